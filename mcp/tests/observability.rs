//! What the MCP server tells operators (docs/mcp.md: Debug log, Two eras): the trace a
//! request's `_meta` names, and the debug lines of requests and refresh grants, which
//! never carry a token. Each test installs a subscriber of its own, so they live in their
//! own test binary, one at a time, where no other test's first use of a callsite can race
//! with it: tracing caches which callsites are enabled across every thread's subscriber.

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

/// Held by each test while its subscriber is installed.
static OWN_SUBSCRIBER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The spans a test's tracer provider exported.
#[derive(Clone, Debug, Default)]
struct ExportedSpans(std::sync::Arc<std::sync::Mutex<Vec<opentelemetry_sdk::trace::SpanData>>>);

impl opentelemetry_sdk::trace::SpanExporter for ExportedSpans {
    async fn export(&self, batch: Vec<opentelemetry_sdk::trace::SpanData>) -> opentelemetry_sdk::error::OTelSdkResult {
        self.0.lock().unwrap().extend(batch);
        Ok(())
    }
}

// "traceparent, tracestate ... in params._meta" (W3C trace context): the MCP span of a request
// continues the trace its _meta names; a malformed value is ignored, never refused.
#[tokio::test]
async fn a_traceparent_in_meta_continues_the_clients_trace() {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let _one_at_a_time = OWN_SUBSCRIBER.lock().await;
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    let spans = ExportedSpans::default();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test"))));
    let world = World::in_process(recap_mcp::McpConfig::default()).await;
    let (trace_id, parent_id) = ("0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7");
    let call = |traceparent: &str| {
        let mut params = with_meta(json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_budget"}}));
        params["_meta"]["traceparent"] = json!(traceparent);
        params["_meta"]["tracestate"] = json!("vendor=1");
        body("tools/call", params)
    };
    let reply = world.post_raw(Some(FLOW_PAT), &call(&format!("00-{trace_id}-{parent_id}-01")), &headers("tools/call", Some("get_meeting"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = world.post_raw(Some(FLOW_PAT), &call("00-not-a-trace-01"), &headers("tools/call", Some("get_meeting"))).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let _ = provider.force_flush();
    let exported = spans.0.lock().unwrap().clone();
    let tool_spans: Vec<_> = exported.iter().filter(|span| span.name == "tools/call get_meeting").collect();
    assert_eq!(tool_spans.len(), 2, "{exported:?}");
    let continued = tool_spans[0];
    assert_eq!(continued.span_context.trace_id().to_string(), trace_id);
    assert_eq!(continued.parent_span_id.to_string(), parent_id);
    assert!(continued.parent_span_is_remote);
    assert_eq!(continued.span_context.trace_state().get("vendor"), Some("1"));
    let fresh = tool_spans[1];
    assert_ne!(fresh.span_context.trace_id().to_string(), trace_id);
    assert_eq!(fresh.parent_span_id, opentelemetry::trace::SpanId::INVALID, "a malformed traceparent starts a new trace");

    // Every method's span continues it, in both eras: each request names a trace of its
    // own, found again on the span of the expected name.
    let legacy = |method: &'static str| vec![("mcp-protocol-version", "2025-11-25"), ("mcp-method", method)];
    // (method, params, headers, the name of its span)
    let requests = [
        ("server/discover", json!({}), headers("server/discover", None), "server/discover"),
        ("tools/list", json!({}), headers("tools/list", None), "tools/list"),
        ("subscriptions/listen", json!({"notifications": {}}), headers("subscriptions/listen", None), "subscriptions/listen"),
        ("resources/list", json!({}), headers("resources/list", None), "unknown method"),
        (
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            legacy("initialize"),
            "initialize",
        ),
        ("ping", json!({}), legacy("ping"), "ping"),
        ("tools/list", json!({}), legacy("tools/list"), "tools/list"),
        ("tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_budget"}}), legacy("tools/call"), "tools/call get_meeting"),
    ];
    for (index, (method, mut params, headers, span_name)) in requests.into_iter().enumerate() {
        let (trace_id, parent_id) = (format!("{:032x}", 0xabc0 + index), format!("{:016x}", 0xde0 + index));
        // A handshake-era request's `_meta` names no version, or it would be a modern one.
        params["_meta"] = if headers.contains(&("mcp-protocol-version", MODERN)) { meta() } else { json!({}) };
        params["_meta"]["traceparent"] = json!(format!("00-{trace_id}-{parent_id}-01"));
        let reply = world.post_raw(Some(FLOW_PAT), &body(method, params), &headers).await;
        assert!(reply.status.is_success() || reply.status == StatusCode::NOT_FOUND, "{method}: {}", reply.body);
        let _ = provider.force_flush();
        let exported = spans.0.lock().unwrap().clone();
        // The span whose parent is the client's (the store's own spans, children of it,
        // are in the trace too).
        let continued = exported.iter().find(|span| span.span_context.trace_id().to_string() == trace_id && span.parent_span_id.to_string() == parent_id);
        let continued = continued.unwrap_or_else(|| panic!("{method} ({headers:?}): no span continues {trace_id}/{parent_id}: {exported:?}"));
        assert_eq!(continued.name, span_name, "{method} ({headers:?})");
    }
}

/// What a test's subscriber wrote, as the binary writes its log lines.
#[derive(Clone, Default)]
struct LogLines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogLines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogLines {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The lines with `message` and every one of `fields` (`name=value` as written).
    fn count(&self, message: &str, fields: &[&str]) -> usize {
        self.text().lines().filter(|line| line.contains(message) && fields.iter().all(|field| line.contains(field))).count()
    }
}

// Debug log: one line per request to /mcp (request id as the response's X-Request-Id
// carries it, era, JSON-RPC id, method, tool, outcome, status, latency) and per refresh
// grant (client, outcome, latency); never a token.
#[tokio::test]
async fn debug_lines_name_each_request_and_refresh_and_never_a_token() {
    let _one_at_a_time = OWN_SUBSCRIBER.lock().await;
    let lines = LogLines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_ansi(false).with_writer(move || writer.clone()).finish();
    let _subscriber = tracing::subscriber::set_default(subscriber);
    let world = World::in_process(recap_mcp::McpConfig::default()).await;

    world.modern_call("get_meeting", json!({"meeting_id": "mtg_budget"})).await;
    world.modern_call("get_meeting", json!({"meeting_id": "mtg_nope"})).await;
    world.modern("ping", json!({})).await;
    world.call("list_meetings", json!({})).await;
    let unknown_token =
        world.post_raw(Some("svc_pat_unknown_0000000000000000000000001"), &body("tools/list", with_meta(json!({}))), &headers("tools/list", None)).await;
    // The client's own well-formed id is kept; a malformed one is replaced.
    let mut own_id = headers("tools/list", None);
    own_id.push(("x-request-id", "client-trace.42:a_b"));
    let kept = world.post_raw(Some(FLOW_PAT), &body("tools/list", with_meta(json!({}))), &own_id).await;
    let mut bad_id = headers("tools/list", None);
    bad_id.push(("x-request-id", "has space"));
    let replaced = world.post_raw(Some(FLOW_PAT), &body("tools/list", with_meta(json!({}))), &bad_id).await;
    let (client_id, access, refresh_token) = connect(&world, FLOW_PAT).await;
    world.rpc_as(&access, "tools/list", json!({}), &[]).await;
    let refreshed = refresh(&world, &client_id, &refresh_token).await;
    let reused = refresh(&world, &client_id, &refresh_token).await;
    assert_eq!(reused.status, StatusCode::BAD_REQUEST);

    let request = "mcp request";
    let modern = r#"era="2026-07-28""#;
    assert_eq!(lines.count(request, &[modern, r#"id="1""#, r#"method="tools/call""#, r#"tool="get_meeting""#, "outcome=ok", "status=200", "latency_us="]), 1);
    assert_eq!(lines.count(request, &[modern, r#"tool="get_meeting""#, "outcome=tool_error"]), 1);
    assert_eq!(lines.count(request, &[modern, r#"method="ping""#, "outcome=-32601", "status=404"]), 1);
    assert_eq!(lines.count(request, &[r#"era="2025-03-26""#, r#"tool="list_meetings""#, "outcome=ok"]), 1);
    assert_eq!(lines.count(request, &["outcome=unauthorized", "status=401"]), 1);
    assert_eq!(kept.header("x-request-id"), Some("client-trace.42:a_b"));
    assert_eq!(lines.count(request, &[r#"request_id="client-trace.42:a_b""#, r#"method="tools/list""#, "status=200"]), 1);
    for reply in [&unknown_token, &replaced] {
        let id = reply.header("x-request-id").expect("every response carries X-Request-Id");
        assert!(uuid::Uuid::parse_str(id).is_ok(), "a new id replaces a missing or malformed one: {id}");
        assert_eq!(lines.count(request, &[&format!(r#"request_id="{id}""#)]), 1, "the line names the response's id");
    }
    assert_eq!(lines.count(request, &[r#"request_id="-""#]), 0);
    let refresh_line = "refresh token grant";
    assert_eq!(lines.count(refresh_line, &[&format!(r#"client_id="{client_id}""#), "outcome=ok", "latency_us="]), 1);
    assert_eq!(lines.count(refresh_line, &["outcome=invalid_grant"]), 1);
    for reply in [&refreshed, &reused] {
        let id = reply.header("x-request-id").expect("a refresh grant's response carries X-Request-Id");
        assert_eq!(lines.count(refresh_line, &[&format!(r#"request_id="{id}""#)]), 1, "the line names the response's id");
    }

    let text = lines.text();
    let refreshed = refreshed.json();
    let issued = [refreshed["access_token"].as_str().unwrap(), refreshed["refresh_token"].as_str().unwrap()];
    for token in [FLOW_PAT, "svc_pat_unknown_0000000000000000000000001", &access, &refresh_token, issued[0], issued[1]] {
        let secret = &token[8..];
        assert!(!text.contains(secret), "a token reached the log: {token}\n{text}");
    }
}
