//! MCP 2026-07-28 on `/mcp` beside the handshake-era versions (docs/mcp.md: Two eras,
//! Errors). Each test names the rule of the revision it checks; the handshake-era rules
//! are `transport.rs`'s, which keeps passing as it was.

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use serde_json::{json, Value};

/// Every version the server speaks, newest first.
const ALL_VERSIONS: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];
/// One call of each tool, with arguments the seeded world answers.
const CALLS: [(&str, &str); 9] = [
    ("list_meetings", r#"{"limit": 5}"#),
    ("get_meeting", r#"{"meeting_id": "mtg_budget"}"#),
    ("get_meeting_transcript", r#"{"meeting_id": "mtg_weekly_1", "limit": 2}"#),
    ("get_recurring_meeting_history", r#"{"meeting_id": "mtg_weekly_1"}"#),
    ("search_meetings", r#"{"query": "budget"}"#),
    ("list_pending_action_items", r#"{}"#),
    ("search_shared_notes", r#"{"query": "budget"}"#),
    ("get_shared_note", r#"{"share_id": "shr_team"}"#),
    ("list_recent_changes", r#"{"limit": 5}"#),
];

/// A JSON-RPC error reply: its status and code, and it echoes `id` (null when unread).
fn assert_error(reply: &Reply, status: StatusCode, code: i64, id: Value) -> Value {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert_eq!(body["id"], id, "{body}");
    assert!(body.get("result").is_none(), "{body}");
    body["error"].clone()
}

/// "Servers SHOULD include io.modelcontextprotocol/serverInfo in every result's _meta"
/// and "The result MUST include a resultType field".
fn assert_modern_result(result: &Value) {
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["_meta"][SERVER_INFO_KEY]["name"], "recap", "{result}");
    assert_eq!(result["_meta"][SERVER_INFO_KEY]["version"], env!("CARGO_PKG_VERSION"), "{result}");
}

// "Servers MUST implement server/discover": supportedVersions, capabilities, instructions,
// ttlMs, cacheScope, serverInfo in _meta and nowhere else; a dual-era server lists both eras.
#[tokio::test]
async fn server_discover_lists_every_version_the_tools_capability_and_caching_hints() {
    let world = World::new().await;
    let reply = world.modern("server/discover", json!({})).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let response = reply.json();
    assert_eq!(response["id"], 1);
    let result = &response["result"];
    assert_modern_result(result);
    assert_eq!(result["supportedVersions"], json!(ALL_VERSIONS));
    assert_eq!(result["capabilities"], json!({"tools": {}}));
    assert!(result["instructions"].as_str().is_some_and(|text| text.contains("list_meetings")), "{result}");
    assert_eq!(result["ttlMs"], 3_600_000);
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["_meta"][SERVER_INFO_KEY], json!({"name": "recap", "version": env!("CARGO_PKG_VERSION"), "title": "recap meeting notes"}));
    let mut keys: Vec<&str> = result.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["_meta", "cacheScope", "capabilities", "instructions", "resultType", "supportedVersions", "ttlMs"],
        "no serverInfo or protocolVersion at the top"
    );
}

// tools/list: "Servers MUST include caching hints" (ttlMs >= 0, cacheScope) and "SHOULD return
// tools in a deterministic order". Public: the list is the same whatever the token.
#[tokio::test]
async fn tools_list_carries_caching_hints_and_the_same_tools_in_the_same_order() {
    let world = World::new().await;
    let first = world.modern("tools/list", json!({})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let result = first.json()["result"].clone();
    assert_modern_result(&result);
    assert_eq!(result["ttlMs"], 3_600_000);
    assert_eq!(result["cacheScope"], "public");
    assert!(result.get("nextCursor").is_none());
    let names: Vec<&str> = result["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for tool in result["tools"].as_array().unwrap() {
        assert_eq!(tool["inputSchema"]["type"], "object", "{}", tool["name"]);
        assert_eq!(tool["outputSchema"]["type"], "object", "{}", tool["name"]);
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
    }
    let second = world.modern("tools/list", json!({})).await;
    assert_eq!(second.body, first.body, "two lists, byte for byte");
    let other = world.post_raw(Some(OTHER_PAT), &body("tools/list", with_meta(json!({}))), &headers("tools/list", None)).await;
    assert_eq!(other.json()["result"], result, "another account is shown the same list");
}

// "Invalid cursors SHOULD result in an error with code -32602": the list is one page.
#[tokio::test]
async fn a_cursor_on_tools_list_is_invalid_params_400() {
    let world = World::new().await;
    let reply = world.modern("tools/list", json!({"cursor": "abc"})).await;
    assert_error(&reply, StatusCode::BAD_REQUEST, -32602, json!(1));
    assert_eq!(world.modern("tools/list", json!({"cursor": null})).await.status, StatusCode::OK);
}

// "Tool inputSchema MUST be a valid JSON Schema object", type object at the root, 2020-12 by
// default: every input and output schema compiles as 2020-12 and validates against its meta-schema.
#[tokio::test]
async fn every_tool_schema_is_valid_json_schema_2020_12() {
    let world = World::new().await;
    let tools = world.modern("tools/list", json!({})).await.json()["result"]["tools"].clone();
    let mut compiler = boon::Compiler::new();
    compiler.set_default_draft(boon::Draft::V2020_12);
    let mut schemas = boon::Schemas::new();
    let meta_schema = compiler.compile("https://json-schema.org/draft/2020-12/schema", &mut schemas).expect("the 2020-12 meta-schema");
    for tool in tools.as_array().unwrap() {
        let name = tool["name"].as_str().unwrap();
        for key in ["inputSchema", "outputSchema"] {
            let schema = &tool[key];
            assert!(schema.get("$schema").is_none_or(|dialect| dialect == "https://json-schema.org/draft/2020-12/schema"), "{name}.{key}");
            schemas.validate(schema, meta_schema).unwrap_or_else(|error| panic!("{name}.{key} is not a 2020-12 schema: {error:#}"));
            let location = format!("urn:recap:{name}:{key}");
            compiler.add_resource(&location, schema.clone()).unwrap();
            compiler.compile(&location, &mut schemas).unwrap_or_else(|error| panic!("{name}.{key}: {error:#}"));
        }
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
    }
}

// Every tool is callable under 2026-07-28: resultType complete, serverInfo, structuredContent
// (the same JSON as the text item), no caching hints on a call result.
#[tokio::test]
async fn every_tool_is_callable_with_result_type_and_server_info() {
    let world = World::new().await;
    for (tool, arguments) in CALLS {
        let result = world.modern_call(tool, serde_json::from_str(arguments).unwrap()).await;
        assert_modern_result(&result);
        assert_eq!(result["isError"], false, "{tool}: {result}");
        assert_eq!(result["structuredContent"], text_json(&result), "{tool}");
        assert!(result.get("ttlMs").is_none() && result.get("cacheScope").is_none(), "{tool}: {result}");
    }
    // A tool that cannot answer is still a complete result, with isError.
    let missing = world.modern_call("get_meeting", json!({"meeting_id": "mtg_nope"})).await;
    assert_modern_result(&missing);
    assert_eq!(missing["isError"], true);
    assert_eq!(text_json(&missing)["error"]["code"], "meeting_not_found");
}

// "An unknown tool ... is a JSON-RPC error" -32602, HTTP 400 on this revision.
#[tokio::test]
async fn an_unknown_tool_is_invalid_params_400() {
    let world = World::new().await;
    let reply = world.modern("tools/call", json!({"name": "delete_everything", "arguments": {}})).await;
    let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32602, json!(1));
    assert!(error["message"].as_str().unwrap().contains("delete_everything"), "{error}");
}

// Mcp-Method "MUST" be on every request and equal the body's method: -32020, 400.
#[tokio::test]
async fn a_missing_or_differing_mcp_method_is_header_mismatch_400() {
    let world = World::new().await;
    let list = body("tools/list", with_meta(json!({})));
    let reply = world.post_raw(Some(FLOW_PAT), &list, &[("mcp-protocol-version", MODERN)]).await;
    let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    assert!(error["message"].as_str().unwrap().contains("Mcp-Method"), "{error}");
    for wrong in ["tools/call", "server/discover", "Tools/List", ""] {
        let reply = world.post_raw(Some(FLOW_PAT), &list, &[("mcp-protocol-version", MODERN), ("mcp-method", wrong)]).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    }
    // Header names are case-insensitive.
    let reply = world.post_raw(Some(FLOW_PAT), &list, &[("MCP-Protocol-Version", MODERN), ("MCP-METHOD", "tools/list")]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

// "The body's method differing from the header": the header names what a proxy routed.
#[tokio::test]
async fn a_body_method_differing_from_the_header_is_header_mismatch_400() {
    let world = World::new().await;
    let reply = world.post_raw(Some(FLOW_PAT), &body("server/discover", with_meta(json!({}))), &headers("tools/list", None)).await;
    let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    assert_eq!(error["message"], "Header mismatch: Mcp-Method header value 'tools/list' does not match body value 'server/discover'");
}

// Mcp-Name is required on tools/call and must equal params.name once decoded: -32020, 400.
#[tokio::test]
async fn a_missing_or_differing_mcp_name_is_header_mismatch_400() {
    let world = World::new().await;
    let call = body("tools/call", with_meta(json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_budget"}})));
    let reply = world.post_raw(Some(FLOW_PAT), &call, &headers("tools/call", None)).await;
    let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    assert!(error["message"].as_str().unwrap().contains("Mcp-Name"), "{error}");
    for wrong in ["list_meetings", "GET_MEETING", "=?base64?bGlzdF9tZWV0aW5ncw==?=", "=?base64?!!?="] {
        let reply = world.post_raw(Some(FLOW_PAT), &call, &headers("tools/call", Some(wrong))).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    }
    let reply = world.post_raw(Some(FLOW_PAT), &call, &headers("tools/call", Some("list_meetings"))).await;
    assert_eq!(reply.json()["error"]["message"], "Header mismatch: Mcp-Name header value 'list_meetings' does not match body value 'get_meeting'");
    // "servers MUST decode an encoded Mcp-Name before comparing"; spaces around a value are not part of it.
    for right in ["get_meeting", "=?base64?Z2V0X21lZXRpbmc=?=", " get_meeting ", "\tget_meeting"] {
        let reply = world.post_raw(Some(FLOW_PAT), &call, &headers("tools/call", Some(right))).await;
        assert_eq!(reply.status, StatusCode::OK, "{right:?}: {}", reply.body);
        assert_eq!(reply.json()["result"]["isError"], false, "{right:?}");
    }
    // Mcp-Name is not required where no name is carried.
    assert_eq!(world.post_raw(Some(FLOW_PAT), &body("tools/list", with_meta(json!({}))), &headers("tools/list", None)).await.status, StatusCode::OK);
}

// A routing header given twice is refused: readers of either copy would disagree.
#[tokio::test]
async fn a_repeated_routing_header_is_header_mismatch_400() {
    let world = World::new().await;
    let list = body("tools/list", with_meta(json!({})));
    for repeated in [
        vec![("mcp-protocol-version", MODERN), ("mcp-method", "tools/list"), ("mcp-method", "tools/list")],
        vec![("mcp-protocol-version", MODERN), ("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")],
    ] {
        let reply = world.post_raw(Some(FLOW_PAT), &list, &repeated).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
    }
    let call = body("tools/call", with_meta(json!({"name": "list_meetings", "arguments": {}})));
    let name_repeated = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "list_meetings"), ("mcp-name", "get_meeting")];
    assert_error(&world.post_raw(Some(FLOW_PAT), &call, &name_repeated).await, StatusCode::BAD_REQUEST, -32020, json!(1));
    // A handshake-era first copy does not make the request a handshake-era one: a proxy
    // reading the last copy routes it as 2026-07-28, whose headers (here an Mcp-Name
    // naming another tool) must then have been checked against the body.
    let plain_call = body("tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_budget"}}));
    let legacy_first = [("mcp-protocol-version", "2025-11-25"), ("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "list_meetings")];
    let error = assert_error(&world.post_raw(Some(FLOW_PAT), &plain_call, &legacy_first).await, StatusCode::BAD_REQUEST, -32020, json!(1));
    assert!(error["message"].as_str().unwrap().contains("mcp-protocol-version header appears more than once"), "{error}");
    // Only the routing headers must come once: another header given twice (the check
    // then looks for copies of each routing header) is no reason to refuse.
    let other_repeated = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list"), ("x-trace-note", "a"), ("x-trace-note", "b")];
    assert_eq!(world.post_raw(Some(FLOW_PAT), &list, &other_repeated).await.status, StatusCode::OK);
}

// "A request missing any required field is malformed; the server MUST reject it with -32602
// ... the response status MUST be 400": no _meta, or either required key missing.
#[tokio::test]
async fn a_request_without_meta_or_a_required_key_is_invalid_params_400() {
    let world = World::new().await;
    let cases = [
        (json!({}), "_meta"),
        (json!({"_meta": {}}), VERSION_KEY),
        (json!({"_meta": {CAPABILITIES_KEY: {}}}), VERSION_KEY),
        (json!({"_meta": {VERSION_KEY: MODERN}}), CAPABILITIES_KEY),
        (json!({"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: null}}), CAPABILITIES_KEY),
        (json!({"_meta": {VERSION_KEY: 20260728, CAPABILITIES_KEY: {}}}), VERSION_KEY),
        (json!({"_meta": "2026-07-28"}), "_meta"),
    ];
    for method in ["server/discover", "tools/list"] {
        for (params, named) in &cases {
            let reply = world.post_raw(Some(FLOW_PAT), &body(method, params.clone()), &headers(method, None)).await;
            let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32602, json!(1));
            assert!(error["message"].as_str().unwrap().contains(named), "{method} {params}: {error}");
        }
        // No params at all.
        let reply = world.post_raw(Some(FLOW_PAT), &json!({"jsonrpc": "2.0", "id": "x", "method": method}).to_string(), &headers(method, None)).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, -32602, json!("x"));
    }
    // clientInfo is optional.
    let params = json!({"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}});
    assert_eq!(world.post_raw(Some(FLOW_PAT), &body("tools/list", params), &headers("tools/list", None)).await.status, StatusCode::OK);
}

// MCP-Protocol-Version "MUST match io.modelcontextprotocol/protocolVersion": else -32020, even
// when the body names a version nobody speaks.
#[tokio::test]
async fn a_meta_version_differing_from_the_header_is_header_mismatch_400() {
    let world = World::new().await;
    for version in ["v999.0.0", "2025-11-25"] {
        let params = json!({"_meta": {VERSION_KEY: version, CAPABILITIES_KEY: {}}});
        let reply = world.post_raw(Some(FLOW_PAT), &body("tools/list", params), &headers("tools/list", None)).await;
        let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
        assert!(error["message"].as_str().unwrap().contains("MCP-Protocol-Version"), "{error}");
    }
}

// An unsupported version: -32022 "Unsupported protocol version", HTTP 400, data.supported
// listing every version (both eras) and data.requested, whatever the request's shape.
#[tokio::test]
async fn an_unknown_version_is_32022_listing_every_supported_version() {
    let world = World::new().await;
    for version in ["v999.0.0", "2024-11-05", "1999-01-01", "latest"] {
        let params = json!({"_meta": {VERSION_KEY: version, CAPABILITIES_KEY: {}}});
        let reply =
            world.post_raw(Some(FLOW_PAT), &body("server/discover", params), &[("mcp-protocol-version", version), ("mcp-method", "server/discover")]).await;
        let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32022, json!(1));
        assert_eq!(error, json!({"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ALL_VERSIONS, "requested": version}}));
        // A handshake-era body (no _meta, no Mcp-Method) learns the same.
        let reply = world.post_raw(Some(FLOW_PAT), r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#, &[("mcp-protocol-version", version)]).await;
        let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32022, json!(7));
        assert_eq!(error["data"]["supported"], json!(ALL_VERSIONS));
    }
    // Every supported version listed is one a request may name.
    let discovered = world.modern("server/discover", json!({})).await.json()["result"]["supportedVersions"].clone();
    assert_eq!(discovered, json!(ALL_VERSIONS));
}

// Conformance sends initialize, ping, logging/setLevel and resources/subscribe modern-shaped and
// expects "404 Not Found and -32601", echoing the id: the revision removed them.
#[tokio::test]
async fn initialize_ping_and_other_unknown_methods_are_32601_with_404() {
    let world = World::new().await;
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/list", "prompts/list", "nope"] {
        let reply = world.modern(method, json!({"protocolVersion": "2025-11-25", "capabilities": {}})).await;
        let error = assert_error(&reply, StatusCode::NOT_FOUND, -32601, json!(1));
        assert!(error["message"].as_str().unwrap().contains(method), "{error}");
    }
}

// "If the server accepts [a notification], the server MUST return HTTP status code 202 Accepted
// with no body."
#[tokio::test]
async fn notifications_are_202_without_a_body() {
    let world = World::new().await;
    for method in ["notifications/initialized", "notifications/cancelled", "notifications/whatever"] {
        let reply = world.post_raw(Some(FLOW_PAT), &json!({"jsonrpc": "2.0", "method": method}).to_string(), &headers(method, None)).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{method}");
        assert!(reply.body.is_empty());
    }
    // A notification has no id to answer an error to: under a version this server does
    // not speak, or without Mcp-Method, it is still accepted (docs/mcp.md, Two eras).
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}).to_string();
    for headers in [vec![("mcp-protocol-version", "2099-01-01"), ("mcp-method", "notifications/cancelled")], vec![("mcp-protocol-version", MODERN)]] {
        let reply = world.post_raw(Some(FLOW_PAT), &notification, &headers).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{headers:?}: {}", reply.body);
        assert!(reply.body.is_empty());
    }
}

// The body "MUST be a single JSON-RPC request or notification": a batch, a posted response,
// an invalid object are -32600 and unreadable JSON -32700, each with 400, and the id when
// one could be read. Without one the member is left out: the schema's
// `JSONRPCErrorResponse` has `id?: RequestId`, a string or a number, never null.
#[tokio::test]
async fn batches_responses_and_unreadable_bodies_are_400() {
    let world = World::new().await;
    let list = body("tools/list", with_meta(json!({})));
    for (sent, code, id) in [
        (format!("[{list}]"), -32600, None),
        (r#"{"jsonrpc":"2.0","id":3,"result":{}}"#.to_string(), -32600, None),
        (r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_string(), -32600, Some(json!(1))),
        (r#"{"jsonrpc":"2.0","id":1,"method":"#.to_string(), -32700, None),
    ] {
        let reply = world.post_raw(Some(FLOW_PAT), &sent, &headers("tools/list", None)).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, code, id.clone().unwrap_or(Value::Null));
        assert_eq!(reply.json().get("id").cloned(), id, "{}", reply.body);
    }
}

// "do not mint or echo session IDs"; GET and DELETE stay 405.
#[tokio::test]
async fn no_session_id_and_get_or_delete_are_405() {
    let world = World::new().await;
    let mut with_session = headers("tools/list", None);
    with_session.push(("mcp-session-id", "abc"));
    let reply = world.post_raw(Some(FLOW_PAT), &body("tools/list", with_meta(json!({}))), &with_session).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.header("mcp-session-id").is_none());
    for method in ["GET", "DELETE"] {
        let request = Request::builder()
            .method(method)
            .uri("/mcp")
            .header("authorization", format!("Bearer {FLOW_PAT}"))
            .header("mcp-protocol-version", MODERN)
            .body(Body::empty())
            .unwrap();
        let reply = world.send(request).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(reply.header("allow"), Some("POST"));
    }
}

// The token and plan come first, as on the legacy path: 401 with its challenge, 402, before
// any protocol check.
#[tokio::test]
async fn the_token_and_plan_are_checked_before_the_protocol() {
    let world = World::new().await;
    let discover = body("server/discover", with_meta(json!({})));
    let reply = world.post_raw(None, &discover, &headers("server/discover", None)).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert!(reply.header("www-authenticate").unwrap().contains("resource_metadata="));
    assert_eq!(reply.json()["error"]["code"], "unauthorized");
    let reply = world.post_raw(None, "garbage", &[("mcp-protocol-version", "v999")]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let reply = world.post_raw(Some(ENTERPRISE_PAT), &discover, &headers("server/discover", None)).await;
    assert_eq!(reply.status, StatusCode::PAYMENT_REQUIRED);
}

// "An initialize request selects legacy semantics": without the header, or with a
// handshake-era one, a request is handshake-era and initialize answers as it always did.
// But "a request carrying modern per-request _meta is served statelessly according to
// this revision", whose header "MUST match the io.modelcontextprotocol/protocolVersion
// field ... If the values do not match, the server MUST reject the request with 400 Bad
// Request and a HeaderMismatch JSON-RPC error": a handshake-era or absent header
// (read as 2025-03-26) with `_meta` naming 2026-07-28 (or a version this server does
// not know) is -32020. A `_meta` without that key (a progress token) or naming a
// handshake-era version changes nothing: the header rules that era.
#[tokio::test]
async fn without_the_header_the_legacy_path_answers_as_before() {
    let world = World::new().await;
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}, "_meta": meta()});
    let result = world.rpc("initialize", initialize).await["result"].clone();
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["capabilities"], json!({"tools": {"listChanged": false}}));
    assert!(result.get("resultType").is_none() && result.get("_meta").is_none(), "{result}");
    let list = world.rpc("tools/list", json!({"_meta": {"progressToken": 1}})).await["result"].clone();
    assert!(list.get("resultType").is_none() && list.get("ttlMs").is_none(), "{list}");
    assert!(list["tools"].as_array().is_some_and(|tools| !tools.is_empty()), "{list}");
    for named in ["2025-11-25", "2025-06-18"] {
        let handshake_era_version = json!({"_meta": {VERSION_KEY: named}});
        let list = world.rpc_as(FLOW_PAT, "tools/list", handshake_era_version, &[("mcp-protocol-version", "2025-11-25")]).await["result"].clone();
        assert!(list.get("resultType").is_none() && list["tools"].is_array(), "{named}: {list}");
    }
    assert_eq!(world.rpc("server/discover", json!({})).await["error"]["code"], -32601);
    for (method, sent) in [("tools/list", vec![]), ("server/discover", vec![]), ("tools/list", vec![("mcp-protocol-version", "2025-11-25")])] {
        let reply = world.post_raw(Some(FLOW_PAT), &body(method, with_meta(json!({}))), &sent).await;
        let error = assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
        assert!(error["message"].as_str().unwrap().contains(MODERN), "{method} {sent:?}: {error}");
        // The message says what was sent: no header at all is not a header value.
        let says = if sent.is_empty() { "no MCP-Protocol-Version header (version 2025-03-26)" } else { "MCP-Protocol-Version header value '2025-11-25'" };
        assert!(error["message"].as_str().unwrap().contains(says), "{method} {sent:?}: {error}");
    }
    let future = json!({"_meta": {VERSION_KEY: "2099-01-01", CAPABILITIES_KEY: {}}});
    let reply = world.post_raw(Some(FLOW_PAT), &body("tools/list", future), &[("mcp-protocol-version", "2025-11-25")]).await;
    assert_error(&reply, StatusCode::BAD_REQUEST, -32020, json!(1));
}

// "Input-validation errors" are tool results with isError: a required argument of another type
// says its type is wrong, not that it is missing, on either era.
#[tokio::test]
async fn a_required_argument_of_another_type_is_named_a_wrong_type_in_both_eras() {
    let world = World::new().await;
    for (tool, argument) in [("get_meeting", "meeting_id"), ("search_meetings", "query"), ("get_shared_note", "share_id")] {
        for value in [json!(12345), json!(true), json!(["x"]), json!({"x": 1})] {
            let legacy = world.call_err(tool, json!({argument: value})).await;
            let modern = world.modern_call(tool, json!({argument: value})).await;
            assert_eq!(modern["isError"], true, "{modern}");
            for error in [legacy, text_json(&modern)] {
                assert_eq!(error, json!({"error": {"code": "invalid_argument", "message": format!("{argument} must be a string")}}), "{tool} {value}");
            }
        }
        let missing = world.call_err(tool, json!({argument: null})).await;
        assert_eq!(missing["error"]["message"], format!("missing required argument: {argument} (a non-empty string)"));
    }
}

// `_meta`'s members the server does not read (clientInfo, a client's own) are still JSON
// read by a `Value`'s rules, in both eras: a number out of an f64's range, a lone
// surrogate, nesting past serde_json's limit of 127 make the body unreadable (-32700,
// id null); what a `Value` holds (long numbers in range, paired surrogates, escapes,
// nesting up to the limit) is accepted and changes nothing. (A handshake-era request
// names its own version in `_meta`, or none: see the next test.)
#[tokio::test]
async fn meta_members_not_read_are_still_checked_as_json() {
    let world = World::new().await;
    let call_as = |version: &str, client_info: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"get_meeting","arguments":{{"meeting_id":"mtg_budget"}},"_meta":{{"{VERSION_KEY}":"{version}","{CAPABILITIES_KEY}":{{}},"io.modelcontextprotocol/clientInfo":{client_info}}}}}}}"#
        )
    };
    let call = |client_info: &str| call_as(MODERN, client_info);
    // The message, params and _meta are three levels: 124 more reach serde_json's limit.
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let handshake_era = [("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/call"), ("mcp-name", "get_meeting")];
    let refused = [
        r#"{"build":1e400}"#.to_string(),
        r#"{"n":-1e400}"#.to_string(),
        r#"[123456789012345678901234567890e300]"#.to_string(),
        r#"{"name":"\ud800"}"#.to_string(),
        r#"{"name":"\udc00\ud800"}"#.to_string(),
        r#"{"name":"\ud800\u0041"}"#.to_string(),
        nested(125),
    ];
    for client_info in &refused {
        let reply = world.post_raw(Some(FLOW_PAT), &call(client_info), &headers("tools/call", Some("get_meeting"))).await;
        assert_error(&reply, StatusCode::BAD_REQUEST, -32700, Value::Null);
        assert!(reply.json().get("id").is_none(), "{}", reply.body);
        let reply = world.post_raw(Some(FLOW_PAT), &call_as("2025-11-25", client_info), &handshake_era).await;
        assert_error(&reply, StatusCode::OK, -32700, Value::Null);
        assert_eq!(reply.json().get("id"), Some(&Value::Null), "{}", reply.body);
    }
    let accepted = [
        r#"{"name":"t","version":"1"}"#.to_string(),
        r#"{"build":1e300,"n":-12345678901234567890123,"f":0.5e-400}"#.to_string(),
        r#"{"name":"\ud83d\ude00 \"q\" \u00e9 \\"}"#.to_string(),
        r#"[1,-2,3.5,true,false,null,{"a":[{}]}]"#.to_string(),
        r#""plain""#.to_string(),
        nested(124),
    ];
    for client_info in &accepted {
        for (sent_headers, version) in [(&headers("tools/call", Some("get_meeting"))[..], MODERN), (&handshake_era[..], "2025-11-25")] {
            let reply = world.post_raw(Some(FLOW_PAT), &call_as(version, client_info), sent_headers).await;
            assert_eq!(reply.status, StatusCode::OK, "{client_info}: {}", reply.body);
            let body = reply.json();
            assert_eq!(body["result"]["isError"], false, "{client_info}: {body}");
            assert_eq!(body["result"]["structuredContent"]["id"], "mtg_budget", "{client_info}: {body}");
        }
    }
}

// basic/patterns/subscriptions.mdx: the server "MUST send
// notifications/subscriptions/acknowledged as the first message carrying the
// subscription's ID in _meta", whose `notifications` "reflects the subset the server
// agreed to honor" (types it does not support are omitted), and when it ends a
// subscription on its own initiative it "SHOULD respond to the original
// subscriptions/listen request with a completion result before closing the stream".
// This server has nothing to notify: an SSE stream of the acknowledgement with no type,
// then the completion result; the subscription's id is the request's, a string one too.
#[tokio::test]
async fn subscriptions_listen_is_acknowledged_with_no_notification_type_then_ended_with_its_result() {
    let world = World::new().await;
    for (id, id_json) in [("1", json!(1)), ("\"sub-a\"", json!("sub-a"))] {
        let params = with_meta(json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["file:///x"]}}));
        let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{params}}}"#);
        let reply = world.post_raw(Some(FLOW_PAT), &request, &headers("subscriptions/listen", None)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.header("content-type"), Some("text/event-stream"));
        assert_eq!(reply.header("x-accel-buffering"), Some("no"));
        let events: Vec<Value> = reply
            .body
            .split("\n\n")
            .filter(|event| !event.is_empty())
            .map(|event| serde_json::from_str(event.strip_prefix("data: ").unwrap()).unwrap())
            .collect();
        assert_eq!(events.len(), 2, "{}", reply.body);
        assert_eq!(
            events[0],
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                   "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": id_json}, "notifications": {}}})
        );
        assert_eq!((&events[1]["id"], &events[1]["result"]["resultType"]), (&id_json, &json!("complete")));
        assert_eq!(events[1]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id_json);
        assert_eq!(events[1]["result"]["_meta"][SERVER_INFO_KEY]["name"], "recap");
    }
    // A filter that is not an object is refused as the revision refuses bad params.
    let reply = world.modern("subscriptions/listen", json!({"notifications": ["toolsListChanged"]})).await;
    assert_error(&reply, StatusCode::BAD_REQUEST, -32602, json!(1));
    // The handshake era has no such method.
    let legacy = world.rpc("subscriptions/listen", json!({})).await;
    assert_eq!(legacy["error"]["code"], -32601, "{legacy}");
}
