//! Every structured result validates against its tool's `outputSchema`, as MCP clients
//! check it (the Python SDK does, for one): results are copied from stored bodies, and
//! their schemas come from types that only describe them, so this is what ties the two.
//! A JSON Schema 2020-12 validator checks the real results of every tool in the shapes
//! the seeded world gives: first and later pages, empty pages, nulls where allowed.

mod common;

use common::*;
use serde_json::{json, Value};

const STRUCTURED: [(&str, &str); 1] = [("mcp-protocol-version", "2025-06-18")];

/// The output schemas of tools/list, compiled, by tool name.
struct OutputSchemas {
    schemas: boon::Schemas,
    by_tool: Vec<(String, boon::SchemaIndex)>,
}

impl OutputSchemas {
    async fn listed<W: recap_testkit::world::World + ?Sized>(world: &World<W>) -> OutputSchemas {
        let tools = world.rpc_as(FLOW_PAT, "tools/list", json!({}), &STRUCTURED).await["result"]["tools"].clone();
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        let mut schemas = boon::Schemas::new();
        let mut by_tool = Vec::new();
        for tool in tools.as_array().unwrap() {
            let name = tool["name"].as_str().unwrap().to_string();
            let location = format!("urn:recap:{name}");
            compiler.add_resource(&location, tool["outputSchema"].clone()).unwrap();
            let index = compiler.compile(&location, &mut schemas).unwrap_or_else(|error| panic!("{name}: {error:#}"));
            by_tool.push((name, index));
        }
        OutputSchemas { schemas, by_tool }
    }

    fn check(&self, tool: &str, result: &Value) -> Result<(), String> {
        let (_, index) = self.by_tool.iter().find(|(name, _)| name == tool).unwrap_or_else(|| panic!("no outputSchema for {tool}"));
        self.schemas.validate(result, *index).map_err(|error| format!("{error:#}"))
    }
}

#[tokio::test]
async fn every_structured_result_validates_against_its_output_schema() {
    let world = World::new().await;
    let schemas = OutputSchemas::listed(&world).await;
    let calls = [
        ("list_meetings", json!({})),
        ("list_meetings", json!({"limit": 2, "offset": 3})),
        ("list_meetings", json!({"query": "budget"})),
        ("list_meetings", json!({"series_id": "ser_weekly"})),
        ("list_meetings", json!({"series_id": "ser_weekly", "query": "weekly"})),
        ("list_meetings", json!({"offset": 100000})),
        ("get_meeting", json!({"meeting_id": "mtg_budget"})),
        ("get_meeting", json!({"meeting_id": "mtg_weekly_1"})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "limit": 2})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "offset": 2})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "offset": 50})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_2"})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_budget"})),
        ("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_1"})),
        ("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_2", "limit": 1})),
        ("get_recurring_meeting_history", json!({"meeting_id": "mtg_budget"})),
        ("search_meetings", json!({"query": "budget"})),
        ("search_meetings", json!({"query": "weekly", "limit": 1})),
        ("search_meetings", json!({"query": "?!"})),
        ("list_pending_action_items", json!({})),
        ("list_pending_action_items", json!({"limit": 1, "offset": 1})),
        ("search_shared_notes", json!({"query": "budget"})),
        ("search_shared_notes", json!({"query": "long"})),
        ("search_shared_notes", json!({"query": "?!"})),
        ("get_shared_note", json!({"share_id": "shr_team"})),
        ("get_shared_note", json!({"share_id": "shr_long"})),
        ("list_recent_changes", json!({})),
        ("list_recent_changes", json!({"types": "meeting.created", "limit": 1})),
    ];
    let mut tools_checked = std::collections::BTreeSet::new();
    for (tool, arguments) in calls {
        let response = world.rpc_as(FLOW_PAT, "tools/call", json!({"name": tool, "arguments": arguments}), &STRUCTURED).await;
        let result = &response["result"];
        assert_eq!(result["isError"], false, "{tool} {arguments}: {result}");
        let structured = &result["structuredContent"];
        assert_eq!(structured, &text_json(result), "{tool} {arguments}");
        if let Err(error) = schemas.check(tool, structured) {
            panic!("{tool} {arguments}: the result does not match the outputSchema: {error}\n{structured}");
        }
        tools_checked.insert(tool);
    }
    assert_eq!(tools_checked.len(), TOOLS.len(), "every tool is called");
}

// The check above is not vacuous: results that break their schema are refused.
#[tokio::test]
async fn results_that_break_their_output_schema_are_refused() {
    let world = World::new().await;
    let schemas = OutputSchemas::listed(&world).await;
    let mut page = world.call_ok("list_meetings", json!({"limit": 1})).await;
    assert_eq!(schemas.check("list_meetings", &page), Ok(()));
    page["pagination"]["total"] = json!("many");
    assert!(schemas.check("list_meetings", &page).is_err());
    let mut meeting = world.call_ok("get_meeting", json!({"meeting_id": "mtg_budget"})).await;
    meeting["note"].as_object_mut().unwrap().remove("markdown");
    assert!(schemas.check("get_meeting", &meeting).is_err());
    let mut note = world.call_ok("get_shared_note", json!({"share_id": "shr_team"})).await;
    note["truncated"] = json!(null);
    assert!(schemas.check("get_shared_note", &note).is_err());
}

// list_recent_changes with changes in it: the seeded feed, first and last pages, a type
// filter, and a cursor at the end.
#[tokio::test]
async fn the_feed_results_validate_against_their_output_schema() {
    let world = World::in_process(recap_mcp::McpConfig::default()).await;
    let seeder = world.seeder();
    for (seq, kind) in [(1, recap_readmodel::messages::MessageKind::MeetingCreated), (2, recap_readmodel::messages::MessageKind::TeamJoined)] {
        let message = recap_testkit::webhooks::message("acc_flow", kind, &format!("res_{seq}"), "2026-11-20T09:00:00Z");
        seeder.publish("acc_flow", seq, &message).await;
    }
    let schemas = OutputSchemas::listed(&world).await;
    let after_first = world.call_ok("list_recent_changes", json!({"limit": 1})).await["next_cursor"].clone();
    let at_the_end = world.call_ok("list_recent_changes", json!({})).await["next_cursor"].clone();
    for arguments in [json!({}), json!({"limit": 1}), json!({"cursor": after_first}), json!({"cursor": at_the_end}), json!({"types": "team.joined"})] {
        let response = world.rpc_as(FLOW_PAT, "tools/call", json!({"name": "list_recent_changes", "arguments": arguments}), &STRUCTURED).await;
        let structured = &response["result"]["structuredContent"];
        assert_eq!(response["result"]["isError"], false, "{arguments}: {response}");
        if let Err(error) = schemas.check("list_recent_changes", structured) {
            panic!("{arguments}: the result does not match the outputSchema: {error}\n{structured}");
        }
    }
}

// "If an output schema is provided: Servers MUST provide structured results that conform
// to this schema." A stored list entry that does not read back (written by hand here)
// cannot make a conforming result: the call is the store's failure (isError,
// `read_failed`), never a success without structuredContent; a handshake-era call
// without structured output still carries the text.
#[tokio::test]
async fn a_stored_body_that_is_not_json_is_a_tool_error_where_an_output_schema_is_declared() {
    use recap_readmodel::table::Val;
    use recap_readmodel::{Mutation, Op};
    let world = World::in_process(recap_mcp::McpConfig::default()).await;
    let corrupt = Mutation {
        table: &recap_readmodel::tables::MEETINGS_BY_ACCOUNT,
        partition: vec![Val::text("acc_flow")],
        clustering: vec![Val::Int(i64::MAX - 1), Val::text("mtg_corrupt")],
        op: Op::Put { body: "{not json".into(), expires_at: None },
        ts: 1,
    };
    world.readmodel().driver().write(vec![corrupt]).await.unwrap();
    for headers in [&STRUCTURED[..], &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "list_meetings")][..]] {
        let modern = headers.iter().any(|(_, value)| *value == "2026-07-28");
        let params = json!({"name": "list_meetings", "arguments": {"limit": 1}});
        let params = if modern { with_meta(params) } else { params };
        let response = world.rpc_as(FLOW_PAT, "tools/call", params, headers).await;
        let result = &response["result"];
        assert_eq!(result["isError"], true, "{headers:?}: {response}");
        assert_eq!(result.get("structuredContent"), None, "{headers:?}");
        assert_eq!(text_json(result)["error"]["code"], "read_failed", "{headers:?}: {response}");
    }
    let legacy = world.rpc_as(FLOW_PAT, "tools/call", json!({"name": "list_meetings", "arguments": {"limit": 1}}), &[]).await;
    assert_eq!(legacy["result"]["isError"], false, "{legacy}");
    assert!(legacy["result"]["content"][0]["text"].as_str().unwrap().contains("{not json"), "{legacy}");
}
