//! The delivery queue's rules (docs/webhooks.md, Delivery): first attempts have no row
//! (the message log is their queue, its position committed once they settle), retries
//! are rows partitioned by the minute they are due, and no scan reads a past minute
//! again. The feed's reads without a cursor likewise start at the oldest message kept,
//! not at the partition's start. Over the embedded store, or a Cassandra keyspace with
//! `RECAP_TEST_WORLD=cassandra`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use recap_readmodel::messages::{AccountMessage, MessageKind};
use recap_readmodel::tables::WEBHOOK_DELIVERIES;
use recap_readmodel::webhooks::{minute_of, minute_start, Delivery, DueDelivery, WebhookStore};
use recap_readmodel::{Mutation, Op, Val};
use recap_webhooks::shards::GRACE;
use recap_webhooks::{ManualClock, Shards};

const SECOND: i64 = 1_000_000;
const HOUR: i64 = 3_600 * SECOND;

fn delivery(index: usize) -> Delivery {
    Delivery {
        account_id: "acc_a".into(),
        endpoint_id: "ep".into(),
        endpoint_created_version: Some(1),
        message_id: format!("msg_{index:032}"),
        seq: index as i64,
        attempt: 2,
    }
}

/// The fastest of `rounds` timings of `reads` reads of the shard's queue from its low
/// minute to `now`, as a scan of a shard newly held (and the queue count) reads it.
async fn scan_time(store: &WebhookStore, shards: &Shards, shard: &str, now: i64) -> Duration {
    let low = shards.low(shard).expect("prepared");
    let mut fastest = Duration::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..20 {
            assert!(store.due_between(shard, minute_start(low), now, 2_000).await.unwrap().is_empty());
        }
        fastest = fastest.min(started.elapsed());
    }
    fastest
}

/// Removed deliveries leave nothing a scan steps over: their rows are gone outright
/// from the embedded store, and on ScyllaDB their tombstones stay in minutes that are
/// past, which no scan reads once the low minute moved beyond them (a single partition
/// of 200,000 tombstones would exceed Cassandra's `tombstone_failure_threshold`, and the
/// read would fail). The scans' times are printed beside an empty shard's, not judged:
/// what is judged is where the scans start and that they succeed.
#[tokio::test]
async fn a_shard_with_200000_removed_deliveries_scans_from_past_all_of_them() {
    let setup = setup().await;
    let store = &setup.webhooks;
    let shards = Shards::fixed(&["busy", "empty"]);
    let earlier = START - 2 * HOUR;
    shards.prepare(store, "busy", earlier).await.unwrap();
    shards.prepare(store, "empty", earlier).await.unwrap();
    let removed = 200_000;
    // Scheduled over the hour that followed, then made and removed, as the deliverer
    // removes a retry once its attempt is recorded.
    for chunk in (0..removed).step_by(10_000) {
        let due: Vec<DueDelivery> = (chunk..chunk + 10_000)
            .map(|index| DueDelivery { shard: "busy".into(), due_at: earlier + index as i64 * (HOUR / removed as i64), delivery: delivery(index) })
            .collect();
        store.write(due.iter().map(|due| store.retry_row("busy", due.due_at, &due.delivery)).collect()).await.unwrap();
        store.write(due.iter().map(|due| store.retry_done_row(due)).collect()).await.unwrap();
    }
    assert!(store.scheduled("busy", earlier, earlier + HOUR).await.unwrap().is_empty(), "every delivery was removed");

    // A sweep an hour later moves the low minute past the removed ones.
    shards.sweep(START);
    shards.advance_low(store, "busy", START).await.unwrap();
    shards.advance_low(store, "empty", START).await.unwrap();
    let low = shards.low("busy").unwrap();
    assert_eq!(low, minute_of(START - GRACE), "the low minute is past every minute that held the removed deliveries");
    assert_eq!(store.shard_state("busy").await.unwrap().map(|state| state.low_minute), Some(low), "and kept in the store");
    assert!(minute_start(low) > earlier + HOUR);

    let busy = scan_time(store, &shards, "busy", START).await;
    let empty = scan_time(store, &shards, "empty", START).await;
    eprintln!("20 scans: shard with {removed} removed deliveries {busy:?}, empty shard {empty:?}");
}

/// What a receiver answered, by path and `webhook-id`, in order.
type Answers = Arc<Mutex<Vec<(String, String, String, u16)>>>;

/// A receiver on loopback taking `delay` a request: `/flaky` answers 500 to the first
/// request of each message and 200 after, anything else 200.
async fn receiver(delay: Duration) -> (String, Answers) {
    let answers: Answers = Arc::default();
    let app = {
        let answers = answers.clone();
        axum::Router::new().fallback(move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: String| {
            let answers = answers.clone();
            async move {
                tokio::time::sleep(delay).await;
                let id = headers.get("webhook-id").and_then(|id| id.to_str().ok()).unwrap_or_default().to_owned();
                let path = uri.path().to_owned();
                let mut answers = answers.lock().unwrap();
                let seen = answers.iter().any(|(seen_path, seen_id, _, _)| *seen_path == path && *seen_id == id);
                let status = if path == "/flaky" && !seen { 500 } else { 200 };
                answers.push((path, id, body, status));
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        })
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, answers)
}

fn queue_runtime(setup: &Setup, clock: &ManualClock, driver: Arc<dyn recap_readmodel::Driver>) -> recap_webhooks::Runtime {
    let mut runtime = runtime(setup, clock, Duration::from_secs(5));
    runtime.store = WebhookStore::new(driver.clone(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    runtime.driver = driver;
    // One request at a time an endpoint, and a queued first attempt written as a row at
    // the first look: every kind of write the queue makes happens in a short run.
    runtime.deliverer.per_endpoint = 1;
    runtime.deliverer.first_attempt_hold = Duration::ZERO;
    runtime
}

/// A process killed (`kill -9`) after any number of its writes, whichever step of the
/// queue that write was (the claims, the feed rows and heads, the shard's state, a first
/// attempt written as a row, an attempt's record and retry row, a row's removal, the
/// position and the outbox rows it passes), loses no delivery: the next process makes
/// every delivery not recorded, with the same `webhook-id` and body.
#[tokio::test]
async fn a_kill_at_every_step_of_the_queue_loses_nothing() {
    let mut step = 0;
    loop {
        let setup = setup().await;
        let (url, answers) = receiver(Duration::from_millis(30)).await;
        setup.endpoint("acc_a", "ep_ok", &format!("{url}/ok"), &[], true, 1).await;
        setup.endpoint("acc_a", "ep_flaky", &format!("{url}/flaky"), &[], true, 1).await;
        let messages: Vec<(i64, AccountMessage)> =
            (1..=6).map(|seq| (seq, message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
        setup.outbox(&messages).await;
        let ids: BTreeSet<String> = messages.iter().map(|(_, message)| message.message.id.clone()).collect();
        let clock = ManualClock::at(START);
        let faulty = recap_testkit::FaultyDriver::new(setup.driver());
        faulty.crash_after_writes(step);
        let (_stop, task) = start(queue_runtime(&setup, &clock, Arc::new(faulty.clone())));
        let delivered_at = |answers: &Answers, path: &str| -> BTreeSet<String> {
            answers.lock().unwrap().iter().filter(|(seen, _, _, status)| seen == path && *status == 200).map(|(_, id, _, _)| id.clone()).collect()
        };
        // Until the write past the crash point, or (a run that never reaches it) until
        // everything is delivered, recorded and passed by the position.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !faulty.crashed() {
            if delivered_at(&answers, "/ok") == ids && committed_position(&setup).await == 6 {
                break;
            }
            assert!(Instant::now() < deadline, "step {step}: the run neither crashed nor ended");
            clock.advance(Duration::from_secs(6));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let crashed = faulty.crashed();
        task.abort();
        let _ = task.await;

        let (stop, task) = start(queue_runtime(&setup, &clock, setup.driver()));
        let deadline = Instant::now() + Duration::from_secs(10);
        while delivered_at(&answers, "/ok") != ids || delivered_at(&answers, "/flaky") != ids {
            assert!(Instant::now() < deadline, "step {step}: after the restart, not every delivery was made: {:?}", answers.lock().unwrap());
            // The flaky endpoint's retries come due.
            clock.advance(Duration::from_secs(6));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A retry the crashed run scheduled may still wait for its time although a replayed
        // first attempt made the delivery meanwhile: it is made again once due.
        eventually("every delivery is recorded and the position passes every message", || async {
            clock.advance(Duration::from_secs(6));
            committed_position(&setup).await == 6 && pending(&setup, &clock).await.is_empty()
        })
        .await;
        let _ = stop.send(true);
        task.await.unwrap();
        let mut bodies: BTreeMap<String, String> = BTreeMap::new();
        for (_, id, body, _) in answers.lock().unwrap().iter() {
            assert!(ids.contains(id), "step {step}: only the messages appended are sent");
            let first = bodies.entry(id.clone()).or_insert_with(|| body.clone());
            assert_eq!(first, body, "step {step}: a repeat carries the same body");
            assert_eq!(serde_json::from_str::<serde_json::Value>(body).unwrap()["id"], id.as_str());
        }
        if !crashed {
            eprintln!("a run without a crash made {step} writes or fewer; a kill after each of them was tried");
            assert!(step > 10, "a run makes more writes than {step}");
            break;
        }
        step += 1;
    }
}

/// A dead endpoint's first attempts beyond its slots wait in the window at most the
/// hold, then are written as rows; those under way hold the position at most the
/// attempt's timeout. So the position passes every other endpoint's messages, and a
/// restart sends them no repeats, while the dead endpoint's deliveries wait in the
/// store.
#[tokio::test]
async fn a_dead_endpoints_backlog_does_not_hold_other_endpoints_first_attempts() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_dead", "ep_dead", &format!("{}/hang", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_live", "ep_live", &format!("{}/live", receiver.url), &[], true, 1).await;
    let mut messages = Vec::new();
    for index in 0..12i64 {
        messages.push((2 * index + 1, message("acc_dead", MessageKind::MeetingCreated, &format!("evt_d{index}"), &format!("mtg_{index}"))));
        messages.push((2 * index + 2, message("acc_live", MessageKind::MeetingCreated, &format!("evt_l{index}"), &format!("mtg_{index}"))));
    }
    setup.outbox(&messages).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(1));
    runtime.deliverer.first_attempt_hold = Duration::from_millis(200);
    let (_stop, task) = start(runtime);

    let started = Instant::now();
    eventually("the position passes every message", || async { committed_position(&setup).await == 24 }).await;
    let passed_in = started.elapsed();
    assert!(passed_in < Duration::from_secs(4), "passed in {passed_in:?}: the hold and one attempt's timeout, not the backlog's");
    assert_eq!(receiver.count("/live"), 12);
    let dead: BTreeSet<String> =
        messages.iter().filter(|(_, message)| message.account_id == "acc_dead").map(|(_, message)| message.message.id.clone()).collect();
    eventually("each of the dead endpoint's deliveries has a row", || async {
        pending(&setup, &clock).await.iter().map(|due| due.delivery.message_id.clone()).collect::<BTreeSet<_>>() == dead
    })
    .await;
    // Killed, then started again with the dead endpoint still hanging.
    task.abort();
    let _ = task.await;
    let (stop, task) = start(runtime_with_hold(&setup, &clock));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(receiver.count("/live"), 12, "the live endpoint's messages were behind the position: not sent again");
    assert_eq!(pending(&setup, &clock).await.len(), 12, "the dead endpoint's deliveries still wait in the store");
}

/// A backlog past the deliverer's window, which drains: each batch's ingest waits for
/// room while room is freed, so every first attempt goes over in memory and none is
/// written as a row (a row the deliverer would then read and remove). Without that wait
/// the same run writes rows: the receiver takes 20 ms an answer, one at a time, so the
/// reader outruns the window on either store.
#[tokio::test]
async fn a_backlog_past_the_window_goes_over_in_memory_as_the_window_drains() {
    for wait in [Duration::from_secs(5), Duration::ZERO] {
        let setup = setup().await;
        let (url, answers) = receiver(Duration::from_millis(20)).await;
        setup.endpoint("acc_a", "ep", &format!("{url}/ok"), &[], true, 1).await;
        let messages: Vec<(i64, AccountMessage)> =
            (1..=60).map(|seq| (seq, message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
        setup.outbox(&messages).await;
        let clock = ManualClock::at(START);
        let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
        runtime.deliverer.window = 10;
        runtime.deliverer.per_endpoint = 1;
        runtime.outbox.batch = 10;
        // When it waits, far longer than an answer takes.
        runtime.deliverer.room_wait = recap_webhooks::handoff::RoomWait { limit: wait, probe: wait };
        let stats = runtime.stats.clone();
        let (stop, task) = start(runtime);
        let delivered = || answers.lock().unwrap().iter().map(|(_, id, _, _)| id.clone()).collect::<BTreeSet<String>>().len();
        eventually("every message delivered", || async { delivered() == 60 }).await;
        eventually("the position passes every message", || async { committed_position(&setup).await == 60 }).await;
        let _ = stop.send(true);
        task.await.unwrap();
        let rows = stats.written_as_rows.load(std::sync::atomic::Ordering::Relaxed);
        if wait.is_zero() {
            assert!(rows > 0, "without the wait, the reader runs ahead of the window and writes rows");
        } else {
            assert_eq!(rows, 0, "every first attempt went over in memory");
        }
    }
}

/// The queue figures (`recap.webhooks.queue_depth`, `recap.webhooks.oldest_pending_age`)
/// count both kinds of pending delivery: a first attempt under way, which has no row,
/// and the rows due now behind it.
#[tokio::test]
async fn queue_depth_and_the_oldest_due_count_first_attempts_under_way_and_rows_due() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_dead", "ep_dead", &format!("{}/hang", receiver.url), &[], true, 1).await;
    let messages: Vec<_> =
        (1..=3i64).map(|seq| (seq, message("acc_dead", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
    setup.outbox(&messages).await;
    let clock = ManualClock::at(START);
    let mut runtime = queue_runtime(&setup, &clock, setup.driver());
    runtime.deliverer.queue_interval = Duration::from_millis(10);
    let stats = runtime.stats.clone();
    let (stop, task) = start(runtime);

    eventually("one attempt under way, two rows due", || async { receiver.count("/hang") == 1 && pending(&setup, &clock).await.len() == 2 }).await;
    eventually("the figures count all three", || async { stats.queue_depth.load(std::sync::atomic::Ordering::Relaxed) == 3 }).await;
    let soonest = stats.soonest_due_micros.load(std::sync::atomic::Ordering::Relaxed);
    assert!(soonest > 0 && soonest <= START, "the oldest is due by now: {soonest}");
    let _ = stop.send(true);
    task.await.unwrap();
}

fn runtime_with_hold(setup: &Setup, clock: &ManualClock) -> recap_webhooks::Runtime {
    let mut runtime = runtime(setup, clock, Duration::from_secs(1));
    runtime.deliverer.first_attempt_hold = Duration::from_millis(200);
    runtime
}

/// Upgrading keeps every pending delivery: the rows of `webhook_deliveries`, the queue
/// before `webhook_retries`, are moved once by the first process that holds their shard
/// (due when they were, or at once if that is past) and delivered with their attempt
/// numbers; the old partition is not read again.
#[tokio::test]
async fn deliveries_pending_in_the_table_before_are_moved_once_and_made() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let store = &setup.webhooks;
    // As the previous runtime left them: two messages in the feed, their outbox rows
    // consumed (the position past them), a first attempt due and a retry due later.
    let first = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
    let second = message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1");
    store.claim_many(&[("acc_a", 1, &first.message), ("acc_a", 2, &second.message)]).await.unwrap();
    store.write(vec![store.feed_row("acc_a", 1, &first.message), store.feed_row("acc_a", 2, &second.message), store.head_row("acc_a", 2)]).await.unwrap();
    let old_row = |due_at: i64, message: &AccountMessage, seq: i64, attempt: u32| {
        let delivery = Delivery {
            account_id: "acc_a".into(),
            endpoint_id: "ep".into(),
            endpoint_created_version: Some(1),
            message_id: message.message.id.clone(),
            seq,
            attempt,
        };
        Mutation {
            table: &WEBHOOK_DELIVERIES,
            partition: vec![Val::text("0")],
            clustering: vec![Val::Int(due_at), Val::text(delivery.id())],
            op: Op::Put { body: serde_json::to_string(&delivery).unwrap(), expires_at: None },
            ts: due_at,
        }
    };
    let position = Mutation {
        table: &recap_readmodel::tables::POSITIONS,
        partition: vec![Val::text("webhooks")],
        clustering: vec![],
        op: Op::Put { body: r#"{"seq":2}"#.into(), expires_at: None },
        ts: 2,
    };
    setup.driver().write(vec![old_row(START - SECOND, &first, 1, 1), old_row(START + 5 * SECOND, &second, 2, 3), position]).await.unwrap();

    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    let received = receiver.wait_for(|received| received.len() == 1).await;
    assert_eq!(received[0].header("webhook-id"), first.message.id, "the delivery due is made at once");
    assert_eq!(store.legacy_deliveries("0", None, 10).await.unwrap(), vec![], "the old table is emptied");
    assert_eq!(store.shard_state("0").await.unwrap().map(|state| state.legacy_moved), Some(true));
    clock.advance(Duration::from_secs(5));
    let received = receiver.wait_for(|received| received.len() == 2).await;
    assert_eq!(received[1].header("webhook-id"), second.message.id, "the retry comes when it was due");
    eventually("both are recorded", || async { pending(&setup, &clock).await.is_empty() }).await;
    let _ = stop.send(true);
    task.await.unwrap();
    let (attempts, _) = store.attempts("acc_a", "ep", None, 10).await.unwrap();
    let mut numbers: Vec<(String, u32)> = attempts.iter().map(|attempt| (attempt.message_id.clone(), attempt.attempt)).collect();
    numbers.sort();
    let mut expected = vec![(first.message.id.clone(), 1), (second.message.id.clone(), 3)];
    expected.sort();
    assert_eq!(numbers, expected, "each delivered once, as the attempt it was due for");
}

/// The queue anti-pattern: a queue that deletes its rows once they are delivered, then
/// scans the partition that holds them, reads through every removed row (on ScyllaDB a
/// tombstone, kept `gc_grace_seconds`), so each scan slows as deliveries accumulate.
/// Here hundreds of messages are delivered to two endpoints, one of which fails each
/// message once, so every message also leaves a retry row that is removed once the
/// retry succeeds. Once the minutes that held them are past, no scan of any queue table
/// (not the sweep's, not a newly held shard's from its low minute, not the queue
/// figures') covers a single removed row: what a scan reads no longer grows with the
/// deliveries made.
#[tokio::test]
async fn after_hundreds_of_deliveries_and_removed_retries_no_scan_covers_a_removed_row() {
    let setup = setup().await;
    let (url, answers) = receiver(Duration::ZERO).await;
    setup.endpoint("acc_a", "ep_ok", &format!("{url}/ok"), &[], true, 1).await;
    setup.endpoint("acc_a", "ep_flaky", &format!("{url}/flaky"), &[], true, 1).await;
    let count = 200i64;
    let messages: Vec<(i64, AccountMessage)> =
        (1..=count).map(|seq| (seq, message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
    setup.outbox(&messages).await;
    let ids: BTreeSet<String> = messages.iter().map(|(_, message)| message.message.id.clone()).collect();
    let recording = recap_testkit::FaultyDriver::new(setup.driver());
    recording.record_writes();
    let clock = ManualClock::at(START);
    let quick_sweeps = |driver: &recap_testkit::FaultyDriver| {
        let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
        runtime.store = WebhookStore::new(Arc::new(driver.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
        runtime.driver = Arc::new(driver.clone());
        runtime.deliverer.sweep = Duration::from_millis(50);
        runtime.deliverer.queue_interval = Duration::from_millis(50);
        runtime
    };
    let (stop, task) = start(quick_sweeps(&recording));
    let succeeded_at = |path: &str| -> BTreeSet<String> {
        answers.lock().unwrap().iter().filter(|(seen, _, _, status)| seen == path && *status == 200).map(|(_, id, _, _)| id.clone()).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while succeeded_at("/ok") != ids || succeeded_at("/flaky") != ids {
        assert!(Instant::now() < deadline, "not every delivery was made: {} and {} of {count}", succeeded_at("/ok").len(), succeeded_at("/flaky").len());
        // The failed attempts' retries come due (the first waits 5 s).
        clock.advance(Duration::from_secs(6));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eventually("every retry is recorded and removed", || async { pending(&setup, &clock).await.is_empty() }).await;
    let removed: Vec<(Vec<Val>, Vec<Val>)> = recording
        .take_recorded()
        .into_iter()
        .flatten()
        .filter(|mutation| mutation.table.name == "webhook_retries" && matches!(mutation.op, Op::Purge | Op::Delete))
        .map(|mutation| (mutation.partition, mutation.clustering))
        .collect();
    assert_eq!(removed.len(), count as usize, "each message's retry row was written, then removed once it succeeded");

    // Time passes beyond the grace; the sweeps move the low minute past the minutes
    // that held the removed rows.
    let last_removed_minute = removed.iter().filter_map(|(partition, _)| partition.get(1).and_then(Val::as_int)).max().unwrap();
    clock.advance(Duration::from_micros((GRACE + 3 * 60 * SECOND) as u64));
    eventually("the low minute passes the removed rows", || async {
        setup.webhooks.shard_state("0").await.unwrap().is_some_and(|state| state.low_minute > last_removed_minute)
    })
    .await;
    let _ = stop.send(true);
    task.await.unwrap();

    // Every scan from here on, of a process still running and of one starting afresh
    // (a shard newly held is scanned from its low minute).
    recording.record_scans();
    let (stop, task) = start(quick_sweeps(&recording));
    for _ in 0..20 {
        clock.advance(Duration::from_secs(6));
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = stop.send(true);
    task.await.unwrap();
    let scans = recording.take_scans();
    let queue_scans: Vec<_> = scans.iter().filter(|scan| scan.table.name == "webhook_retries").collect();
    assert!(queue_scans.len() >= 20, "the queue was scanned {} times", queue_scans.len());
    let covered: Vec<_> = queue_scans
        .iter()
        .flat_map(|scan| removed.iter().filter(move |(partition, clustering)| *partition == scan.partition && scan.covers(clustering)))
        .collect();
    assert_eq!(covered, Vec::<&(Vec<Val>, Vec<Val>)>::new(), "no scan covers a removed row");
    assert!(scans.iter().all(|scan| scan.table.name != "webhook_deliveries"), "the table before webhook_retries is not read again once its rows were moved");
    assert_eq!(answers.lock().unwrap().len(), 3 * count as usize, "nothing was sent again");
}

/// A message enters the feed once (docs/webhooks.md, "For each batch of the log"): its
/// id is claimed by the first seq that carries it, without a conditional write. A
/// replay of that seq finds its own claim, a later seq (a duplicate) finds another's,
/// and of one id twice in a call the first is decided first. Should two readers ever
/// write claims of one id for two seqs, whatever the order they land in, the lowest
/// seq stands (`claim_clock`), and `GET /v1/events/{id}` agrees with the feed.
#[tokio::test]
async fn an_id_is_claimed_once_by_its_first_seq_and_of_two_claims_landing_in_any_order_the_lowest_stands() {
    use recap_readmodel::tables::MESSAGE_CLAIMS;
    use recap_readmodel::webhooks::{claim_clock, claim_day, Claimed};
    let setup = setup().await;
    let store = &setup.webhooks;
    let created = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1").message.id;
    let updated = message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1").message.id;
    let deleted = message("acc_a", MessageKind::MeetingDeleted, "evt_3", "mtg_1").message.id;
    async fn claimed(store: &WebhookStore, claims: &[(i64, &str)]) -> Vec<Claimed> {
        let claims: Vec<(&str, i64, &str)> = claims.iter().map(|(seq, id)| ("acc_a", *seq, *id)).collect();
        store.claim_ids(&claims).await.unwrap()
    }
    assert_eq!(claimed(store, &[(3, &created)]).await, vec![Claimed::New]);
    assert_eq!(claimed(store, &[(3, &created), (5, &created)]).await, vec![Claimed::Again, Claimed::Elsewhere], "a replay, then a duplicate");
    assert_eq!(claimed(store, &[(7, &updated), (9, &updated)]).await, vec![Claimed::New, Claimed::Elsewhere], "twice in one call");
    assert_eq!(claimed(store, &[(9, &updated)]).await, vec![Claimed::Elsewhere]);
    // Two readers' claims of one id, each written as a claim is written: the later
    // seq's lands first, then the earlier seq's.
    let written = |seq: i64, id: &str| Mutation {
        table: &MESSAGE_CLAIMS,
        partition: vec![Val::text("acc_a"), Val::Int(claim_day(id))],
        clustering: vec![Val::text(id)],
        op: Op::Put { body: format!("{{\"seq\":{seq}}}"), expires_at: None },
        ts: claim_clock(seq),
    };
    store.write(vec![written(12, &deleted)]).await.unwrap();
    store.write(vec![written(11, &deleted)]).await.unwrap();
    assert_eq!(claimed(store, &[(11, &deleted), (12, &deleted)]).await, vec![Claimed::Again, Claimed::Elsewhere]);
    // The earlier seq's first, then the later one's.
    store.write(vec![written(8, &updated)]).await.unwrap();
    assert_eq!(claimed(store, &[(7, &updated), (8, &updated), (4, &updated)]).await, vec![Claimed::Again, Claimed::Elsewhere, Claimed::Elsewhere]);
    let all = [(3, &created, MessageKind::MeetingCreated), (7, &updated, MessageKind::MeetingUpdated), (11, &deleted, MessageKind::MeetingDeleted)];
    for (seq, _, kind) in all {
        let event = format!("evt_{}", [3, 7, 11].iter().position(|at| *at == seq).unwrap() + 1);
        store.write(vec![store.feed_row("acc_a", seq, &message("acc_a", kind, &event, "mtg_1").message)]).await.unwrap();
    }
    store.write(vec![store.head_row("acc_a", 11)]).await.unwrap();
    for (seq, id, _) in all {
        let (found_seq, found) = store.message("acc_a", id).await.unwrap().expect("the message by its id");
        assert_eq!((found_seq, found.id.as_str()), (seq, id.as_str()));
    }
}

/// A message id made at `milliseconds` since the epoch, the `n`th of them.
fn id_at(milliseconds: i64, n: u64) -> String {
    format!("msg_{milliseconds:012x}{n:020x}")
}

fn now_milliseconds() -> i64 {
    recap_readmodel::driver::now_micros() / 1_000
}

/// A batch's claims of an account on one day are read in one request (docs/webhooks.md,
/// "For each batch of the log") and decided as read one by one: new, a replay of the
/// seq that holds it, a duplicate of another's. A day within the retention is read by
/// one scan from the lowest id to the highest, up to four claims an id looked for;
/// when others' claims between them fill that, the ids past the last one read are
/// read by their keys, in one request. A day past the retention, whose partition may
/// hold expired claims, is read by keys only. With the trait's default `get_many` (a
/// get a key), the same claims decide the same.
#[tokio::test]
async fn a_batchs_claims_of_an_account_on_one_day_are_read_in_one_request_and_decided_as_by_id() {
    use recap_readmodel::tables::MESSAGE_CLAIMS;
    use recap_readmodel::webhooks::Claimed;
    for trait_defaults in [false, true] {
        let setup = setup().await;
        let mut recording = recap_testkit::FaultyDriver::new(setup.driver());
        if trait_defaults {
            recording = recording.with_trait_defaults();
        }
        let store = WebhookStore::new(Arc::new(recording.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
        let claim_scans = || recording.take_scans().iter().filter(|scan| scan.table.name == MESSAGE_CLAIMS.name).count();
        let today = now_milliseconds();
        // 100 ids claimed one a call, at seqs 1..=100; one on a day past the retention.
        let ids: Vec<String> = (0..100).map(|n| id_at(today - 100 + n as i64, n)).collect();
        for (index, id) in ids.iter().enumerate() {
            assert_eq!(store.claim_ids(&[("acc_a", index as i64 + 1, id)]).await.unwrap(), vec![Claimed::New]);
        }
        let old_day = today - 40 * 24 * 3_600_000;
        let old: Vec<String> = (0..2).map(|n| id_at(old_day + n as i64, 9_000 + n)).collect();
        assert_eq!(store.claim_ids(&[("acc_a", 500, &old[0])]).await.unwrap(), vec![Claimed::New]);
        // A batch: 120 new ids of today, a replay and a duplicate of claims of today,
        // the first new one twice; of the old day a replay, a new one and a duplicate.
        let fresh: Vec<String> = (0..120).map(|n| id_at(today + 1 + n as i64, 1_000 + n)).collect();
        let mut batch: Vec<(&str, i64, &str)> = fresh.iter().enumerate().map(|(n, id)| ("acc_a", 200 + n as i64, id.as_str())).collect();
        batch.extend([("acc_a", 50, ids[49].as_str()), ("acc_a", 400, ids[9].as_str()), ("acc_a", 401, fresh[0].as_str())]);
        batch.extend([("acc_a", 500, old[0].as_str()), ("acc_a", 501, old[1].as_str()), ("acc_a", 502, old[0].as_str())]);
        recording.record_scans();
        recording.reset_counts();
        let told = store.claim_ids(&batch).await.unwrap();
        let mut expected = vec![Claimed::New; 120];
        expected.extend([Claimed::Again, Claimed::Elsewhere, Claimed::Elsewhere, Claimed::Again, Claimed::New, Claimed::Elsewhere]);
        assert_eq!(told, expected, "trait defaults: {trait_defaults}");
        // Today's 122 ids: 211 claims between the lowest and the highest, within the
        // scan's 488.
        assert_eq!(claim_scans(), 1, "today's claims: one scan");
        if !trait_defaults {
            assert_eq!(recording.gets(), 1, "the old day's claims: one request");
        }
        // The lowest of today, a new one between, the highest: the 100 claims between
        // them fill the scan's 12 rows, and the rest are read by their keys.
        let between = id_at(today - 50, 5_000);
        recording.reset_counts();
        let told = store.claim_ids(&[("acc_a", 1, &ids[0]), ("acc_a", 600, &between), ("acc_a", 319, &fresh[119])]).await.unwrap();
        assert_eq!(told, vec![Claimed::Again, Claimed::New, Claimed::Again]);
        assert_eq!(claim_scans(), 1);
        if !trait_defaults {
            assert_eq!(recording.gets(), 1, "the ids past the scan's last row: one request");
        }
        // Read again, each claim holds for the seq that made it.
        let again: Vec<(&str, i64, &str)> = fresh.iter().enumerate().map(|(n, id)| ("acc_a", 200 + n as i64, id.as_str())).collect();
        assert_eq!(store.claim_ids(&again).await.unwrap(), vec![Claimed::Again; 120]);
        // Another account's claims are its own.
        assert_eq!(store.claim_ids(&[("acc_b", 7, &ids[0]), ("acc_b", 8, &ids[1])]).await.unwrap(), vec![Claimed::New, Claimed::New]);
    }
}

/// Claims were kept in `messages_by_id` before `message_claims`: after the upgrade they
/// still decide (a replay, a duplicate, `GET /v1/events/{id}`) until they have expired,
/// for ids of changes up to the upgrade's roll, as the claims' marker says. A store whose `messages_by_id` held nothing when the
/// first claimer looked never looks there.
#[tokio::test]
async fn claims_kept_before_in_messages_by_id_still_decide_until_they_expire() {
    use recap_readmodel::tables::MESSAGES_BY_ID;
    use recap_readmodel::webhooks::{claim_clock, Claimed};
    let legacy = |seq: i64, id: &str| Mutation {
        table: &MESSAGES_BY_ID,
        partition: vec![Val::text("acc_a"), Val::text(id)],
        clustering: vec![],
        op: Op::Put { body: format!("{{\"seq\":{seq},\"message\":{{}}}}"), expires_at: Some(recap_readmodel::driver::now_micros() + HOUR) },
        ts: claim_clock(seq),
    };
    let today = now_milliseconds();
    let (old, other, fresh) = (id_at(today - 10, 1), id_at(today - 5, 2), id_at(today, 3));
    // Upgraded: the store held claims.
    let upgraded = setup().await;
    upgraded.webhooks.write(vec![legacy(3, &old)]).await.unwrap();
    let store = WebhookStore::new(upgraded.driver(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    assert_eq!(
        store.claim_ids(&[("acc_a", 3, &old), ("acc_a", 4, &fresh), ("acc_a", 5, &old)]).await.unwrap(),
        vec![Claimed::Again, Claimed::New, Claimed::Elsewhere]
    );
    // A process of the version before writes one more during the roll; a new process
    // finds it too.
    upgraded.webhooks.write(vec![legacy(6, &other)]).await.unwrap();
    let later = WebhookStore::new(upgraded.driver(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    assert_eq!(later.claim_ids(&[("acc_a", 7, &other), ("acc_a", 4, &fresh)]).await.unwrap(), vec![Claimed::Elsewhere, Claimed::Again]);
    // An id whose change came after the roll (and the margin of producers' clocks)
    // was never claimed there: not looked for.
    let after_roll = id_at(today + 3 * 24 * 3_600_000, 4);
    upgraded.webhooks.write(vec![legacy(8, &after_roll)]).await.unwrap();
    assert_eq!(later.claim_ids(&[("acc_a", 9, &after_roll)]).await.unwrap(), vec![Claimed::New], "messages_by_id is not read for it");
    store
        .write(vec![store.feed_row("acc_a", 3, &message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1").message), store.head_row("acc_a", 3)])
        .await
        .unwrap();
    assert_eq!(later.message("acc_a", &old).await.unwrap().map(|(seq, _)| seq), Some(3), "GET /v1/events/{{id}} of a message claimed before");
    // Fresh: nothing held when the first claimer looked; a row written there later
    // is never looked for.
    let fresh_store = setup().await;
    let store = WebhookStore::new(fresh_store.driver(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    assert_eq!(store.claim_ids(&[("acc_a", 4, &fresh)]).await.unwrap(), vec![Claimed::New]);
    fresh_store.webhooks.write(vec![legacy(3, &old)]).await.unwrap();
    let later = WebhookStore::new(fresh_store.driver(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    assert_eq!(later.claim_ids(&[("acc_a", 5, &old)]).await.unwrap(), vec![Claimed::New], "messages_by_id is not read");
}

/// A read of the feed without a cursor starts just below the first floor still kept
/// (`feed_floors`: a floor outlives the rows of its hour), not at the partition's
/// start: the expired rows before it (tombstones until compaction on ScyllaDB, past
/// `tombstone_failure_threshold` in a busy account's partition) are not stepped over.
/// The reader's own retention plays no part.
#[tokio::test]
async fn a_feed_read_without_a_cursor_starts_at_the_floor_of_the_first_hour_kept() {
    let setup = setup().await;
    let recording = recap_testkit::FaultyDriver::new(setup.driver());
    let driver: Arc<dyn recap_readmodel::Driver> = Arc::new(recording.clone());
    let messages = feed_messages(8);
    // Four messages written with a second's retention, expired when the feed is read.
    let brief = WebhookStore::new(driver.clone(), Duration::from_secs(1));
    brief.write(messages[..4].iter().zip(1..).map(|(message, seq)| brief.feed_row("acc_a", seq, message)).collect()).await.unwrap();
    // Floors kept since two hours ago by a writer keeping an hour (the earliest write of
    // the row stands), and a floor of their hour two hours ago, expired with them.
    let now = recap_readmodel::driver::now_micros();
    let since = floor_row([0, 0], format!("{{\"since_us\":{},\"retention_us\":{HOUR}}}", now - 2 * HOUR), None, now - 2 * HOUR);
    let old_hour = now - 2 * HOUR - (now - 2 * HOUR).rem_euclid(HOUR);
    let expired = floor_row([old_hour, SECOND], r#"{"seq":1}"#.into(), Some(now + SECOND), 1);
    brief.write(vec![since, expired]).await.unwrap();
    let kept = WebhookStore::new(driver.clone(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let mut rows: Vec<_> = messages[4..6].iter().zip(5..).map(|(message, seq)| kept.feed_row("acc_a", seq, message)).collect();
    rows.extend(kept.floor_rows("acc_a", 5));
    rows.push(kept.head_row("acc_a", 6));
    kept.write(rows).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    // Whatever the reader's own retention (30 days: the floors are not that old): the
    // writers decided what is kept.
    recording.record_scans();
    let page = kept.feed_page("acc_a", None, 10, &[]).await.unwrap();
    assert_eq!(page.messages.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [5, 6]);
    let feed_scans: Vec<_> = recording.take_scans().into_iter().filter(|scan| scan.table.name == "feed").collect();
    assert_eq!(feed_scans.len(), 1, "{feed_scans:?}");
    assert!(matches!(&feed_scans[0].range.start, std::ops::Bound::Excluded(key) if *key == [Val::Int(4)]), "{:?}", feed_scans[0].range);
}

/// Writers keeping messages for different times (a retention changed in a rolling
/// deploy) keep the floors of one hour apart: the floor of the shorter retention expires
/// with its rows, and the longer one's still covers the rows kept longer.
#[tokio::test]
async fn writers_of_different_retentions_in_one_hour_keep_their_floors_apart() {
    let setup = setup().await;
    let store = &setup.webhooks;
    let messages = feed_messages(4);
    let now = recap_readmodel::driver::now_micros();
    let hour = now - now.rem_euclid(HOUR);
    let brief = WebhookStore::new(setup.driver(), Duration::from_secs(1));
    let mut rows: Vec<_> = messages[..2].iter().zip(1..).map(|(message, seq)| brief.feed_row("acc_a", seq, message)).collect();
    rows.push(floor_row([0, 0], format!("{{\"since_us\":{},\"retention_us\":{SECOND}}}", now - 2 * HOUR), None, now - 2 * HOUR));
    // Written as a floor of the shorter retention would be, but expiring with its rows
    // rather than an hour after them, so that the test need not wait the hour.
    rows.push(floor_row([hour, SECOND], r#"{"seq":1}"#.into(), Some(now + SECOND), 1));
    brief.write(rows).await.unwrap();
    let mut rows: Vec<_> = messages[2..].iter().zip(3..).map(|(message, seq)| store.feed_row("acc_a", seq, message)).collect();
    rows.extend(store.floor_rows("acc_a", 3));
    rows.push(store.head_row("acc_a", 4));
    store.write(rows).await.unwrap();
    assert_eq!(store.feed_page("acc_a", None, 10, &[]).await.unwrap().messages.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert_eq!(store.feed_page("acc_a", None, 10, &[]).await.unwrap().messages.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [3, 4]);
}

/// `count` messages of acc_a, one a meeting.
fn feed_messages(count: i64) -> Vec<recap_readmodel::messages::Message> {
    (1..=count).map(|seq| message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")).message).collect()
}

/// A row of acc_a's floors at (hour, retention), written as the lowest seq's claim is
/// (`ts` its seq, or the since row's time).
fn floor_row(clustering: [i64; 2], body: String, expires_at: Option<i64>, ts: i64) -> Mutation {
    Mutation {
        table: &recap_readmodel::tables::FEED_FLOORS,
        partition: vec![Val::text("acc_a")],
        clustering: clustering.into_iter().map(Val::Int).collect(),
        op: Op::Put { body, expires_at },
        ts: recap_readmodel::webhooks::claim_clock(ts),
    }
}

/// Floors are trusted only once they were kept over the whole retention: rows written
/// before the first floor (by an earlier version) are read from the partition's start.
#[tokio::test]
async fn floors_kept_for_less_than_the_retention_leave_a_read_at_the_partition_start() {
    let setup = setup().await;
    let store = &setup.webhooks;
    let messages = feed_messages(4);
    store.write(vec![store.feed_row("acc_a", 1, &messages[0]), store.feed_row("acc_a", 2, &messages[1])]).await.unwrap();
    let mut rows = vec![store.feed_row("acc_a", 3, &messages[2]), store.feed_row("acc_a", 4, &messages[3])];
    rows.extend(store.floor_rows("acc_a", 3));
    store.write(rows).await.unwrap();
    store.write(vec![store.head_row("acc_a", 4)]).await.unwrap();
    let page = store.feed_page("acc_a", None, 10, &[]).await.unwrap();
    assert_eq!(page.messages.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
}
