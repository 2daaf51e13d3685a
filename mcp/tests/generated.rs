//! Generated JSON-RPC traffic against a model of the spec's rules: envelopes right and
//! wrong (jsonrpc, id, method, params of every JSON type), every tool with its real
//! arguments given values of every type, unknown tools and methods, non-JSON bodies,
//! and tokens valid, unknown, revoked and on plans without MCP. Each reply must be what
//! the rules say: its HTTP status, its JSON-RPC code, the id echoed, one text item of
//! JSON per tool result, isError with a code for tool failures, limits clamped as the
//! Limits table says. Never a 5xx, and the token is never echoed.

mod common;

use axum::body::Body;
use axum::http::{Method, Request};
use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};

/// Meetings of the caller (acc_flow) in the seeded world, of those the cases name.
const OWN_MEETINGS: [&str; 4] = ["mtg_weekly_1", "mtg_weekly_2", "mtg_budget", "mtg_standup_03"];

/// Argument names, every tool's and some no tool has.
const ARGUMENTS: [&str; 7] = ["meeting_id", "share_id", "query", "limit", "offset", "cursor", "extra"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    Flow,
    Enterprise,
    NoPlan,
    Revoked,
    Missing,
    Unknown,
}

impl Caller {
    fn authorization(self) -> Option<String> {
        match self {
            Caller::Flow => Some(format!("Bearer {FLOW_PAT}")),
            Caller::Enterprise => Some(format!("Bearer {ENTERPRISE_PAT}")),
            Caller::NoPlan => Some(format!("Bearer {NO_PLAN_PAT}")),
            Caller::Revoked => Some(format!("Bearer {REVOKED_PAT}")),
            Caller::Missing => None,
            Caller::Unknown => Some("Bearer svc_pat_nobody000000000000000000000001".to_string()),
        }
    }
}

/// Values of every JSON type, and the world's identifiers.
fn values() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(0),
        json!(1),
        json!(-1),
        json!(7),
        json!(200),
        json!(201),
        json!(499),
        json!(500),
        json!(501),
        json!(20),
        json!(21),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1.5),
        json!(1e300),
        json!(""),
        json!("lots"),
        json!("5"),
        json!("mtg_weekly_1"),
        json!("mtg_budget"),
        json!("mtg_foreign"),
        json!("mtg_nope"),
        json!("shr_team"),
        json!("shr_private"),
        json!("shr_nope"),
        json!("budget"),
        json!("weekly sync"),
        json!("\u{0}🙂\u{202e}\""),
        json!("x".repeat(5000)),
        json!([]),
        json!(["mtg_budget"]),
        json!({}),
        json!({"$ne": 1}),
    ]
}

#[derive(Clone, Debug)]
enum Payload {
    /// Bytes that are not JSON.
    Raw(&'static str),
    /// A JSON value sent as is.
    Json(Value),
}

#[derive(Clone, Debug)]
struct Case {
    method: Method,
    caller: Caller,
    body: Payload,
}

const RAW: [&str; 7] = ["", "{", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":", "nul", "\u{0}", "{\"a\":1}}", "[1,"];

fn envelope() -> impl Strategy<Value = Value> {
    let jsonrpc = prop_oneof![40 => Just(Some(json!("2.0"))), 1 => Just(Some(json!("1.0"))), 1 => Just(Some(json!(2))), 1 => Just(None)];
    let id = prop_oneof![
        20 => Just(Some(json!(1))),
        10 => Just(Some(json!("req-7"))),
        1 => Just(Some(json!(0))),
        1 => Just(Some(json!(-5))),
        1 => Just(Some(json!(i64::MAX))),
        1 => Just(Some(json!(null))),
        1 => Just(Some(json!({"a": 1}))),
        1 => Just(Some(json!([1]))),
        1 => Just(Some(json!(true))),
        5 => Just(None),
    ];
    let method = prop_oneof![
        30 => Just(Some(json!("tools/call"))),
        2 => Just(Some(json!("ping"))),
        2 => Just(Some(json!("tools/list"))),
        2 => Just(Some(json!("initialize"))),
        1 => Just(Some(json!("notifications/initialized"))),
        1 => Just(Some(json!("resources/list"))),
        1 => Just(Some(json!("nope"))),
        1 => Just(Some(json!(""))),
        1 => Just(Some(json!(42))),
        1 => Just(None),
    ];
    // Mostly values of the argument's own kind, else anything.
    let argument = proptest::sample::select(&ARGUMENTS[..]).prop_flat_map(|name| {
        let typed: Vec<Value> = match name {
            "meeting_id" => ["mtg_weekly_1", "mtg_weekly_2", "mtg_budget", "mtg_foreign", "mtg_nope", "mtg_standup_03"].iter().map(|id| json!(id)).collect(),
            "share_id" => ["shr_team", "shr_long", "shr_private", "shr_nope"].iter().map(|id| json!(id)).collect(),
            "query" => ["budget", "weekly sync", "BUDGET", "zzz", "a b c d"].iter().map(|query| json!(query)).collect(),
            _ => [0, 1, 2, 5, 19, 20, 21, 200, 201, 500, 501, 10_000].iter().map(|number| json!(number)).collect(),
        };
        (Just(name), prop_oneof![3 => proptest::sample::select(typed), 1 => proptest::sample::select(values())])
    });
    let arguments = proptest::collection::vec(argument, 0..4)
        .prop_map(|arguments| Value::Object(arguments.into_iter().map(|(name, value)| (name.to_string(), value)).collect::<Map<String, Value>>()));
    let name = prop_oneof![12 => proptest::sample::select(&TOOLS[..]).prop_map(|tool| Some(json!(tool))), 1 => Just(Some(json!("delete_everything"))), 1 => Just(Some(json!(3))), 1 => Just(None)];
    let call_params = (name, prop_oneof![8 => arguments.prop_map(Some), 1 => Just(Some(json!([1, 2]))), 1 => Just(Some(json!("x"))), 1 => Just(None)])
        .prop_map(|(name, arguments)| {
            let mut params = Map::new();
            if let Some(name) = name {
                params.insert("name".into(), name);
            }
            if let Some(arguments) = arguments {
                params.insert("arguments".into(), arguments);
            }
            Value::Object(params)
        });
    let params = prop_oneof![
        30 => call_params.prop_map(Some),
        2 => Just(Some(json!({}))),
        1 => Just(Some(json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}))),
        1 => Just(Some(json!({"protocolVersion": 5}))),
        1 => Just(Some(json!("x"))),
        1 => Just(Some(json!(7))),
        2 => Just(None),
    ];
    (jsonrpc, id, method, params).prop_map(|(jsonrpc, id, method, params)| {
        let mut object = Map::new();
        for (key, value) in [("jsonrpc", jsonrpc), ("id", id), ("method", method), ("params", params)] {
            if let Some(value) = value {
                object.insert(key.into(), value);
            }
        }
        Value::Object(object)
    })
}

fn case() -> impl Strategy<Value = Case> {
    let method = prop_oneof![30 => Just(Method::POST), 1 => Just(Method::GET), 1 => Just(Method::PUT), 1 => Just(Method::DELETE)];
    let caller = prop_oneof![
        20 => Just(Caller::Flow),
        1 => Just(Caller::Enterprise),
        1 => Just(Caller::NoPlan),
        1 => Just(Caller::Revoked),
        1 => Just(Caller::Missing),
        1 => Just(Caller::Unknown),
    ];
    let body = prop_oneof![
        20 => envelope().prop_map(Payload::Json),
        1 => proptest::sample::select(&RAW[..]).prop_map(Payload::Raw),
        1 => Just(Payload::Json(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))),
        1 => Just(Payload::Json(json!("just a string"))),
        1 => Just(Payload::Json(json!(12))),
    ];
    (method, caller, body).prop_map(|(method, caller, body)| Case { method, caller, body })
}

/// The Limits table: (default, lowest, highest) of each tool's `limit`.
fn limit_bounds(tool: &str) -> Option<(i64, i64, i64)> {
    match tool {
        "list_meetings" | "search_meetings" | "get_recurring_meeting_history" | "list_pending_action_items" | "list_recent_changes" => Some((20, 1, 200)),
        "get_meeting_transcript" => Some((200, 1, 500)),
        "search_shared_notes" => Some((10, 1, 20)),
        _ => None,
    }
}

/// The required string argument of a tool, if it has one.
fn required(tool: &str) -> Option<&'static str> {
    match tool {
        "get_meeting" | "get_meeting_transcript" | "get_recurring_meeting_history" => Some("meeting_id"),
        "search_meetings" | "search_shared_notes" => Some("query"),
        "get_shared_note" => Some("share_id"),
        _ => None,
    }
}

/// Checks a tools/call result against the Results rules and the Limits table.
fn check_tool_result(tool: &str, arguments: &Map<String, Value>, result: &Value) -> Result<(), TestCaseError> {
    // Results 1: one text content item whose text is JSON.
    let content = result["content"].as_array().ok_or_else(|| TestCaseError::fail(format!("no content: {result}")))?;
    prop_assert_eq!(content.len(), 1, "one content item: {}", result);
    prop_assert_eq!(&content[0]["type"], &json!("text"), "{}", result);
    let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap_or(""))
        .map_err(|error| TestCaseError::fail(format!("text is not JSON ({error}): {result}")))?;
    let is_error = result["isError"].as_bool().ok_or_else(|| TestCaseError::fail(format!("isError is not a boolean: {result}")))?;
    let required_value = required(tool).map(|name| arguments.get(name));
    // Results 3: "a missing required argument" is a normal result with isError true.
    if let Some(None | Some(Value::Null)) = required_value {
        prop_assert!(is_error, "{} without its required argument: {}", tool, result);
    }
    if is_error {
        let code = text["error"]["code"].as_str().unwrap_or("");
        prop_assert!(["invalid_argument", "meeting_not_found", "shared_note_not_found"].contains(&code), "a tool failure names its code: {}", text);
        prop_assert!(!text["error"]["message"].as_str().unwrap_or("").is_empty(), "a tool failure says why: {}", text);
        // Results 3: "a meeting that does not exist or is not the caller's".
        if code == "meeting_not_found" {
            let id = arguments.get("meeting_id").and_then(Value::as_str).unwrap_or("");
            prop_assert!(!OWN_MEETINGS.contains(&id), "{} is the caller's: {}", id, text);
        }
        return Ok(());
    }
    prop_assert!(text.get("error").is_none(), "{}", text);
    if tool == "get_meeting" {
        let id = arguments.get("meeting_id").and_then(Value::as_str).unwrap_or("");
        prop_assert!(OWN_MEETINGS.contains(&id), "get_meeting answered {} for someone else's or no meeting: {}", id, text);
        prop_assert_eq!(&text["id"], &json!(id), "{}", text);
    }
    // Limits: "default N, clamped to lo..hi" for an integer limit.
    if let Some((default, lowest, highest)) = limit_bounds(tool) {
        let pagination = text.get("pagination");
        let asked = match arguments.get("limit") {
            None | Some(Value::Null) => Some(default),
            Some(value) => value.as_i64().map(|limit| limit.clamp(lowest, highest)),
        };
        if let (Some(pagination), Some(asked)) = (pagination, asked) {
            prop_assert_eq!(&pagination["limit"], &json!(asked), "{} limit {:?}: {}", tool, arguments.get("limit"), text);
        }
        if let Some(results) = text.get("results").and_then(Value::as_array) {
            prop_assert!(results.len() as i64 <= highest, "{}", text);
        }
    }
    Ok(())
}

#[test]
fn errors_generated_traffic_gets_what_the_rules_say_and_never_a_5xx() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    // Thousands of calls of one account: the tool-call limit is not what is tested here.
    let world = runtime.block_on(World::with_config(recap_mcp::McpConfig { tool_calls_per_minute: u32::MAX, ..recap_mcp::McpConfig::default() }));
    let cases: u32 = std::env::var("RECAP_GENERATED_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(3000);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&case(), |case| {
        let text = match &case.body {
            Payload::Raw(raw) => raw.to_string(),
            Payload::Json(value) => value.to_string(),
        };
        let mut request = Request::builder()
            .method(case.method.clone())
            .uri("/mcp")
            .header("host", "mcp.test:8080")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(authorization) = case.caller.authorization() {
            request = request.header("authorization", authorization);
        }
        let reply = runtime.block_on(world.send(request.body(Body::from(text.clone())).expect("a request")));
        let context = format!("{} as {:?}: {} -> {} {}", case.method, case.caller, text.chars().take(300).collect::<String>(), reply.status, reply.body);
        prop_assert!(!reply.status.is_server_error(), "never a 5xx: {}", context);
        for token in [FLOW_PAT, ENTERPRISE_PAT, NO_PLAN_PAT, REVOKED_PAT] {
            prop_assert!(!reply.body.contains(token), "the token is never echoed: {}", context);
        }
        // Errors (HTTP): the method, then the token, then the plan.
        if case.method != Method::POST {
            prop_assert_eq!(reply.status.as_u16(), 405, "{}", context);
            prop_assert_eq!(reply.header("allow"), Some("POST"), "{}", context);
            return Ok(());
        }
        match case.caller {
            Caller::Missing | Caller::Unknown | Caller::Revoked => {
                prop_assert_eq!(reply.status.as_u16(), 401, "{}", context);
                prop_assert!(reply.header("www-authenticate").is_some_and(|value| value.contains("resource_metadata")), "{}", context);
                return Ok(());
            }
            Caller::Enterprise | Caller::NoPlan => {
                prop_assert_eq!(reply.status.as_u16(), 402, "{}", context);
                let code = if case.caller == Caller::NoPlan { "no_plan" } else { "feature_not_included" };
                prop_assert_eq!(&reply.json()["error"]["code"], &json!(code), "{}", context);
                return Ok(());
            }
            Caller::Flow => {}
        }
        // JSON-RPC: -32700 for what is not JSON, -32600 for what is not one request object.
        let value = match &case.body {
            Payload::Raw(_) => {
                prop_assert_eq!(reply.status.as_u16(), 200, "{}", context);
                let body = reply.json();
                prop_assert_eq!(&body["error"]["code"], &json!(-32700), "{}", context);
                prop_assert_eq!(&body["id"], &Value::Null, "{}", context);
                return Ok(());
            }
            Payload::Json(value) => value,
        };
        let Some(object) = value.as_object() else {
            prop_assert_eq!(reply.status.as_u16(), 200, "{}", context);
            prop_assert_eq!(&reply.json()["error"]["code"], &json!(-32600), "{}", context);
            return Ok(());
        };
        let id = object.get("id");
        let valid = object.get("jsonrpc") == Some(&json!("2.0"))
            && object.get("method").is_some_and(Value::is_string)
            && id.is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64())
            && object.get("params").is_none_or(Value::is_object);
        if !valid {
            prop_assert_eq!(reply.status.as_u16(), 200, "{}", context);
            let body = reply.json();
            prop_assert_eq!(&body["error"]["code"], &json!(-32600), "{}", context);
            prop_assert!(body["id"].is_null() || Some(&body["id"]) == id, "{}", context);
            return Ok(());
        }
        // "Notifications are accepted with 202 and no body."
        let Some(id) = id else {
            prop_assert_eq!(reply.status.as_u16(), 202, "{}", context);
            prop_assert!(reply.body.is_empty(), "{}", context);
            return Ok(());
        };
        prop_assert_eq!(reply.status.as_u16(), 200, "{}", context);
        let body = reply.json();
        prop_assert_eq!(&body["jsonrpc"], &json!("2.0"), "{}", context);
        prop_assert_eq!(&body["id"], id, "the id is echoed: {}", context);
        prop_assert!(body.get("result").is_some() != body.get("error").is_some(), "exactly one of result and error: {}", context);
        if let Some(error) = body.get("error") {
            prop_assert!(error["code"].is_i64() && error["message"].is_string(), "{}", context);
        }
        let params = object.get("params").cloned().unwrap_or_else(|| json!({}));
        match object["method"].as_str().unwrap_or("") {
            "ping" => prop_assert_eq!(&body["result"], &json!({}), "{}", context),
            "tools/list" => prop_assert_eq!(body["result"]["tools"].as_array().map(Vec::len), Some(TOOLS.len()), "{}", context),
            "initialize" => prop_assert!(body["result"]["protocolVersion"].is_string() || body["error"]["code"].is_i64(), "{}", context),
            "tools/call" => {
                let tool = params.get("name").and_then(Value::as_str).filter(|name| TOOLS.contains(name));
                match (tool, params.get("arguments")) {
                    // -32602 "unknown tool".
                    (None, _) => prop_assert_eq!(&body["error"]["code"], &json!(-32602), "{}", context),
                    (Some(tool), None) => check_tool_result(tool, &Map::new(), &body["result"])?,
                    (Some(tool), Some(Value::Object(arguments))) => check_tool_result(tool, arguments, &body["result"])?,
                    // Arguments that are not an object: refused, by the protocol or the tool.
                    (Some(_), Some(_)) => prop_assert!(
                        body["error"]["code"].is_i64() || body["result"]["isError"] == json!(true),
                        "arguments that are not an object are refused: {}",
                        context
                    ),
                }
            }
            // -32601 "unsupported method"; notifications/initialized with an id is a request.
            "notifications/initialized" => {}
            _ => prop_assert_eq!(&body["error"]["code"], &json!(-32601), "{}", context),
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
