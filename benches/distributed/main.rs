//! Benchmarks of the distributed edition on the real engines (`make up`: Kafka,
//! Cassandra standing in for ScyllaDB, Redis), measured side by side in one run:
//!
//! 1. projector events/s into the store vs a raw-driver loop writing the same rows in
//!    the same batches with the same requests, statements, consistency and concurrency;
//! 2. a backlog of `RECAP_BENCH_EVENTS` (default 1,000,000) demo-mix events drained
//!    while `GET /v1/meetings?limit=50` is offered open-loop: drain rate and read
//!    latency over time;
//! 3. freshness: produce → readable through REST, while the projector runs at half of
//!    the rate it drained at;
//! 4. `GET /v1/meetings?limit=50` through a `recap query-api` process (auth and Redis
//!    limits on) vs a raw-driver loop issuing the same SELECT at the same concurrency,
//!    in `RECAP_BENCH_REST_ROUNDS` (default 3) rounds that alternate which side goes
//!    first, reported as the median round ratio, and the Redis calls per counted request
//!    (`INFO commandstats` of a Redis private to the run). Two placements: Cassandra on
//!    a core of its own (judged: the store has the same CPU on both sides, as ScyllaDB
//!    on nodes of its own), then Cassandra sharing both cores with wrk and Redis;
//! 5. resident memory of the projector and the query-api at those loads.
//! 6. `recap webhooks` against the projector on the same events, alone and together
//!    (webhooks.rs);
//! 7. Cassandra's and the writer's CPU a row, rows written one a request vs in the
//!    driver's requests (rows of one partition key in one unlogged batch),
//!    `RECAP_BENCH_REQUEST_ROWS` (100,000) feed rows over 64 accounts a round, last so
//!    that its rows do not weigh on the sections before;
//! 8. only when asked for (`cargo bench --bench distributed soak`, its own section of
//!    `make bench`): the soak, mixed REST and MCP reads at half their maximum for
//!    `RECAP_BENCH_SOAK_MINUTES` (15) with events produced throughout and the projector
//!    and a query-api restarted midway (soak.rs).
//!
//! The query-api and the raw-driver read loop run on core 0. Elsewhere Cassandra and
//! Kafka are not pinned (they need both cores); the REST section pins Cassandra for one
//! placement's rounds and gives its cores back after. Every resource is named after the
//! run (topic prefix, keyspaces, consumer group, Redis) and removed at the end. Run with
//! `make bench` or `cargo bench --bench distributed [section]`.

// The binary's global allocator lives in the recap library: link it, so in-process
// work (recording rows, generating events) is what `recap` would do.
extern crate recap;

mod engines;
mod events;
mod load;
mod soak;
mod webhooks;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engines::{Engines, PrivateRedis, Role};
use events::{DemoMix, Event, READER};
use recap_lmdb::EmbeddedDriver;
use recap_readmodel::{Batch, Driver, Mutation};
use recap_schemas::Envelope;
use recap_testkit::bench::stats;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.replace('_', "").parse().ok()).unwrap_or(default)
}

/// Pins the calling thread (threads it creates inherit it) to one core.
fn pin_current_thread(core: usize) {
    let thread = std::fs::read_link("/proc/thread-self").ok().and_then(|link| link.file_name().map(|tid| tid.to_string_lossy().into_owned()));
    if let Some(tid) = thread {
        let _ = std::process::Command::new("taskset").args(["-cp", &core.to_string(), &tid]).output();
    }
}

/// Produces events to their contract topics under `prefix`; returns events/s.
fn produce(brokers: &str, prefix: &str, events: &[Event]) -> f64 {
    let producer = engines::bulk_producer(brokers, 5);
    let started = Instant::now();
    for (topic, key, line) in events {
        engines::send(&producer, &format!("{prefix}{topic}"), key, line);
    }
    engines::flush(&producer);
    events.len() as f64 / started.elapsed().as_secs_f64()
}

/// The rows the projection writes for `events`, in batches of the projector's size
/// (RECAP_PROJECTOR_MAX_BATCH default), computed once, untimed, over an embedded store.
async fn record_rows(events: &[Event], dir: &std::path::Path) -> Vec<Vec<Mutation>> {
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.join(format!("record{}.lmdb", events.len()))).expect("embedded store"));
    let mut batches = Vec::new();
    let mut position = 0;
    for chunk in events.chunks(2_000) {
        let mut batch = Batch::new(driver.clone());
        for (_, _, line) in chunk {
            position += 1;
            batch.apply(&Envelope::decode(line.as_bytes()).expect("a contract event"), position).await.expect("apply");
        }
        let mutations = batch.into_mutations();
        driver.write(mutations.clone()).await.expect("write");
        batches.push(mutations);
    }
    batches
}

/// Waits until the projector accounted for `target` events; returns the instant it
/// first made progress past `from` and the instant it reached `target`.
fn wait_accounted(projector: &Role, from: u64, target: u64, timeout: Duration) -> (Instant, Instant) {
    let deadline = Instant::now() + timeout;
    let mut first = None;
    loop {
        let accounted = projector.accounted();
        if accounted > from && first.is_none() {
            first = Some(Instant::now());
        }
        if accounted >= target {
            let now = Instant::now();
            return (first.unwrap_or(now), now);
        }
        assert!(Instant::now() < deadline, "the projector accounted for {accounted} of {target} events");
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Bench {
    runtime: tokio::runtime::Runtime,
    engines: Engines,
    id: String,
    redis: PrivateRedis,
    keyspace: String,
    raw_keyspace: String,
    prefixes: Vec<String>,
    mix: DemoMix,
    dir: tempfile::TempDir,
}

impl Bench {
    fn envs(&self, prefix: &str) -> Vec<(String, String)> {
        engines::role_envs(&self.engines, &self.id, prefix, &self.keyspace, &self.redis.url())
    }

    fn topics(&mut self, name: &str) -> String {
        let prefix = format!("{}_{name}.", self.id);
        self.runtime.block_on(engines::create_topics(&self.engines.brokers, &prefix));
        self.prefixes.push(prefix.clone());
        prefix
    }
}

/// Section 1; returns the best projector rate.
fn projector_vs_raw(bench: &mut Bench, events_per_round: usize) -> f64 {
    let raw_session = bench.runtime.block_on(load::session(&bench.engines.cluster()));
    let (mut projector_best, mut raw_best, mut rows, mut hwm) = (0f64, 0f64, 0usize, 0f64);
    println!("projector vs raw driver loop, demo event mix, {events_per_round} events a round (2 rounds, alternating):");
    for round in 0..2 {
        let events = bench.mix.take(events_per_round);
        let batches = bench.runtime.block_on(record_rows(&events, bench.dir.path()));
        rows = batches.iter().map(Vec::len).sum();
        let raw_time = bench.runtime.block_on(load::raw_write(&raw_session, &bench.raw_keyspace, &batches, 256));
        let raw_rate = events.len() as f64 / raw_time.as_secs_f64();
        drop(batches);

        let prefix = bench.topics(&format!("r{round}"));
        produce(&bench.engines.brokers, &prefix, &events);
        let projector = Role::start("projector", &bench.envs(&prefix), None);
        // From its first applied event: start-up and the group join are not throughput.
        let (first, done) = wait_accounted(&projector, 0, events.len() as u64, Duration::from_secs(3_600));
        let projector_rate = events.len() as f64 / done.duration_since(first).as_secs_f64();
        hwm = hwm.max(engines::memory_mib(projector.pid()).1);
        projector.stop();
        println!(
            "  round {round}: raw driver {raw_rate:>8.0} events/s ({:.0} rows/s)   projector {projector_rate:>8.0} events/s   ratio {:.2}",
            rows as f64 / raw_time.as_secs_f64(),
            projector_rate / raw_rate
        );
        projector_best = projector_best.max(projector_rate);
        raw_best = raw_best.max(raw_rate);
    }
    println!("  {rows} row writes a round ({:.1} per event); projector VmHWM {hwm:.0} MiB", rows as f64 / events_per_round as f64);
    println!("  best of each: projector {projector_best:.0} / raw {raw_best:.0} events/s = {:.2} (target >= 0.6)", projector_best / raw_best);
    projector_best
}

/// Where a projector batch's time goes: the projection reads each event's entity state
/// from the store (one round trip per entity not already in the batch, one after the
/// other), then the batch's rows are written `RECAP_SCYLLA_WRITE_CONCURRENCY` at a
/// time. The same two steps the Kafka projector takes per batch, timed apart through
/// the real ScyllaDriver (Kafka, offsets and dead letters left out).
fn projector_split(bench: &Bench, events: usize) {
    let config = recap_scylla::ScyllaConfig {
        cluster: bench.engines.cluster(),
        keyspace: bench.raw_keyspace.clone(),
        consistency: recap_scylla::Consistency::LocalQuorum,
        timeout: Duration::from_secs(2),
        write_concurrency: 256,
    };
    let events = bench.mix.take(events);
    let (reads, writes) = bench.runtime.block_on(async {
        let driver: Arc<dyn Driver> = Arc::new(recap_scylla::ScyllaDriver::connect(config).await.expect("connect"));
        let (mut reads, mut writes) = (Duration::ZERO, Duration::ZERO);
        for (index, chunk) in events.chunks(2_000).enumerate() {
            let started = Instant::now();
            let mut batch = Batch::new(driver.clone());
            let envelopes: Vec<Envelope> = chunk.iter().map(|(_, _, line)| Envelope::decode(line.as_bytes()).expect("a contract event")).collect();
            // As the Kafka projector does: the batch's entity states in one concurrent read.
            batch.prefetch(&envelopes).await.expect("prefetch");
            for (offset, envelope) in envelopes.iter().enumerate() {
                batch.apply(envelope, (index * 2_000 + offset) as i64).await.expect("apply");
            }
            let projected = Instant::now();
            driver.write(batch.into_mutations()).await.expect("write");
            reads += projected - started;
            writes += projected.elapsed();
        }
        (reads, writes)
    });
    let per_event = |time: Duration| time.as_secs_f64() * 1e6 / events.len() as f64;
    println!(
        "  where a batch's time goes ({} events through the ScyllaDriver, batches of 2,000): projection with its state reads {:.0} us/event, writing the rows {:.0} us/event",
        events.len(),
        per_event(reads),
        per_event(writes)
    );
    println!(
        "  (one after the other, as the Kafka projector runs them: at most {:.0} events/s; the raw loop only writes)",
        events.len() as f64 / (reads + writes).as_secs_f64()
    );
}

/// Section 2: the backlog drained under reads. Returns the projector (still running),
/// the query-api and the drain rate.
fn drain_under_reads(bench: &mut Bench, backlog: usize, read_rate: f64) -> (Role, Role, f64) {
    let prefix = bench.topics("main");
    let envs = bench.envs(&prefix);
    let seed = events::reader_world(1_000);
    let seeded = seed.len() as u64;
    produce(&bench.engines.brokers, &prefix, &seed);
    let projector = Role::start("projector", &envs, None);
    wait_accounted(&projector, 0, seeded, Duration::from_secs(300));
    projector.stop();
    let query_api = Role::start("query-api", &envs, Some(0));

    println!("backlog of {backlog} demo-mix events drained while GET /v1/meetings?limit=50 is offered at {read_rate:.0}/s (open loop):");
    let started = Instant::now();
    let producer = engines::bulk_producer(&bench.engines.brokers, 5);
    let mut produced = 0;
    while produced < backlog {
        let chunk = bench.mix.take((backlog - produced).min(bench.mix.events_per_copy() * 10));
        for (topic, key, line) in &chunk {
            engines::send(&producer, &format!("{prefix}{topic}"), key, line);
        }
        produced += chunk.len();
    }
    engines::flush(&producer);
    drop(producer);
    println!("  produced in {:.1} s ({:.0} events/s)", started.elapsed().as_secs_f64(), backlog as f64 / started.elapsed().as_secs_f64());

    let stop = Arc::new(AtomicBool::new(false));
    let (address, request) = load::get_request(&query_api.url, "/meetings?limit=50");
    let reader_started = Instant::now();
    let reader = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            runtime.block_on(load::open_loop(&address, request, read_rate, 16, stop))
        }
    });
    // Reads alone first, for a reference latency.
    std::thread::sleep(Duration::from_secs(10));
    let projector_started = Instant::now();
    let projector = Role::start("projector", &envs, None);
    // A projector's counters start at 0 with its process: this one sees the backlog only.
    let target = backlog as u64;
    let mut progress: Vec<(Duration, u64)> = Vec::new();
    let (mut projector_hwm, mut query_hwm) = (0f64, 0f64);
    let deadline = Instant::now() + Duration::from_secs(7_200);
    loop {
        let accounted = projector.accounted();
        progress.push((reader_started.elapsed(), accounted));
        projector_hwm = projector_hwm.max(engines::memory_mib(projector.pid()).1);
        query_hwm = query_hwm.max(engines::memory_mib(query_api.pid()).1);
        if accounted >= target {
            break;
        }
        assert!(Instant::now() < deadline, "the drain did not finish: {accounted} of {target}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let drained_at = reader_started.elapsed();
    let first_progress = progress.iter().find(|(_, done)| *done > 0).map(|(at, _)| *at).unwrap_or(drained_at);
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::Relaxed);
    let samples = reader.join().expect("reader");
    let drain = drained_at - first_progress;
    let drain_rate = backlog as f64 / drain.as_secs_f64();
    println!(
        "  drained in {:.1} s from the first applied event ({:.1} s after the projector started): {drain_rate:.0} events/s",
        drain.as_secs_f64(),
        (drained_at - (projector_started - reader_started)).as_secs_f64()
    );
    let window = (drain / 10).max(Duration::from_secs(10));
    println!("  {:>14} {:>14} {:>8} {:>9} {:>9} {:>9} {:>6}", "window (s)", "drained ev/s", "reads", "p50 ms", "p99 ms", "max ms", "non-200");
    let mut start = Duration::ZERO;
    while start < drained_at + Duration::from_secs(5) {
        let end = start + window;
        let mut latencies: Vec<f64> = samples.iter().filter(|sample| sample.at >= start && sample.at < end).map(|sample| sample.latency_ms).collect();
        let failures = samples.iter().filter(|sample| sample.at >= start && sample.at < end && sample.status != 200).count();
        let done_at = |instant: Duration| progress.iter().rev().find(|(at, _)| *at <= instant).map_or(0, |(_, done)| *done);
        let rate = (done_at(end) - done_at(start)) as f64 / window.as_secs_f64();
        let phase = if end <= first_progress {
            "  (before the drain)"
        } else if start >= drained_at {
            "  (after the drain)"
        } else {
            ""
        };
        let count = latencies.len();
        let (p50, p99, max) = load::percentiles(&mut latencies);
        println!("  {:>6.0}-{:<7.0} {rate:>14.0} {count:>8} {p50:>9.1} {p99:>9.1} {max:>9.1} {failures:>6}{phase}", start.as_secs_f64(), end.as_secs_f64());
        start = end;
    }
    let during: Vec<f64> = samples.iter().filter(|sample| sample.at >= first_progress && sample.at < drained_at).map(|sample| sample.latency_ms).collect();
    let answered = samples.iter().filter(|sample| sample.at >= first_progress && sample.at < drained_at && sample.status == 200).count();
    let (p50, p99, max) = load::percentiles(&mut during.clone());
    println!("  reads during the drain: {answered} of {} answered 200; p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms", during.len());
    println!("  VmHWM during the drain: projector {projector_hwm:.0} MiB (target <= 200), query-api {query_hwm:.0} MiB (target <= 100)");
    (projector, query_api, drain_rate)
}

/// Section 3: produce → readable through REST at half of the drain rate.
fn freshness(bench: &mut Bench, projector: &Role, query_api: &Role, background_rate: f64) {
    let prefix = bench.prefixes.last().cloned().expect("the main topics");
    let seconds = 30u64;
    println!("freshness: produce → readable through GET /v1/meetings/{{id}}, {background_rate:.0} events/s of demo mix alongside, {seconds} s:");
    let stop = Arc::new(AtomicBool::new(false));
    let accounted_before = projector.accounted();
    let started = Instant::now();
    // The background load, paced in 10 ms steps.
    let filler = std::thread::spawn({
        let (stop, brokers, prefix) = (stop.clone(), bench.engines.brokers.clone(), prefix.clone());
        let mix_events: Vec<Event> = bench.mix.take((background_rate * (seconds as f64 + 5.0)) as usize);
        move || {
            let producer = engines::bulk_producer(&brokers, 5);
            let started = Instant::now();
            let mut sent = 0usize;
            while !stop.load(Ordering::Relaxed) && sent < mix_events.len() {
                let due = ((started.elapsed().as_secs_f64() * background_rate) as usize).min(mix_events.len());
                for (topic, key, line) in &mix_events[sent..due] {
                    engines::send(&producer, &format!("{prefix}{topic}"), key, line);
                }
                sent = due;
                std::thread::sleep(Duration::from_millis(10));
            }
            engines::flush(&producer);
            sent
        }
    });
    let probe_producer = Arc::new(engines::bulk_producer(&bench.engines.brokers, 0));
    let base_url = query_api.url.clone();
    let mut latencies: Vec<f64> = bench.runtime.block_on(async {
        let mut probes = Vec::new();
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        for index in 0..(seconds * 10) {
            tick.tick().await;
            let (producer, base_url, prefix) = (probe_producer.clone(), base_url.clone(), prefix.clone());
            probes.push(tokio::spawn(async move {
                let meeting_id = format!("mtg_probe_{index}");
                let (topic, key, line) = events::reader_meeting(&meeting_id, recap_readmodel::driver::now_micros());
                let (address, request) = load::get_request(&base_url, &format!("/meetings/{meeting_id}"));
                let mut connection = tokio::net::TcpStream::connect(&address).await.expect("connect");
                let _ = connection.set_nodelay(true);
                let sent = Instant::now();
                engines::send(&producer, &format!("{prefix}{topic}"), &key, &line);
                loop {
                    connection.write_all(&request).await.expect("request");
                    match load::read_response(&mut connection).await {
                        Some(200) => return Some(sent.elapsed().as_secs_f64() * 1e3),
                        // Polls back off with the wait (a 2% step, 2–50 ms): a late
                        // probe polling every 2 ms would load the store it waits on.
                        Some(404) if sent.elapsed() < Duration::from_secs(30) => {
                            tokio::time::sleep((sent.elapsed() / 50).clamp(Duration::from_millis(2), Duration::from_millis(50))).await
                        }
                        _ => return None,
                    }
                }
            }));
        }
        let mut latencies = Vec::new();
        for probe in probes {
            if let Some(latency) = probe.await.expect("probe") {
                latencies.push(latency);
            }
        }
        latencies
    });
    stop.store(true, Ordering::Relaxed);
    let sent = filler.join().expect("filler");
    let elapsed = started.elapsed().as_secs_f64();
    let applied_rate = (projector.accounted() - accounted_before) as f64 / elapsed;
    let probes = latencies.len();
    let (p50, p99, max) = load::percentiles(&mut latencies);
    println!("  {probes} of {} probes readable: p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms (targets p50 <= 100 ms, p99 <= 1000 ms)", seconds * 10);
    println!("  background: {sent} events sent, the projector accounted for {applied_rate:.0} events/s over the window");
}

use tokio::io::AsyncWriteExt;

/// One raw-driver read measurement on core 0 (the query-api's core), in a runtime of
/// its own: iterations per second.
fn raw_reads(engines: &Engines, keyspace: &str, concurrency: usize, seconds: u64, all_reads: bool) -> f64 {
    let (nodes, keyspace) = (engines.cluster(), keyspace.to_string());
    std::thread::spawn(move || {
        pin_current_thread(0);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        runtime.block_on(async {
            let session = Arc::new(load::session(&nodes).await);
            let reads = Arc::new(load::PageReads::prepare(&session, &keyspace).await);
            reads.closed_loop(&session, READER, concurrency, Duration::from_secs(1), all_reads).await;
            reads.closed_loop(&session, READER, concurrency, Duration::from_secs(seconds), all_reads).await
        })
    })
    .join()
    .expect("raw reads")
}

/// Section 4: connections of wrk, tasks of the raw loop, and seconds of each phase.
const REST_CONNECTIONS: usize = 32;
const REST_SECONDS: u64 = 8;

/// Section 4 (and the query-api's memory): both placements, the judged one first.
fn rest_vs_raw(bench: &Bench, query_api: &Role) {
    let (connections, seconds) = (REST_CONNECTIONS, REST_SECONDS);
    let url = format!("{}/meetings?limit=50", query_api.url);
    // `RECAP_BENCH_HOLD=<seconds>` keeps the query-api up for a profiler and prints what
    // to load (e.g. `perf record -p <pid>` while wrk runs).
    if let Some(seconds) = std::env::var("RECAP_BENCH_HOLD").ok().and_then(|value| value.parse::<u64>().ok()) {
        println!(
            "query-api pid {} url {url} token {} redis pid {} cassandra pid {:?}",
            query_api.pid(),
            events::TOKEN,
            bench.redis.pid(),
            engines::cassandra_pid()
        );
        std::thread::sleep(Duration::from_secs(seconds));
        return;
    }
    println!("GET /v1/meetings?limit=50, {connections} connections, {seconds} s, the query-api and the raw loop on core 0:");
    let judged = rest_rounds(bench, query_api, &url, Placement::StoreAlone);
    let shared = rest_rounds(bench, query_api, &url, Placement::Shared);
    match (judged, shared) {
        (Some(judged), Some(shared)) => {
            println!("  median ratio with the store on a core of its own: {judged:.2} (target >= 0.7); sharing both cores with the client side: {shared:.2}")
        }
        (_, Some(shared)) => println!("  median ratio sharing both cores with the client side: {shared:.2} (no store-alone placement here)"),
        _ => {}
    }
    time_inside(query_api);
    let (rss, hwm) = engines::memory_mib(query_api.pid());
    println!("  query-api after the load: VmRSS {rss:.0} MiB, VmHWM {hwm:.0} MiB (target <= 100 MiB)");
}

/// Where the processes of a REST round run. The query-api and the raw loop are always on
/// core 0, so each side's client gets the same core.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// Cassandra alone on core 1; Redis and wrk on core 0 with the query-api. The store
    /// has the same CPU in both phases, as when ScyllaDB runs on nodes of its own, so the
    /// ratio is the share of the store's read rate that reaches clients through the
    /// query-api. The target is judged here.
    StoreAlone,
    /// Cassandra and Redis free to use both cores, wrk on core 1: the client side's
    /// processes (wrk, Redis, the query-api) take CPU from the store, so the ratio is
    /// close to the ratio of the whole machine's CPU per read on each side. Printed as a
    /// diagnosis.
    Shared,
}

/// Rounds alternating the raw loop and the query-api in one placement; prints them and
/// returns the median of the rounds' ratios (none when the placement cannot be made:
/// pinning the store needs it on this machine).
fn rest_rounds(bench: &Bench, query_api: &Role, url: &str, placement: Placement) -> Option<f64> {
    let (connections, seconds) = (REST_CONNECTIONS, REST_SECONDS);
    let cassandra = engines::cassandra_pid();
    let (store_pin, _redis_pin, wrk_core) = match placement {
        Placement::StoreAlone => {
            let Some(cassandra) = cassandra else {
                println!(" Cassandra does not run on this machine: no store-alone placement");
                return None;
            };
            println!(
                " Cassandra alone on core 1; the query-api, Redis and wrk on core 0 (the store on a core of its own, as ScyllaDB on nodes of its own; judged):"
            );
            (Some(engines::Pinned::new(cassandra, "1")), Some(engines::Pinned::new(bench.redis.pid(), "0")), 0)
        }
        Placement::Shared => {
            println!(" Cassandra and Redis on both cores, wrk on core 1 (the store shares the machine with the client side; diagnosis):");
            let free = engines::bench_cores();
            if let Some(cassandra) = cassandra.filter(|&cassandra| !engines::held_to(cassandra, &free)) {
                let cores = engines::thread_cores(cassandra);
                println!("  warning: Cassandra's threads may use cores {cores:?}, not {free}: these rounds do not share every core");
            }
            (None, None, 1)
        }
    };
    load::wrk(url, connections, 2, wrk_core);
    let period_counter = || -> u64 {
        let keys = bench.redis.cli(&["--scan", "--pattern", &format!("{}:limit:*period*", bench.id)]);
        keys.lines().map(|key| bench.redis.cli(&["GET", key.trim()]).trim().parse::<u64>().unwrap_or(0)).sum()
    };
    // Where the CPU goes: Cassandra, Redis, the query-api and this process (the raw loop),
    // with the machine's idle time. Sharing, both sides keep the two cores busy, so the
    // ratio is close to the ratio of the CPU each side spends per read; with the store
    // alone, both sides are bound by its core and core 0 keeps idle time, so it is not.
    struct Snapshot {
        processes: [engines::Usage; 4],
        machine: (u64, u64),
    }
    let usages = || Snapshot {
        processes: [
            cassandra.map(engines::usage).unwrap_or_default(),
            engines::usage(bench.redis.pid()),
            engines::usage(query_api.pid()),
            engines::usage(std::process::id()),
        ],
        machine: engines::machine_ticks(),
    };
    // One side's phase of a round: CPU usages around it and, for the query-api, the
    // Redis calls and the period counter around it.
    struct Phase<T> {
        before: Snapshot,
        result: T,
        after: Snapshot,
    }
    struct RedisCounts {
        calls: std::collections::HashMap<String, u64>,
        counted: u64,
    }
    let (mut recap_best, mut raw_best, mut ratios) = (0f64, 0f64, Vec::new());
    for round in 0..env_usize("RECAP_BENCH_REST_ROUNDS", 3).max(1) {
        let measure_raw = || {
            let before = usages();
            let result = raw_reads(&bench.engines, &bench.keyspace, connections, seconds, false);
            Phase { before, result, after: usages() }
        };
        let measure_recap = || {
            let redis_before = RedisCounts { calls: bench.redis.command_calls(), counted: period_counter() };
            let before = usages();
            let result = load::wrk(url, connections, seconds, wrk_core);
            let after = usages();
            (Phase { before, result, after }, redis_before, RedisCounts { calls: bench.redis.command_calls(), counted: period_counter() })
        };
        // Odd rounds measure the query-api first, so a drift of the machine's speed
        // across a round favours neither side.
        let (raw_phase, (recap_phase, redis_before, redis_after)) = if round % 2 == 0 {
            let raw = measure_raw();
            (raw, measure_recap())
        } else {
            let recap = measure_recap();
            (measure_raw(), recap)
        };
        let Phase { before: before_raw, result: raw, after: after_raw } = raw_phase;
        let Phase { before, result, after } = recap_phase;
        let (calls_before, calls_after) = (redis_before.calls, redis_after.calls);
        let (counted_before, counted_after) = (redis_before.counted, redis_after.counted);
        let delta = |name: &str| calls_after.get(name).copied().unwrap_or(0) - calls_before.get(name).copied().unwrap_or(0);
        let all_calls: u64 = calls_after.keys().map(|name| delta(name)).sum::<u64>() - delta("info") - delta("scan") - delta("get");
        let counted = counted_after - counted_before;
        println!("  round {round}: raw SELECT loop {raw:>8.0}/s   recap query-api {:>8.0} req/s   ratio {:.2}", result.rate, result.rate / raw);
        println!(
            "           redis: {counted} counted requests (period counter; wrk completed {}), evalsha {} + eval {} calls = {:.3} round trips per counted request",
            result.requests,
            delta("evalsha"),
            delta("eval"),
            (delta("evalsha") + delta("eval")) as f64 / counted.max(1) as f64
        );
        println!(
            "           ({} further calls counted by INFO commandstats are the script's own commands, inside those round trips)",
            all_calls - delta("evalsha") - delta("eval")
        );
        // The raw loop's 1 s warm-up runs at about the measured rate.
        let raw_reads_done = raw * (seconds + 1) as f64;
        let cpu = |from: &Snapshot, to: &Snapshot, index: usize, count: f64| {
            (to.processes[index].cpu_seconds - from.processes[index].cpu_seconds) * 1e6 / count.max(1.0)
        };
        let wakeups =
            |from: &Snapshot, to: &Snapshot, count: f64| (to.processes[0].voluntary_switches - from.processes[0].voluntary_switches) as f64 / count.max(1.0);
        // wrk is this process's one waited-for child during the query-api's phase.
        let wrk_cpu =
            |from: &Snapshot, to: &Snapshot, count: f64| (to.processes[3].children_cpu_seconds - from.processes[3].children_cpu_seconds) * 1e6 / count.max(1.0);
        let idle = |from: &Snapshot, to: &Snapshot| {
            let (idle, total) = (to.machine.0 - from.machine.0, to.machine.1 - from.machine.1);
            idle as f64 * 100.0 / total.max(1) as f64
        };
        let served = result.requests as f64;
        println!(
            "           CPU per read: raw loop: Cassandra {:.0} µs ({:.1} thread wake-ups), the loop {:.0} µs; query-api: Cassandra {:.0} µs ({:.1} wake-ups), query-api {:.0} µs, Redis {:.0} µs",
            cpu(&before_raw, &after_raw, 0, raw_reads_done),
            wakeups(&before_raw, &after_raw, raw_reads_done),
            cpu(&before_raw, &after_raw, 3, raw_reads_done),
            cpu(&before, &after, 0, served),
            wakeups(&before, &after, served),
            cpu(&before, &after, 2, served),
            cpu(&before, &after, 1, served),
        );
        let raw_total = cpu(&before_raw, &after_raw, 0, raw_reads_done) + cpu(&before_raw, &after_raw, 3, raw_reads_done);
        let recap_total = [0, 1, 2].iter().map(|&index| cpu(&before, &after, index, served)).sum::<f64>() + wrk_cpu(&before, &after, served);
        println!(
            "           the whole machine per read: raw side {raw_total:.0} µs ({:.0}% idle); query-api side {recap_total:.0} µs with wrk's {:.0} µs ({:.0}% idle); ratio of the two {:.2}",
            idle(&before_raw, &after_raw),
            wrk_cpu(&before, &after, served),
            idle(&before, &after),
            raw_total / recap_total.max(1.0)
        );
        recap_best = recap_best.max(result.rate);
        raw_best = raw_best.max(raw);
        ratios.push(result.rate / raw);
    }
    let median = stats::median(&mut ratios);
    let rounds: Vec<String> = ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
    println!("  round ratios, sorted: {}; median {median:.2}", rounds.join(", "));
    let all_reads = raw_reads(&bench.engines, &bench.keyspace, connections, seconds, true);
    println!("  best of each: {recap_best:.0} / {raw_best:.0} = {:.2}", recap_best / raw_best);
    println!("  raw loop issuing every read of a request (token, account, page): {all_reads:.0}/s; recap / that = {:.2}", recap_best / all_reads);
    if store_pin.is_some() && cassandra.is_some_and(|cassandra| !engines::held_to(cassandra, "1")) {
        println!(
            "  warning: Cassandra's threads left core 1 during these rounds (a `make up` gives an engine every core back): they are not store-alone rounds"
        );
    }
    Some(median)
}

/// Where a request's time goes, from the query-api's own histograms (`/metrics`): the
/// mean of each HTTP route and store operation over everything it served.
fn time_inside(query_api: &Role) {
    let metrics = engines::http_get(&format!("{}metrics", query_api.admin_url)).1;
    let mut series: Vec<(String, f64, f64)> = Vec::new();
    for (family, sum_suffix) in [("http_server_request_duration_seconds", "_sum"), ("db_client_operation_duration_seconds", "_sum")] {
        for line in metrics.lines().filter(|line| line.starts_with(&format!("{family}{sum_suffix}{{"))) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let labels = labels.trim_start_matches(&format!("{family}{sum_suffix}"));
            let count_line = format!("{family}_count{labels} ");
            let count = metrics.lines().find_map(|line| line.strip_prefix(&count_line)).and_then(|count| count.trim().parse::<f64>().ok()).unwrap_or(0.0);
            let wanted = ["http_route", "db_operation_name", "db_collection_name"];
            let label_text: Vec<&str> =
                labels.trim_matches(|c| c == '{' || c == '}').split(',').filter(|pair| wanted.iter().any(|name| pair.starts_with(name))).collect();
            series.push((format!("{family} {}", label_text.join(",")), value.parse().unwrap_or(0.0), count));
        }
    }
    println!("  inside the query-api (its own histograms, every request it served):");
    for (name, sum, count) in series.iter().filter(|(_, _, count)| *count > 0.0) {
        println!("    {name}: {count:.0} × mean {:.2} ms", sum / count * 1000.0);
    }
}

fn main() {
    let only = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let wants = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    // The soak runs only when asked for by name: a quarter of an hour of its own.
    if only.as_deref() == Some("soak") {
        soak::soak();
        return;
    }
    let events_per_round = env_usize("RECAP_BENCH_RATIO_EVENTS", 100_000);
    let backlog = env_usize("RECAP_BENCH_EVENTS", 1_000_000);
    let read_rate = env_usize("RECAP_BENCH_READ_RATE", 100) as f64;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let engines = Engines::from_env();
    let id = engines::run_id();
    let redis = PrivateRedis::start();
    let keyspace = format!("recap_{id}");
    let raw_keyspace = format!("recap_{id}_raw");
    let mut bench =
        Bench { runtime, engines, redis, keyspace, raw_keyspace, prefixes: Vec::new(), mix: DemoMix::new(), dir: tempfile::tempdir().expect("temp dir"), id };
    let started = Instant::now();
    engines::migrate(&bench.envs("unused."));
    engines::migrate(&engines::role_envs(&bench.engines, &bench.id, "unused.", &bench.raw_keyspace, &bench.redis.url()));
    println!(
        "run {} (keyspaces migrated in {:.1} s; the demo mix is {} events a copy)",
        bench.id,
        started.elapsed().as_secs_f64(),
        bench.mix.events_per_copy()
    );

    let mut max_rate = None;
    if wants("projector") {
        max_rate = Some(projector_vs_raw(&mut bench, events_per_round));
    }
    if wants("projector") || wants("split") {
        projector_split(&bench, 10_000);
    }
    if wants("drain") || wants("freshness") || wants("rest") {
        let (projector, query_api, drain_rate) = drain_under_reads(&mut bench, backlog, read_rate);
        let max_rate = drain_rate.max(max_rate.unwrap_or(0.0));
        if wants("freshness") {
            freshness(&mut bench, &projector, &query_api, max_rate / 2.0);
            let (rss, hwm) = engines::memory_mib(projector.pid());
            println!("  projector after the drain and the freshness load: VmRSS {rss:.0} MiB, VmHWM {hwm:.0} MiB (target <= 200 MiB)");
            std::thread::sleep(engines::LAG_CHECK);
            println!("  partition lag reported by the idle projector: {}", engines::http_get(&format!("{}progress", projector.admin_url)).1);
        }
        projector.stop();
        if wants("rest") {
            rest_vs_raw(&bench, &query_api);
        }
        query_api.stop();
    }
    if wants("webhooks") {
        webhooks::webhooks_vs_projector(&mut bench);
    }
    if wants("requests") {
        println!("rows written one a request vs the driver's requests (rows of one partition key in one unlogged batch), 32 in flight:");
        let session = bench.runtime.block_on(load::session(&bench.engines.cluster()));
        bench.runtime.block_on(load::requests_vs_rows(&session, &bench.raw_keyspace, env_usize("RECAP_BENCH_REQUEST_ROWS", 100_000), 32));
    }
    println!("total {:.0} s", started.elapsed().as_secs_f64());
    let _ = std::fs::remove_file(engines::recap_bin());
}

impl Drop for Bench {
    /// The run's topics and keyspaces go, whether the run finished or panicked.
    fn drop(&mut self) {
        for prefix in &self.prefixes {
            self.runtime.block_on(engines::delete_topics(&self.engines.brokers, prefix));
        }
        for keyspace in [&self.keyspace, &self.raw_keyspace] {
            self.runtime.block_on(engines::drop_keyspace(&self.engines, keyspace));
        }
    }
}
