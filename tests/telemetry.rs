//! Telemetry through a real OpenTelemetry Collector (`testkit/src/otel.rs`): the real
//! binary exports OTLP over HTTP/protobuf to a collector that writes what it received as
//! OTLP/JSON lines, and each test checks that what it caused arrived as the telemetry
//! contract names it: HTTP server spans and their duration histogram, MCP request spans,
//! projector batch spans and event counters, store client spans and durations, limiter
//! decisions, the resource and the scope; that no token is exported; and that nothing is
//! exported without an endpoint.
//!
//! The embedded edition runs in every pass; the distributed roles (Kafka, Cassandra,
//! Redis) are checked by an ignored test that `make test` runs in its pass over the
//! engines. The collector is built by `scripts/otel-collector.sh` (`RECAP_OTELCOL`).

use std::time::Duration;

use recap_schemas::Envelope;
use recap_testkit::events::*;
use recap_testkit::otel::*;
use recap_testkit::server::Server;
use serde_json::{json, Value};

const SERVICE: &str = "recap-test";
/// Every OTLP variable recap reads, unset unless a test sets it, whatever the
/// environment the tests run in.
const OTEL_VARIABLES: [&str; 6] = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_SERVICE_NAME",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_BSP_SCHEDULE_DELAY",
];

const REST_ROUTES: [(&str, &str); 7] = [
    ("/v1/meetings", "/v1/meetings"),
    ("/v1/meetings/mtg_0", "/v1/meetings/{meeting_id}"),
    ("/v1/action-items", "/v1/action-items"),
    ("/v1/shared-notes", "/v1/shared-notes"),
    ("/v1/shared-notes/shr_1", "/v1/shared-notes/{shared_note_id}"),
    ("/v1/teams", "/v1/teams"),
    ("/v1/teams/team_1/action-items", "/v1/teams/{team_id}/action-items"),
];

/// The variables that point recap at `collector`, with prompt exports.
fn exporting_to(collector: &Collector) -> Vec<(String, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector.endpoint.clone()),
        ("OTEL_SERVICE_NAME".into(), SERVICE.into()),
        ("OTEL_METRIC_EXPORT_INTERVAL".into(), "500".into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
    ]
}

/// A collector and an embedded `recap serve` exporting to it, with a projected world:
/// Alice (flow plan) with meetings, items, a team and a note Bob shared with the team.
struct Scene {
    collector: Collector,
    server: Server,
    alice: String,
    /// Events fed so far (every one applied).
    events: usize,
}

fn scene() -> Scene {
    scene_with(&[], |_| {})
}

/// A scene with extra variables for recap and extra events in the world.
fn scene_with(envs: &[(&str, &str)], extra: impl FnOnce(&mut Vec<Envelope>)) -> Scene {
    let collector = Collector::start();
    let mut builder = Server::builder().embedded();
    for key in OTEL_VARIABLES {
        builder = builder.env_remove(key);
    }
    for (key, value) in exporting_to(&collector) {
        builder = builder.env(&key, &value);
    }
    for (key, value) in envs {
        builder = builder.env(key, value);
    }
    let server = builder.start();
    let alice = new_token();
    let mut lines = world_lines(&alice);
    extra(&mut lines);
    server.feed(&lines);
    Scene { collector, server, alice, events: lines.len() }
}

fn world_lines(alice: &str) -> Vec<Envelope> {
    let mut lines =
        vec![account("acc_alice", Some("flow"), None, 1), token_created("acc_alice", "tok_alice", alice, 1), account("acc_bob", Some("enterprise"), None, 1)];
    for index in 0..3 {
        let id = format!("mtg_{index}");
        let items = [item(&format!("ai_{index}"), "todo", None, 10 * (index + 1))];
        lines.push(meeting_draft("acc_alice", &id, "Weekly sync", 10 * (index + 1)).action_items(items).version(2).envelope());
    }
    lines.push(team("team_1", "Design", Some("business"), true, 1));
    lines.push(member("team_1", "acc_alice", 1));
    lines.push(member("team_1", "acc_bob", 1));
    lines.push(team_item("team_1", "tai_1", "todo", 3, 1));
    lines.push(share("shr_1", "acc_bob", 4).title("Q3").team(Some(("team_1", "Design"))).text("Q3 plan").version(1).envelope());
    lines
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    fn request_id(&self) -> String {
        self.header("x-request-id").unwrap_or_else(|| panic!("no X-Request-Id: {:?}", self.headers)).to_string()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.body))
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

fn reply(mut response: ureq::http::Response<ureq::Body>) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().iter().map(|(name, value)| (name.as_str().to_string(), value.to_str().unwrap_or_default().to_string())).collect();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    Reply { status, headers, body }
}

/// A GET on the REST listener (`path` from `/v1`), with a token and extra headers.
fn rest(server: &Server, path: &str, token: Option<&str>, headers: &[(&str, &str)]) -> Reply {
    let root = server.base_url.trim_end_matches("/v1");
    let mut request = agent().get(&format!("{root}{path}"));
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    reply(request.call().expect("REST request"))
}

/// One JSON-RPC request to the MCP endpoint under the W3C trace `trace_id`, so its spans
/// are found by trace.
fn mcp(url: &str, token: &str, trace_id: &str, id: u64, method: &str, params: Value) -> Value {
    let (_, parent) = random_trace_context();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let response = agent()
        .post(url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("traceparent", &format!("00-{trace_id}-{parent}-01"))
        .send(body.to_string())
        .expect("MCP request");
    let reply = reply(response);
    assert_eq!(reply.status, 200, "{method}: {}", reply.body);
    reply.json()
}

/// The HTTP server span of the request whose response carried `request_id`.
fn server_span(collector: &Collector, request_id: &str) -> Span {
    collector.wait_span(&format!("the SERVER span with recap.request_id {request_id}"), |span| {
        span.kind == SPAN_KIND_SERVER && span.str("recap.request_id") == Some(request_id)
    })
}

/// The HTTP server span and the other spans of trace `trace_id`, once a span named
/// `child` arrived in it.
fn trace_with(collector: &Collector, trace_id: &str, child: &str) -> (Span, Vec<Span>) {
    collector.wait_until(&format!("a SERVER span and a {child:?} span in trace {trace_id}"), |spans, _| {
        let trace: Vec<Span> = spans.iter().filter(|span| span.trace_id == trace_id).cloned().collect();
        let server = trace.iter().find(|span| span.kind == SPAN_KIND_SERVER)?.clone();
        trace.iter().any(|span| span.name == child).then_some((server, trace))
    })
}

/// A histogram point's count once it reached `count`; then it must be exactly `count`.
fn histogram_count(collector: &Collector, name: &str, what: &str, matches: impl Fn(&Point) -> bool, count: u64) -> Point {
    let point = collector.wait_point_until(name, what, matches, |point| point.count >= count);
    assert_eq!(point.count, count, "{name} {what}: one recording per request: {point:?}");
    point
}

/// A counter's newest value once it reached `value`; then it must be exactly `value`.
fn counter_value(collector: &Collector, name: &str, what: &str, matches: impl Fn(&Point) -> bool, value: f64) -> Point {
    let point = collector.wait_point_until(name, what, matches, |point| point.value >= value);
    assert_eq!(point.kind, MetricKind::Sum { monotonic: true }, "{name} is a monotonic counter");
    assert_eq!(point.value, value, "{name} {what}: {point:?}");
    point
}

#[test]
fn the_collector_harness_reads_back_hand_made_otlp_spans_and_points() {
    // The plumbing alone, without recap: what is posted to the collector's OTLP/HTTP
    // receiver comes back through the file exporter and the readers, typed.
    let collector = Collector::start();
    let (trace_id, parent) = random_trace_context();
    collector.post_json(
        "/v1/traces",
        &json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "hand-made"}}]},
            "scopeSpans": [{"scope": {"name": "recap"}, "spans": [{
                "traceId": trace_id, "spanId": "b7ad6b7169203331", "parentSpanId": parent,
                "name": "GET /v1/meetings/{meeting_id}", "kind": 2, "startTimeUnixNano": "1", "endTimeUnixNano": "2",
                "attributes": [
                    {"key": "http.route", "value": {"stringValue": "/v1/meetings/{meeting_id}"}},
                    {"key": "http.response.status_code", "value": {"intValue": "404"}}
                ],
                "status": {"code": 2}
            }]}]
        }]}),
    );
    collector.post_json(
        "/v1/metrics",
        &json!({"resourceMetrics": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "hand-made"}}]},
            "scopeMetrics": [{"scope": {"name": "recap"}, "metrics": [
                {"name": "recap.limiter.decisions", "unit": "{decision}", "sum": {"aggregationTemporality": 2, "isMonotonic": true, "dataPoints": [
                    {"asInt": "3", "timeUnixNano": "5", "attributes": [{"key": "outcome", "value": {"stringValue": "allowed"}}]},
                    {"asInt": "7", "timeUnixNano": "6", "attributes": [{"key": "outcome", "value": {"stringValue": "allowed"}}]}
                ]}},
                {"name": "http.server.request.duration", "unit": "s", "histogram": {"aggregationTemporality": 2, "dataPoints": [
                    {"count": "2", "sum": 0.5, "timeUnixNano": "5", "bucketCounts": ["1", "1"], "explicitBounds": [0.1],
                     "attributes": [{"key": "http.response.status_code", "value": {"intValue": "200"}}]}
                ]}},
                {"name": "recap.projector.newest_event_age", "unit": "s", "gauge": {"dataPoints": [{"asDouble": 1.5, "timeUnixNano": "5"}]}}
            ]}]
        }]}),
    );
    let span = collector.wait_span("the hand-made span", |span| span.trace_id == trace_id);
    assert_eq!(span.name, "GET /v1/meetings/{meeting_id}");
    assert_eq!((span.kind, span.status_code, span.parent_span_id.as_str()), (SPAN_KIND_SERVER, STATUS_ERROR, parent.as_str()));
    assert_eq!((span.service(), span.scope.as_str()), (Some("hand-made"), "recap"));
    assert_eq!(span.int("http.response.status_code"), Some(404));
    assert_eq!(span.str("http.response.status_code"), None, "an int is not a string");
    assert_eq!(span.str("http.route"), Some("/v1/meetings/{meeting_id}"));
    let decisions = counter_value(&collector, "recap.limiter.decisions", "allowed", |point| point.str("outcome") == Some("allowed"), 7.0);
    assert_eq!(decisions.unit, "{decision}");
    let duration = histogram_count(&collector, "http.server.request.duration", "200", |point| point.int("http.response.status_code") == Some(200), 2);
    assert_eq!((duration.kind, duration.unit.as_str(), duration.value), (MetricKind::Histogram, "s", 0.5));
    let age = collector.wait_point("recap.projector.newest_event_age", "any", |_| true);
    assert_eq!((age.kind, age.value), (MetricKind::Gauge, 1.5));
}

#[test]
fn rest_requests_export_one_server_span_named_by_method_and_route() {
    let scene = scene();
    for (path, route) in REST_ROUTES {
        let reply = rest(&scene.server, path, Some(&scene.alice), &[]);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        let request_id = reply.request_id();
        let span = server_span(&scene.collector, &request_id);
        assert_eq!(span.name, format!("GET {route}"), "{path}");
        assert_eq!(span.str("http.request.method"), Some("GET"), "{path}: {span:?}");
        assert_eq!(span.str("http.route"), Some(route), "{path}: {span:?}");
        assert_eq!(span.int("http.response.status_code"), Some(200), "{path}: an int attribute: {span:?}");
        assert_eq!(span.str("url.path"), Some(path), "{path}: {span:?}");
        assert!(!span.attributes.has("error.type"), "{path}: no error.type on a success: {span:?}");
        assert_ne!(span.status_code, STATUS_ERROR, "{path}: {span:?}");
        let same: Vec<Span> = scene
            .collector
            .spans()
            .into_iter()
            .filter(|other| other.kind == SPAN_KIND_SERVER && other.str("recap.request_id") == Some(request_id.as_str()))
            .collect();
        assert_eq!(same.len(), 1, "{path}: one server span per request: {same:?}");
    }
    // The query string is not part of url.path.
    let reply = rest(&scene.server, "/v1/meetings/mtg_0?include=transcript", Some(&scene.alice), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let span = server_span(&scene.collector, &reply.request_id());
    assert_eq!(span.str("url.path"), Some("/v1/meetings/mtg_0"), "{span:?}");
}

#[test]
fn otlp_traces_honour_incoming_w3c_trace_context() {
    let scene = scene();
    let (trace_id, parent_id) = random_trace_context();
    let traceparent = format!("00-{trace_id}-{parent_id}-01");
    let reply = rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[("traceparent", &traceparent)]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let span = server_span(&scene.collector, &reply.request_id());
    assert_eq!(span.trace_id, trace_id, "the header's trace id: {span:?}");
    assert_eq!(span.parent_span_id, parent_id, "the header's parent id: {span:?}");
    assert_ne!(span.span_id, parent_id, "a span of its own");
    // Without the header the request starts a trace of its own: a root span.
    let reply = rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]);
    let span = server_span(&scene.collector, &reply.request_id());
    assert_ne!(span.trace_id, trace_id);
    assert!(span.parent_span_id.is_empty(), "a root span: {span:?}");
}

#[test]
fn error_responses_carry_their_wire_code_in_error_type_and_only_5xx_is_a_span_error() {
    let scene = scene();
    let missing = rest(&scene.server, "/v1/meetings/mtg_missing", Some(&scene.alice), &[]);
    assert_eq!(missing.status, 404, "{}", missing.body);
    assert_eq!(missing.json()["error"]["code"], "meeting_not_found");
    let span = server_span(&scene.collector, &missing.request_id());
    assert_eq!(span.name, "GET /v1/meetings/{meeting_id}");
    assert_eq!(span.str("http.route"), Some("/v1/meetings/{meeting_id}"));
    assert_eq!(span.int("http.response.status_code"), Some(404), "{span:?}");
    assert_eq!(span.str("error.type"), Some("meeting_not_found"), "{span:?}");
    assert_ne!(span.status_code, STATUS_ERROR, "a 4xx is not a span error: {span:?}");

    let anonymous = rest(&scene.server, "/v1/meetings", None, &[]);
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let span = server_span(&scene.collector, &anonymous.request_id());
    assert_eq!(span.name, "GET /v1/meetings");
    assert_eq!(span.int("http.response.status_code"), Some(401), "{span:?}");
    assert_eq!(span.str("error.type"), Some("unauthorized"), "{span:?}");
    assert_ne!(span.status_code, STATUS_ERROR, "{span:?}");
}

#[test]
fn unmatched_paths_are_named_by_the_method_alone_without_a_route() {
    let scene = scene();
    let reply = rest(&scene.server, "/v1/nope/deeper", Some(&scene.alice), &[]);
    assert_eq!(reply.status, 404, "{}", reply.body);
    let span = server_span(&scene.collector, &reply.request_id());
    assert_eq!(span.name, "GET", "{span:?}");
    assert!(!span.attributes.has("http.route"), "no route when none matched: {span:?}");
    assert_eq!(span.str("http.request.method"), Some("GET"));
    assert_eq!(span.str("url.path"), Some("/v1/nope/deeper"));
    assert_eq!(span.int("http.response.status_code"), Some(404));
    assert_eq!(span.str("error.type"), Some("not_found"), "{span:?}");
}

#[test]
fn request_traces_contain_store_select_client_spans() {
    let scene = scene();
    let reply = rest(&scene.server, "/v1/meetings/mtg_1", Some(&scene.alice), &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let server = server_span(&scene.collector, &reply.request_id());
    let select = scene.collector.wait_span(&format!("a SELECT CLIENT span in trace {}", server.trace_id), |span| {
        span.trace_id == server.trace_id && span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some("SELECT")
    });
    let collection = select.str("db.collection.name").unwrap_or_else(|| panic!("db.collection.name: {select:?}"));
    assert!(!collection.is_empty(), "{select:?}");
    assert_eq!(select.name, format!("SELECT {collection}"));
    assert_eq!(select.str("db.system.name"), Some("lmdb"), "{select:?}");
    assert!(!select.attributes.has("error.type"), "{select:?}");
    assert_ne!(select.span_id, server.span_id);
}

#[test]
fn mcp_requests_export_a_post_mcp_span_with_one_child_span_per_json_rpc_request() {
    let scene = scene();
    let url = scene.server.mcp_url.clone();
    let mcp_path = url.find("/mcp").map(|start| &url[start..]).unwrap_or("/mcp").to_string();

    let (trace_id, _) = random_trace_context();
    let response = mcp(&url, &scene.alice, &trace_id, 1, "tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_0"}}));
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    let (server, trace) = trace_with(&scene.collector, &trace_id, "tools/call get_meeting");
    assert_eq!(server.name, "POST /mcp", "{server:?}");
    assert_eq!(server.str("http.request.method"), Some("POST"));
    assert_eq!(server.str("http.route"), Some("/mcp"));
    assert_eq!(server.str("url.path"), Some(mcp_path.as_str()));
    assert_eq!(server.int("http.response.status_code"), Some(200), "{server:?}");
    assert!(!server.attributes.has("error.type"), "{server:?}");
    let tool = trace.iter().find(|span| span.name == "tools/call get_meeting").expect("the tool span");
    assert_eq!(tool.kind, SPAN_KIND_INTERNAL, "{tool:?}");
    assert_eq!(tool.parent_span_id, server.span_id, "a child of the HTTP span: {tool:?}");
    assert_eq!(tool.str("mcp.method.name"), Some("tools/call"), "{tool:?}");
    assert_eq!(tool.str("gen_ai.tool.name"), Some("get_meeting"), "{tool:?}");
    assert_eq!(tool.str("gen_ai.operation.name"), Some("execute_tool"), "{tool:?}");
    assert!(!tool.attributes.has("error.type"), "a successful call: {tool:?}");
    assert_ne!(tool.status_code, STATUS_ERROR, "{tool:?}");
    scene.collector.wait_span("a SELECT CLIENT span in the tool call's trace", |span| {
        span.trace_id == trace_id && span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some("SELECT")
    });

    for (method, params) in
        [("initialize", json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})), ("tools/list", json!({}))]
    {
        let (trace_id, _) = random_trace_context();
        let response = mcp(&url, &scene.alice, &trace_id, 2, method, params);
        assert!(response.get("result").is_some(), "{method}: {response}");
        let (server, trace) = trace_with(&scene.collector, &trace_id, method);
        assert_eq!(server.name, "POST /mcp");
        let span = trace.iter().find(|span| span.name == method).expect("the method's span");
        assert_eq!(span.parent_span_id, server.span_id, "{method}: a child of the HTTP span: {span:?}");
        assert_eq!(span.str("mcp.method.name"), Some(method), "{span:?}");
        assert!(!span.attributes.has("gen_ai.tool.name"), "{span:?}");
    }
}

#[test]
fn mcp_tool_results_with_is_error_set_error_type_tool_error() {
    let scene = scene();
    let (trace_id, _) = random_trace_context();
    let response =
        mcp(&scene.server.mcp_url, &scene.alice, &trace_id, 1, "tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_missing"}}));
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    let (server, trace) = trace_with(&scene.collector, &trace_id, "tools/call get_meeting");
    let tool = trace.iter().find(|span| span.name == "tools/call get_meeting").expect("the tool span");
    assert_eq!(tool.parent_span_id, server.span_id);
    assert_eq!(tool.str("error.type"), Some("tool_error"), "{tool:?}");
    assert_eq!(tool.str("gen_ai.tool.name"), Some("get_meeting"));
    assert_eq!(server.int("http.response.status_code"), Some(200), "a tool error is a JSON-RPC result: {server:?}");
    assert!(!server.attributes.has("error.type"), "{server:?}");
}

#[test]
fn projected_batches_export_consumer_spans_with_partition_offsets_and_counts() {
    let scene = scene();
    let events = scene.events as i64;
    let batches = scene.collector.wait_until(&format!("projector.batch spans covering the {events} events"), |spans, _| {
        let batches: Vec<Span> = spans.iter().filter(|span| span.name == "projector.batch").cloned().collect();
        let covered: i64 = batches.iter().filter_map(|span| span.int("messaging.batch.message_count")).sum();
        (covered >= events).then_some(batches)
    });
    let covered: i64 = batches.iter().filter_map(|span| span.int("messaging.batch.message_count")).sum();
    assert_eq!(covered, events, "each event in exactly one batch: {batches:?}");
    for batch in &batches {
        assert_eq!(batch.kind, SPAN_KIND_CONSUMER, "{batch:?}");
        assert_eq!(batch.str("messaging.system"), Some("recap.log"), "{batch:?}");
        assert_eq!(batch.str("messaging.destination.partition.id"), Some("0"), "a string: {batch:?}");
        let first = batch.int("recap.offset.first").unwrap_or_else(|| panic!("recap.offset.first, an int: {batch:?}"));
        let last = batch.int("recap.offset.last").unwrap_or_else(|| panic!("recap.offset.last, an int: {batch:?}"));
        let count = batch.int("messaging.batch.message_count").unwrap_or_else(|| panic!("messaging.batch.message_count, an int: {batch:?}"));
        assert!(first <= last && count >= 1, "{batch:?}");
        assert_ne!(batch.status_code, STATUS_ERROR, "{batch:?}");
    }
    let mut ranges: Vec<(i64, i64)> = batches.iter().filter_map(|batch| Some((batch.int("recap.offset.first")?, batch.int("recap.offset.last")?))).collect();
    ranges.sort();
    assert!(ranges.windows(2).all(|pair| pair[0].1 < pair[1].0), "batches do not overlap: {ranges:?}");
}

#[test]
fn projector_metrics_count_events_by_outcome_and_report_lag_and_event_age() {
    let scene = scene();
    // mtg_0 is at version 2: version 1 again is stale.
    scene.server.feed(&[meeting("acc_alice", "mtg_0", "Older title", 10, 1)]);
    let applied = scene.events as f64;
    counter_value(&scene.collector, "recap.projector.events", "outcome applied", |point| point.str("outcome") == Some("applied"), applied);
    counter_value(&scene.collector, "recap.projector.events", "outcome stale", |point| point.str("outcome") == Some("stale"), 1.0);
    // The embedded log has one partition whose lag is measured in bytes (its positions
    // are byte offsets); Kafka's per-partition lag is checked in the distributed test.
    let lag = scene.collector.wait_point_until("recap.projector.log_lag", "caught up", |_| true, |point| point.value == 0.0);
    assert_eq!((lag.kind, lag.unit.as_str()), (MetricKind::Gauge, "By"), "{lag:?}");
    let age = scene.collector.wait_point("recap.projector.newest_event_age", "any", |_| true);
    assert_eq!((age.kind, age.unit.as_str()), (MetricKind::Gauge, "s"), "{age:?}");
    // Every fed event occurred at events::at(0): the age is the time since then, as of
    // the gauge's collection (at most a few export intervals ago).
    let occurred = recap_schemas::Timestamp::parse(&at(0)).unwrap().0 as f64 / 1e6;
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() - occurred;
    assert!(age.value <= since + 1.0 && age.value >= since - 300.0, "age {} s, the newest event occurred {since} s ago: {age:?}", age.value);
}

#[test]
fn http_server_request_duration_is_a_histogram_in_seconds_by_route_and_status() {
    let scene = scene();
    for _ in 0..3 {
        assert_eq!(rest(&scene.server, "/v1/meetings/mtg_0", Some(&scene.alice), &[]).status, 200);
    }
    assert_eq!(rest(&scene.server, "/v1/meetings/mtg_missing", Some(&scene.alice), &[]).status, 404);
    let route = "/v1/meetings/{meeting_id}";
    let ok = histogram_count(
        &scene.collector,
        "http.server.request.duration",
        "GET /v1/meetings/{meeting_id} 200",
        |point| point.str("http.route") == Some(route) && point.int("http.response.status_code") == Some(200),
        3,
    );
    assert_eq!((ok.kind, ok.unit.as_str()), (MetricKind::Histogram, "s"), "{ok:?}");
    assert_eq!(ok.str("http.request.method"), Some("GET"));
    assert!(!ok.attributes.has("error.type"), "{ok:?}");
    assert!(ok.value > 0.0 && ok.value < 30.0, "seconds: {ok:?}");
    let missing = histogram_count(
        &scene.collector,
        "http.server.request.duration",
        "GET /v1/meetings/{meeting_id} 404",
        |point| point.str("http.route") == Some(route) && point.int("http.response.status_code") == Some(404),
        1,
    );
    assert_eq!(missing.str("error.type"), Some("meeting_not_found"), "{missing:?}");
}

#[test]
fn limiter_decisions_are_counted_by_outcome() {
    // Alice may make 3 counted requests a minute; Carol's plan has a quota of 1.
    let carol = new_token();
    let carol_lines = vec![account("acc_carol", Some("flow"), Some(1), 1), token_created("acc_carol", "tok_carol", &carol, 1)];
    let scene = scene_with(&[("RECAP_REST_RATE_LIMIT_PER_MINUTE", "3")], |lines| lines.extend(carol_lines));
    for _ in 0..3 {
        assert_eq!(rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]).status, 200);
    }
    let limited = rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]);
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(rest(&scene.server, "/v1/meetings", Some(&carol), &[]).status, 200);
    let exhausted = rest(&scene.server, "/v1/meetings", Some(&carol), &[]);
    assert_eq!(exhausted.status, 402, "{}", exhausted.body);

    let outcome = |name: &'static str| move |point: &Point| point.str("outcome") == Some(name);
    counter_value(&scene.collector, "recap.limiter.decisions", "outcome allowed", outcome("allowed"), 4.0);
    counter_value(&scene.collector, "recap.limiter.decisions", "outcome rate_limited", outcome("rate_limited"), 1.0);
    counter_value(&scene.collector, "recap.limiter.decisions", "outcome quota_exhausted", outcome("quota_exhausted"), 1.0);
    let span = server_span(&scene.collector, &limited.request_id());
    assert_eq!((span.int("http.response.status_code"), span.str("error.type")), (Some(429), Some("rate_limited")), "{span:?}");
    let span = server_span(&scene.collector, &exhausted.request_id());
    assert_eq!((span.int("http.response.status_code"), span.str("error.type")), (Some(402), Some("quota_exhausted")), "{span:?}");
}

#[test]
fn db_client_operation_duration_is_recorded_for_reads_and_writes() {
    let scene = scene();
    assert_eq!(rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]).status, 200);
    for operation in ["SELECT", "BATCH"] {
        let point = scene.collector.wait_point("db.client.operation.duration", operation, |point| {
            point.str("db.system.name") == Some("lmdb") && point.str("db.operation.name") == Some(operation)
        });
        assert_eq!((point.kind, point.unit.as_str()), (MetricKind::Histogram, "s"), "{point:?}");
        // A read names its table; a write batch names one only when it writes to one.
        if operation == "SELECT" {
            assert!(point.str("db.collection.name").is_some_and(|name| !name.is_empty()), "{point:?}");
        }
        assert!(point.count >= 1, "{point:?}");
    }
    // The projector's writes are client spans too, named `BATCH <table>` when they write
    // to one table and `BATCH` when to several (a projected batch writes rows, counters
    // and the position together).
    let write = scene.collector.wait_span("a BATCH CLIENT span", |span| span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some("BATCH"));
    assert_eq!(write.str("db.system.name"), Some("lmdb"), "{write:?}");
    match write.str("db.collection.name") {
        Some(collection) => assert_eq!(write.name, format!("BATCH {collection}")),
        None => assert_eq!(write.name, "BATCH"),
    }
}

#[test]
fn every_export_names_the_service_the_role_and_the_recap_scope() {
    let scene = scene();
    let reply = rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]);
    server_span(&scene.collector, &reply.request_id());
    scene.collector.wait_point("http.server.request.duration", "any", |_| true);
    scene.collector.wait_span("a projector.batch span", |span| span.name == "projector.batch");
    let spans = scene.collector.spans();
    let points = scene.collector.points();
    for span in &spans {
        assert_eq!(span.service(), Some(SERVICE), "{span:?}");
        assert_eq!(span.resource.str("recap.role"), Some("serve"), "{span:?}");
        assert_eq!(span.scope, "recap", "{span:?}");
    }
    for point in &points {
        assert_eq!(point.service(), Some(SERVICE), "{point:?}");
        assert_eq!(point.resource.str("recap.role"), Some("serve"), "{point:?}");
        assert_eq!(point.scope, "recap", "{point:?}");
    }
}

#[test]
fn bearer_tokens_never_reach_the_exported_telemetry() {
    let scene = scene();
    let unknown = new_token();
    let (trace_id, _) = random_trace_context();
    let replies = [
        rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]),
        rest(&scene.server, "/v1/meetings/mtg_missing", Some(&scene.alice), &[]),
        rest(&scene.server, "/v1/meetings", Some(&unknown), &[]),
        rest(&scene.server, "/v1/meetings", Some("not-a-pat"), &[]),
    ];
    mcp(&scene.server.mcp_url, &scene.alice, &trace_id, 1, "tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_0"}}));
    for reply in &replies {
        server_span(&scene.collector, &reply.request_id());
    }
    trace_with(&scene.collector, &trace_id, "tools/call get_meeting");
    // The last REST request's duration, exported after the others.
    scene.collector.wait_point("http.server.request.duration", "a 401", |point| point.int("http.response.status_code") == Some(401));
    let exported = scene.collector.raw();
    for secret in [scene.alice.as_str(), unknown.as_str(), "svc_pat_", "Bearer", "not-a-pat"] {
        assert!(!exported.contains(secret), "{secret:?} was exported");
    }
}

// docs/webhooks.md: "a `webhooks.attempt` span per attempt with the account, endpoint
// and message ids, the attempt number, the outcome and the status (never the body, the
// URL's answer or a secret)", and docs/events.md of an endpoint's secret: "Never served,
// never logged": an endpoint rotated from one secret to another signs a delivery with
// both, and neither secret (nor its key's base64) is in the exported telemetry or in the
// debug log.
#[test]
fn webhook_attempts_export_a_span_and_no_secret_reaches_telemetry_or_logs() {
    let collector = Collector::start();
    let receiver = recap_testkit::receiver::Receiver::start();
    let mut builder = Server::builder().embedded().arg("--webhooks-allow-insecure").env("RECAP_LOG", "debug").capture_stderr();
    for key in OTEL_VARIABLES {
        builder = builder.env_remove(key);
    }
    for (key, value) in exporting_to(&collector) {
        builder = builder.env(&key, &value);
    }
    let server = builder.start();
    let alice = new_token();
    let first = EVENTS.webhook_endpoint("acc_alice", "ep_alice", receiver.url("ep_alice")).key(&[7; 32]).version(1);
    // Rotated now: the previous secret signs for a day after the upsert.
    let rotated =
        EVENTS.webhook_endpoint("acc_alice", "ep_alice", receiver.url("ep_alice")).key(&[9; 32]).version(2).occurred_at(recap_schemas::Timestamp::now());
    let secrets: Vec<String> = [&first, &rotated].iter().map(|draft| draft.data.endpoint.secret.as_str().to_owned()).collect();
    let mut lines = world_lines(&alice);
    lines.extend([first.envelope(), rotated.envelope()]);
    server.feed(&lines);
    server.feed(&[meeting("acc_alice", "mtg_hooked", "Told", 90, 1)]);
    let requests =
        receiver.wait_until(Duration::from_secs(30), "a delivery to ep_alice", |requests| requests.iter().any(|request| request.endpoint == "ep_alice"));
    let delivered = requests.iter().find(|request| request.endpoint == "ep_alice").unwrap();
    assert_eq!(delivered.header("webhook-signature").split(' ').count(), 2, "signed with both secrets through the rotation");
    let span = collector.wait_span("a webhooks.attempt span", |span| span.name == "webhooks.attempt" && span.str("outcome") == Some("succeeded"));
    assert_eq!((span.str("account_id"), span.str("endpoint_id"), span.int("attempt")), (Some("acc_alice"), Some("ep_alice"), Some(1)), "{span:?}");
    assert_eq!(span.int("http.response.status_code"), Some(200), "{span:?}");
    assert!(span.str("message_id").is_some_and(|id| id.starts_with("msg_")), "{span:?}");
    let exported = collector.raw();
    let logged = server.stderr_lines().join("\n");
    assert!(logged.contains(" DEBUG ") && logged.contains("recap_webhooks"), "the log is at debug and covers the webhooks runtime: {logged}");
    for secret in &secrets {
        let key = secret.trim_start_matches("whsec_");
        for (place, text) in [("the exported telemetry", &exported), ("the log", &logged)] {
            assert!(!text.contains(key), "a secret's key is in {place}");
        }
    }
    assert!(!exported.contains("whsec_") && !logged.contains("whsec_"), "no secret's prefix either");
}

#[test]
fn nothing_is_exported_without_an_otlp_endpoint() {
    // The collector listens where an OTLP exporter sends by default (127.0.0.1:4318),
    // so a default endpoint would be caught too.
    let collector = Collector::start_on(4318, Duration::from_secs(60));
    let silent = format!("recap-silent-{}", uuid::Uuid::new_v4().simple());
    let mut builder = Server::builder().embedded();
    for key in OTEL_VARIABLES {
        builder = builder.env_remove(key);
    }
    let mut server = builder.env("OTEL_SERVICE_NAME", &silent).env("OTEL_METRIC_EXPORT_INTERVAL", "100").env("OTEL_BSP_SCHEDULE_DELAY", "100").start();
    let alice = new_token();
    server.feed(&world_lines(&alice));
    assert_eq!(rest(&server, "/v1/meetings", Some(&alice), &[]).status, 200);
    let (trace_id, _) = random_trace_context();
    mcp(&server.mcp_url, &alice, &trace_id, 1, "tools/list", json!({}));
    std::thread::sleep(Duration::from_millis(500));
    // A clean stop flushes whatever an exporter holds; then markers sent after it
    // arrive after anything recap sent.
    assert!(server.stop().success());
    let (marker, _) = random_trace_context();
    collector.post_json(
        "/v1/traces",
        &json!({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": marker, "spanId": "b7ad6b7169203331", "name": "marker", "kind": 1,
            "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]}),
    );
    collector.post_json(
        "/v1/metrics",
        &json!({"resourceMetrics": [{"scopeMetrics": [{"metrics": [{"name": "marker", "gauge": {"dataPoints": [{"asInt": "1", "timeUnixNano": "1"}]}}]}]}]}),
    );
    collector.wait_span("the trace marker", |span| span.trace_id == marker);
    collector.wait_point("marker", "the metric marker", |_| true);
    let spans: Vec<Span> = collector.spans().into_iter().filter(|span| span.name != "marker").collect();
    let points: Vec<Point> = collector.points().into_iter().filter(|point| point.name != "marker").collect();
    assert!(spans.is_empty() && points.is_empty(), "exported without an endpoint:\n{}", summary(&spans, &points));
    assert!(!collector.raw().contains(&silent));
}

#[test]
fn signal_specific_otlp_endpoints_are_honoured() {
    let collector = Collector::start();
    let mut builder = Server::builder().embedded();
    for key in OTEL_VARIABLES {
        builder = builder.env_remove(key);
    }
    let server = builder
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &format!("{}/v1/traces", collector.endpoint))
        .env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", &format!("{}/v1/metrics", collector.endpoint))
        .env("OTEL_METRIC_EXPORT_INTERVAL", "500")
        .env("OTEL_BSP_SCHEDULE_DELAY", "200")
        .start();
    let alice = new_token();
    server.feed(&world_lines(&alice));
    let reply = rest(&server, "/v1/meetings", Some(&alice), &[]);
    let span = server_span(&collector, &reply.request_id());
    assert_eq!(span.service(), Some("recap"), "service.name defaults to recap: {span:?}");
    let point = collector.wait_point("http.server.request.duration", "GET /v1/meetings", |point| point.str("http.route") == Some("/v1/meetings"));
    assert_eq!(point.service(), Some("recap"));
}

/// The distributed roles, over the real engines: Kafka batch spans from the projector,
/// Cassandra store spans, Redis EVALSHA spans and limiter decisions from query-api and
/// mcp, each process naming its role.
#[test]
#[ignore = "needs the engines (`make up`); make test runs it in its distributed pass"]
fn distributed_roles_export_kafka_batches_cassandra_and_redis_spans_and_limiter_decisions() {
    let collector = Collector::start();
    let cluster = recap_testkit::cluster::Cluster::start(&exporting_to(&collector));
    let alice = new_token();
    let lines = world_lines(&alice);
    cluster.produce(&lines);
    cluster.wait_projected();

    // Projector: one consumer span per partition per batch, offsets from Kafka.
    let batches = collector.wait_until("projector.batch spans covering every produced event", |spans, _| {
        let batches: Vec<Span> = spans.iter().filter(|span| span.name == "projector.batch").cloned().collect();
        let covered: i64 = batches.iter().filter_map(|span| span.int("messaging.batch.message_count")).sum();
        (covered >= lines.len() as i64).then_some(batches)
    });
    for batch in &batches {
        assert_eq!(batch.kind, SPAN_KIND_CONSUMER, "{batch:?}");
        assert_eq!(batch.resource.str("recap.role"), Some("projector"), "{batch:?}");
        assert_eq!(batch.service(), Some(SERVICE), "{batch:?}");
        assert_eq!(batch.str("messaging.system"), Some("kafka"), "{batch:?}");
        let partition = batch.str("messaging.destination.partition.id").unwrap_or_else(|| panic!("a string partition id: {batch:?}"));
        assert!(partition.parse::<u32>().is_ok(), "{batch:?}");
        assert!(batch.int("recap.offset.first").is_some() && batch.int("recap.offset.last").is_some(), "{batch:?}");
    }
    let write = collector.wait_span("a Cassandra BATCH span from the projector", |span| {
        span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some("BATCH") && span.resource.str("recap.role") == Some("projector")
    });
    assert_eq!(write.str("db.system.name"), Some("cassandra"), "{write:?}");
    collector.wait_point("recap.projector.events", "outcome applied from the projector", |point| {
        point.str("outcome") == Some("applied") && point.resource.str("recap.role") == Some("projector")
    });
    // Lag per owned partition (`<topic>/<partition>`), down to zero once caught up.
    let lag = collector.wait_point_until(
        "recap.projector.partition_lag",
        "a caught-up partition of the projector",
        |point| point.str("partition").is_some_and(|partition| partition.contains('/')) && point.resource.str("recap.role") == Some("projector"),
        |point| point.value == 0.0,
    );
    assert_eq!(lag.kind, MetricKind::Gauge, "{lag:?}");
    // Freshness: the age of the newest applied event (its occurred_at), as of the
    // gauge's collection (at most a few export intervals ago).
    let age = collector.wait_point("recap.projector.newest_event_age", "from the projector", |point| point.resource.str("recap.role") == Some("projector"));
    assert_eq!((age.kind, age.unit.as_str()), (MetricKind::Gauge, "s"), "{age:?}");
    let newest = lines.iter().map(|envelope| envelope.occurred_at.micros()).max().unwrap();
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() - newest as f64 / 1e6;
    assert!(age.value <= since + 1.0 && age.value >= since - 300.0, "age {} s, the newest event occurred {since} s ago: {age:?}", age.value);

    // Every query-api: its server span, a Cassandra SELECT and a Redis EVALSHA in the
    // request's trace.
    for base_url in cluster.query_apis.iter().map(|role| role.url.clone()) {
        let root = base_url.trim_end_matches("/v1");
        let response = agent().get(&format!("{root}/v1/meetings/mtg_0")).header("Authorization", &format!("Bearer {alice}")).call().expect("REST request");
        let reply = reply(response);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let server = server_span(&collector, &reply.request_id());
        assert_eq!(server.resource.str("recap.role"), Some("query-api"), "{server:?}");
        assert_eq!(server.name, "GET /v1/meetings/{meeting_id}");
        let in_trace = |operation: &'static str| {
            let trace_id = server.trace_id.clone();
            move |span: &Span| span.trace_id == trace_id && span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some(operation)
        };
        let select = collector.wait_span("a Cassandra SELECT in the request's trace", in_trace("SELECT"));
        assert_eq!(select.str("db.system.name"), Some("cassandra"), "{select:?}");
        let collection = select.str("db.collection.name").unwrap_or_else(|| panic!("db.collection.name: {select:?}"));
        assert_eq!(select.name, format!("SELECT {collection}"));
        let evalsha = collector.wait_span("a Redis EVALSHA in the request's trace", in_trace("EVALSHA"));
        assert_eq!((evalsha.name.as_str(), evalsha.str("db.system.name")), ("EVALSHA", Some("redis")), "{evalsha:?}");
        assert!(!evalsha.attributes.has("error.type"), "{evalsha:?}");
    }
    collector.wait_point("recap.limiter.decisions", "outcome allowed from query-api", |point| {
        point.str("outcome") == Some("allowed") && point.resource.str("recap.role") == Some("query-api")
    });
    collector.wait_point("db.client.operation.duration", "Cassandra SELECT", |point| {
        point.str("db.system.name") == Some("cassandra") && point.str("db.operation.name") == Some("SELECT")
    });

    // mcp: the HTTP span, the tool span, the tool-call limit's Redis round trip and the
    // tool's Cassandra read in one trace.
    let (trace_id, _) = random_trace_context();
    let response = mcp(&cluster.mcp.url, &alice, &trace_id, 1, "tools/call", json!({"name": "get_meeting", "arguments": {"meeting_id": "mtg_0"}}));
    assert_eq!(response["result"]["isError"], json!(false), "{response}");
    let (server, _) = trace_with(&collector, &trace_id, "tools/call get_meeting");
    assert_eq!(server.resource.str("recap.role"), Some("mcp"), "{server:?}");
    collector.wait_span("a Cassandra SELECT in the MCP request's trace", |span| {
        span.trace_id == trace_id
            && span.kind == SPAN_KIND_CLIENT
            && span.str("db.system.name") == Some("cassandra")
            && span.str("db.operation.name") == Some("SELECT")
    });
    // Tool calls are counted per account in Redis (docs/mcp.md, Limits).
    let evalsha = collector.wait_span("a Redis EVALSHA in the MCP request's trace", |span| {
        span.trace_id == trace_id && span.kind == SPAN_KIND_CLIENT && span.str("db.operation.name") == Some("EVALSHA")
    });
    assert_eq!(evalsha.str("db.system.name"), Some("redis"), "{evalsha:?}");
}

/// The Prometheus names the dashboard, the alerts and the chart README promise are the
/// ones `/metrics` serves (the same meters as OTLP, rendered by the Prometheus exporter).
#[test]
fn metrics_endpoint_serves_the_documented_prometheus_names() {
    let scene = scene();
    assert_eq!(rest(&scene.server, "/v1/meetings", Some(&scene.alice), &[]).status, 200);
    assert_eq!(rest(&scene.server, "/v1/meetings/mtg_missing", Some(&scene.alice), &[]).status, 404);
    let metrics = reply(agent().get(&format!("{}metrics", scene.server.admin_url)).call().expect("GET /metrics"));
    assert_eq!(metrics.status, 200);
    for expected in [
        "http_server_request_duration_seconds_bucket{",
        "http_route=\"/v1/meetings\"",
        "error_type=\"meeting_not_found\"",
        "recap_limiter_decisions_total{",
        "outcome=\"allowed\"",
        "recap_projector_events_total{",
        "outcome=\"applied\"",
        "recap_projector_newest_event_age_seconds{",
        "recap_projector_log_lag_bytes{",
        "db_client_operation_duration_seconds_bucket{",
    ] {
        assert!(metrics.body.contains(expected), "/metrics lacks {expected}:\n{}", metrics.body);
    }
    assert!(!metrics.body.contains(&scene.alice), "no token in /metrics");
}
