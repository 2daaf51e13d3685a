//! Benchmarks of the embedded edition, each measured side by side in one run (this
//! machine is shared and noisy, so ratios matter more than absolute numbers):
//!
//! 1. projector throughput on the demo event mix, and the ratio against a loop that
//!    writes the same rows straight through the driver;
//! 2. resident memory of `recap serve --demo` once the demo world is loaded;
//! 3. the cost of a page of 50 meetings on an account with 1,000 and with 100,000
//!    meetings (first page and a page deep in the list).
//!
//! Run with `make bench` (or `cargo bench --bench embedded`).

// The binary's global allocator lives in the recap library: link it, so the
// benchmark measures what `recap` runs.
extern crate recap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use recap_lmdb::EmbeddedDriver;
use recap_projector::{EmbeddedProjector, EventLog, LoopConfig};
use recap_readmodel::{Batch, Driver, MeetingFilter, ReadModel, Val};
use recap_schemas::build::{Epoch, Events};
use recap_testkit::bench::child;
use recap_testkit::FaultyDriver;

/// The demo world, copied with fresh identifiers until it has at least `events` events.
fn demo_mix(events: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut copy = 0;
    while lines.len() < events {
        let world = recap::demo::world(1_800_000_000_000_000);
        for envelope in world.events {
            let mut event = serde_json::to_value(&envelope).expect("a demo event");
            if let Some(data) = event.get_mut("data") {
                rename_ids(data, copy);
            }
            lines.push(event.to_string());
        }
        copy += 1;
    }
    lines
}

/// Gives every identifier value (never a field name or an event type) a copy prefix.
fn rename_ids(value: &mut serde_json::Value, copy: usize) {
    const PREFIXES: [&str; 9] = ["acc_", "team_", "shr_", "mtg_", "tok_", "ai_", "tai_", "ser_", "doc_"];
    match value {
        serde_json::Value::String(text) => {
            if let Some(prefix) = PREFIXES.iter().find(|prefix| text.starts_with(**prefix)) {
                *text = format!("{prefix}{copy}_{}", &text[prefix.len()..]);
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| rename_ids(item, copy)),
        serde_json::Value::Object(fields) => fields.values_mut().for_each(|field| rename_ids(field, copy)),
        _ => {}
    }
}

async fn projector_throughput() {
    let lines = demo_mix(40_000);
    let events = lines.len();
    let dir = tempfile::tempdir().expect("a temp dir");
    let log_path = dir.path().join("events.log");
    EventLog::new(&log_path).append("bench", (lines.join("\n") + "\n").as_bytes()).expect("appending the mix to the log");

    // The rows the projection writes, captured once (untimed).
    let recording = Arc::new(FaultyDriver::new(Arc::new(EmbeddedDriver::open(&dir.path().join("record.lmdb")).expect("opening the recording store"))));
    recording.record_writes();
    let progress = EmbeddedProjector::new(recording.clone(), EventLog::new(&log_path), dir.path().join("dl0"), LoopConfig::default())
        .drain()
        .await
        .expect("projecting the mix");
    // Every copy of the mix is valid and known: the figure is for applied events only.
    assert_eq!((progress.applied + progress.stale, progress.skipped_unknown, progress.dead_lettered), (events as u64, 0, 0), "{progress:?}");
    let batches = recording.take_recorded();
    let rows: usize = batches.iter().map(Vec::len).sum();

    let mut projector_best = Duration::MAX;
    let mut raw_best = Duration::MAX;
    for round in 0..3 {
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join(format!("projector{round}.lmdb"))).expect("opening the projector store"));
        let projector = EmbeddedProjector::new(driver, EventLog::new(&log_path), dir.path().join(format!("dl{round}")), LoopConfig::default());
        let started = Instant::now();
        projector.drain().await.expect("projecting the mix");
        projector_best = projector_best.min(started.elapsed());

        let raw: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join(format!("raw{round}.lmdb"))).expect("opening the raw store"));
        let copies = batches.clone();
        let started = Instant::now();
        for batch in copies {
            raw.write(batch).await.expect("raw write");
        }
        raw_best = raw_best.min(started.elapsed());
    }
    let projector_rate = events as f64 / projector_best.as_secs_f64();
    let raw_rate = events as f64 / raw_best.as_secs_f64();
    println!("projector, demo event mix: {events} events, {rows} row writes");
    println!("  projector          {projector_rate:>10.0} events/s   (target >= 20000)");
    println!("  raw driver loop    {raw_rate:>10.0} events/s   (the same rows, the same batches)");
    println!("  ratio              {:>10.2}            (target >= 0.6)", projector_rate / raw_rate);
}

fn serve_demo_rss() {
    let binary = std::path::PathBuf::from(env!("CARGO_BIN_EXE_recap"));
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut child = child::ends_with_this_process(&mut std::process::Command::new(&binary))
        .args(["serve", "--demo", "--rest-listen", "127.0.0.1:0", "--mcp-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("RECAP_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting recap serve --demo");
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped standard output");
    // The rest of the output is drained, so the server never writes into a closed pipe.
    let (found, admin_url) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.split("admin_url ").nth(1) {
                let _ = found.send(url.trim().to_string());
            }
        }
    });
    let admin = admin_url.recv_timeout(Duration::from_secs(60)).expect("recap serve printed its admin_url");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = ureq::get(&format!("{admin}progress")).call().expect("GET /progress").into_body().read_to_string().expect("the /progress body");
        if body.contains("\"caught_up\":true") || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("the process status");
    let rss = status.lines().find(|line| line.starts_with("VmRSS")).unwrap_or("VmRSS: ?").to_string();
    let _ = child.kill();
    let _ = child.wait();
    println!("recap serve --demo after loading the demo world: {} (target <= 150 MiB)", rss.split_whitespace().skip(1).collect::<Vec<_>>().join(" "));
}

async fn account_with_meetings(dir: &std::path::Path, name: &str, meetings: usize) -> ReadModel {
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.join(format!("{name}.lmdb"))).expect("opening the store"));
    // One meeting a minute from 2023-11-14.
    let events = Events::new(Epoch::from_unix_seconds(1_700_000_000));
    let mut position = 0;
    for chunk_start in (0..meetings).step_by(5_000) {
        let mut batch = Batch::new(driver.clone());
        for index in chunk_start..(chunk_start + 5_000).min(meetings) {
            let created = events.minute(index as i64);
            let note = events.note(format!("n{index}")).title("n").text("text");
            let meeting = events.meeting("acc", format!("mtg_{index:06}")).title(format!("Meeting {index}")).note(note).times(created);
            position += 1;
            batch.apply(&meeting.id(format!("e{index}")).occurred_at(created).envelope(), position).await.expect("apply");
        }
        driver.write(batch.into_mutations()).await.expect("write");
    }
    ReadModel::new(driver)
}

async fn page_cost() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let small = account_with_meetings(dir.path(), "small", 1_000).await;
    let large = account_with_meetings(dir.path(), "large", 100_000).await;
    let deep = |readmodel: &ReadModel, count: usize| {
        let readmodel = readmodel.clone();
        async move {
            // A cursor half way down the account's meetings.
            let mut after = None;
            for _ in 0..(count / 2 / 50) {
                after = readmodel.meetings("acc", &MeetingFilter::default(), after.as_deref(), 50).await.expect("a page").last_key().map(<[Val]>::to_vec);
            }
            after
        }
    };
    let small_deep = deep(&small, 1_000).await;
    let large_deep = deep(&large, 100_000).await;
    let rounds = 3_000;
    let mut timings = [Duration::ZERO; 4];
    for _ in 0..5 {
        for (slot, (readmodel, after)) in [(&small, None), (&large, None), (&small, small_deep.clone()), (&large, large_deep.clone())].into_iter().enumerate() {
            // As GET /v1/meetings reads a page: bodies straight into the response buffer.
            let mut out = Vec::with_capacity(64 << 10);
            let started = Instant::now();
            for _ in 0..rounds / 5 {
                out.clear();
                let page = readmodel.meetings_into("acc", &MeetingFilter::default(), after.as_deref(), 50, &mut out).await.expect("a page");
                assert_eq!(page.count, 50);
            }
            timings[slot] += started.elapsed();
        }
    }
    let per_page = |slot: usize| timings[slot].as_secs_f64() * 1e6 / rounds as f64;
    println!("a page of 50 meetings (read model, {rounds} pages each, interleaved):");
    println!(
        "  first page   1,000 meetings {:>8.1} us   100,000 meetings {:>8.1} us   ratio {:.2} (target <= 1.2)",
        per_page(0),
        per_page(1),
        per_page(1) / per_page(0)
    );
    println!(
        "  middle page  1,000 meetings {:>8.1} us   100,000 meetings {:>8.1} us   ratio {:.2} (target <= 1.2)",
        per_page(2),
        per_page(3),
        per_page(3) / per_page(2)
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("the runtime");
    let only = std::env::args().nth(1).filter(|arg| !arg.starts_with('-'));
    let wants = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    if wants("projector") {
        runtime.block_on(projector_throughput());
    }
    if wants("rss") {
        serve_demo_rss();
    }
    if wants("pages") {
        runtime.block_on(page_cost());
    }
}
