//! HTTP benchmarks of the embedded edition, measured side by side in one run:
//!
//! - requests per second of `GET /v1/meetings?limit=50`, `GET /v1/meetings/{id}` (auth
//!   and limits on) and MCP `tools/call` get_meeting and list_meetings (limit 20),
//!   against a bare axum route returning a constant, served by the same process;
//! - p50/p99 latency of the two REST routes at half of their maximum (measured again with
//!   wrk just before, and just after to show the machine held its speed), offered open-loop
//!   (each request is scheduled at a fixed rate and its latency counts from its
//!   scheduled instant, so a stall is not hidden by the generator waiting);
//! - MCP search_meetings vs list_meetings on an account with 100,000 meetings.
//!
//! The servers run on core 0 and the load generators (wrk for the maximum, the
//! built-in open-loop generator for latency) on core 1 (`taskset`). Run with
//! `make bench`.

// The binary's global allocator lives in the recap library: link it, so the
// benchmark measures what `recap` runs.
extern crate recap;

use std::sync::Arc;
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::{Batch, Driver, ReadModel};
use recap_schemas::build::{Epoch, Events};
use recap_schemas::Timestamp;
use recap_testkit::bench::{http_client, stats};
use recap_testkit::FaultyDriver;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "svc_pat_benchmarkbenchmarkbenchmark0000";

/// The account's events happen on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

/// One flow-plan account with `meetings` meetings (titles searchable), a token, and a
/// quota and minute limit large enough that the benchmark measures work, not refusals.
async fn world(dir: &std::path::Path, meetings: usize) -> ReadModel {
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.join(format!("bench{meetings}.lmdb"))).expect("store"));
    let mut batch = Batch::new(driver.clone());
    batch.apply(&EVENTS.account("acc").plan("flow", Some(1_000_000_000_000), EVENTS.minute(0)).envelope(), 1).await.expect("apply");
    batch.apply(&EVENTS.token_created("acc", "tok", recap_access::token_sha256(TOKEN)).name("bench").envelope(), 2).await.expect("apply");
    driver.write(batch.into_mutations()).await.expect("write");
    let base = 1_700_000_000_000_000i64;
    let topics = ["Budget review", "Design sync", "Hiring debrief", "Customer call", "Roadmap planning", "Incident retro", "Sales pipeline", "Weekly sync"];
    for chunk in (0..meetings).collect::<Vec<_>>().chunks(5_000) {
        let mut batch = Batch::new(driver.clone());
        for &index in chunk {
            let created = Timestamp(base + index as i64 * 60_000_000);
            // One meeting in 100 mentions a rare word, so a search has a realistic
            // selectivity (1%) on the large account.
            let title = if index % 100 == 7 {
                format!("{} escalation {index}", topics[index % topics.len()])
            } else {
                format!("{} {index}", topics[index % topics.len()])
            };
            let meeting = EVENTS
                .meeting("acc", format!("mtg_{index:06}"))
                .title(title)
                .note(EVENTS.note(format!("n{index}")).text("Agenda\nBudget\nHiring"))
                .summaries([EVENTS.summary(format!("s{index}")).text("We agreed on the plan.").times(created)])
                .participants([EVENTS.participant("hum_1")])
                .action_items([EVENTS.item(format!("ai{index}")).text("Follow up").assignee(Some("hum_1")).created_at(created)])
                .times(created);
            batch.apply(&meeting.envelope(), 3 + index as i64).await.expect("apply");
        }
        driver.write(batch.into_mutations()).await.expect("write");
    }
    // Served as the binary serves it: store calls report their spans and durations.
    ReadModel::new(Arc::new(recap_readmodel::Instrumented::new(driver, "lmdb")))
}

/// Every figure is taken as `recap serve` runs by default (token lookups kept until a
/// token or account row changes, which the embedded store sees) and with every request
/// reading its token and account, as over a store other processes write with no token
/// cache (the distributed edition's default).
struct Servers {
    /// As `recap serve` runs.
    rest: String,
    mcp: String,
    /// Over the embedded store seen as one other processes write would be (no change
    /// counts): no kept lookups.
    rest_uncached: String,
    mcp_uncached: String,
    bare: String,
}

/// The REST and MCP routers (as `recap serve` runs them, and with no kept token
/// lookups) and a bare constant route, in this process.
async fn serve(readmodel: ReadModel) -> Servers {
    let plans = recap_access::Plans::default();
    let rest = |readmodel: &ReadModel| {
        let rest_config = recap_query_api::RestConfig { rate_limit_per_minute: 1_000_000_000, ..recap_query_api::RestConfig::default() };
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
    let mcp =
        |readmodel: &ReadModel| recap::telemetry::http_layer(recap_mcp::router(recap_mcp::McpState::new(readmodel.clone(), plans.clone(), &unlimited_mcp())));
    // The embedded store as a store other processes write would be seen: no change
    // counts, so no token lookup is kept (with a zero `--token-cache-ms`).
    let shared = ReadModel::new(Arc::new(FaultyDriver::new(readmodel.driver().clone()).hiding_change_counts()));
    // The reference route, and a constant as large as a page of 50 meetings: how much of
    // the list route's cost is moving its bytes rather than computing them.
    let page_sized: &'static str = Box::leak(format!("{{\"data\":\"{}\"}}", "x".repeat(15_000)).into_boxed_str());
    let bare = axum::Router::new()
        .route("/constant", axum::routing::get(|| async { "{\"data\":\"constant\"}" }))
        .route("/constant-15k", axum::routing::get(move || async move { page_sized }));
    let mut addresses = Vec::new();
    for router in [rest(&readmodel), mcp(&readmodel), rest(&shared), mcp(&shared), bare] {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        addresses.push(format!("http://{}", listener.local_addr().expect("address")));
        tokio::spawn(async move {
            recap::http::serve(listener, router, &recap::http::HttpLimits::default(), recap::http::Metered::Yes, std::future::pending()).await
        });
    }
    let mut addresses = addresses.into_iter();
    let mut next = || addresses.next().expect("five servers");
    Servers { rest: next(), mcp: next(), rest_uncached: next(), mcp_uncached: next(), bare: next() }
}

/// Rounds of [`side_by_side`]: a route's ratio is the median of this many (the reference
/// route's own rate moves by a fifth between 2 s rounds on a shared machine).
const ROUNDS: usize = 5;

/// A route's rate and its ratio to a reference, measured side by side: reference and
/// route alternate in short rounds (reference first and last), each round of the route
/// is divided by the mean of the reference rounds around it, and the medians are kept.
/// The machine is shared and its speed drifts within a run; alternating keeps the
/// drift out of the ratio.
fn side_by_side(reference: (&str, Option<&Post>), route: (&str, Option<&Post>)) -> (f64, f64) {
    let mut references = vec![busy_wrk(reference)];
    let (mut rates, mut ratios) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let rate = busy_wrk(route);
        references.push(busy_wrk(reference));
        let around = (references[references.len() - 2].0 + references[references.len() - 1].0) / 2.0;
        rates.push(rate.0);
        ratios.push(rate.0 / around);
        if std::env::var_os("RECAP_BENCH_BUSY").is_some() {
            let (before, after) = (references[references.len() - 2], references[references.len() - 1]);
            println!(
                "    round: reference {:.0}/s ({:.0}% of the server core), route {:.0}/s ({:.0}%), reference {:.0}/s ({:.0}%)",
                before.0,
                before.1 * 100.0,
                rate.0,
                rate.1 * 100.0,
                after.0,
                after.1 * 100.0
            );
        }
    }
    (stats::median(&mut rates), stats::median(&mut ratios))
}

/// One 2 s wrk round and how busy the server threads kept their core meanwhile.
fn busy_wrk(route: (&str, Option<&Post>)) -> (f64, f64) {
    let (started, before) = (std::time::Instant::now(), server_sched());
    let rate = wrk_for(route.0, route.1, 2);
    (rate, sched_between(&before, &server_sched()).0 / started.elapsed().as_secs_f64())
}

/// Requests per second wrk reaches on one core (closed loop, keep-alive), over 4 s.
fn wrk(url: &str, post: Option<&Post>) -> f64 {
    wrk_for(url, post, 4)
}

fn wrk_for(url: &str, post: Option<&Post>, seconds: u64) -> f64 {
    let mut script = String::from("wrk.headers[\"Authorization\"] = \"Bearer ") + TOKEN + "\"\n";
    if let Some(Post { body, headers }) = post {
        script.push_str("wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n");
        for (name, value) in headers {
            script.push_str(&format!("wrk.headers[\"{name}\"] = \"{value}\"\n"));
        }
        script.push_str(&format!("wrk.body = [[{body}]]\n"));
    }
    let script_file = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(script_file.path(), script).expect("write script");
    let output = std::process::Command::new("taskset")
        .args(["-c", "1", "wrk", "-t1", "-c32", &format!("-d{seconds}s"), "-s"])
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
/// (no coordinated omission).
async fn open_loop(address: &str, request: Vec<u8>, rate: f64, duration: Duration) -> Latency {
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
                samples.push(((scheduled - start).as_secs_f64() * 1e3, scheduled.elapsed().as_secs_f64() * 1e3));
                index += CONNECTIONS;
            }
            samples
        }));
    }
    let mut timed = Vec::with_capacity(total);
    for task in tasks {
        timed.extend(task.await.unwrap_or_default());
    }
    // The 100 ms windows (by scheduled instant) holding a request over the target.
    let mut late_windows: Vec<u64> = timed.iter().filter(|(_, latency)| *latency > 10.0).map(|(at, _)| (*at / 100.0) as u64).collect();
    late_windows.sort_unstable();
    late_windows.dedup();
    let mut samples: Vec<f64> = timed.into_iter().map(|(_, latency)| latency).collect();
    assert!(samples.len() * 100 >= total * 99, "only {} of {total} requests answered", samples.len());
    samples.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| samples.get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1))).copied().unwrap_or(f64::NAN);
    Latency { p50: at(0.5), p99: at(0.99), max: samples.last().copied().unwrap_or(f64::NAN), late_windows: late_windows.len() }
}

/// An open-loop phase's latencies in milliseconds, and how many 100 ms windows held a
/// request over 10 ms (a few stalls, or a queue that never drained).
struct Latency {
    p50: f64,
    p99: f64,
    max: f64,
    late_windows: usize,
}

fn get_request(url: &str) -> (String, Vec<u8>) {
    let without_scheme = url.trim_start_matches("http://");
    let (host, path) = without_scheme.split_once('/').unwrap_or((without_scheme, ""));
    (host.to_string(), format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n").into_bytes())
}

fn tool_call(name: &str, arguments: serde_json::Value) -> Post {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    Post { body: body.to_string(), headers: Vec::new() }
}

/// A POST request: its JSON body and the headers beside it (besides the token and the
/// content type, which every request carries).
#[derive(Clone)]
struct Post {
    body: String,
    headers: Vec<(&'static str, String)>,
}

/// The newest handshake-era version: after `initialize`, its clients send it in
/// `MCP-Protocol-Version`, and its results carry `structuredContent` as 2026-07-28's do.
const LATEST_HANDSHAKE_ERA: &str = "2025-11-25";

/// The revision of MCP whose requests carry their version and capabilities in `_meta`.
const MODERN: &str = "2026-07-28";

/// The call as a client that negotiated 2025-11-25 sends it.
fn handshake_era_tool_call(name: &str, arguments: serde_json::Value) -> Post {
    Post { headers: vec![("MCP-Protocol-Version", LATEST_HANDSHAKE_ERA.to_string())], ..tool_call(name, arguments) }
}

/// The call as a 2026-07-28 client sends it: the request `_meta` in the body, and the
/// headers mirroring it (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).
fn modern_tool_call(name: &str, arguments: serde_json::Value) -> Post {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    });
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": meta}});
    let headers = vec![("MCP-Protocol-Version", MODERN.to_string()), ("Mcp-Method", "tools/call".to_string()), ("Mcp-Name", name.to_string())];
    Post { body: body.to_string(), headers }
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
    // `RECAP_BENCH_ONLY=mcp-router` measures the two eras' tools/call in the MCP router
    // itself, without sockets (see `router_eras`).
    if std::env::var("RECAP_BENCH_ONLY").is_ok_and(|value| value == "mcp-router") {
        runtime.block_on(router_eras(dir.path()));
        return;
    }
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
            "pid {} rest {} mcp {} rest_uncached {} mcp_uncached {} bare {} token {TOKEN} large_mcp {}",
            std::process::id(),
            servers.rest,
            servers.mcp,
            servers.rest_uncached,
            servers.mcp_uncached,
            servers.bare,
            large.mcp
        );
        std::thread::sleep(Duration::from_secs(seconds));
        return;
    }

    // `RECAP_BENCH_ONLY=mcp` measures the bare route and the MCP figures only (the
    // REST routes and their open-loop latency are skipped).
    // `RECAP_BENCH_SWEEP=<rate>,<rate>,...` offers the list route and the 15 kB constant
    // open-loop at each rate and prints their latency and how busy the server core was.
    if let Ok(rates) = std::env::var("RECAP_BENCH_SWEEP") {
        let rates: Vec<f64> = rates.split(',').map(|rate| rate.trim().parse().expect("RECAP_BENCH_SWEEP: rates per second, comma-separated")).collect();
        sweep(&servers, &rates);
        return;
    }
    let only_mcp = std::env::var("RECAP_BENCH_ONLY").is_ok_and(|value| value == "mcp");
    let bare_url = format!("{}/constant", servers.bare);
    let bare = (bare_url.as_str(), None);
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
    let modern_get_meeting = modern_tool_call("get_meeting", serde_json::json!({"meeting_id": "mtg_000500"}));
    let modern_list_meetings = modern_tool_call("list_meetings", serde_json::json!({"limit": 20}));
    routes.push(("MCP 2026-07-28 get_meeting", format!("{}/mcp", servers.mcp), format!("{}/mcp", servers.mcp_uncached), Some(modern_get_meeting.clone())));
    routes.push((
        "MCP 2026-07-28 list_meetings(20)",
        format!("{}/mcp", servers.mcp),
        format!("{}/mcp", servers.mcp_uncached),
        Some(modern_list_meetings.clone()),
    ));
    println!("requests per second, one server core, keep-alive (wrk -c32 on the other core); each route alternates");
    println!("with the bare axum route returning a constant in {ROUNDS} rounds of 2 s, ratios are the median round's:");
    println!("  {:<34} {:>30}   {:>30}", "", "recap serve (lookups kept)", "token and account read each time");
    let mut maximum = Vec::new();
    for (name, cached, uncached, body) in &routes {
        let (cached_rate, cached_ratio) = side_by_side(bare, (cached, body.as_ref()));
        let (uncached_rate, uncached_ratio) = side_by_side(bare, (uncached, body.as_ref()));
        println!("  {name:<34} {cached_rate:>9.0}/s  {cached_ratio:.2} of bare   {uncached_rate:>9.0}/s  {uncached_ratio:.2} of bare   (target >= 0.40)");
        maximum.push(cached_rate);
    }
    let bare_rate = wrk(&bare_url, None);
    println!("  bare axum route (constant)         {bare_rate:>9.0}/s");
    // The two eras of one call, alternating in the same way: a 2026-07-28 request (its
    // `_meta` and headers checked on every call) must cost no more than a handshake-era one.
    // The reference is a 2025-11-25 call: the same result (structuredContent beside the
    // text) without `_meta` and the routing headers.
    println!("MCP tools/call in the 2026-07-28 form against the same call at {LATEST_HANDSHAKE_ERA}, alternating as above (recap serve):");
    let mcp_url = format!("{}/mcp", servers.mcp);
    for (name, legacy, modern) in [
        ("get_meeting", handshake_era_tool_call("get_meeting", serde_json::json!({"meeting_id": "mtg_000500"})), modern_get_meeting),
        ("list_meetings(20)", handshake_era_tool_call("list_meetings", serde_json::json!({"limit": 20})), modern_list_meetings),
    ] {
        let (rate, ratio) = side_by_side((&mcp_url, Some(&legacy)), (&mcp_url, Some(&modern)));
        println!("  {name:<34} {rate:>9.0}/s  {ratio:.2} of the handshake-era call's rate (target >= 1.00, within noise)");
    }
    if !only_mcp {
        rest_figures(&servers, maximum[2], maximum[3]);
    }

    let large_url = format!("{}/mcp", large.mcp);
    let list_call = tool_call("list_meetings", serde_json::json!({"limit": 20}));
    let search_call = tool_call("search_meetings", serde_json::json!({"query": "escalation", "limit": 20}));
    let (search_large, search_ratio) = side_by_side((&large_url, Some(&list_call)), (&large_url, Some(&search_call)));
    println!("MCP on an account with 100,000 meetings (search matches 1%, counted in total), alternating as above:");
    println!("  search_meetings(20) {search_large:>9.0} req/s   list/search = {:.2} (target <= 5)", 1.0 / search_ratio);
    drop(dir);
    telemetry.shutdown();
}

/// The transport ceiling of a page, and the REST routes' open-loop latency at half of
/// their maximum (as `recap serve` runs), `meetings` and `detail` being the maxima of the
/// side-by-side rounds, printed beside the ones measured just before each phase.
fn rest_figures(servers: &Servers, meetings: f64, detail: f64) {
    let page_sized_url = format!("{}/constant-15k", servers.bare);
    let (page_sized, page_sized_ratio) = side_by_side((&format!("{}/constant", servers.bare), None), (&page_sized_url, None));
    println!("  bare axum route (15 kB constant)   {page_sized:>9.0}/s  {page_sized_ratio:.2} of bare: the transport ceiling of a page-sized response");

    // Each route's maximum is taken again just before its open-loop phase (4 s of wrk),
    // so that the rate offered is half of what the route does in the same state of the
    // machine (its speed drifts over the minutes since the side-by-side rounds), and
    // once more just after, to show whether that state held through the phase.
    println!("open-loop latency at 50% of each route's maximum as measured just before (8 s, scheduled-time latency):");
    let generator = std::thread::spawn({
        let (rest, bare) = (servers.rest.clone(), servers.bare.clone());
        move || {
            pin_current_thread(1);
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let mut results = Vec::new();
            let offer = |label: &str, url: &str, rate: f64| offered(&runtime, label, url, rate, Duration::from_secs(8));
            let list = format!("{rest}/v1/meetings?limit=50");
            let mut list_rate = 0.0;
            for (label, url, earlier) in
                [("GET /v1/meetings?limit=50", &list, meetings), ("GET /v1/meetings/mtg_000500", &format!("{rest}/v1/meetings/mtg_000500"), detail)]
            {
                let before = wrk(url, None);
                results.push(offer(label, url, before * 0.5));
                let after = wrk(url, None);
                results.push(format!("  {:<32} maximum {before:.0} req/s just before, {after:.0} just after (side by side above: {earlier:.0})", ""));
                if url == &list {
                    list_rate = before * 0.5;
                }
            }
            // The instrument's own floor: the 15 kB constant at the list route's rate,
            // through the same generator and transport.
            results.push(offer("bare 15 kB constant (floor)", &format!("{bare}/constant-15k"), list_rate));
            results
        }
    });
    for line in generator.join().expect("generator") {
        println!("{line}");
    }
}

/// One open-loop phase, reported with how the server core was shared meanwhile: the
/// share the servers' threads used, and how long in all they were ready to run while
/// something else had the core (a stall the service did not cause: a kernel thread such
/// as a memory-reclaim daemon, another process).
fn offered(runtime: &tokio::runtime::Runtime, label: &str, url: &str, rate: f64, duration: Duration) -> String {
    let (host, request) = get_request(url);
    let (started, before) = (std::time::Instant::now(), server_sched());
    let latency = runtime.block_on(open_loop(&host, request, rate, duration));
    let (running, waiting) = sched_between(&before, &server_sched());
    format!(
        "  {label:<32} at {rate:>6.0} req/s: p50 {:.2} ms, p99 {:.2} ms (target <= 10 ms), max {:.2} ms; {} of {} 100 ms windows held a request over 10 ms; server core {:.0}% busy, its threads waited {:.1} ms for it",
        latency.p50,
        latency.p99,
        latency.max,
        latency.late_windows,
        duration.as_millis() / 100,
        running / started.elapsed().as_secs_f64() * 100.0,
        waiting * 1e3
    )
}

/// Open-loop latency of the list route and of the 15 kB constant at each of `rates`.
fn sweep(servers: &Servers, rates: &[f64]) {
    let urls = [format!("{}/v1/meetings?limit=50", servers.rest), format!("{}/constant-15k", servers.bare)];
    let rates = rates.to_vec();
    let generator = std::thread::spawn(move || {
        pin_current_thread(1);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        for rate in rates {
            for (label, url) in ["GET /v1/meetings?limit=50", "bare 15 kB constant"].into_iter().zip(&urls) {
                println!("{}", offered(&runtime, label, url, rate, Duration::from_secs(5)));
            }
        }
    });
    generator.join().expect("generator");
}

/// Of each of the servers' runtime threads so far, by thread id (a blocking-pool thread
/// may exit between two readings): seconds on a core, and seconds runnable but waiting
/// while something else (a kernel thread, another process) had the core
/// (`/proc/<tid>/schedstat`, nanoseconds).
fn server_sched() -> std::collections::HashMap<String, (f64, f64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Default::default() };
    tasks
        .filter_map(|task| {
            let path = task.ok()?.path();
            if std::fs::read_to_string(path.join("comm")).ok()?.trim() != "tokio-rt-worker" {
                return None;
            }
            let schedstat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            let mut fields = schedstat.split_whitespace().map(|field| field.parse::<f64>().ok());
            let (running, waiting) = (fields.next()??, fields.next()??);
            Some((path.file_name()?.to_string_lossy().into_owned(), (running / 1e9, waiting / 1e9)))
        })
        .collect()
}

/// Seconds on a core and seconds waiting for it, of the servers' runtime threads,
/// between two readings of [`server_sched`].
fn sched_between(before: &std::collections::HashMap<String, (f64, f64)>, after: &std::collections::HashMap<String, (f64, f64)>) -> (f64, f64) {
    after.iter().fold((0.0, 0.0), |(running, waiting), (thread, now)| {
        let then = before.get(thread).copied().unwrap_or((0.0, 0.0));
        (running + now.0 - then.0, waiting + now.1 - then.1)
    })
}

/// CPU time of the calling thread so far, in seconds (`/proc/thread-self/schedstat`).
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|running| running.parse::<f64>().ok()))
        .map_or(0.0, |nanoseconds| nanoseconds / 1e9)
}

/// One tools/call as the router is timed with it: the handshake-era call, the same call
/// padded to the modern one's bytes, and the modern call.
#[derive(Clone, Copy)]
enum Form {
    HandshakeEra,
    Padded,
    Modern,
}

impl Form {
    fn post(self, name: &str, arguments: serde_json::Value) -> Post {
        match self {
            Form::HandshakeEra => handshake_era_tool_call(name, arguments),
            Form::Padded => padded_handshake_era_tool_call(name, arguments),
            Form::Modern => modern_tool_call(name, arguments),
        }
    }

    fn named(name: &str) -> Option<Form> {
        match name {
            "legacy" => Some(Form::HandshakeEra),
            "padded" => Some(Form::Padded),
            "modern" => Some(Form::Modern),
            _ => None,
        }
    }
}

/// The handshake-era call carrying every byte the modern one carries: the same body
/// (`_meta` included) and the same headers, but for the version, which names 2025-11-25
/// (as long as 2026-07-28) in `MCP-Protocol-Version` and in `_meta`, as the two must
/// agree. What a modern call costs beyond it is what the modern rules cost; what it costs
/// beyond the plain handshake-era call is what the modern bytes cost, which the revision
/// forces.
fn padded_handshake_era_tool_call(name: &str, arguments: serde_json::Value) -> Post {
    let mut post = modern_tool_call(name, arguments);
    for (header, value) in &mut post.headers {
        if *header == "MCP-Protocol-Version" {
            *value = LATEST_HANDSHAKE_ERA.to_string();
        }
    }
    post.body = post.body.replace(MODERN, LATEST_HANDSHAKE_ERA);
    post
}

/// Requests of one form, as hyper hands them to the router (names and values parsed).
/// Built before a batch is timed, so the figure is the server's own code.
#[inline(never)]
fn build_requests(post: &Post, count: usize) -> Vec<axum::http::Request<axum::body::Body>> {
    (0..count)
        .map(|_| {
            let mut builder = axum::http::Request::post("/mcp").header("authorization", format!("Bearer {TOKEN}")).header("content-type", "application/json");
            for (name, value) in &post.headers {
                builder = builder.header(*name, value);
            }
            builder.body(axum::body::Body::from(post.body.clone())).expect("request")
        })
        .collect()
}

/// Calls the router with each request in turn, reading each answer whole.
async fn serve_requests(router: &axum::Router, requests: Vec<axum::http::Request<axum::body::Body>>) {
    use tower::ServiceExt as _;
    for request in requests {
        let response = router.clone().oneshot(request).await.expect("infallible");
        assert_eq!(response.status(), axum::http::StatusCode::OK);
        let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
    }
}

/// One tools/call through the MCP router as `recap serve` builds it, called in this
/// thread without sockets, so that the figure is the CPU time of the server's own code
/// per call (parsing, checks, the tool, the response), out of reach of the kernel's and
/// the other tenants' share of a socket round trip; requests are built in batches of
/// `BATCH` outside the timed part. Three forms: the handshake-era call, the same call
/// padded to the modern bytes, and the modern call. A block runs one round of `CALLS`
/// calls of each form, then again in the reverse order (so a drift of the machine
/// weighs on every form alike); each block gives the modern call's ratio to each of the
/// two others, and the medians over `BLOCKS` blocks are printed.
///
/// `RECAP_BENCH_MCP_FORM=legacy|padded|modern` runs only `RECAP_BENCH_CALLS` (2,000)
/// calls of that form of `RECAP_BENCH_MCP_TOOL` (get_meeting), for a profiler: under
/// `valgrind --tool=callgrind`, the difference between two forms' counts is the
/// difference between their calls, the setup being the same.
async fn router_eras(dir: &std::path::Path) {
    const CALLS: usize = 20_000;
    const BATCH: usize = 500;
    const BLOCKS: usize = 7;
    let readmodel = world(dir, 1_000).await;
    let router = recap::telemetry::http_layer(recap_mcp::router(recap_mcp::McpState::new(readmodel, recap_access::Plans::default(), &unlimited_mcp())));
    let arguments_of = |tool: &str| match tool {
        "list_meetings" => serde_json::json!({"limit": 20}),
        _ => serde_json::json!({"meeting_id": "mtg_000500"}),
    };
    if let Ok(form) = std::env::var("RECAP_BENCH_MCP_FORM") {
        let form = Form::named(&form).expect("RECAP_BENCH_MCP_FORM: legacy, padded or modern");
        let tool = std::env::var("RECAP_BENCH_MCP_TOOL").unwrap_or_else(|_| "get_meeting".into());
        let calls = std::env::var("RECAP_BENCH_CALLS").ok().and_then(|calls| calls.parse().ok()).unwrap_or(2_000);
        let requests = build_requests(&form.post(&tool, arguments_of(&tool)), calls);
        serve_requests(&router, requests).await;
        return;
    }
    let round = |post: &Post| {
        let (router, post) = (router.clone(), post.clone());
        async move {
            let mut seconds = 0.0;
            for _ in 0..CALLS / BATCH {
                let requests = build_requests(&post, BATCH);
                let started = thread_cpu_seconds();
                serve_requests(&router, requests).await;
                seconds += thread_cpu_seconds() - started;
            }
            seconds / CALLS as f64 * 1e6
        }
    };
    println!("MCP tools/call through the router in this thread, CPU µs per call ({CALLS} calls a round, {BLOCKS} blocks of a round of each form and back):");
    for tool in ["get_meeting", "list_meetings"] {
        let posts = [Form::HandshakeEra, Form::Padded, Form::Modern].map(|form| form.post(tool, arguments_of(tool)));
        let (mut costs, mut to_legacy, mut to_padded) = ([Vec::new(), Vec::new(), Vec::new()], Vec::new(), Vec::new());
        for _ in 0..BLOCKS {
            let mut block = [0.0; 3];
            for index in [0, 1, 2, 2, 1, 0] {
                block[index] += round(&posts[index]).await / 2.0;
            }
            for (index, cost) in block.iter().enumerate() {
                costs[index].push(*cost);
            }
            to_legacy.push(block[2] / block[0]);
            to_padded.push(block[2] / block[1]);
        }
        let range = |ratios: &[f64]| (ratios.iter().cloned().fold(f64::INFINITY, f64::min), ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max));
        let ((legacy_low, legacy_high), (padded_low, padded_high)) = (range(&to_legacy), range(&to_padded));
        println!(
            "  {tool:<14} 2025-11-25 {:>6.2} µs   padded {:>6.2} µs   2026-07-28 {:>6.2} µs   modern/handshake-era {:.3} ({legacy_low:.3}..{legacy_high:.3})   modern/padded {:.3} ({padded_low:.3}..{padded_high:.3})",
            stats::median(&mut costs[0].clone()),
            stats::median(&mut costs[1].clone()),
            stats::median(&mut costs[2].clone()),
            stats::median(&mut to_legacy.clone()),
            stats::median(&mut to_padded.clone()),
        );
    }
}

/// The MCP settings the benches serve with: the tool-call limit out of the way (the
/// benches make hundreds of thousands of calls of one account; the limiter's check,
/// one in-process count a call, is still made).
fn unlimited_mcp() -> recap_mcp::McpConfig {
    recap_mcp::McpConfig { tool_calls_per_minute: u32::MAX, ..recap_mcp::McpConfig::default() }
}
