//! Conformance of the nine tools and their results (docs/mcp.md: Tools,
//! Results, Limits). Each test quotes the rule it checks.

mod common;

use common::*;
use recap_testkit::events;
use serde_json::{json, Value};

fn ids(list: &Value) -> Vec<String> {
    list.as_array().unwrap().iter().map(|entry| entry["id"].as_str().unwrap().to_string()).collect()
}

fn sorted_keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn sorted(keys: &[&str]) -> Vec<String> {
    let mut keys: Vec<String> = keys.iter().map(|key| key.to_string()).collect();
    keys.sort();
    keys
}

// "Each tool call returns one text content item whose text is JSON."
#[tokio::test]
async fn every_tool_returns_one_text_item_of_json() {
    let world = World::new().await;
    for (tool, arguments) in a_call_of_every_tool() {
        let result = world.call(tool, arguments).await;
        assert_eq!(result["isError"], false, "{tool}: {result}");
        text_json(&result);
    }
}

// list_meetings: "Returns meetings, newest first, and pagination. pagination.total is null."
#[tokio::test]
async fn list_meetings_is_newest_first_with_a_null_total() {
    let world = World::new().await;
    let page = world.call_ok("list_meetings", json!({})).await;
    let listed = ids(&page["meetings"]);
    assert_eq!(listed.len(), 20, "default limit 20");
    assert_eq!(listed[0], "mtg_standup_24");
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 20, "returned": 20, "total": null, "next_offset": 20}));
    let rest = world.call_ok("list_meetings", json!({"offset": 20})).await;
    assert_eq!(
        ids(&rest["meetings"]),
        ["mtg_standup_04", "mtg_standup_03", "mtg_standup_02", "mtg_standup_01", "mtg_standup_00", "mtg_budget", "mtg_weekly_2", "mtg_weekly_1"]
    );
    assert_eq!(rest["pagination"]["next_offset"], Value::Null);
    // Entries have the REST meeting list entry's fields (contract: fields fixed).
    assert_eq!(
        sorted_keys(&rest["meetings"][5]),
        sorted(&["id", "title", "kind", "status", "started_at", "ended_at", "created_at", "updated_at", "series_id"])
    );
}

// list_meetings query: "case-insensitive substring of title or meeting identifier"; series_id: "exact recurring series identifier"
#[tokio::test]
async fn list_meetings_filters_by_substring_and_series() {
    let world = World::new().await;
    assert_eq!(ids(&world.call_ok("list_meetings", json!({"query": "WEEKLY"})).await["meetings"]), ["mtg_weekly_2", "mtg_weekly_1"]);
    assert_eq!(ids(&world.call_ok("list_meetings", json!({"query": "standup_1"})).await["meetings"]).len(), 10);
    assert_eq!(ids(&world.call_ok("list_meetings", json!({"query": "dget pla"})).await["meetings"]), ["mtg_budget"]);
    assert_eq!(ids(&world.call_ok("list_meetings", json!({"series_id": "ser_weekly"})).await["meetings"]), ["mtg_weekly_2", "mtg_weekly_1"]);
    assert_eq!(ids(&world.call_ok("list_meetings", json!({"series_id": "ser_weekly", "query": "_1"})).await["meetings"]), ["mtg_weekly_1"]);
    assert!(ids(&world.call_ok("list_meetings", json!({"series_id": "SER_WEEKLY"})).await["meetings"]).is_empty());
    let page = world.call_ok("list_meetings", json!({"series_id": "ser_weekly", "limit": 1})).await;
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 1, "returned": 1, "total": null, "next_offset": 1}));
    // Another account's meetings never appear.
    assert!(ids(&world.call_ok("list_meetings", json!({"query": "other"})).await["meetings"]).is_empty());
}

// "Out-of-range limit and offset values are clamped, not rejected." limit clamped to 1..200.
#[tokio::test]
async fn out_of_range_limits_and_offsets_are_clamped() {
    let world = World::new().await;
    for (limit, clamped) in [(json!(0), 1), (json!(-3), 1), (json!(1000), 200), (json!(2.9), 2), (json!("3"), 3)] {
        let page = world.call_ok("list_meetings", json!({"limit": limit})).await;
        assert_eq!(page["pagination"]["limit"], clamped, "{limit}");
    }
    let page = world.call_ok("list_meetings", json!({"offset": -10, "limit": 1})).await;
    assert_eq!(page["pagination"]["offset"], 0);
    let page = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "limit": 100000})).await;
    assert_eq!(page["pagination"]["limit"], 500);
    // A non-numeric limit is an argument error, not a protocol error.
    let error = world.call_err("list_meetings", json!({"limit": "lots"})).await;
    assert_eq!(error["error"]["code"], "invalid_argument");
}

// Limits: "list_meetings, search_meetings, get_recurring_meeting_history,
// list_pending_action_items limit: default 20, clamped to 1..200"; "get_meeting_transcript
// limit: default 200, clamped to 1..500"; "offset: default 0"; out-of-range values are
// clamped, not rejected — on every paginated tool.
#[tokio::test]
async fn every_paginated_tool_has_its_default_limit_and_clamps() {
    let world = World::new().await;
    let tools = [
        ("list_meetings", json!({}), 20, 200),
        ("search_meetings", json!({"query": "standup"}), 20, 200),
        ("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_1"}), 20, 200),
        ("list_pending_action_items", json!({}), 20, 200),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1"}), 200, 500),
    ];
    for (tool, arguments, default, max) in tools {
        let with = |extra: Value| {
            let mut arguments = arguments.clone();
            arguments.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            arguments
        };
        let page = world.call_ok(tool, arguments.clone()).await;
        assert_eq!((page["pagination"]["limit"].clone(), page["pagination"]["offset"].clone()), (json!(default), json!(0)), "{tool}: the defaults");
        for (limit, clamped) in [(json!(0), 1), (json!(-7), 1), (json!(1_000_000), max), (json!(3), 3)] {
            let page = world.call_ok(tool, with(json!({"limit": limit}))).await;
            assert_eq!(page["pagination"]["limit"], clamped, "{tool} limit {limit}");
        }
        let page = world.call_ok(tool, with(json!({"offset": -5}))).await;
        assert_eq!(page["pagination"]["offset"], 0, "{tool}: a negative offset");
    }
}

// "search_shared_notes limit: default 10, clamped to 1..20".
#[tokio::test]
async fn search_shared_notes_returns_10_by_default_and_1_to_20() {
    let world = World::new().await;
    let shares: Vec<recap_schemas::Envelope> = (0..25)
        .map(|index| {
            let id = format!("shr_retro_{index:02}");
            events::share(&id, "acc_other", 200 + index).title("Retro").recipients(["acc_flow"]).text("retro notes").version(1).envelope()
        })
        .collect();
    world.feed(&shares).await;
    let count = |result: Value| result["results"].as_array().unwrap().len();
    assert_eq!(count(world.call_ok("search_shared_notes", json!({"query": "retro"})).await), 10);
    for (limit, expected) in [(json!(0), 1), (json!(-3), 1), (json!(15), 15), (json!(20), 20), (json!(21), 20), (json!(500), 20)] {
        assert_eq!(count(world.call_ok("search_shared_notes", json!({"query": "retro", "limit": limit})).await), expected, "limit {limit}");
    }
}

// get_meeting: metadata, note, summaries, participants, action_items; "Each note or summary carries its text in the field markdown"; "Transcript words are not included."
#[tokio::test]
async fn get_meeting_returns_the_detail_with_markdown() {
    let world = World::new().await;
    let meeting = world.call_ok("get_meeting", json!({"meeting_id": "mtg_weekly_1"})).await;
    for field in [
        "id",
        "title",
        "kind",
        "status",
        "created_at",
        "updated_at",
        "started_at",
        "ended_at",
        "series_id",
        "timezone",
        "language",
        "note",
        "summaries",
        "participants",
        "action_items",
    ] {
        assert!(meeting.get(field).is_some(), "{field}");
    }
    assert_eq!(meeting["note"]["markdown"], meeting["note"]["text"]);
    assert_eq!(meeting["note"]["markdown"], "Weekly sync\nAgenda\nBudget review");
    assert_eq!(meeting["summaries"][0]["markdown"], "Summary text");
    assert_eq!(meeting["series_id"], "ser_weekly");
    assert_eq!(meeting["action_items"].as_array().unwrap().len(), 2);
    assert!(meeting.get("transcript").is_none() && meeting.get("words").is_none());
}

// "a meeting that does not exist or is not the caller's (message of the form: meeting with the given identifier not found)"
#[tokio::test]
async fn unknown_and_foreign_meetings_are_tool_errors() {
    let world = World::new().await;
    for tool in ["get_meeting", "get_meeting_transcript", "get_recurring_meeting_history"] {
        for id in ["mtg_x", "mtg_foreign"] {
            let error = world.call_err(tool, json!({"meeting_id": id})).await;
            assert_eq!(error["error"]["message"], format!("meeting {id} not found"), "{tool}");
            assert_eq!(error["error"]["code"], "meeting_not_found");
        }
    }
    // A deleted meeting disappears from every tool.
    world.feed(&[events::meeting_deleted("acc_flow", "mtg_weekly_1", 5)]).await;
    assert_eq!(world.call_err("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1"})).await["error"]["code"], "meeting_not_found");
}

// "This covers a missing required argument"
#[tokio::test]
async fn missing_required_arguments_are_tool_errors() {
    let world = World::new().await;
    for (tool, argument) in [
        ("get_meeting", "meeting_id"),
        ("get_meeting_transcript", "meeting_id"),
        ("get_recurring_meeting_history", "meeting_id"),
        ("search_meetings", "query"),
        ("search_shared_notes", "query"),
        ("get_shared_note", "share_id"),
    ] {
        for arguments in [json!({}), json!({argument: null}), json!({argument: ""}), json!({argument: 7})] {
            let error = world.call_err(tool, arguments).await;
            assert_eq!(error["error"]["code"], "invalid_argument");
            assert!(error["error"]["message"].as_str().unwrap().contains(argument), "{error}");
        }
    }
    // A call without any arguments object at all.
    let response = world.rpc("tools/call", json!({"name": "get_meeting"})).await;
    assert_eq!(response["result"]["isError"], true);
}

// "A tool that cannot answer returns a normal result with isError true ... a failure while reading data."
#[tokio::test]
async fn a_failed_read_is_a_tool_error() {
    let world = World::in_process(recap_mcp::McpConfig::default()).await;
    world.fail_table("meeting_details");
    let error = world.call_err("get_meeting", json!({"meeting_id": "mtg_budget"})).await;
    assert_eq!(error["error"]["code"], "unavailable");
    world.fail_table("meetings_by_account");
    assert_eq!(world.call_err("list_meetings", json!({})).await["error"]["code"], "unavailable");
}

// get_meeting_transcript: "pagination.total is the number of words; pagination.next_offset is null on the last page."
#[tokio::test]
async fn transcripts_page_by_word() {
    let world = World::new().await;
    let first = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "limit": 2})).await;
    assert_eq!(first["meeting_id"], "mtg_weekly_1");
    assert_eq!(first["text"], "Hello team budget");
    assert_eq!(
        first["words"],
        json!([{"text": "Hello", "start_ms": 0, "end_ms": 200, "track": "speaker"}, {"text": "team", "start_ms": 300, "end_ms": 500, "track": "speaker"}])
    );
    assert_eq!(first["pagination"], json!({"offset": 0, "limit": 2, "returned": 2, "total": 3, "next_offset": 2}));
    let last = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "offset": 2, "limit": 2})).await;
    assert_eq!(last["words"].as_array().unwrap().len(), 1);
    assert_eq!(last["pagination"], json!({"offset": 2, "limit": 2, "returned": 1, "total": 3, "next_offset": null}));
    assert_eq!(last["text"], Value::Null, "the text comes with the first page");
    let whole = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1"})).await;
    assert_eq!(whole["pagination"], json!({"offset": 0, "limit": 200, "returned": 3, "total": 3, "next_offset": null}));
    // Words are read from their index at any offset: a long transcript is walked to its
    // end, so a transcript offset is never capped (only negatives are out of range).
    let far = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1", "offset": 250_000, "limit": 2})).await;
    assert_eq!(far["pagination"], json!({"offset": 250_000, "limit": 2, "returned": 0, "total": 3, "next_offset": null}));
}

// "When a meeting has transcript text but no word timings, the first page returns the text with an empty words list."
#[tokio::test]
async fn a_transcript_without_word_timings_returns_its_text_and_no_words() {
    let world = World::new().await;
    let page = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_2"})).await;
    assert_eq!(page["text"], "Only text here");
    assert_eq!(page["words"], json!([]));
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 200, "returned": 0, "total": 0, "next_offset": null}));
    let none = world.call_ok("get_meeting_transcript", json!({"meeting_id": "mtg_budget"})).await;
    assert_eq!((none["text"].clone(), none["words"].clone()), (json!(""), json!([])));
}

// get_recurring_meeting_history: "Returns meetings of the same recurring series, newest first ... A meeting outside a series returns an empty list."
#[tokio::test]
async fn history_lists_the_series_and_is_empty_outside_one() {
    let world = World::new().await;
    let page = world.call_ok("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_1"})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_weekly_2", "mtg_weekly_1"]);
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 20, "returned": 2, "total": 2, "next_offset": null}));
    let page = world.call_ok("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_1", "limit": 1})).await;
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 1, "returned": 1, "total": 2, "next_offset": 1}));
    let lone = world.call_ok("get_recurring_meeting_history", json!({"meeting_id": "mtg_budget"})).await;
    assert_eq!(lone, json!({"meetings": [], "pagination": {"offset": 0, "limit": 20, "returned": 0, "total": 0, "next_offset": null}}));
}

// search_meetings: "text to find in meeting titles and summaries, case-insensitive"; "pagination.total counts the matches."
#[tokio::test]
async fn search_meetings_counts_matches() {
    let world = World::new().await;
    let page = world.call_ok("search_meetings", json!({"query": "BUDGET"})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_budget"]);
    assert_eq!(page["pagination"]["total"], 1);
    // Every seeded meeting has a summary titled "Summary": 28 matches.
    let page = world.call_ok("search_meetings", json!({"query": "summary", "limit": 2})).await;
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 2, "returned": 2, "total": 28, "next_offset": 2}));
    let page = world.call_ok("search_meetings", json!({"query": "quarterly agreed"})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_budget"]);
    let page = world.call_ok("search_meetings", json!({"query": "?!"})).await;
    assert_eq!(page["pagination"]["total"], 0);
}

// search_meetings: "Returns meetings, newest first, and pagination." Both ways of
// searching: one word (its postings), and several (every word must match).
#[tokio::test]
async fn search_meetings_returns_the_newest_first() {
    let world = World::new().await;
    let page = world.call_ok("search_meetings", json!({"query": "summary", "limit": 3})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_standup_24", "mtg_standup_23", "mtg_standup_22"]);
    let page = world.call_ok("search_meetings", json!({"query": "summary", "limit": 2, "offset": 2})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_standup_22", "mtg_standup_21"]);
    let page = world.call_ok("search_meetings", json!({"query": "weekly sync"})).await;
    assert_eq!(ids(&page["meetings"]), ["mtg_weekly_2", "mtg_weekly_1"]);
}

// list_pending_action_items: "Returns action_items whose status is todo or in_progress, newest first, each with meeting_id and meeting_title of its origin, and pagination."
#[tokio::test]
async fn pending_action_items_name_their_meeting() {
    let world = World::new().await;
    let page = world.call_ok("list_pending_action_items", json!({})).await;
    let items = page["action_items"].as_array().unwrap();
    assert_eq!(items.iter().map(|item| item["id"].as_str().unwrap()).collect::<Vec<_>>(), ["ai_loose", "ai_doing", "ai_todo"]);
    assert_eq!(items[1]["meeting_id"], "mtg_weekly_2");
    assert_eq!(items[1]["meeting_title"], "Weekly sync");
    assert_eq!((items[0]["meeting_id"].clone(), items[0]["meeting_title"].clone()), (Value::Null, Value::Null));
    assert!(items.iter().all(|item| item.get("meeting").is_none()));
    assert_eq!(page["pagination"], json!({"offset": 0, "limit": 20, "returned": 3, "total": null, "next_offset": null}));
    let page = world.call_ok("list_pending_action_items", json!({"limit": 2})).await;
    assert_eq!(page["pagination"]["next_offset"], 2);
}

// search_shared_notes: "Returns results, each with share_id, title, team, published_at and snippet." Shared with the caller's teams included.
#[tokio::test]
async fn search_shared_notes_returns_snippets_of_what_is_shared_with_the_caller() {
    let world = World::new().await;
    let found = world.call_ok("search_shared_notes", json!({"query": "Budget"})).await;
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "shr_private is not shared with the caller: {found}");
    let result = &results[0];
    assert_eq!(sorted_keys(result), sorted(&["share_id", "title", "team", "published_at", "snippet"]));
    assert_eq!(result["share_id"], "shr_team");
    assert_eq!(result["team"], json!({"id": "team_design", "name": "Design"}));
    assert!(result["snippet"].as_str().unwrap().contains("budget for Q3"));
    assert_eq!(world.call_ok("search_shared_notes", json!({"query": "budget nonexistentword"})).await["results"], json!([]));
}

// get_shared_note: "Returns share_id, title, team, published_at, text (up to 12,000 characters) and truncated."
#[tokio::test]
async fn get_shared_note_cuts_text_at_12000_characters() {
    let world = World::new().await;
    let long = world.call_ok("get_shared_note", json!({"share_id": "shr_long"})).await;
    assert_eq!(long["text"].as_str().unwrap().chars().count(), 12_000);
    assert_eq!(long["truncated"], true);
    assert_eq!(long["team"], Value::Null);
    let short = world.call_ok("get_shared_note", json!({"share_id": "shr_team"})).await;
    assert_eq!(short["truncated"], false);
    assert_eq!(short["text"], "Q3 planning\nDecisions\nThe budget for Q3 is approved.");
    assert_eq!(sorted_keys(&short), sorted(&["share_id", "title", "team", "published_at", "text", "truncated"]));
    for id in ["shr_private", "shr_none"] {
        let error = world.call_err("get_shared_note", json!({"share_id": id})).await;
        assert_eq!(error["error"]["code"], "shared_note_not_found");
    }
}

// ---- list_recent_changes ---------------------------------------------------------------

mod recent_changes {
    use recap_readmodel::messages::{Message, MessageKind};
    use recap_testkit::webhooks::message;
    use serde_json::json;

    use super::common::*;

    /// `count` changes in the flow account's feed at seqs 1..=count, types cycling
    /// through meeting.created and team.joined.
    async fn feed(world: &World<recap_testkit::InProcess>, count: i64) -> Vec<Message> {
        let seeder = world.seeder();
        let mut messages = Vec::new();
        for seq in 1..=count {
            let kind = if seq % 2 == 1 { MessageKind::MeetingCreated } else { MessageKind::TeamJoined };
            let message = message("acc_flow", kind, &format!("res_{seq}"), "2026-11-20T09:00:00Z");
            seeder.publish("acc_flow", seq, &message).await;
            messages.push(message);
        }
        messages
    }

    fn ids(result: &serde_json::Value) -> Vec<String> {
        result["changes"].as_array().unwrap().iter().map(|change| change["id"].as_str().unwrap().to_string()).collect()
    }

    fn expected(messages: &[Message]) -> Vec<String> {
        messages.iter().map(|message| message.id.clone()).collect()
    }

    #[tokio::test]
    async fn list_recent_changes_lists_the_accounts_changes_oldest_first_and_its_cursor_resumes_even_at_the_end() {
        let world = World::in_process(recap_mcp::McpConfig::default()).await;
        let messages = feed(&world, 3).await;
        let first = world.call_ok("list_recent_changes", json!({"limit": 2})).await;
        assert_eq!(ids(&first), expected(&messages[..2]));
        assert_eq!(
            first["changes"][0],
            json!({"id": messages[0].id, "type": "meeting.created", "created_at": "2026-11-20T09:00:00Z", "data": {"id": "res_1"}})
        );
        assert_eq!(first["has_more"], json!(true));
        // The cursor is sealed (docs/mcp.md): the feed position it holds is not shown.
        let cursor = first["next_cursor"].as_str().expect("a cursor").to_string();
        use base64::Engine;
        let sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&cursor).expect("base64url");
        assert!(sealed.len() > 16 && !sealed.windows(3).any(|window| window == b"[2]"), "the position in the clear: {cursor}");
        let last = world.call_ok("list_recent_changes", json!({"limit": 2, "cursor": cursor})).await;
        assert_eq!((ids(&last), &last["has_more"]), (expected(&messages[2..]), &json!(false)));
        let at_the_end = last["next_cursor"].as_str().expect("a cursor at the end too").to_string();
        let later = message("acc_flow", MessageKind::TeamLeft, "res_4", "2026-11-20T09:05:00Z");
        world.seeder().publish("acc_flow", 4, &later).await;
        assert_eq!(ids(&world.call_ok("list_recent_changes", json!({"cursor": at_the_end})).await), [later.id]);
        // A bare position, as cursors were before they were sealed, is refused: read as
        // given, it would let a caller probe where its changes sit in the shared log.
        let error = world.call_err("list_recent_changes", json!({"cursor": "3"})).await;
        assert_eq!(error["error"]["code"], "invalid_argument", "{error}");
    }

    #[tokio::test]
    async fn list_recent_changes_filters_by_types_and_refuses_an_unknown_one_naming_it() {
        let world = World::in_process(recap_mcp::McpConfig::default()).await;
        let messages = feed(&world, 4).await;
        let joined = world.call_ok("list_recent_changes", json!({"types": "team.joined"})).await;
        assert_eq!(ids(&joined), [messages[1].id.clone(), messages[3].id.clone()]);
        let error = world.call_err("list_recent_changes", json!({"types": "team.joined,meeting.archived"})).await;
        assert_eq!(error["error"]["code"], "invalid_argument");
        assert!(error["error"]["message"].as_str().unwrap().contains("\"meeting.archived\""), "{error}");
        let error = world.call_err("list_recent_changes", json!({"cursor": "not a cursor"})).await;
        assert_eq!(error["error"]["code"], "invalid_argument");
    }

    #[tokio::test]
    async fn list_recent_changes_clamps_its_limit_and_never_shows_another_accounts_changes() {
        let world = World::in_process(recap_mcp::McpConfig::default()).await;
        let messages = feed(&world, 3).await;
        let others = message("acc_other", MessageKind::MeetingCreated, "res_other", "2026-11-20T09:00:00Z");
        world.seeder().publish("acc_other", 1, &others).await;
        assert_eq!(world.call_ok("list_recent_changes", json!({"limit": 0})).await["changes"].as_array().unwrap().len(), 1);
        let all = world.call_ok("list_recent_changes", json!({"limit": 1000})).await;
        assert_eq!(ids(&all), expected(&messages));
        let theirs = world.rpc_as(OTHER_PAT, "tools/call", json!({"name": "list_recent_changes", "arguments": {}}), &[]).await;
        assert_eq!(ids(&text_json(&theirs["result"])), [others.id]);
    }
}

/// The tool-call limit: `--mcp-tool-calls-per-minute` (docs/mcp.md, Limits).
mod rate_limit {
    use super::*;
    use std::time::Duration;

    fn limited(per_minute: u32) -> recap_mcp::McpConfig {
        recap_mcp::McpConfig { tool_calls_per_minute: per_minute, ..recap_mcp::McpConfig::default() }
    }

    async fn call_as(world: &World, token: &str, tool: &str) -> Value {
        world.rpc_as(token, "tools/call", json!({"name": tool, "arguments": {}}), &[]).await["result"].clone()
    }

    // "Servers MUST: ... Rate limit tool invocations" (MCP, server/tools, Security
    // considerations): past the account's calls of a minute, a call is a tool error
    // `rate_limited` saying how long to wait; every token of the account shares the
    // count, another account has its own, and a call refused before any tool runs (an
    // unknown tool) is not counted.
    #[tokio::test]
    async fn tool_calls_past_the_accounts_per_minute_limit_are_a_rate_limited_tool_error() {
        let world = World::with_config(limited(3)).await;
        // Another account's call first: on the distributed edition it opens the mcp
        // process's Redis connection and loads the limiter's script, so that the calls
        // counted below are not decided locally while Redis is still being reached.
        assert_eq!(call_as(&world, OTHER_PAT, "list_meetings").await["isError"], false);
        let unknown = world.rpc("tools/call", json!({"name": "no_such_tool", "arguments": {}})).await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        world.call_ok("list_meetings", json!({})).await;
        world.call_ok("list_pending_action_items", json!({})).await;
        assert_eq!(call_as(&world, FLOW2_PAT, "list_meetings").await["isError"], false, "a second token of the same account");
        let refused = world.call_err("list_meetings", json!({})).await;
        assert_eq!(refused["error"]["code"], "rate_limited", "{refused}");
        let wait = refused["error"]["retry_after_seconds"].as_u64().expect("retry_after_seconds");
        assert!((1..=60).contains(&wait), "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap().contains("at most 3 a minute"), "{refused}");
        let refused = call_as(&world, FLOW2_PAT, "list_pending_action_items").await;
        assert_eq!((refused["isError"].clone(), text_json(&refused)["error"]["code"].clone()), (json!(true), json!("rate_limited")));
        assert_eq!(call_as(&world, OTHER_PAT, "list_meetings").await["isError"], false, "another account counts apart");
    }

    // The window slides: a minute after the calls that filled it, calls are admitted
    // again. A refused call counts nowhere, so refusals do not push the window on.
    #[tokio::test]
    async fn a_minute_after_the_limit_was_reached_tool_calls_are_admitted_again() {
        let world = World::in_process(limited(2)).await;
        world.call_ok("list_meetings", json!({})).await;
        world.call_ok("list_meetings", json!({})).await;
        for _ in 0..5 {
            assert_eq!(world.call_err("list_meetings", json!({})).await["error"]["code"], "rate_limited");
        }
        world.advance_clock(Duration::from_secs(61));
        world.call_ok("list_meetings", json!({})).await;
    }
}
