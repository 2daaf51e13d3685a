//! HTTP benchmarks of the embedded edition, measured side by side in one run:
//!
//! - requests per second of `GET /v1/meetings?limit=50`, `GET /v1/meetings/{id}` (auth
//!   and limits on) and MCP `tools/call` get_meeting and list_meetings (limit 20),
//!   against a bare axum route returning a constant, served by the same process;
//! - p50/p99 latency of the two REST routes at half of their maximum, offered open-loop
//!   (each request is scheduled at a fixed rate and its latency counts from its
//!   scheduled instant, so a stall is not hidden by the generator waiting);
//! - MCP search_meetings vs list_meetings on an account with 100,000 meetings.
//!
//! The servers run on core 0 and the load generators (wrk for the maximum, the
//! built-in open-loop generator for latency) on core 1 (`taskset`). Run with
//! `make bench`.

#[path = "common/http_client.rs"]
mod http_client;

// The binary's global allocator lives in the recap library: link it, so the
// benchmark measures what `recap` runs.
extern crate recap;

use std::sync::Arc;
use std::time::Duration;

use recap_readmodel::{Batch, Driver, EmbeddedDriver, ReadModel};
use recap_schemas::{Envelope, Timestamp};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "svc_pat_benchmarkbenchmarkbenchmark0000";

fn envelope(event_type: &str, data: serde_json::Value) -> Envelope {
    let line = serde_json::json!({"id": "e", "type": event_type, "version": 1, "occurred_at": "2026-01-01T00:00:00Z", "data": data}).to_string();
    Envelope::decode(line.as_bytes()).expect("valid event")
}

/// One flow-plan account with `meetings` meetings (titles searchable), a token, and a
/// quota and minute limit large enough that the benchmark measures work, not refusals.
async fn world(dir: &std::path::Path, meetings: usize) -> ReadModel {
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.join(format!("bench{meetings}.redb"))).expect("store"));
    let mut batch = Batch::new(driver.clone());
    let plan = serde_json::json!({"tier": "flow", "api_quota": 1_000_000_000_000u64, "billing_cycle_anchor": "2026-01-01T00:00:00Z"});
    batch.apply(&envelope("account.upserted", serde_json::json!({"account_id": "acc", "plan": plan})), 1).await.expect("apply");
    let token = serde_json::json!({"account_id": "acc", "token_id": "tok", "name": "bench", "token_sha256": recap_access::token_sha256(TOKEN), "created_at": "2026-01-01T00:00:00Z"});
    batch.apply(&envelope("token.created", token), 2).await.expect("apply");
    driver.write(batch.into_mutations()).await.expect("write");
    let base = 1_700_000_000_000_000i64;
    let topics = ["Budget review", "Design sync", "Hiring debrief", "Customer call", "Roadmap planning", "Incident retro", "Sales pipeline", "Weekly sync"];
    for chunk in (0..meetings).collect::<Vec<_>>().chunks(5_000) {
        let mut batch = Batch::new(driver.clone());
        for &index in chunk {
            let created = Timestamp(base + index as i64 * 60_000_000).to_rfc3339();
            // One meeting in 100 mentions a rare word, so a search has a realistic
            // selectivity (1%) on the large account.
            let title = if index % 100 == 7 {
                format!("{} escalation {index}", topics[index % topics.len()])
            } else {
                format!("{} {index}", topics[index % topics.len()])
            };
            let meeting = serde_json::json!({"account_id": "acc", "meeting": {
                "id": format!("mtg_{index:06}"), "title": title, "kind": "call", "status": "done", "started_at": created, "ended_at": created,
                "created_at": created, "updated_at": created, "series_id": null, "timezone": "UTC", "language": "en",
                "note": {"id": format!("n{index}"), "kind": "note", "title": "Notes", "template_id": null, "text": "Agenda\nBudget\nHiring", "created_at": created, "updated_at": created},
                "summaries": [{"id": format!("s{index}"), "kind": "summary", "title": "Summary", "template_id": null, "text": "We agreed on the plan.", "created_at": created, "updated_at": created}],
                "participants": [{"human_id": "hum_1", "name": "Ada", "email": "ada@example.com", "role": null, "job_title": "CTO"}],
                "action_items": [{"id": format!("ai{index}"), "text": "Follow up", "status": "todo", "assignee_human_id": "hum_1", "due_at": null, "completed_at": null, "created_at": created}]}});
            batch.apply(&envelope("meeting.upserted", meeting), 3 + index as i64).await.expect("apply");
        }
        driver.write(batch.into_mutations()).await.expect("write");
    }
    // Served as the binary serves it: store calls report their spans and durations.
    ReadModel::new(Arc::new(recap_readmodel::Instrumented::new(driver, "redb")))
}

/// Every figure is taken with the token cache of the chart's production values (1 s)
/// and with none (the default: every request reads its token and account).
const PRODUCTION_TOKEN_CACHE_MS: u64 = 1_000;

struct Servers {
    /// With the production token cache.
    rest: String,
    mcp: String,
    /// Without a token cache.
    rest_uncached: String,
    mcp_uncached: String,
    bare: String,
}

/// The REST and MCP routers (with and without a token cache) and a bare constant route,
/// in this process.
async fn serve(readmodel: ReadModel) -> Servers {
    let plans = recap_access::Plans::default();
    let rest = |token_cache_ms: u64| {
        let rest_config = recap_query_api::RestConfig { rate_limit_per_minute: 1_000_000_000, token_cache_ms, ..recap_query_api::RestConfig::default() };
        let limiter: Arc<dyn recap_access::Limiter> = Arc::new(recap_access::InProcessLimiter::with_system_clock());
        // Wrapped as the binary wraps them: server spans (off, as without OTEL_*) and the
        // request-duration histogram (on, for /metrics).
        recap::telemetry::http_layer(recap_query_api::router(recap_query_api::RestState::new(
            readmodel.clone(),
            plans.clone(),
            limiter,
            vec![7; 32],
            &rest_config,
        )))
    };
    let mcp = |token_cache_ms: u64| {
        let mcp_config = recap_mcp::McpConfig { token_cache_ms, ..recap_mcp::McpConfig::default() };
        recap::telemetry::http_layer(recap_mcp::router(recap_mcp::McpState::new(readmodel.clone(), plans.clone(), &mcp_config)))
    };
    // The reference route, and a constant as large as a page of 50 meetings: how much of
    // the list route's cost is moving its bytes rather than computing them.
    let page_sized: &'static str = Box::leak(format!("{{\"data\":\"{}\"}}", "x".repeat(15_000)).into_boxed_str());
    let bare = axum::Router::new()
        .route("/constant", axum::routing::get(|| async { "{\"data\":\"constant\"}" }))
        .route("/constant-15k", axum::routing::get(move || async move { page_sized }));
    let mut addresses = Vec::new();
    for router in [rest(PRODUCTION_TOKEN_CACHE_MS), mcp(PRODUCTION_TOKEN_CACHE_MS), rest(0), mcp(0), bare] {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        addresses.push(format!("http://{}", listener.local_addr().expect("address")));
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    let mut addresses = addresses.into_iter();
    let mut next = || addresses.next().expect("five servers");
    Servers { rest: next(), mcp: next(), rest_uncached: next(), mcp_uncached: next(), bare: next() }
}

/// Requests per second wrk reaches on one core (closed loop, keep-alive).
fn wrk(url: &str, post_body: Option<&str>) -> f64 {
    let mut script = String::from("wrk.headers[\"Authorization\"] = \"Bearer ") + TOKEN + "\"\n";
    if let Some(body) = post_body {
        script.push_str("wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n");
        script.push_str(&format!("wrk.body = [[{body}]]\n"));
    }
    let script_file = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(script_file.path(), script).expect("write script");
    let output = std::process::Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1", "-c32", "-d4s", "-s"])
        .arg(script_file.path())
        .arg(url)
        .output()
        .expect("run wrk (apt-get install wrk)");
    assert!(output.status.success(), "wrk failed: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let non_2xx = text.lines().find(|line| line.contains("Non-2xx")).map(str::to_string);
    assert!(non_2xx.is_none(), "{url}: {non_2xx:?}");
    text.lines()
        .find_map(|line| line.strip_prefix("Requests/sec:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rate in wrk's output: {text}"))
}

/// Open-loop latency: `rate` requests per second for `duration`, spread over a fixed
/// set of keep-alive connections, each with its own schedule (connection k sends its
/// i-th request at `(i * CONNECTIONS + k) / rate`). Latency counts from the scheduled
/// instant, so a response that delays the next request is charged to that request too
/// (no coordinated omission). Returns (p50, p99, max) in milliseconds.
async fn open_loop(address: &str, request: Vec<u8>, rate: f64, duration: Duration) -> (f64, f64, f64) {
    const CONNECTIONS: usize = 64;
    let request = Arc::new(request);
    let total = (rate * duration.as_secs_f64()) as usize;
    let start = tokio::time::Instant::now() + Duration::from_millis(100);
    let mut tasks = Vec::with_capacity(CONNECTIONS);
    for k in 0..CONNECTIONS {
        let mut connection = TcpStream::connect(address).await.expect("connect");
        let _ = connection.set_nodelay(true);
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(total / CONNECTIONS + 1);
            let mut index = k;
            while index < total {
                let scheduled = start + Duration::from_secs_f64(index as f64 / rate);
                tokio::time::sleep_until(scheduled).await;
                if connection.write_all(&request).await.is_err() || http_client::read_response(&mut connection).await.is_none() {
                    break;
                }
                samples.push(scheduled.elapsed().as_secs_f64() * 1e3);
                index += CONNECTIONS;
            }
            samples
        }));
    }
    let mut samples = Vec::with_capacity(total);
    for task in tasks {
        samples.extend(task.await.unwrap_or_default());
    }
    assert!(samples.len() * 100 >= total * 99, "only {} of {total} requests answered", samples.len());
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples.get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1))).copied().unwrap_or(f64::NAN);
    (at(0.5), at(0.99), samples.last().copied().unwrap_or(f64::NAN))
}

fn get_request(url: &str) -> (String, Vec<u8>) {
    let without_scheme = url.trim_start_matches("http://");
    let (host, path) = without_scheme.split_once('/').unwrap_or((without_scheme, ""));
    (host.to_string(), format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").into_bytes())
}

fn tool_call(name: &str, arguments: serde_json::Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).to_string()
}

/// Pins the calling thread (threads it creates inherit it) to one core.
fn pin_current_thread(core: usize) {
    let thread = std::fs::read_link("/proc/thread-self").ok().and_then(|link| link.file_name().map(|tid| tid.to_string_lossy().into_owned()));
    if let Some(tid) = thread {
        let _ = std::process::Command::new("taskset").args(["-cp", &core.to_string(), &tid]).output();
    }
}

fn main() {
    let telemetry = recap::telemetry::Telemetry::init("bench");
    // The servers' runtime: one worker, on core 0 (the load generators use core 1).
    pin_current_thread(0);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let (servers, large) = runtime.block_on(async {
        let small = world(dir.path(), 1_000).await;
        let large = world(dir.path(), 100_000).await;
        (serve(small).await, serve(large).await)
    });
    let _guard = runtime.enter();
    // `RECAP_BENCH_HOLD=<seconds>` keeps the servers up for a profiler and prints their
    // addresses (e.g. `perf record -p <pid>` while loading one route).
    if let Some(seconds) = std::env::var("RECAP_BENCH_HOLD").ok().and_then(|value| value.parse::<u64>().ok()) {
        println!(
            "pid {} rest {} mcp {} rest_uncached {} mcp_uncached {} bare {} token {TOKEN}",
            std::process::id(),
            servers.rest,
            servers.mcp,
            servers.rest_uncached,
            servers.mcp_uncached,
            servers.bare
        );
        std::thread::sleep(Duration::from_secs(seconds));
        return;
    }

    // `RECAP_BENCH_ONLY=mcp` measures the bare route and the MCP figures only (the
    // REST routes and their open-loop latency are skipped).
    let only_mcp = std::env::var("RECAP_BENCH_ONLY").is_ok_and(|value| value == "mcp");
    // The reference is measured before and after the routes, and its mean divides them:
    // the machine is shared, so its speed drifts within a run.
    let bare_before = wrk(&format!("{}/constant", servers.bare), None);
    let get_meeting = tool_call("get_meeting", serde_json::json!({"meeting_id": "mtg_000500"}));
    let list_meetings = tool_call("list_meetings", serde_json::json!({"limit": 20}));
    let mut routes = vec![
        ("MCP tools/call get_meeting", format!("{}/mcp", servers.mcp), format!("{}/mcp", servers.mcp_uncached), Some(get_meeting)),
        ("MCP tools/call list_meetings(20)", format!("{}/mcp", servers.mcp), format!("{}/mcp", servers.mcp_uncached), Some(list_meetings)),
    ];
    if !only_mcp {
        for path in ["/v1/meetings?limit=50", "/v1/meetings/mtg_000500"] {
            routes.push((path, format!("{}{path}", servers.rest), format!("{}{path}", servers.rest_uncached), None));
        }
    }
    let rates: Vec<(f64, f64)> = routes.iter().map(|(_, cached, uncached, body)| (wrk(cached, body.as_deref()), wrk(uncached, body.as_deref()))).collect();
    let bare_after = wrk(&format!("{}/constant", servers.bare), None);
    let bare = (bare_before + bare_after) / 2.0;
    println!("requests per second, one server core, keep-alive (wrk -c32 on the other core):");
    println!("  bare axum route (constant)           {bare:>9.0}   (before {bare_before:.0}, after {bare_after:.0}: the mean is the reference)");
    println!("  {:<36} {:>9}   {:<28} {:>9}", "", "token cache 1 s (production values)", "", "no token cache (default)");
    for ((name, ..), (cached, uncached)) in routes.iter().zip(&rates) {
        println!("  {name:<36} {cached:>9.0}   {:.2} of bare (target >= 0.40)   {uncached:>9.0}   {:.2} of bare", cached / bare, uncached / bare);
    }
    if !only_mcp {
        let (meetings, detail) = (rates[2].0, rates[3].0);
        rest_figures(&servers, meetings, detail);
    }

    let list_large = wrk(&format!("{}/mcp", large.mcp), Some(&tool_call("list_meetings", serde_json::json!({"limit": 20}))));
    let search_large = wrk(&format!("{}/mcp", large.mcp), Some(&tool_call("search_meetings", serde_json::json!({"query": "escalation", "limit": 20}))));
    println!("MCP on an account with 100,000 meetings (search matches 1%, counted in total):");
    println!("  list_meetings(20)   {list_large:>9.0} req/s");
    println!("  search_meetings(20) {search_large:>9.0} req/s   list/search = {:.2} (target <= 5)", list_large / search_large);
    drop(dir);
    telemetry.shutdown();
}

/// The transport ceiling of a page, and the REST routes' open-loop latency at half of
/// their maximum (token cache as in production).
fn rest_figures(servers: &Servers, meetings: f64, detail: f64) {
    let bare_page_sized = wrk(&format!("{}/constant-15k", servers.bare), None);
    println!("  bare axum route (15 kB constant)     {bare_page_sized:>9.0}   the transport ceiling of a page-sized response");

    println!("open-loop latency at 50% of each route's maximum (8 s, scheduled-time latency):");
    let generator = std::thread::spawn({
        let rest = servers.rest.clone();
        move || {
            pin_current_thread(1);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let mut results = Vec::new();
            for (path, max) in [("/v1/meetings?limit=50", meetings), ("/v1/meetings/mtg_000500", detail)] {
                let (host, request) = get_request(&format!("{rest}{path}"));
                let (p50, p99, worst) = runtime.block_on(open_loop(&host, request, max * 0.5, Duration::from_secs(8)));
                results.push(format!("  GET {path:<28} at {:>6.0} req/s: p50 {p50:.2} ms, p99 {p99:.2} ms (target <= 10 ms), max {worst:.2} ms", max * 0.5));
            }
            results
        }
    });
    for line in generator.join().expect("generator") {
        println!("{line}");
    }
}
