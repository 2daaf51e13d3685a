//! Conformance of the endpoint, its protocol handling and its authentication
//! (docs/mcp.md: Transport, Errors, Authentication, Versioning). Each test
//! quotes the rule it checks.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use recap_mcp::McpConfig;
use recap_testkit::events;
use serde_json::{json, Value};

const INITIALIZE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

// "{mcp_url} receives POST requests, each with one JSON-RPC 2.0 message; the response is JSON."
#[tokio::test]
async fn post_one_message_gets_a_json_response() {
    let world = World::new().await;
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 1);
}

// "The server is stateless: there is no session."
#[tokio::test]
async fn no_session_id_is_issued_or_needed() {
    let world = World::new().await;
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert!(reply.header("mcp-session-id").is_none());
    // A tools/call without any initialize on this "connection" works.
    let reply = world.post_raw(Some(FLOW_PAT), r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["id"], "a");
}

// "It speaks MCP protocol 2025-03-26" / "It declares only the tools capability, with no resources and no prompts."
#[tokio::test]
async fn initialize_answers_2025_03_26_with_only_tools() {
    let world = World::new().await;
    let result = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await.json()["result"].clone();
    assert_eq!(result["protocolVersion"], "2025-03-26");
    let capabilities = result["capabilities"].as_object().unwrap();
    assert_eq!(capabilities.keys().collect::<Vec<_>>(), vec!["tools"]);
    assert_eq!(result["serverInfo"]["name"], "recap");
    assert!(result.get("resultType").is_none());
}

// Forward compatibility: a client asking 2025-06-18 or 2025-11-25 gets that version; unknown or older gets 2025-03-26.
#[tokio::test]
async fn initialize_negotiates_newer_versions_and_falls_back_for_unknown_ones() {
    let world = World::new().await;
    for (asked, answered) in [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"), ("2024-11-05", "2025-03-26"), ("2030-01-01", "2025-03-26")] {
        let response = world.rpc("initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})).await;
        assert_eq!(response["result"]["protocolVersion"], answered, "asked {asked}");
    }
}

// "Batches are not supported." / -32600 "invalid JSON-RPC request, or a batch"
#[tokio::test]
async fn a_batch_is_an_invalid_request() {
    let world = World::new().await;
    let reply = world.post_raw(Some(FLOW_PAT), r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#, &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = reply.json();
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(body["id"], Value::Null);
}

// "GET (the optional event stream) returns 405. Any non-POST request returns 405."
#[tokio::test]
async fn get_and_every_other_method_return_405() {
    let world = World::new().await;
    for method in ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"] {
        let request = Request::builder().method(method).uri("/mcp").header("authorization", format!("Bearer {FLOW_PAT}")).body(Body::empty()).unwrap();
        let reply = world.send(request).await;
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{method}");
        assert_eq!(reply.header("allow"), Some("POST"));
    }
    // Even without a token: the method is checked first.
    let reply = world.send(Request::get("/mcp").header("accept", "text/event-stream").body(Body::empty()).unwrap()).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
}

// "Supported methods: initialize, ping, tools/list, tools/call."
#[tokio::test]
async fn ping_answers_an_empty_result() {
    let world = World::new().await;
    assert_eq!(world.rpc("ping", json!({})).await, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
}

// "Notifications are accepted with 202 and no body."
#[tokio::test]
async fn notifications_get_202_without_a_body() {
    let world = World::new().await;
    for body in
        [r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#]
    {
        let reply = world.post_raw(Some(FLOW_PAT), body, &[]).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED);
        assert!(reply.body.is_empty());
    }
}

// -32700 "the body is not valid JSON"
#[tokio::test]
async fn invalid_json_is_a_parse_error() {
    let world = World::new().await;
    let body = world.post_raw(Some(FLOW_PAT), r#"{"jsonrpc":"2.0","id":1,"method":"#, &[]).await.json();
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], Value::Null);
}

// -32600 "invalid JSON-RPC request"
#[tokio::test]
async fn invalid_request_objects_are_invalid_requests() {
    let world = World::new().await;
    for body in [
        r#"{"id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":42}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#,
        r#""just a string""#,
    ] {
        let reply = world.post_raw(Some(FLOW_PAT), body, &[]).await;
        assert_eq!(reply.status, StatusCode::OK, "{body}");
        assert_eq!(reply.json()["error"]["code"], -32600, "{body}");
    }
}

// -32601 "unsupported method"
#[tokio::test]
async fn unsupported_methods_are_method_not_found() {
    let world = World::new().await;
    for method in ["resources/list", "prompts/list", "logging/setLevel", "completion/complete", "nope"] {
        let response = world.rpc(method, json!({})).await;
        assert_eq!(response["error"]["code"], -32601, "{method}");
        assert_eq!(response["id"], 1);
    }
}

// -32602 "unknown tool"
#[tokio::test]
async fn an_unknown_tool_is_invalid_params() {
    let world = World::new().await;
    let response = world.rpc("tools/call", json!({"name": "delete_everything", "arguments": {}})).await;
    assert_eq!(response["error"]["code"], -32602);
    let response = world.rpc("tools/call", json!({"arguments": {}})).await;
    assert_eq!(response["error"]["code"], -32602);
}

// "Every tool is read-only and idempotent." Annotations readOnlyHint, idempotentHint, openWorldHint false; docs/mcp.md's order, then list_recent_changes.
#[tokio::test]
async fn tools_list_names_the_spec_tools_in_its_order_then_the_feed_with_annotations() {
    let world = World::new().await;
    let tools = world.rpc("tools/list", json!({})).await["result"]["tools"].clone();
    let names: Vec<&str> = tools.as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for tool in tools.as_array().unwrap() {
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
        assert_eq!(tool["annotations"]["idempotentHint"], true);
        assert_eq!(tool["annotations"]["openWorldHint"], false);
        assert_eq!(tool["inputSchema"]["type"], "object");
        // outputSchema is for 2025-06-18 and later.
        assert!(tool.get("outputSchema").is_none());
    }
    let required = |name: &str| tools.as_array().unwrap().iter().find(|tool| tool["name"] == name).unwrap()["inputSchema"]["required"].clone();
    assert_eq!(required("get_meeting"), json!(["meeting_id"]));
    assert_eq!(required("search_meetings"), json!(["query"]));
    assert_eq!(required("list_meetings"), Value::Null);
}

// "Every tool is read-only and idempotent": what the server does, not only what its
// annotations claim. Every tool, called twice, writes nothing to the store and answers
// the same both times.
#[tokio::test]
async fn every_tool_writes_nothing_and_answers_the_same_when_called_again() {
    let world = World::in_process(McpConfig::default()).await;
    let calls = a_call_of_every_tool();
    let called: Vec<&str> = calls.iter().map(|(tool, _)| *tool).collect();
    assert_eq!(called, TOOLS, "every tool");
    world.record_writes();
    for (tool, arguments) in calls {
        let first = world.call(tool, arguments.clone()).await;
        assert_eq!(first["isError"], false, "{tool}: {first}");
        let again = world.call(tool, arguments).await;
        assert_eq!(first, again, "{tool} answers the same when called again");
    }
    assert_eq!(world.recorded_writes().len(), 0, "no tool writes to the store");
}

// "Out-of-range limit and offset values are clamped, not rejected." So the advertised
// schemas must accept them too: a client that checks arguments against inputSchema
// would otherwise refuse what the server takes.
#[tokio::test]
async fn limit_and_offset_schemas_accept_out_of_range_values_since_they_are_clamped() {
    let world = World::new().await;
    let tools = world.rpc("tools/list", json!({})).await["result"]["tools"].clone();
    let mut checked = 0;
    for tool in tools.as_array().unwrap() {
        for (name, schema) in tool["inputSchema"]["properties"].as_object().unwrap() {
            if name == "limit" || name == "offset" {
                assert_eq!(schema["type"], "integer", "{}.{name}", tool["name"]);
                assert!(schema.get("minimum").is_none() && schema.get("maximum").is_none(), "{}.{name}: {schema}", tool["name"]);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 12, "limit on seven tools, offset on five");
}

// structuredContent and outputSchema for clients on 2025-06-18 or later (the header names the version).
#[tokio::test]
async fn clients_on_2025_06_18_get_output_schemas_and_structured_content() {
    let world = World::new().await;
    let header = [("mcp-protocol-version", "2025-06-18")];
    let tools = world.rpc_as(FLOW_PAT, "tools/list", json!({}), &header).await["result"]["tools"].clone();
    for tool in tools.as_array().unwrap() {
        assert_eq!(tool["outputSchema"]["type"], "object", "{}", tool["name"]);
    }
    let result =
        world.rpc_as(FLOW_PAT, "tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_budget"}}), &header).await["result"].clone();
    assert_eq!(result["structuredContent"], text_json(&result));
    let old = world.call("get_meeting", json!({"meeting_id": "mtg_budget"})).await;
    assert!(old.get("structuredContent").is_none());
}

// Validate MCP-Protocol-Version: absent is fine, an unsupported value is 400, with the
// 2026-07-28 error (-32022) that lists every supported version, so that a client of
// either era recognises the server.
#[tokio::test]
async fn an_unsupported_protocol_version_header_is_400() {
    let world = World::new().await;
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let reply = world.post_raw(Some(FLOW_PAT), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[("mcp-protocol-version", version)]).await;
        assert_eq!(reply.status, StatusCode::OK, "{version}");
    }
    for version in ["1999-01-01", "latest", "2024-11-05"] {
        let reply = world.post_raw(Some(FLOW_PAT), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, &[("mcp-protocol-version", version)]).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{version}");
        assert_eq!(reply.json()["error"]["code"], -32022);
    }
}

// A present Origin not allowed by configuration is 403; absent, loopback and configured origins pass.
#[tokio::test]
async fn origins_not_allowed_are_403() {
    let world = World::with_config(McpConfig { allowed_origins: vec!["https://app.example.com".into()], ..McpConfig::default() }).await;
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    for (origin, status) in [
        ("https://evil.example", StatusCode::FORBIDDEN),
        ("null", StatusCode::FORBIDDEN),
        ("https://app.example.com.evil.example", StatusCode::FORBIDDEN),
        ("https://app.example.com", StatusCode::OK),
        ("http://localhost:6274", StatusCode::OK),
        ("http://127.0.0.1:3000", StatusCode::OK),
        // The origin of the Host header is not trusted: under DNS rebinding an
        // attacker's page sends its own name as both Host and Origin.
        ("http://mcp.test:8080", StatusCode::FORBIDDEN),
    ] {
        let reply = world.post_raw(Some(FLOW_PAT), ping, &[("origin", origin)]).await;
        assert_eq!(reply.status, status, "{origin}");
    }
    // The server's own origin passes once `--mcp-public-url` pins it.
    let pinned = World::with_config(McpConfig { public_url: Some("https://mcp.example.com/mcp".into()), ..McpConfig::default() }).await;
    assert_eq!(pinned.post_raw(Some(FLOW_PAT), ping, &[("origin", "https://mcp.example.com")]).await.status, StatusCode::OK);
    assert_eq!(pinned.post_raw(Some(FLOW_PAT), ping, &[("origin", "http://mcp.test:8080")]).await.status, StatusCode::FORBIDDEN);
    // Forbidden before the token is even looked at.
    assert_eq!(world.post_raw(None, ping, &[("origin", "https://evil.example")]).await.status, StatusCode::FORBIDDEN);
    let strict = World::with_config(McpConfig { allow_loopback_origins: false, ..McpConfig::default() }).await;
    assert_eq!(strict.post_raw(Some(FLOW_PAT), ping, &[("origin", "http://localhost:6274")]).await.status, StatusCode::FORBIDDEN);
}

// svc_pat_: "personal access token ...; does not expire; works until revoked". Moving
// the server's clock a year and more on leaves it working.
#[tokio::test]
async fn a_personal_access_token_does_not_expire() {
    let world = World::in_process(McpConfig::default()).await;
    assert_eq!(world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await.status, StatusCode::OK);
    world.advance_clock(Duration::from_secs(400 * 24 * 3600));
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

// "A missing, unknown, expired or revoked token returns 401 with a WWW-Authenticate header pointing to the protected-resource metadata."
#[tokio::test]
async fn missing_unknown_and_malformed_tokens_are_401_with_the_metadata_pointer() {
    let world = World::new().await;
    let reply = world.post_raw(None, INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_challenge(&reply);
    assert_eq!(reply.json()["error"]["code"], "unauthorized");
    for token in ["svc_pat_unknown", "svc_oat_unknown", "sk_live_123", "svc_pat_", "svc_oat_"] {
        let reply = world.post_raw(Some(token), INITIALIZE, &[]).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{token}");
        assert_challenge(&reply);
        assert!(!reply.body.contains(token) || token.len() < 9, "the token is echoed");
    }
    // RFC 6750 §3.1: a token that is present but not usable is `invalid_token`; another
    // scheme is no credential at all, so its challenge names no error.
    assert!(world.post_raw(Some("svc_pat_unknown"), INITIALIZE, &[]).await.header("www-authenticate").unwrap().contains(r#"error="invalid_token""#));
    for header in ["Basic dXNlcjpwYXNz", "Digest username=\"u\"", "Bearer", "bearer  "] {
        let reply =
            world.send(Request::post("/mcp").header("host", "mcp.test:8080").header("authorization", header).body(Body::from(INITIALIZE)).unwrap()).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{header}");
        assert_challenge(&reply);
        let names_an_error = reply.header("www-authenticate").unwrap().contains("error=");
        assert_eq!(names_an_error, header.to_ascii_lowercase().starts_with("bearer"), "{header}: {:?}", reply.header("www-authenticate"));
    }
}

// RFC 6750 §3.1: a request that "uses more than one method for including an access
// token, or is otherwise malformed" is `invalid_request`, 400. Two Authorization headers
// are refused whichever comes first: a proxy reading the other one would disagree on who
// is calling.
#[tokio::test]
async fn duplicate_authorization_headers_are_400_invalid_request() {
    let world = World::new().await;
    for (first, second) in
        [(format!("Bearer {FLOW_PAT}"), "Bearer svc_pat_unknown".to_string()), ("Bearer svc_pat_unknown".to_string(), format!("Bearer {FLOW_PAT}"))]
    {
        let request = Request::post("/mcp")
            .header("host", "mcp.test:8080")
            .header("content-type", "application/json")
            .header("authorization", first.as_str())
            .header("authorization", second.as_str())
            .body(Body::from(INITIALIZE))
            .unwrap();
        let reply = world.send(request).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        assert_eq!(reply.json()["error"]["code"], "invalid_request");
        assert_eq!(reply.json()["error"]["param"], "Authorization", "as the REST API names it");
        assert!(reply.json()["error"]["message"].is_string());
        assert_challenge(&reply);
        assert!(reply.header("www-authenticate").unwrap().contains(r#"error="invalid_request""#));
        assert!(!reply.body.contains(FLOW_PAT), "the token is not echoed");
    }
    assert_eq!(world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await.status, StatusCode::OK, "one header is served");
}

#[tokio::test]
async fn a_revoked_pat_is_401_token_revoked() {
    let world = World::new().await;
    let reply = world.post_raw(Some(REVOKED_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_challenge(&reply);
    assert_eq!(reply.json()["error"]["code"], "token_revoked");
    // Revocation is seen on the next request.
    assert_eq!(world.post_raw(Some(FLOW2_PAT), INITIALIZE, &[]).await.status, StatusCode::OK, "before its revocation");
    world.feed(&[events::token_revoked("acc_flow", "tok_flow2", 2)]).await;
    let reply = world.post_raw(Some(FLOW2_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_challenge(&reply);
    assert_eq!(reply.json()["error"]["code"], "token_revoked");
}

#[tokio::test]
async fn a_configured_token_cache_bounds_how_long_a_revoked_pat_keeps_working() {
    // With --mcp-token-cache-ms N a revocation takes effect within N ms, never later.
    let world = World::in_process(McpConfig { token_cache_ms: 1_500, ..McpConfig::default() }).await;
    assert_eq!(world.post_raw(Some(FLOW2_PAT), INITIALIZE, &[]).await.status, StatusCode::OK);
    world.feed(&[events::token_revoked("acc_flow", "tok_flow2", 2)]).await;
    assert_eq!(world.post_raw(Some(FLOW2_PAT), INITIALIZE, &[]).await.status, StatusCode::OK, "answered from the cache within its age");
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let reply = world.post_raw(Some(FLOW2_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    assert_eq!(reply.json()["error"]["code"], "token_revoked");
}

#[tokio::test]
async fn a_configured_token_cache_never_keeps_a_refusal() {
    // A token created after a refused attempt works at once: only successes are cached.
    let world = World::with_config(McpConfig { token_cache_ms: 60_000, ..McpConfig::default() }).await;
    let fresh = "svc_pat_freshly_created_token_000000000000";
    assert_eq!(world.post_raw(Some(fresh), INITIALIZE, &[]).await.status, StatusCode::UNAUTHORIZED);
    world.feed(&[events::token_created("acc_flow", "tok_fresh", fresh, 1)]).await;
    assert_eq!(world.post_raw(Some(fresh), INITIALIZE, &[]).await.status, StatusCode::OK);
}

// 402 "the plan does not include MCP; the body code is feature_not_included or no_plan"
#[tokio::test]
async fn plans_without_mcp_are_402() {
    let world = World::new().await;
    let reply = world.post_raw(Some(ENTERPRISE_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(reply.json(), json!({"error": {"code": "feature_not_included", "message": "the plan does not include MCP", "feature": "mcp"}}));
    let reply = world.post_raw(Some(NO_PLAN_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(reply.json()["error"]["code"], "no_plan");
    // "The plan is checked on every request": a downgrade takes effect at once.
    world.feed(&[events::account("acc_flow", Some("enterprise"), None, 2)]).await;
    assert_eq!(world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await.status, StatusCode::PAYMENT_REQUIRED);
}

// 503 "the token or plan could not be verified; retry shortly"
#[tokio::test]
async fn an_unreachable_store_is_503() {
    let world = World::in_process(McpConfig::default()).await;
    world.fail_table("tokens_by_hash");
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert_eq!(reply.json()["error"]["code"], "unavailable");
}

// 500 with the REST API's error envelope, whose "request_id: for internal_error,
// identifies the request": a store that refuses the token check as a defect of the
// caller (never the client's doing) is the server's failure, named by the same id as the
// response's X-Request-Id.
#[tokio::test]
async fn a_store_refusing_the_token_check_as_a_defect_is_500_internal_error_naming_the_request_id() {
    let world = World::in_process(McpConfig::default()).await;
    world.misuse_table("tokens_by_hash");
    // No id of the client's: the one the server makes is in the body and the header.
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    let error = &reply.json()["error"];
    assert_eq!(error["code"], "internal_error", "{}", reply.json());
    let request_id = error["request_id"].as_str().expect("an internal_error names the request");
    assert!(!request_id.is_empty());
    assert_eq!(reply.header("x-request-id"), Some(request_id));
    let mut names: Vec<&str> = error.as_object().unwrap().keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, ["code", "message", "request_id"], "nothing of the failure's detail: {}", reply.json());
    // The client's own id: echoed in both.
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[("x-request-id", "req-500.a")]).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.json()["error"]["request_id"], "req-500.a");
    assert_eq!(reply.header("x-request-id"), Some("req-500.a"));
}

#[tokio::test]
async fn a_stalled_store_is_503_within_the_bound() {
    // The configured bound, not the driver's own (3 s in these tests), decides: the
    // answer comes no sooner than the configured 1 s and before the driver's bound.
    let world = World::in_process(McpConfig { store_timeout_ms: Some(1_000), ..McpConfig::default() }).await;
    world.stall_table("accounts");
    let started = std::time::Instant::now();
    let reply = world.post_raw(Some(FLOW_PAT), INITIALIZE, &[]).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.json()["error"]["code"], "unavailable");
    let elapsed = started.elapsed();
    assert!(elapsed >= std::time::Duration::from_millis(1_000), "answered after {elapsed:?}, before the configured bound");
    assert!(elapsed < recap_testkit::world::MCP_STORE_BOUND, "answered after {elapsed:?}, at the driver's bound");
}

// Bodies above 256 KiB (tool arguments are small) are refused with the error envelope,
// after the token check: a caller without a token learns only that it needs one.
#[tokio::test]
async fn an_oversized_body_is_413_payload_too_large_after_the_token_check() {
    let world = World::new().await;
    let big =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"list_meetings","arguments":{{"query":"{}"}}}}}}"#, "a".repeat(300 * 1024));
    let reply = world.post_raw(Some(FLOW_PAT), &big, &[]).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json(), json!({"error": {"code": "payload_too_large", "message": "the request body is larger than 262144 bytes"}}));
    assert_eq!(world.post_raw(None, &big, &[]).await.status, StatusCode::UNAUTHORIZED);
    let fits =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"list_meetings","arguments":{{"query":"{}"}}}}}}"#, "a".repeat(200 * 1024));
    assert_eq!(world.post_raw(Some(FLOW_PAT), &fits, &[]).await.status, StatusCode::OK);
}

// A body the client breaks off is a 400 in the error envelope, never a 500. (In
// process: over HTTP, a client that breaks its body off reads no answer.)
#[tokio::test]
async fn a_body_broken_off_is_400_invalid_request() {
    let world = World::in_process(McpConfig::default()).await;
    let chunks: Vec<Result<&'static [u8], std::io::Error>> = vec![Ok(br#"{"jsonrpc":"2.0","#), Err(std::io::Error::other("connection reset"))];
    let request = Request::post("/mcp")
        .header("host", "mcp.test:8080")
        .header("authorization", format!("Bearer {FLOW_PAT}"))
        .header("content-type", "application/json")
        .body(Body::from_stream(futures::stream::iter(chunks)))
        .unwrap();
    let reply = world.send(request).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json(), json!({"error": {"code": "invalid_request", "message": "the request body could not be read", "param": "body"}}));
}

// Never 500 for input, never a panic: garbage bodies and headers.
#[tokio::test]
async fn garbage_never_causes_a_500() {
    let world = World::new().await;
    let bodies = [
        "",
        "\u{0}",
        "null",
        "123",
        "{}",
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_meeting","arguments":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_meeting","arguments":{"meeting_id":{"$ne":1}}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_meetings","arguments":{"limit":1e400}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5}}"#,
        r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}"#,
    ];
    for body in bodies {
        let reply = world.post_raw(Some(FLOW_PAT), body, &[]).await;
        assert!(reply.status.is_success() || reply.status.is_client_error(), "{body}: {}", reply.status);
    }
}
