//! Benchmarks of the webhooks runtime on the embedded edition, each measured side by
//! side with its baseline in one run (the machine is shared and noisy, so the ratios are
//! the figures that hold):
//!
//! 1. delivery throughput to a local receiver (on loopback, answering 200 at once)
//!    against the projector's own rate on the same events: the projector alone drains
//!    the log, then the runtime alone delivers the outbox it left (in alternated rounds,
//!    each on a fresh store, the median round's ratio the figure), then both run
//!    together from an empty store (delivered/s until the last delivery arrives).
//!    Between the first two, two floors of a delivery: the same requests sent by bare
//!    hyper connections, and the least the store is written a delivered message (its
//!    id claimed, its feed row and head, its attempt's record, at the runtime's batch
//!    sizes); from them and the projector's CPU a message, the best rate the machine's
//!    cores allow the projector and any runtime together;
//! 2. event → delivered latency (from the instant the event line is appended to the
//!    log to the instant the receiver has the request) at half the projector's rate
//!    just measured, then at half the rate the projector and the runtime reached
//!    together: where the first rate is more than the two can carry on the machine's
//!    cores, a backlog forms and its latency is the backlog's, which the second shows
//!    apart;
//! 3. the runtime alone over a backlog several times what the deliverer's window holds
//!    in memory (150,000 messages), against the projector alone on them, with how many
//!    first attempts the ingest wrote as rows;
//! 4. the cost of a `GET /v1/events` page through the REST router, on an account whose
//!    feed holds 1,000 messages and one whose feed holds a million (first page, and a
//!    page from a cursor half way down), the two sizes alternated in rounds.
//!
//! The receiver (`recap_testkit::bench::receiver`) runs on a thread of its own (its own
//! single-threaded runtime), so that what it costs is measured apart (the CPU time of
//! its thread, per request) and it never queues behind the runtime's tasks: in
//! production it is another machine. It is a bare HTTP/1.1 responder (keep-alive,
//! `Content-Length` bodies, `200` with an empty body); `RECAP_BENCH_RECEIVER=axum` puts
//! an axum server there instead, which costs several times as much a request. The CPU
//! time of the whole process per message, and the receiver's share of it, are printed
//! beside each rate.
//!
//! `RECAP_BENCH_WEBHOOK_EVENTS` sizes the throughput rounds (20,000 meetings),
//! `RECAP_BENCH_WEBHOOK_ROUNDS` sets how many rounds of the projector alone and the
//! runtime alone alternate (3),
//! `RECAP_BENCH_WEBHOOK_ACCOUNTS` the accounts, one endpoint each (4),
//! `RECAP_BENCH_LATENCY_SECONDS` the latency run (5), `RECAP_BENCH_WEBHOOK_BACKLOG` the
//! backlog (150,000), `RECAP_BENCH_FEED_MESSAGES` the large feed (1,000,000). Run with
//! `make bench` (or `cargo bench --bench webhooks [throughput|latency|backlog|pages]`).

// The binary's global allocator lives in the recap library: link it, so the
// benchmark measures what `recap` runs.
extern crate recap;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use recap_lmdb::EmbeddedDriver;
use recap_projector::{EmbeddedProjector, EventLog, LoopConfig};
use recap_readmodel::messages::{message_id, Message, MessageKind};
use recap_readmodel::tables::MESSAGE_OUTBOX;
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, WebhookStore};
use recap_readmodel::{Batch, Driver, ReadModel, ScanRange, Val};
use recap_schemas::build::{Epoch, Events};
use recap_schemas::Timestamp;
use recap_testkit::bench::receiver::{cpu_time, receiver, Received};
use recap_testkit::bench::stats;
use recap_webhooks::{ClientConfig, Runtime};
use tokio::sync::watch;
use tower::ServiceExt;

const TOKEN: &str = "svc_pat_benchmarkbenchmarkbenchmark0000";

/// How many accounts the throughput and latency events are spread over, each with one
/// endpoint: deliveries to one endpoint are bounded in flight, as in production.
fn accounts() -> usize {
    setting("RECAP_BENCH_WEBHOOK_ACCOUNTS", 4).max(1)
}

/// The events happen on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.replace('_', "").parse().ok()).unwrap_or(default)
}

fn process_cpu() -> Duration {
    cpu_time(Path::new("/proc/self/stat"))
}

fn line(envelope: &recap_schemas::Envelope) -> String {
    serde_json::to_string(envelope).expect("an event line")
}

/// The endpoint events (one per account, first), then `meetings` meetings spread over
/// the accounts: one `meeting.created` message each.
fn endpoint_lines(url: &str) -> Vec<String> {
    (0..accounts())
        .map(|account| line(&EVENTS.webhook_endpoint(format!("acc_{account}"), format!("ep_{account}"), url).id(format!("ep_evt_{account}")).envelope()))
        .collect()
}

fn meeting_line(prefix: &str, index: usize) -> String {
    let created = EVENTS.minute(index as i64);
    let meeting = EVENTS.meeting(format!("acc_{}", index % accounts()), format!("mtg_{prefix}{index:07}")).title(format!("Meeting {index}")).times(created);
    line(&meeting.id(format!("e_{prefix}{index}")).occurred_at(created).envelope())
}

fn open(dir: &Path, name: &str) -> Arc<dyn Driver> {
    Arc::new(EmbeddedDriver::open(&dir.join(format!("{name}.lmdb"))).expect("opening a store"))
}

fn projector(driver: Arc<dyn Driver>, log: &Path, dir: &Path, name: &str) -> EmbeddedProjector {
    EmbeddedProjector::new(driver, EventLog::new(log), dir.join(format!("{name}.dead")), LoopConfig::default())
}

/// The runtime as `recap serve --webhooks-allow-insecure` runs it, until `stop`, and
/// its figures.
fn start_runtime(driver: Arc<dyn Driver>, stop: watch::Receiver<bool>) -> (tokio::task::JoinHandle<()>, Arc<recap_webhooks::Stats>) {
    let client = ClientConfig { allow_insecure: true, ..ClientConfig::default() };
    let runtime = Runtime::new(driver, recap_readmodel::webhooks::DEFAULT_RETENTION, client);
    let stats = runtime.stats.clone();
    (tokio::spawn(runtime.run_embedded(stop)), stats)
}

/// The messages' JSON as the outbox holds them: the bodies of their deliveries.
async fn outbox_bodies(driver: &dyn Driver) -> Vec<hyper::body::Bytes> {
    #[derive(serde::Deserialize)]
    struct Record<'a> {
        #[serde(borrow)]
        message: &'a serde_json::value::RawValue,
    }
    let rows = driver.scan(&MESSAGE_OUTBOX, &[Val::text("log")], &ScanRange::after(None), usize::MAX).await.expect("reading the outbox");
    rows.iter()
        .map(|row| {
            let record: Record<'_> = serde_json::from_str(&row.body).expect("an outbox record");
            hyper::body::Bytes::copy_from_slice(record.message.get().as_bytes())
        })
        .collect()
}

/// The floor of a delivery: the same requests (each message's JSON, with the Standard
/// Webhooks headers of the runtime's length, made once) sent by bare hyper HTTP/1.1
/// client connections, as many as the runtime may have in flight (four per endpoint),
/// with nothing read, written or signed per request. It is what any runtime built on
/// hyper's client pays to send the deliveries, the receiver's share included; returns
/// how long it took and the CPU time it used.
async fn floor(url: &str, bodies: Vec<hyper::body::Bytes>, received: &Received) -> (Duration, Duration) {
    use http_body_util::{BodyExt, Full};
    let address = url.trim_start_matches("http://").split('/').next().expect("the receiver's address").to_owned();
    let bodies = Arc::new(bodies);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("webhook-id", format!("msg_{}", "0".repeat(32))),
        ("webhook-timestamp", "1767225600".to_owned()),
        ("webhook-signature", format!("v1,{}=", "A".repeat(43))),
    ];
    let before = received.count();
    let (started, cpu_before) = (Instant::now(), process_cpu());
    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..accounts() * 4 {
        let (address, bodies, next, headers) = (address.clone(), bodies.clone(), next.clone(), headers.clone());
        senders.spawn(async move {
            let stream = tokio::net::TcpStream::connect(&address).await.expect("connecting to the receiver");
            stream.set_nodelay(true).expect("TCP_NODELAY");
            let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("an HTTP/1.1 connection");
            tokio::spawn(connection);
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(index) else { break };
                let mut request = hyper::Request::post("/hooks").header("host", address.as_str());
                for (name, value) in &headers {
                    request = request.header(*name, value.as_str());
                }
                let request = request.body(Full::new(body.clone())).expect("a request");
                sender.ready().await.expect("the connection is ready");
                let response = sender.send_request(request).await.expect("an answer");
                assert_eq!(response.status(), 200);
                response.into_body().collect().await.expect("the answer's body");
            }
        });
    }
    while senders.join_next().await.is_some() {}
    received.wait_for(before + bodies.len() as u64, Duration::from_secs(30)).await;
    (started.elapsed(), process_cpu().saturating_sub(cpu_before))
}

/// The floor of what a delivered message writes to the store: its id claimed, its feed
/// row and its account's head in batches of 500, in one commit (as the runtime
/// ingests), and the record of its successful attempt in groups of 64 (as the runtime's
/// recorder commits them), on a fresh store in `dir`; nothing read, no endpoint state, no
/// position.
/// Returns the CPU time it used.
async fn store_floor(dir: &Path, bodies: &[hyper::body::Bytes]) -> Duration {
    let store = WebhookStore::new(open(dir, "store-floor"), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let messages: Vec<(String, String, i64, String)> = bodies
        .iter()
        .enumerate()
        .map(|(index, body)| {
            let account = format!("acc_{}", index % accounts());
            (account, format!("msg_{index:032x}"), index as i64 + 1, String::from_utf8_lossy(body).into_owned())
        })
        .collect();
    let cpu_before = process_cpu();
    for batch in messages.chunks(500) {
        let claims: Vec<(&str, i64, &str)> = batch.iter().map(|(account, id, seq, _)| (account.as_str(), *seq, id.as_str())).collect();
        let (_, mut rows) = store.claim_rows(&claims).await.expect("claiming the ids");
        rows.extend(batch.iter().map(|(account, _, seq, body)| store.feed_row_with_body(account, *seq, body.clone())));
        let mut heads: HashMap<&str, (i64, i64)> = HashMap::new();
        for (account, _, seq, _) in batch {
            heads.entry(account.as_str()).or_insert((*seq, *seq)).1 = *seq;
        }
        rows.extend(heads.iter().flat_map(|(account, (lowest, _))| store.floor_rows(account, *lowest)));
        rows.extend(heads.iter().map(|(account, (_, seq))| store.head_row(account, *seq)));
        store.write(rows).await.expect("writing the feed");
    }
    for group in messages.chunks(64) {
        let rows = group
            .iter()
            .map(|(account, id, _, _)| {
                let record = AttemptRecord {
                    id: format!("att_{}", uuid::Uuid::new_v4().simple()),
                    endpoint_created_version: Some(1),
                    message_id: id.clone(),
                    kind: MessageKind::MeetingCreated,
                    attempt: 1,
                    attempted_at: Timestamp(recap_readmodel::driver::now_micros()),
                    outcome: AttemptOutcome::Succeeded,
                    status: Some(200),
                    error: None,
                    duration_ms: 0,
                    next_attempt_at: None,
                };
                store.attempt_row(account, "ep_0", &record)
            })
            .collect();
        store.write(rows).await.expect("recording the attempts");
    }
    process_cpu().saturating_sub(cpu_before)
}

/// A temp dir on the disk, or on tmpfs with `RECAP_BENCH_TMPFS=1` (a diagnosis: how
/// much of a figure is waiting for the disk to sync commits).
fn store_dir() -> tempfile::TempDir {
    match std::env::var_os("RECAP_BENCH_TMPFS") {
        Some(_) => tempfile::tempdir_in("/dev/shm"),
        None => tempfile::tempdir(),
    }
    .expect("a temp dir")
}

/// One round of the projector alone, then the runtime alone on the outbox it left.
struct AloneRound {
    projected_in: Duration,
    projector_cpu: Duration,
    delivered_in: Duration,
    runtime_cpu: Duration,
    receiver_cpu: Duration,
}

/// The projector alone drains `log` into a fresh store `name`: the store, how long it
/// took and the CPU it used.
async fn project_alone(dir: &Path, log: &Path, name: &str) -> (Arc<dyn Driver>, Duration, Duration) {
    let store = open(dir, name);
    let (started, cpu_before) = (Instant::now(), process_cpu());
    projector(store.clone(), log, dir, name).drain().await.expect("projecting");
    (store, started.elapsed(), process_cpu().saturating_sub(cpu_before))
}

/// The runtime alone delivers the `meetings` messages of the outbox the projector left
/// in `store`: how long it took, the process's CPU and the receiver's, and the first
/// attempts the ingest wrote as rows.
async fn deliver_alone(store: Arc<dyn Driver>, meetings: usize, received: &Received) -> (Duration, Duration, Duration, u64) {
    received.reset();
    let (stop, stopped) = watch::channel(false);
    let (started, cpu_before, receiver_before) = (Instant::now(), process_cpu(), received.cpu());
    let (running, stats) = start_runtime(store, stopped);
    received.wait_for(meetings as u64, Duration::from_secs(60)).await;
    let delivered_in = started.elapsed();
    let (runtime_cpu, receiver_cpu) = (process_cpu().saturating_sub(cpu_before), received.cpu().saturating_sub(receiver_before));
    stop.send(true).expect("stopping the runtime");
    running.await.expect("the runtime ends");
    (delivered_in, runtime_cpu, receiver_cpu, stats.written_as_rows.load(Ordering::Relaxed))
}

/// The event log of a throughput or backlog run: one endpoint per account at `url`,
/// then `meetings` meetings.
fn meetings_log(dir: &Path, url: &str, prefix: &str, meetings: usize) -> std::path::PathBuf {
    let log = dir.join("events.log");
    let mut lines = endpoint_lines(url);
    lines.extend((0..meetings).map(|index| meeting_line(prefix, index)));
    EventLog::new(&log).append("bench", (lines.join("\n") + "\n").as_bytes()).expect("appending the events");
    log
}

/// The floors of a delivery, measured once.
struct Floors {
    /// The process's CPU for the least the store is written.
    store_cpu: Duration,
    /// The bare requests: how long they took, the process's CPU and the receiver's.
    took: Duration,
    cpu: Duration,
    receiver_cpu: Duration,
}

/// Returns the projector's rate alone and the rate it and the runtime reached together,
/// in events/s (the latency runs offer half of each).
async fn throughput() -> (f64, f64) {
    let meetings = setting("RECAP_BENCH_WEBHOOK_EVENTS", 20_000);
    let dir = store_dir();
    let received = Arc::new(Received::default());
    let url = receiver(received.clone());
    let log = meetings_log(dir.path(), &url, "t", meetings);

    // The projector alone, then the runtime alone on the outbox it left, in alternated
    // rounds on fresh stores: the ratio of each round is of two rates measured one right
    // after the other, and the median round's is the figure. The floors are measured once,
    // between the first round's two.
    let rounds = setting("RECAP_BENCH_WEBHOOK_ROUNDS", 3).max(1);
    let mut alone_rounds: Vec<AloneRound> = Vec::with_capacity(rounds);
    let mut floors = None;
    for round in 0..rounds {
        let (alone, projected_in, projector_cpu) = project_alone(dir.path(), &log, &format!("alone{round}")).await;
        if floors.is_none() {
            let bodies = outbox_bodies(alone.as_ref()).await;
            assert_eq!(bodies.len(), meetings, "one meeting.created message a meeting");
            // The two floors: what the store is written at the least, and the same
            // requests, bare.
            let store_floor_cpu = store_floor(dir.path(), &bodies).await;
            let receiver_before = received.cpu();
            let (floor_in, floor_cpu) = floor(&url, bodies, &received).await;
            floors = Some(Floors { store_cpu: store_floor_cpu, took: floor_in, cpu: floor_cpu, receiver_cpu: received.cpu().saturating_sub(receiver_before) });
        }
        let (delivered_in, runtime_cpu, receiver_cpu, _) = deliver_alone(alone, meetings, &received).await;
        alone_rounds.push(AloneRound { projected_in, projector_cpu, delivered_in, runtime_cpu, receiver_cpu });
    }
    let floors = floors.expect("at least one round");
    let messages = meetings;

    // Both together, from an empty store: until the last delivery arrives.
    received.reset();
    let together = open(dir.path(), "together");
    let (stop, stopped) = watch::channel(false);
    let (started, cpu_before, receiver_before) = (Instant::now(), process_cpu(), received.cpu());
    let (running, _) = start_runtime(together.clone(), stopped);
    projector(together, &log, dir.path(), "together").drain().await.expect("projecting");
    let projected_together_in = started.elapsed();
    received.wait_for(messages as u64, Duration::from_secs(30)).await;
    let together_in = started.elapsed();
    let (together_cpu, together_receiver_cpu) = (process_cpu().saturating_sub(cpu_before), received.cpu().saturating_sub(receiver_before));
    stop.send(true).expect("stopping the runtime");
    running.await.expect("the runtime ends");

    let rate = |count: usize, took: Duration| count as f64 / took.as_secs_f64();
    let per_message = |cpu: Duration| cpu.as_secs_f64() * 1e6 / messages as f64;
    let median_of = |value: &dyn Fn(&AloneRound) -> f64| stats::median(&mut alone_rounds.iter().map(value).collect::<Vec<f64>>());
    let projected = median_of(&|round| rate(messages, round.projected_in));
    let projector_cpu_us = median_of(&|round| per_message(round.projector_cpu));
    let ratios: Vec<f64> = alone_rounds.iter().map(|round| round.projected_in.as_secs_f64() / round.delivered_in.as_secs_f64()).collect();
    let receiver_kind = std::env::var("RECAP_BENCH_RECEIVER").unwrap_or_else(|_| "bare".into());
    println!(
        "webhooks throughput: {messages} meeting.created messages over {} accounts, one endpoint each, {receiver_kind} receiver answering 200 at once on its own thread",
        accounts()
    );
    println!(
        "  projector alone                {:>9.0} messages/s                              CPU {:>5.0} us a message (median of {rounds} rounds)",
        projected, projector_cpu_us
    );
    println!(
        "  floor: bare hyper client      {:>9.0} requests/s    ratio to the projector {:.2}   CPU {:>5.0} us a request, {:.0} of them the receiver's",
        rate(messages, floors.took),
        rate(messages, floors.took) / projected,
        per_message(floors.cpu),
        per_message(floors.receiver_cpu)
    );
    // On this machine's cores, the projector and the deliveries together can go no
    // faster than the cores allow for the CPU the projector and the floor use a message.
    let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get()) as f64;
    let bound = cores * 1e6 / (projector_cpu_us + per_message(floors.cpu));
    println!(
        "  together at best, on {cores:.0} cores      {:>9.0} delivered/s   ratio to the projector {:.2}   (the cores over the projector's and the floor's CPU a message)",
        bound,
        bound / projected
    );
    let written_bound = cores * 1e6 / (projector_cpu_us + per_message(floors.cpu) + per_message(floors.store_cpu));
    println!(
        "  ... and the least it writes          {:>9.0} delivered/s   ratio to the projector {:.2}   (claim, feed row and head by 500, attempt record by 64: CPU {:.0} us a message)",
        written_bound,
        written_bound / projected,
        per_message(floors.store_cpu)
    );
    for (round, (alone, ratio)) in alone_rounds.iter().zip(&ratios).enumerate() {
        println!(
            "    round {}: projector {:>6.0} messages/s, then runtime {:>6.0} delivered/s: ratio {:.2}   CPU {:>3.0} / {:>3.0} us, {:.0} of them the receiver's",
            round + 1,
            rate(messages, alone.projected_in),
            rate(messages, alone.delivered_in),
            ratio,
            per_message(alone.projector_cpu),
            per_message(alone.runtime_cpu),
            per_message(alone.receiver_cpu)
        );
    }
    let (low, high) = ratios.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), ratio| (low.min(*ratio), high.max(*ratio)));
    println!(
        "  runtime alone (outbox backlog) {:>9.0} delivered/s   ratio to the projector {:.2} (rounds {low:.2}-{high:.2})   CPU {:>5.0} us a delivery, {:.0} of them the receiver's (target >= 1.0)",
        median_of(&|round| rate(messages, round.delivered_in)),
        stats::median(&mut ratios.clone()),
        median_of(&|round| per_message(round.runtime_cpu)),
        median_of(&|round| per_message(round.receiver_cpu))
    );
    println!(
        "  both together, to the last     {:>9.0} delivered/s   ratio to the projector {:.2}   CPU {:>5.0} us a message, {:.0} of them the receiver's (target >= 1.0; the projector took {:.2} s of {:.2} s)",
        rate(messages, together_in),
        rate(messages, together_in) / projected,
        per_message(together_cpu),
        per_message(together_receiver_cpu),
        projected_together_in.as_secs_f64(),
        together_in.as_secs_f64()
    );
    // Where "together" stands between the bounds above: how busy the process kept the
    // cores, what the cores would carry were they busy throughout at the CPU a message it
    // spent, and the projector's own rate beside the runtime.
    let busy = together_cpu.as_secs_f64() / (cores * together_in.as_secs_f64());
    let full = cores * 1e6 / per_message(together_cpu);
    let beside = rate(messages, projected_together_in);
    println!(
        "    the cores {:.0}% busy; at that CPU a message, busy throughout {:>6.0} delivered/s (ratio {:.2}); the projector beside the runtime {:>6.0} messages/s (ratio {:.2})",
        busy * 100.0,
        full,
        full / projected,
        beside,
        beside / projected
    );
    (projected, rate(messages, together_in))
}

/// The projector alone, then the runtime alone, over a backlog several times what the
/// deliverer's window holds in memory (20,000 deliveries): past the window is where a
/// first attempt may be written as a row, which the deliverer then reads and removes.
async fn backlog() {
    let meetings = setting("RECAP_BENCH_WEBHOOK_BACKLOG", 150_000);
    let dir = store_dir();
    let received = Arc::new(Received::default());
    let url = receiver(received.clone());
    let log = meetings_log(dir.path(), &url, "b", meetings);
    let (store, projected_in, projector_cpu) = project_alone(dir.path(), &log, "backlog").await;
    let (delivered_in, runtime_cpu, receiver_cpu, written_as_rows) = deliver_alone(store, meetings, &received).await;
    let rate = |took: Duration| meetings as f64 / took.as_secs_f64();
    let per_message = |cpu: Duration| cpu.as_secs_f64() * 1e6 / meetings as f64;
    println!(
        "webhooks backlog: {meetings} meeting.created messages over {} accounts, the deliverer's window holding {}",
        accounts(),
        recap_webhooks::DelivererConfig::default().window
    );
    println!(
        "  projector alone {:>9.0} messages/s, CPU {:.0} us a message; then the runtime alone {:>9.0} delivered/s: ratio {:.2}   CPU {:.0} us a delivery, {:.0} of them the receiver's; first attempts the ingest wrote as rows: {} ({:.2}%)",
        rate(projected_in),
        per_message(projector_cpu),
        rate(delivered_in),
        projected_in.as_secs_f64() / delivered_in.as_secs_f64(),
        per_message(runtime_cpu),
        per_message(receiver_cpu),
        written_as_rows,
        written_as_rows as f64 * 100.0 / meetings as f64
    );
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * fraction).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Appends meetings at `rate` events/s to a live projector and runtime, and times each
/// from its line's append to its arrival at the receiver. `what` says what the rate is
/// half of.
async fn latency(rate: f64, what: &str) {
    let seconds = setting("RECAP_BENCH_LATENCY_SECONDS", 5);
    let dir = store_dir();
    let received = Arc::new(Received::default());
    let url = receiver(received.clone());
    let log_path = dir.path().join("events.log");
    let log = EventLog::new(&log_path);
    log.append("bench", (endpoint_lines(&url).join("\n") + "\n").as_bytes()).expect("appending the endpoints");
    let driver = open(dir.path(), "latency");
    let (stop, stopped) = watch::channel(false);
    let (running, _) = start_runtime(driver.clone(), stopped.clone());
    let live = projector(driver, &log_path, dir.path(), "latency");
    let projecting = tokio::spawn(async move { live.run(stopped).await });

    // The pacer appends, every millisecond, the lines due by then (as one write).
    let total = (rate * seconds as f64) as usize;
    let pacer = tokio::task::spawn_blocking(move || {
        let mut appended = HashMap::with_capacity(total);
        let started = Instant::now();
        let mut next = 0;
        while next < total {
            let due = ((started.elapsed().as_secs_f64() * rate) as usize + 1).min(total);
            if due > next {
                let lines: Vec<String> = (next..due).map(|index| meeting_line("l", index)).collect();
                log.append("bench", (lines.join("\n") + "\n").as_bytes()).expect("appending events");
                let at = Instant::now();
                for index in next..due {
                    appended.insert(format!("mtg_l{index:07}"), at);
                }
                next = due;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (appended, started.elapsed())
    });
    let (appended, offered_in) = pacer.await.expect("the pacer");
    received.wait_for(total as u64, Duration::from_secs(30)).await;
    stop.send(true).expect("stopping");
    running.await.expect("the runtime ends");
    projecting.await.expect("the projector ends").expect("projecting");

    let first = received.take_first_arrivals();
    let mut millis: Vec<f64> = appended.iter().map(|(meeting, at)| first[meeting].duration_since(*at).as_secs_f64() * 1e3).collect();
    millis.sort_by(f64::total_cmp);
    println!(
        "event -> delivered at half {what} ({:.0} events/s offered, {} events in {:.1} s): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        total as f64 / offered_in.as_secs_f64(),
        total,
        offered_in.as_secs_f64(),
        percentile(&millis, 0.50),
        percentile(&millis, 0.99),
        percentile(&millis, 1.0)
    );
}

/// A store with account `acc` (a token, limits large enough to measure work) whose
/// feed holds `messages` messages, seeded as the runtime writes it: each message
/// claimed, its feed rows, floors and the head written in large batches.
async fn account_with_feed(dir: &Path, messages: usize) -> ReadModel {
    let driver = open(dir, &format!("feed{messages}"));
    let mut batch = Batch::new(driver.clone());
    batch.apply(&EVENTS.account("acc").plan("flow", Some(1_000_000_000_000), EVENTS.minute(0)).envelope(), 1).await.expect("apply");
    batch.apply(&EVENTS.token_created("acc", "tok", recap_access::token_sha256(TOKEN)).name("bench").envelope(), 2).await.expect("apply");
    driver.write(batch.into_mutations()).await.expect("write");
    let readmodel = ReadModel::new(driver);
    let store = readmodel.webhooks(recap_readmodel::webhooks::DEFAULT_RETENTION);
    let now = Timestamp::now();
    for chunk_start in (0..messages).step_by(50_000) {
        let chunk: Vec<(i64, Message)> = (chunk_start..(chunk_start + 50_000).min(messages))
            .map(|index| {
                let meeting = format!("mtg_{index:07}");
                let message = Message {
                    id: message_id(&format!("evt_{index}"), "acc", MessageKind::MeetingCreated, &meeting, now),
                    kind: MessageKind::MeetingCreated,
                    created_at: now,
                    data: recap_readmodel::messages::raw_json(
                        &serde_json::json!({ "meeting_id": meeting, "meeting": { "id": meeting, "title": format!("Meeting {index}") } }),
                    ),
                };
                (index as i64 + 1, message)
            })
            .collect();
        let claims: Vec<(&str, i64, &Message)> = chunk.iter().map(|(seq, message)| ("acc", *seq, message)).collect();
        let claimed = store.claim_many(&claims).await.expect("claim");
        assert!(claimed.iter().all(|claimed| claimed.holds()));
        let mut rows: Vec<_> = chunk.iter().map(|(seq, message)| store.feed_row("acc", *seq, message)).collect();
        // Floors said to be kept for longer than the retention, so a first page starts at
        // the first floor, as it does once a feed is older than its retention.
        let since = recap_readmodel::driver::now_micros() - 2 * recap_readmodel::webhooks::DEFAULT_RETENTION.as_micros() as i64;
        rows.extend(store.floor_rows_since("acc", chunk.first().map_or(0, |(seq, _)| *seq), since));
        rows.push(store.head_row("acc", chunk.last().map_or(0, |(seq, _)| *seq)));
        store.write(rows).await.expect("writing feed rows");
    }
    readmodel
}

fn router(readmodel: ReadModel) -> axum::Router {
    let config = recap_query_api::RestConfig { rate_limit_per_minute: 1_000_000_000, ..recap_query_api::RestConfig::default() };
    let limiter: Arc<dyn recap_access::Limiter> = Arc::new(recap_access::InProcessLimiter::with_system_clock());
    recap_query_api::router(recap_query_api::RestState::new(readmodel, recap_access::Plans::default(), limiter, vec![7; 32], &config))
}

/// GET `uri` through the router; the body's bytes.
async fn get_bytes(router: &axum::Router, uri: &str) -> axum::body::Bytes {
    let request = axum::http::Request::get(uri).header("authorization", format!("Bearer {TOKEN}")).body(axum::body::Body::empty()).expect("a request");
    let response = router.clone().oneshot(request).await.expect("an answer");
    assert_eq!(response.status(), 200, "GET {uri}");
    axum::body::to_bytes(response.into_body(), 16 << 20).await.expect("the body")
}

/// GET `uri` through the router; the body as JSON.
async fn get(router: &axum::Router, uri: &str) -> serde_json::Value {
    serde_json::from_slice(&get_bytes(router, uri).await).expect("a JSON body")
}

/// The cursor of the page that starts half way down a feed of `messages`.
async fn middle_cursor(router: &axum::Router, messages: usize) -> String {
    let mut cursor = String::new();
    for _ in 0..(messages / 2 / 200) {
        let page = get(router, &format!("/v1/events?limit=200{cursor}")).await;
        cursor = format!("&cursor={}", page["next_cursor"].as_str().expect("a next cursor"));
    }
    cursor
}

async fn page_cost() {
    let large_size = setting("RECAP_BENCH_FEED_MESSAGES", 1_000_000);
    // Pages are read from memory (the page cache) on the disk and on tmpfs alike.
    let dir = store_dir();
    let small = router(account_with_feed(dir.path(), 1_000).await);
    let started = Instant::now();
    let large = router(account_with_feed(dir.path(), large_size).await);
    let seeded_in = started.elapsed();
    let small_middle = middle_cursor(&small, 1_000).await;
    let large_middle = middle_cursor(&large, large_size).await;
    let pages = 2_000;
    let rounds = 5;
    let mut timings = [Duration::ZERO; 4];
    for _ in 0..rounds {
        for (slot, (router, cursor)) in [(&small, ""), (&large, ""), (&small, small_middle.as_str()), (&large, large_middle.as_str())].into_iter().enumerate() {
            let uri = format!("/v1/events?limit=50{cursor}");
            assert_eq!(get(router, &uri).await["data"].as_array().map(Vec::len), Some(50), "GET {uri}");
            let started = Instant::now();
            for _ in 0..pages / rounds {
                get_bytes(router, &uri).await;
            }
            timings[slot] += started.elapsed();
        }
    }
    let per_page = |slot: usize| timings[slot].as_secs_f64() * 1e6 / pages as f64;
    println!(
        "GET /v1/events?limit=50 through the REST router ({pages} pages each, interleaved; the large feed seeded in {:.0} s, {}):",
        seeded_in.as_secs_f64(),
        if dir.path().starts_with("/dev/shm") { "on tmpfs" } else { "on disk" }
    );
    for (name, slots) in [("first page ", (0, 1)), ("middle page", (2, 3))] {
        println!(
            "  {name}  1,000 messages {:>8.1} us   {large_size} messages {:>8.1} us   ratio {:.2} (target <= 1.2)",
            per_page(slots.0),
            per_page(slots.1),
            per_page(slots.1) / per_page(slots.0)
        );
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("the runtime");
    let only = std::env::args().nth(1).filter(|arg| !arg.starts_with('-'));
    let wants = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    if wants("throughput") || wants("latency") {
        let (projected, together) = runtime.block_on(throughput());
        if wants("latency") {
            runtime.block_on(latency(projected / 2.0, "the projector's rate"));
            runtime.block_on(latency(together / 2.0, "the rate both reached together"));
        }
    }
    if wants("backlog") {
        runtime.block_on(backlog());
    }
    if wants("pages") {
        runtime.block_on(page_cost());
    }
}
