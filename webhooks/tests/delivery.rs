//! The webhooks runtime in process, over the embedded store (or a Cassandra keyspace
//! with `RECAP_TEST_WORLD=cassandra`): from the outbox to the feed and the receiver,
//! retries on a manual clock, isolation of a hanging endpoint, disabling and
//! re-enabling, dropped deliveries, and what is refused.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use recap_readmodel::messages::{AccountMessage, MessageKind};
use recap_readmodel::tables::MESSAGE_OUTBOX;
use recap_readmodel::webhooks::{AttemptOutcome, EndpointState, SigningSecret};
use recap_readmodel::{ScanRange, Val};
use recap_schemas::Timestamp;
use recap_testkit::faulty::FaultyDriver;
use recap_webhooks::ManualClock;

const SECOND: i64 = 1_000_000;

#[tokio::test]
async fn messages_reach_the_feed_once_and_the_endpoints_that_want_them_signed() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep_all", &format!("{}/all", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_a", "ep_notes", &format!("{}/notes", receiver.url), &[MessageKind::MeetingNotesReady], true, 1).await;
    setup.endpoint("acc_a", "ep_off", &format!("{}/off", receiver.url), &[], false, 1).await;
    setup.endpoint("acc_b", "ep_b", &format!("{}/b", receiver.url), &[], true, 1).await;
    let created = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
    let notes = message("acc_a", MessageKind::MeetingNotesReady, "evt_2", "mtg_1");
    // The projector replayed evt_1's message at a later seq: a duplicate.
    setup.outbox(&[(1, created.clone()), (2, notes.clone()), (3, created.clone())]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));

    let received = receiver.wait_for(|received| received.len() >= 3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(true);
    task.await.unwrap();

    let mut delivered: Vec<(String, String)> = receiver.received().iter().map(|r| (r.path.clone(), r.header("webhook-id"))).collect();
    delivered.sort();
    let mut expected =
        vec![("/all".to_owned(), created.message.id.clone()), ("/all".to_owned(), notes.message.id.clone()), ("/notes".to_owned(), notes.message.id.clone())];
    expected.sort();
    assert_eq!(delivered, expected, "acc_b's endpoint and the disabled one get nothing, the duplicate is not delivered again");
    for request in &received {
        let id = request.header("webhook-id");
        let timestamp = request.header("webhook-timestamp");
        assert_eq!(timestamp, (START / SECOND).to_string());
        let expected = recap_webhooks::signing::signature(SECRET, &id, START / SECOND, request.body.as_bytes()).unwrap();
        assert_eq!(request.header("webhook-signature"), expected);
        assert_eq!(request.header("content-type"), "application/json");
        let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(body["id"], id);
    }
    let page = setup.webhooks.feed_page("acc_a", None, 10, &[]).await.unwrap();
    assert_eq!(page.messages, vec![(1, created.message.clone()), (2, notes.message.clone())]);
    assert_eq!(setup.webhooks.head("acc_a").await.unwrap(), Some(2));
    assert_eq!(setup.webhooks.head("acc_b").await.unwrap(), None);
    let outbox = setup.driver().scan(&MESSAGE_OUTBOX, &[Val::text("log")], &ScanRange::all(), 10).await.unwrap();
    assert!(outbox.is_empty(), "outbox rows the position passed are removed");
    assert_eq!(committed_position(&setup).await, 3);
    assert!(pending(&setup, &clock).await.is_empty(), "first attempts have no row");
    let (attempts, _) = setup.webhooks.attempts("acc_a", "ep_notes", None, 10).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!((attempts[0].outcome, attempts[0].status, attempts[0].attempt), (AttemptOutcome::Succeeded, Some(200), 1));
}

#[tokio::test]
async fn the_outbox_reader_resumes_after_its_position() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 1).await;
    let _ = stop.send(true);
    task.await.unwrap();

    setup.outbox(&[(2, message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1"))]).await;
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(receiver.received().len(), 2, "the first message is not read again");
    assert_eq!(setup.webhooks.head("acc_a").await.unwrap(), Some(2));
}

/// Where the store tells of its writes (the embedded one), a message written to the
/// outbox wakes its reader at once: with an hour between looks, it is still delivered
/// within the wait. A store that does not (Cassandra, whose outbox only the upgrade reads)
/// leaves the reader to its poll, so there is nothing to check.
#[tokio::test]
async fn a_message_written_to_the_outbox_wakes_its_reader_before_the_next_poll() {
    let setup = setup().await;
    if setup.driver().next_change(&MESSAGE_OUTBOX).is_none() {
        return;
    }
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
    runtime.outbox.poll = Duration::from_secs(3_600);
    let reads = Arc::new(FaultyDriver::new(setup.driver()));
    reads.record_scans();
    runtime.driver = reads.clone();
    let (stop, task) = start(runtime);
    receiver.wait_for(|received| received.len() == 1).await;
    // Once the reader has looked past the first message and found nothing, it waits (the
    // margin lets that read end), and only the write below can end the wait within the hour.
    let looked_past_the_first = std::sync::atomic::AtomicBool::new(false);
    eventually("the reader looks past the first message", || {
        let looked =
            reads.take_scans().iter().any(|scan| scan.table.name == MESSAGE_OUTBOX.name && !scan.covers(&[Val::Int(1)]) && scan.covers(&[Val::Int(2)]));
        let looked = looked_past_the_first.fetch_or(looked, std::sync::atomic::Ordering::Relaxed) || looked;
        async move { looked }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;

    setup.outbox(&[(2, message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1"))]).await;
    receiver.wait_for(|received| received.len() == 2).await;
    setup.outbox(&[(3, message("acc_a", MessageKind::MeetingDeleted, "evt_3", "mtg_1"))]).await;
    receiver.wait_for(|received| received.len() == 3).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(setup.webhooks.head("acc_a").await.unwrap(), Some(3));
}

/// A scan starts at its shard's mark, not at the start of the removed rows: a message
/// that happened before everything delivered so far (read late) is still delivered.
#[tokio::test]
async fn a_message_older_than_the_deliveries_already_made_is_still_delivered() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 1).await;
    // Rounds with nothing due move the mark up to the clock.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut late = message("acc_a", MessageKind::MeetingCreated, "evt_0", "mtg_0");
    late.message.created_at = Timestamp(START - 3_600 * SECOND);
    setup.outbox(&[(2, late.clone())]).await;
    let received = receiver.wait_for(|received| received.len() == 2).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(received[1].header("webhook-id"), late.message.id);
}

#[tokio::test]
async fn a_failed_delivery_is_retried_after_the_scheduled_delay_with_the_same_id() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500, 503]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let created = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
    setup.outbox(&[(1, created.clone())]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));

    receiver.wait_for(|received| received.len() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(receiver.received().len(), 1, "nothing before the delay");
    clock.advance(Duration::from_secs(4));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(receiver.received().len(), 1, "nothing 4 s later: the first retry waits 5 s");
    clock.advance(Duration::from_secs(1));
    receiver.wait_for(|received| received.len() == 2).await;
    clock.advance(Duration::from_secs(300));
    let received = receiver.wait_for(|received| received.len() == 3).await;
    eventually("the delivery is done", || async { pending(&setup, &clock).await.is_empty() }).await;
    let _ = stop.send(true);
    task.await.unwrap();

    let ids: Vec<String> = received.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids, vec![created.message.id.clone(); 3]);
    let stamps: Vec<String> = received.iter().map(|r| r.header("webhook-timestamp")).collect();
    assert_eq!(stamps, vec![(START / SECOND).to_string(), (START / SECOND + 5).to_string(), (START / SECOND + 305).to_string()]);
    let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap();
    let summary: Vec<_> = attempts.iter().map(|a| (a.attempt, a.outcome, a.status, a.next_attempt_at)).collect();
    assert_eq!(
        summary,
        vec![
            (3, AttemptOutcome::Succeeded, Some(200), None),
            (2, AttemptOutcome::Failed, Some(503), Some(Timestamp(START + 305 * SECOND))),
            (1, AttemptOutcome::Failed, Some(500), Some(Timestamp(START + 5 * SECOND))),
        ],
        "newest first"
    );
    let state = setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap();
    assert_eq!((state.failing_since, state.last_success_at, state.disabled_version), (None, Some(Timestamp(START + 305 * SECOND)), None));
}

/// A retry coming due wakes nothing: the deliverer scans for due rows at least once a
/// poll, however often the first attempts it is handed wake it meanwhile.
#[tokio::test]
async fn a_retry_comes_due_and_is_made_while_first_attempts_keep_waking_the_deliverer() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500]).await;
    setup.endpoint("acc_a", "ep", &format!("{}/a", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_b", "ep", &format!("{}/b", receiver.url), &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_a", "mtg_a"))]).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
    let poll = Duration::from_millis(200);
    runtime.deliverer.poll = poll;
    let (stop, task) = start(runtime);
    receiver.wait_for(|received| received.len() == 1).await;
    eventually("the retry is written", || async { !pending(&setup, &clock).await.is_empty() }).await;

    // A message to the other account every 25 ms for 4 s; the retry comes due 0.5 s in.
    let stream = async {
        for seq in 2..162i64 {
            setup.outbox(&[(seq, message("acc_b", MessageKind::MeetingCreated, &format!("evt_b{seq}"), &format!("mtg_{seq}")))]).await;
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    };
    let retried = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        clock.advance(Duration::from_secs(5));
        let due = std::time::Instant::now();
        receiver.wait_for(|received| received.iter().filter(|request| request.path == "/a").count() == 2).await;
        due.elapsed()
    };
    let ((), took) = tokio::join!(stream, retried);
    assert!(took < 5 * poll, "the retry was made {took:?} after it came due, while the stream lasted");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test]
async fn a_hanging_endpoint_never_delays_another() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_slow", "ep_hang", &format!("{}/hang", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_fast", "ep_fast", &format!("{}/fast", receiver.url), &[], true, 1).await;
    let mut messages = Vec::new();
    for index in 0..20i64 {
        // The hanging endpoint's messages come first in every round.
        messages.push((2 * index + 1, message("acc_slow", MessageKind::MeetingCreated, &format!("evt_s{index}"), &format!("mtg_{index}"))));
        messages.push((2 * index + 2, message("acc_fast", MessageKind::MeetingCreated, &format!("evt_f{index}"), &format!("mtg_{index}"))));
    }
    setup.outbox(&messages).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(3)));

    let started = std::time::Instant::now();
    receiver.wait_for(|received| received.iter().filter(|r| r.path == "/fast").count() == 20).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the other endpoint got all 20 in {:?}, before the hanging one's first timeout", started.elapsed());
    assert_eq!(receiver.count("/hang"), 4, "the hanging endpoint holds its 4 slots and no more");
    eventually("the hanging attempts time out and are recorded", || async {
        let (attempts, _) = setup.webhooks.attempts("acc_slow", "ep_hang", None, 10).await.unwrap();
        attempts.len() == 4 && attempts.iter().all(|attempt| attempt.outcome == AttemptOutcome::TimedOut)
    })
    .await;
    let _ = stop.send(true);
    task.await.unwrap();
}

/// With the process's slots all taken, the endpoints waiting take turns for each slot
/// freed: one process slot here, four endpoints with five deliveries each, and every
/// endpoint gets its k-th delivery before any gets its (k+1)-th, rather than one
/// endpoint's whole backlog going first.
#[tokio::test]
async fn with_the_process_slots_all_taken_endpoints_take_turns() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    let accounts = ["acc_a", "acc_b", "acc_c", "acc_d"];
    for account in accounts {
        setup.endpoint(account, "ep", &format!("{}/{account}", receiver.url), &[], true, 1).await;
    }
    setup.outbox(&backlog(&accounts, 5, 1)).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(2));
    runtime.deliverer.global = 1;
    let (stop, task) = start(runtime);
    let received = receiver.wait_for(|received| received.len() == 20).await;
    let order: Vec<&str> = received.iter().map(|request| request.path.trim_start_matches('/')).collect();
    // The k-th delivery of each endpoint, by the index it arrived at.
    let mut seen = std::collections::HashMap::<&str, usize>::new();
    let turns: Vec<usize> = order
        .iter()
        .map(|account| {
            let count = seen.entry(account).or_default();
            *count += 1;
            *count
        })
        .collect();
    let in_turn = turns.windows(2).all(|pair| pair[1] >= pair[0]);
    assert!(in_turn, "the endpoints did not take turns: {order:?}");
    assert_eq!(seen.len(), 4, "{order:?}");
    let _ = stop.send(true);
    task.await.unwrap();
}

/// A dead endpoint's backlog of rows, due before everyone else's, never keeps the
/// others' rows unread: past its bound in the window (twice its slots, as it is not
/// known to answer), the scans go on past its rows, page after page, to the rows of
/// the endpoint that answers.
#[tokio::test]
async fn a_dead_endpoints_rows_due_first_never_keep_the_scans_from_the_rows_after_them() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_dead", "ep", &format!("{}/hang", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_ok", "ep", &format!("{}/ok", receiver.url), &[], true, 1).await;
    // 100 rows of the dead endpoint, due first, then 5 of the other.
    retry_rows(&setup, std::iter::repeat_n("acc_dead", 100).chain(std::iter::repeat_n("acc_ok", 5))).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(2));
    runtime.deliverer.scan = 20;
    runtime.deliverer.window_per_endpoint = 10;
    let (stop, task) = start(runtime);
    let started = std::time::Instant::now();
    receiver.wait_for(|received| received.iter().filter(|request| request.path == "/ok").count() == 5).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the rows after the dead endpoint's were delivered in {:?}", started.elapsed());
    assert_eq!(receiver.count("/hang"), 4, "the dead endpoint holds its 4 slots and no more");
    let _ = stop.send(true);
    task.await.unwrap();
}

/// An attempt made twice, by two processes over a rebalance (or again after its row's
/// removal was lost), schedules its next attempt once: both write the same row, so the
/// delivery goes on as one chain of retries, not two.
#[tokio::test]
async fn an_attempt_made_twice_schedules_one_next_attempt_not_two() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &format!("{}/hang", receiver.url), &[], true, 1).await;
    // Its second attempt, due a minute ago.
    retry_rows(&setup, std::iter::once("acc_a")).await;
    let clock = ManualClock::at(START);
    let jittered = |mut runtime: recap_webhooks::Runtime| {
        runtime.deliverer.schedule = recap_webhooks::RetrySchedule::default();
        runtime
    };
    // Attempts time out after 5 s: the second process has that long to start and find
    // the row.
    let (stop_a, task_a) = start(jittered(runtime(&setup, &clock, Duration::from_secs(5))));
    receiver.wait_for(|received| received.len() == 1).await;
    // A second process, two seconds later, finds the row still there while the first
    // one's attempt is under way, and makes it too.
    clock.advance(Duration::from_secs(2));
    let (stop_b, task_b) = start(jittered(runtime(&setup, &clock, Duration::from_secs(5))));
    receiver.wait_for(|received| received.len() == 2).await;
    eventually("both attempts time out and are recorded", || async {
        let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap();
        attempts.len() == 2 && pending(&setup, &clock).await.iter().all(|due| due.delivery.attempt == 3)
    })
    .await;
    let pending = pending(&setup, &clock).await;
    assert_eq!(pending.len(), 1, "one next attempt, not one a process: {pending:?}");
    let _ = (stop_a.send(true), stop_b.send(true));
    task_a.await.unwrap();
    task_b.await.unwrap();
}

/// Two rows of one delivery's second attempt at different times, as a first attempt
/// made twice leaves them (by a crash before its position was committed: each making
/// schedules its first retry from its own instant): the first made goes on, the second
/// is removed when it comes due, unsent, whether the first failed (one chain of retries,
/// not two) or delivered the message.
#[tokio::test]
async fn a_second_row_of_an_attempt_already_made_is_removed_unsent_when_it_comes_due() {
    for (answer, what) in [(500, "failed"), (200, "delivered")] {
        let setup = setup().await;
        let receiver = Receiver::start(&[answer]).await;
        setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
        // Attempt 2 due a minute ago, and again (the second making's row) in 30 s.
        retry_rows(&setup, std::iter::once("acc_a")).await;
        let first = pending(&setup, &ManualClock::at(START)).await.remove(0);
        let later = START + 30 * SECOND;
        setup.webhooks.write(vec![setup.webhooks.retry_row("0", later, &first.delivery)]).await.unwrap();
        let clock = ManualClock::at(START);
        let runtime = runtime(&setup, &clock, Duration::from_secs(5));
        let stats = runtime.stats.clone();
        let (stop, task) = start(runtime);
        receiver.wait_for(|received| received.len() == 1).await;
        eventually("the first row's attempt is recorded and the row removed", || async {
            let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap();
            attempts.len() == 1 && !pending(&setup, &clock).await.iter().any(|due| due.due_at == first.due_at)
        })
        .await;

        clock.advance(Duration::from_secs(60));
        eventually("the second row is removed", || async { !pending(&setup, &clock).await.iter().any(|due| due.due_at == later) }).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(receiver.received().len(), 1, "{what}: the second row sent nothing");
        let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap();
        assert_eq!(attempts.len(), 1, "{what}: one attempt recorded");
        let left: Vec<u32> = pending(&setup, &clock).await.iter().map(|due| due.delivery.attempt).collect();
        let expected: Vec<u32> = if answer == 200 { vec![] } else { vec![3] };
        assert_eq!(left, expected, "{what}: one next attempt at most, from the first row's");
        assert_eq!(stats.repeats_removed.load(std::sync::atomic::Ordering::Relaxed), 1, "{what}: the second row counted as a repeat");
        assert_eq!(
            stats.delivered.load(std::sync::atomic::Ordering::Relaxed) + stats.given_up.load(std::sync::atomic::Ordering::Relaxed),
            u64::from(answer == 200),
            "{what}: and not as a delivery's end"
        );
        let _ = stop.send(true);
        task.await.unwrap();
    }
}

/// A delivery's progress is its endpoint's own: an endpoint deleted and created again
/// under its id starts afresh (its retries are not the old one's). Of two progress rows
/// of one delivery the furthest stands, whichever lands last.
#[tokio::test]
async fn a_deliverys_progress_stands_at_its_furthest_attempt_and_is_its_endpoints_own() {
    use recap_readmodel::webhooks::{Delivery, Progress};
    let setup = setup().await;
    let store = &setup.webhooks;
    let delivery =
        Delivery { account_id: "acc_a".into(), endpoint_id: "ep".into(), endpoint_created_version: Some(1), message_id: "msg_1".into(), seq: 1, attempt: 3 };
    store.write(vec![store.progress_row(&delivery, false)]).await.unwrap();
    let progress = store.progress(&delivery).await.unwrap().expect("written");
    assert_eq!(progress, Progress { attempt: 3, delivered: false });
    assert!(progress.covers(2) && progress.covers(3) && !progress.covers(4));

    let recreated = Delivery { endpoint_created_version: Some(2), attempt: 2, ..delivery.clone() };
    assert_eq!(store.progress(&recreated).await.unwrap(), None, "another endpoint of the same id");

    // Attempt 4 failed, then attempt 3's success lands late: attempt 4 stands.
    store.write(vec![store.progress_row(&Delivery { attempt: 4, ..delivery.clone() }, false)]).await.unwrap();
    store.write(vec![store.progress_row(&delivery, true)]).await.unwrap();
    assert_eq!(store.progress(&delivery).await.unwrap(), Some(Progress { attempt: 4, delivered: false }));
    // Its success outranks its failure.
    store.write(vec![store.progress_row(&Delivery { attempt: 4, ..delivery.clone() }, true)]).await.unwrap();
    assert!(store.progress(&delivery).await.unwrap().is_some_and(|progress| progress.delivered && progress.covers(10)));
}

/// A message of each of `accounts` in turn (seqs from 1), in its feed, and its delivery
/// to the account's endpoint `ep` as a row of a second attempt, due every half second
/// from a minute ago (past the shard's low minute, two minutes before it is first held).
async fn retry_rows(setup: &Setup, accounts: impl Iterator<Item = &'static str>) {
    retry_rows_of_attempts(setup, accounts.map(|account| (account, 2))).await;
}

/// As [`retry_rows`], each delivery at the attempt given with its account.
async fn retry_rows_of_attempts(setup: &Setup, deliveries: impl Iterator<Item = (&'static str, u32)>) {
    let store = &setup.webhooks;
    let mut rows = Vec::new();
    for (index, (account, attempt)) in deliveries.enumerate() {
        let seq = index as i64 + 1;
        let created = message(account, MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}"));
        store.claim_many(&[(account, seq, &created.message)]).await.unwrap();
        rows.push(store.feed_row(account, seq, &created.message));
        rows.push(store.head_row(account, seq));
        let delivery = recap_readmodel::webhooks::Delivery {
            account_id: account.into(),
            endpoint_id: "ep".into(),
            endpoint_created_version: Some(1),
            message_id: created.message.id.clone(),
            seq,
            attempt,
        };
        rows.push(store.retry_row("0", START - 60 * SECOND + seq * SECOND / 2, &delivery));
    }
    store.write(rows).await.unwrap();
}

/// Another shard held (a rebalance) while an endpoint's rows wait past its bound: the
/// rows the scans left out are read all the same, none forgotten with the change. The
/// endpoint hangs (each attempt takes the 1 s timeout), so its queue still holds rows
/// when the shards change; its first eight rows fill its bound (twice its four slots),
/// and the next eight are among those left out.
#[tokio::test]
async fn rows_left_out_past_an_endpoints_bound_are_read_after_the_shards_held_change() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_fail", "ep", &format!("{}/hang", receiver.url), &[], true, 1).await;
    retry_rows(&setup, std::iter::repeat_n("acc_fail", 30)).await;
    let clock = ManualClock::at(START);
    let runtime = runtime(&setup, &clock, Duration::from_secs(1));
    let shards = recap_webhooks::Shards::fixed(&["0"]);
    let config = recap_webhooks::DelivererConfig { scan: 20, window_per_endpoint: 10, ..runtime.deliverer };
    let deliverer = recap_webhooks::Deliverer::new(
        runtime.store,
        runtime.client,
        runtime.clock,
        runtime.stats,
        shards.clone(),
        recap_webhooks::Handoff::new(1_000),
        config,
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(deliverer.run(stopped));
    receiver.wait_for(|received| !received.is_empty()).await;
    shards.add("1".to_owned());
    // The first sixteen rows: eight queued at once, eight of those left out then.
    let first: std::collections::BTreeSet<String> =
        (1..=16i64).map(|seq| message("acc_fail", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")).message.id).collect();
    receiver.wait_for(|received| first.is_subset(&received.iter().map(|request| request.header("webhook-id")).collect())).await;
    let _ = stop.send(true);
    task.await.unwrap();
}

/// An endpoint for each of `accounts` at an address of the receiver that never answers.
async fn hanging_endpoints(setup: &Setup, receiver: &Receiver, accounts: &[&str]) {
    for account in accounts {
        setup.endpoint(account, "ep", &format!("{}/hang_{account}", receiver.url), &[], true, 1).await;
    }
}

/// `rounds` messages to each of `accounts`, interleaved, at seqs from `first_seq` on.
fn backlog(accounts: &[&str], rounds: i64, first_seq: i64) -> Vec<(i64, AccountMessage)> {
    (0..rounds)
        .flat_map(|index| {
            accounts.iter().enumerate().map(move |(offset, account)| {
                let message = message(account, MessageKind::MeetingCreated, &format!("evt_{account}_{index}"), &format!("mtg_{index}"));
                (first_seq + accounts.len() as i64 * index + offset as i64, message)
            })
        })
        .collect()
}

/// Four messages to `acc_ok`, at seqs from `first_seq` on.
fn answering_messages(first_seq: i64) -> Vec<(i64, AccountMessage)> {
    (0..4i64).map(|index| (first_seq + index, message("acc_ok", MessageKind::MeetingCreated, &format!("evt_ok_{index}"), &format!("mtg_{index}")))).collect()
}

/// The requests the receiver got at its addresses that never answer.
fn hanging_requests(receiver: &Receiver) -> usize {
    receiver.received().iter().filter(|request| request.path.starts_with("/hang")).count()
}

/// Many endpoints dead at once (more slots wanted than the process has) hold, once
/// their first attempts have failed, only the failing endpoints' quarter of the slots:
/// two of the process's eight here, whatever their backlog, and an endpoint that
/// answers gets its deliveries at once instead of waiting for the dead ones' timeouts.
#[tokio::test]
async fn endpoints_known_to_fail_share_a_quarter_of_the_slots_and_never_take_them_all() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    let dead = ["acc_d1", "acc_d2", "acc_d3", "acc_d4"];
    hanging_endpoints(&setup, &receiver, &dead).await;
    setup.endpoint("acc_ok", "ep", &format!("{}/ok", receiver.url), &[], true, 1).await;
    // A backlog that outlasts the test: sixteen slots wanted at every moment, against
    // the process's eight.
    setup.outbox(&backlog(&dead, 40, 1)).await;
    let clock = ManualClock::at(START);
    let timeout = Duration::from_secs(1);
    let mut runtime = runtime(&setup, &clock, timeout);
    runtime.deliverer.global = 8;
    let (stop, task) = start(runtime);
    eventually("every dead endpoint is known to be failing", || async {
        let mut failing = 0;
        for account in dead {
            if setup.webhooks.endpoint_state(account, "ep").await.unwrap().failing_since.is_some() {
                failing += 1;
            }
        }
        failing == dead.len()
    })
    .await;
    let sent = std::time::Instant::now();
    setup.outbox(&answering_messages(1_000)).await;
    receiver.wait_for(|received| received.iter().filter(|request| request.path == "/ok").count() == 4).await;
    let took = sent.elapsed();
    assert!(took < timeout, "the answering endpoint got its 4 deliveries in {took:?}, not after the dead ones' {timeout:?} timeout");
    // Once the attempts started before they were known to fail have timed out, the dead
    // endpoints start at most two attempts a timeout between them (without the share:
    // eight).
    tokio::time::sleep(timeout + Duration::from_millis(300)).await;
    let before = hanging_requests(&receiver);
    tokio::time::sleep(timeout * 3).await;
    let started = hanging_requests(&receiver) - before;
    assert!(started <= 2 * 3 + 2, "{started} attempts to dead endpoints in three timeouts, where their share allows two at a time");
    assert!(started >= 2, "{started}: the dead endpoints' backlog is still being tried");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test]
async fn a_wave_of_new_endpoints_that_hang_leaves_a_quarter_of_the_slots_to_endpoints_that_answer() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_ok", "ep", &format!("{}/ok", receiver.url), &[], true, 1).await;
    let clock = ManualClock::at(START);
    let timeout = Duration::from_secs(2);
    let mut runtime = runtime(&setup, &clock, timeout);
    runtime.deliverer.global = 8;
    let (stop, task) = start(runtime);
    // The answering endpoint has answered once: its state says so.
    setup.outbox(&[(1, message("acc_ok", MessageKind::MeetingCreated, "evt_ok_first", "mtg_first"))]).await;
    receiver.wait_for(|received| received.len() == 1).await;
    eventually("the answer is recorded", || async { setup.webhooks.endpoint_state("acc_ok", "ep").await.unwrap().last_success_at.is_some() }).await;

    // Four endpoints never attempted, each at an address that never answers, with a
    // backlog: sixteen slots wanted against the process's eight.
    let new = ["acc_n1", "acc_n2", "acc_n3", "acc_n4"];
    hanging_endpoints(&setup, &receiver, &new).await;
    setup.outbox(&backlog(&new, 10, 2)).await;
    eventually("the new endpoints hold their share", || async { hanging_requests(&receiver) >= 6 }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(hanging_requests(&receiver), 6, "endpoints not known to answer hold three quarters of the eight slots, not all of them");

    // Meanwhile the answering endpoint is delivered to at once, not after their timeout.
    let sent = std::time::Instant::now();
    setup.outbox(&answering_messages(100)).await;
    receiver.wait_for(|received| received.iter().filter(|request| request.path == "/ok").count() == 5).await;
    let took = sent.elapsed();
    assert!(took < timeout / 2, "the answering endpoint got its 4 deliveries in {took:?}, with the new endpoints' attempts hanging for {timeout:?}");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test]
async fn a_backlog_of_rows_is_read_a_page_after_another_as_the_window_empties_not_a_page_a_poll() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
    // Memory holds 40 deliveries, a scan reads 20 rows, and the poll is far away: past
    // the 40 handed over, the batch's first attempts are written as rows due at once.
    runtime.deliverer.window = 40;
    runtime.deliverer.scan = 20;
    runtime.deliverer.poll = Duration::from_secs(60);
    let messages: Vec<_> = (1..=300i64).map(|seq| (seq, message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
    setup.outbox(&messages).await;
    let sent = std::time::Instant::now();
    let (stop, task) = start(runtime);
    receiver.wait_for(|received| received.len() == 300).await;
    let took = sent.elapsed();
    // A page a poll would have taken 13 polls (13 minutes) for the 260 rows.
    assert!(took < Duration::from_secs(10), "300 deliveries, 260 of them from rows, took {took:?}");
    let ids: std::collections::BTreeSet<String> = receiver.received().iter().map(|request| request.header("webhook-id")).collect();
    assert_eq!(ids.len(), 300, "each message delivered");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test]
async fn an_endpoint_failing_through_the_whole_schedule_is_disabled_until_an_upsert() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500; 100]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 7).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    // One request at a time: when the second message's retry and the first message's
    // last attempt come due together, the retry (due first) is made first, before the
    // last attempt disables the endpoint and drops what is left.
    let mut one_at_a_time = runtime(&setup, &clock, Duration::from_secs(5));
    one_at_a_time.deliverer.per_endpoint = 1;
    let (stop, task) = start(one_at_a_time);
    receiver.wait_for(|received| received.len() == 1).await;
    let schedule = recap_webhooks::RetrySchedule::default();
    for (index, delay) in schedule.delays.iter().take(8).enumerate() {
        clock.advance(*delay);
        receiver.wait_for(|received| received.len() == index + 2).await;
    }
    // A second message while the endpoint fails: tried, then dropped once it is disabled.
    setup.outbox(&[(2, message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1"))]).await;
    receiver.wait_for(|received| received.len() == 10).await;
    eventually("the second message's first attempt is recorded", || async { pending(&setup, &clock).await.len() == 2 }).await;
    // The first message's last attempt and the second's retry.
    clock.advance(schedule.delays[8]);
    receiver.wait_for(|received| received.len() == 12).await;
    eventually("the endpoint is disabled at its version", || async { setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap().disabled_version == Some(7) })
        .await;
    let state = setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap();
    assert_eq!(state.disabled_at, Some(Timestamp(clock_now(&clock))));
    assert_eq!(state.failing_since, Some(Timestamp(START)));
    // The second message's next retry (its second delay, jittered by at most a fifth)
    // comes due: dropped, not sent.
    eventually("the second message's next retry is scheduled", || async { pending(&setup, &clock).await.len() == 1 }).await;
    clock.advance(2 * schedule.delays[1]);
    eventually("the pending delivery is dropped", || async { pending(&setup, &clock).await.is_empty() }).await;
    let sent = receiver.received().len();
    assert_eq!(sent, 12, "ten attempts of the first message, two of the second");

    setup.outbox(&[(3, message("acc_a", MessageKind::MeetingUpdated, "evt_3", "mtg_1"))]).await;
    // Its first attempt settled (the position passes a message only then) before the
    // upsert below: an attempt still waiting would find the endpoint enabled again.
    eventually("the third message is in the feed", || async { setup.webhooks.head("acc_a").await.unwrap() == Some(3) }).await;
    eventually("the third message's first attempt is settled", || async { committed_position(&setup).await == 3 }).await;
    assert_eq!(receiver.received().len(), sent, "no delivery is made to a disabled endpoint");
    assert!(pending(&setup, &clock).await.is_empty(), "nor scheduled to it");
    receiver.recover();
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 8).await;
    setup.outbox(&[(4, message("acc_a", MessageKind::MeetingUpdated, "evt_4", "mtg_1"))]).await;
    let received = receiver.wait_for(|received| received.len() == sent + 1).await;
    assert_eq!(received.last().unwrap().header("webhook-id"), message("acc_a", MessageKind::MeetingUpdated, "evt_4", "mtg_1").message.id);
    eventually("a success clears the failure", || async { setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap().failing_since.is_none() }).await;
    let _ = stop.send(true);
    task.await.unwrap();
}

/// A disable whose record could not be written is not acted on: the attempt is made
/// again (as any attempt whose record failed), and the endpoint is disabled once the
/// store has it, rather than its deliveries dropped while the store still shows it
/// enabled.
/// A delivery whose attempt finds the endpoint disabled by another attempt whose record
/// is still being written waits for that write, and is dropped once it lands: it is not
/// sent to the endpoint the last attempt just disabled.
#[tokio::test]
async fn a_delivery_that_finds_a_disable_being_written_waits_for_it_and_is_dropped() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &format!("{}/hang", receiver.url), &[], true, 7).await;
    let store = &setup.webhooks;
    // Failing for longer than the whole schedule, with two deliveries due: the first at
    // its last attempt, the second at its third.
    let failing = EndpointState { failing_since: Some(Timestamp(START - 4 * 24 * 3600 * SECOND)), ..EndpointState::default() };
    store.save_endpoint_state("acc_a", "ep", &failing).await.unwrap();
    retry_rows_of_attempts(&setup, [("acc_a", 10), ("acc_a", 3)].into_iter()).await;
    let faulty = recap_testkit::FaultyDriver::new(setup.driver());
    let clock = ManualClock::at(START);
    // Attempts time out after a second, and one at a time.
    let mut one_at_a_time = runtime(&setup, &clock, Duration::from_secs(1));
    one_at_a_time.deliverer.per_endpoint = 1;
    one_at_a_time.driver = std::sync::Arc::new(faulty.clone());
    one_at_a_time.store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(faulty.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let (stop, task) = start(one_at_a_time);
    receiver.wait_for(|received| received.len() == 1).await;
    // While the last attempt hangs: its record, which disables the endpoint, will wait
    // to be written.
    faulty.hold_writes();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(receiver.received().len(), 1, "the second delivery waits for the disable being written, unsent");
    faulty.release_writes();
    eventually("the endpoint is disabled and the second delivery dropped", || async {
        store.endpoint_state("acc_a", "ep").await.unwrap().disabled_version == Some(7) && pending(&setup, &clock).await.is_empty()
    })
    .await;
    assert_eq!(receiver.received().len(), 1, "nothing sent after the last attempt disabled the endpoint");
    let (attempts, _) = store.attempts("acc_a", "ep", None, 10).await.unwrap();
    assert_eq!(attempts.iter().map(|attempt| attempt.attempt).collect::<Vec<_>>(), vec![10], "only the last attempt was made");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test]
async fn a_disable_whose_record_was_not_written_drops_nothing() {
    use recap_readmodel::tables::WEBHOOK_ATTEMPTS;
    let setup = setup().await;
    let receiver = Receiver::start(&[500, 500]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 3).await;
    let faulty = FaultyDriver::new(setup.driver());
    let clock = ManualClock::at(START);
    let mut runtime = recap_webhooks::Runtime::new(
        Arc::new(faulty.clone()),
        recap_readmodel::webhooks::DEFAULT_RETENTION,
        recap_webhooks::ClientConfig { allow_insecure: true, timeout: Duration::from_secs(5), ..recap_webhooks::ClientConfig::default() },
    );
    runtime.clock = Arc::new(clock.clone());
    // No retries: the first attempt is the last, and its failure disables the endpoint.
    let schedule = recap_webhooks::RetrySchedule { delays: Vec::new(), jitter: 0.0 };
    runtime.deliverer = recap_webhooks::DelivererConfig { poll: Duration::from_millis(10), schedule, ..recap_webhooks::DelivererConfig::default() };
    runtime.outbox.poll = Duration::from_millis(10);
    faulty.fail_table(WEBHOOK_ATTEMPTS.name);
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let (stop, task) = start(runtime);
    receiver.wait_for(|received| received.len() == 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    faulty.heal();
    receiver.wait_for(|received| received.len() == 2).await;
    eventually("the endpoint is disabled at its version", || async { setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap().disabled_version == Some(3) })
        .await;
    let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap();
    assert_eq!(attempts.len(), 1, "the attempt whose record was written");
    let _ = stop.send(true);
    task.await.unwrap();
}

fn clock_now(clock: &ManualClock) -> i64 {
    use recap_webhooks::Clock;
    clock.now_micros()
}

#[tokio::test]
async fn deliveries_to_an_endpoint_deleted_or_disabled_by_its_account_are_dropped() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500, 500]).await;
    setup.endpoint("acc_a", "ep_deleted", &format!("{}/deleted", receiver.url), &[], true, 1).await;
    setup.endpoint("acc_a", "ep_disabled", &format!("{}/disabled", receiver.url), &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 2).await;
    eventually("both attempts are recorded", || async { pending(&setup, &clock).await.len() == 2 && all_attempted(&setup).await }).await;
    setup.delete_endpoint("acc_a", "ep_deleted", 2).await;
    setup.endpoint("acc_a", "ep_disabled", &format!("{}/disabled", receiver.url), &[], false, 2).await;
    clock.advance(Duration::from_secs(5));
    eventually("both retries are dropped", || async { pending(&setup, &clock).await.is_empty() }).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(receiver.received().len(), 2, "no retry was sent");
}

// docs/webhooks.md: each attempt goes to the endpoint as it is then; a type taken out of
// its `types` after the delivery was queued is not sent, a type still in them is.
#[tokio::test]
async fn a_retry_of_a_type_the_endpoint_no_longer_wants_is_dropped_and_one_it_still_wants_is_sent() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500, 500]).await;
    let (narrowed, kept) = (format!("{}/narrowed", receiver.url), format!("{}/kept", receiver.url));
    setup.endpoint("acc_a", "ep_narrowed", &narrowed, &[], true, 1).await;
    setup.endpoint("acc_a", "ep_kept", &kept, &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 2).await;
    let attempted = || async {
        let mut counts = Vec::new();
        for endpoint in ["ep_narrowed", "ep_kept"] {
            counts.push(setup.webhooks.attempts("acc_a", endpoint, None, 10).await.unwrap().0.len());
        }
        counts == [1, 1]
    };
    eventually("both attempts are recorded", || async { pending(&setup, &clock).await.len() == 2 && attempted().await }).await;
    setup.endpoint("acc_a", "ep_narrowed", &narrowed, &[MessageKind::MeetingDeleted], true, 2).await;
    setup.endpoint("acc_a", "ep_kept", &kept, &[MessageKind::MeetingCreated, MessageKind::MeetingDeleted], true, 2).await;
    clock.advance(Duration::from_secs(5));
    let received = receiver.wait_for(|received| received.len() == 3).await;
    eventually("both retries are settled", || async { pending(&setup, &clock).await.is_empty() }).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(receiver.received().len(), 3, "the narrowed endpoint's retry was not sent");
    assert_eq!(received[2].path, "/kept", "the retry sent is the one its endpoint still wants");
    let (attempts, _) = setup.webhooks.attempts("acc_a", "ep_narrowed", None, 10).await.unwrap();
    assert_eq!(attempts.len(), 1, "the dropped retry is not an attempt");
}

#[tokio::test]
async fn an_endpoint_deleted_and_created_again_under_its_id_inherits_neither_its_state_nor_its_attempts_nor_its_retries() {
    let setup = setup().await;
    let receiver = Receiver::start(&[500]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let first = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
    setup.outbox(&[(1, first.clone())]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    receiver.wait_for(|received| received.len() == 1).await;
    eventually("the failure is recorded, its retry scheduled", || async {
        pending(&setup, &clock).await.len() == 1 && setup.webhooks.endpoint_state("acc_a", "ep").await.unwrap().failing_since.is_some()
    })
    .await;
    setup.delete_endpoint("acc_a", "ep", 2).await;
    setup.recreated_endpoint("acc_a", "ep", &receiver.url, 3).await;
    let (endpoint, state) = setup.webhooks.endpoint("acc_a", "ep").await.unwrap().unwrap();
    assert_eq!(state, EndpointState { endpoint_created_version: Some(3), ..EndpointState::default() }, "the new endpoint was never attempted");
    // The deleted endpoint's retry comes due: dropped, not sent to the new one.
    clock.advance(Duration::from_secs(5));
    eventually("the retry is dropped", || async { pending(&setup, &clock).await.is_empty() }).await;
    let second = message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1");
    setup.outbox(&[(2, second.clone())]).await;
    let received = receiver.wait_for(|received| received.len() == 2).await;
    eventually("the new endpoint's attempt is recorded", || async {
        !setup.webhooks.endpoint_attempts("acc_a", &endpoint, None, 10).await.unwrap().attempts.is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = stop.send(true);
    task.await.unwrap();

    let ids: Vec<String> = received.iter().map(|request| request.header("webhook-id")).collect();
    assert_eq!(ids, [first.message.id.clone(), second.message.id.clone()], "the first message is not sent again");
    let attempts = setup.webhooks.endpoint_attempts("acc_a", &endpoint, None, 10).await.unwrap().attempts;
    let listed: Vec<(&str, AttemptOutcome)> = attempts.iter().map(|attempt| (attempt.message_id.as_str(), attempt.outcome)).collect();
    assert_eq!(listed, [(second.message.id.as_str(), AttemptOutcome::Succeeded)], "only the new endpoint's attempts");
    let (_, state) = setup.webhooks.endpoint("acc_a", "ep").await.unwrap().unwrap();
    assert_eq!(
        (state.endpoint_created_version, state.failing_since, state.last_success_at),
        (Some(3), None, Some(Timestamp(START + 5 * SECOND))),
        "its own state, from its own attempt"
    );
}

#[tokio::test]
async fn an_attempt_that_outlives_its_endpoints_delete_leaves_the_state_of_the_endpoint_created_again_alone() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &format!("{}/hang", receiver.url), &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(2)));
    receiver.wait_for(|received| received.len() == 1).await;
    // While the attempt waits for its answer, the endpoint is deleted, created again,
    // and answers a message of its own.
    setup.delete_endpoint("acc_a", "ep", 2).await;
    setup.recreated_endpoint("acc_a", "ep", &receiver.url, 3).await;
    setup.outbox(&[(2, message("acc_a", MessageKind::MeetingUpdated, "evt_2", "mtg_1"))]).await;
    receiver.wait_for(|received| received.len() == 2).await;
    let answered = || async { setup.webhooks.endpoint("acc_a", "ep").await.unwrap().unwrap().1.last_success_at.is_some() };
    eventually("the new endpoint's success is recorded", answered).await;
    // The first attempt ends, timed out, and is recorded.
    eventually("the first attempt is recorded", || async {
        setup.webhooks.attempts("acc_a", "ep", None, 10).await.unwrap().0.iter().any(|attempt| attempt.outcome == AttemptOutcome::TimedOut)
    })
    .await;
    let _ = stop.send(true);
    task.await.unwrap();

    let (_, state) = setup.webhooks.endpoint("acc_a", "ep").await.unwrap().unwrap();
    assert_eq!(
        (state.endpoint_created_version, state.failing_since, state.last_success_at),
        (Some(3), None, Some(Timestamp(START))),
        "the new endpoint's state, not the deleted one's failure"
    );
}

async fn all_attempted(setup: &Setup) -> bool {
    let (deleted, _) = setup.webhooks.attempts("acc_a", "ep_deleted", None, 10).await.unwrap();
    let (disabled, _) = setup.webhooks.attempts("acc_a", "ep_disabled", None, 10).await.unwrap();
    deleted.len() == 1 && disabled.len() == 1
}

#[tokio::test]
async fn during_a_rotation_the_delivery_carries_both_signatures_and_an_expired_secret_none() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    let previous = "whsec_cHJldmlvdXMtc2VjcmV0LWtleQ==";
    let expired = "whsec_ZXhwaXJlZC1zZWNyZXQta2V5";
    let secrets = vec![
        SigningSecret { secret: SECRET.into(), expires_at: None },
        SigningSecret { secret: previous.into(), expires_at: Some(Timestamp(START + 3600 * SECOND)) },
        SigningSecret { secret: expired.into(), expires_at: Some(Timestamp(START)) },
    ];
    setup.endpoint_with_secrets("acc_a", "ep", &receiver.url, &[], true, 1, secrets).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
    let received = receiver.wait_for(|received| received.len() == 1).await;
    let _ = stop.send(true);
    task.await.unwrap();
    let request = &received[0];
    let id = request.header("webhook-id");
    let sign = |secret: &str| recap_webhooks::signing::signature(secret, &id, START / SECOND, request.body.as_bytes()).unwrap();
    assert_eq!(request.header("webhook-signature"), format!("{} {}", sign(SECRET), sign(previous)));
}

#[tokio::test]
async fn without_the_development_flag_a_loopback_endpoint_is_refused_and_recorded_unreachable() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    let https_loopback = receiver.url.replace("http://", "https://");
    setup.endpoint("acc_a", "ep_http", &receiver.url, &[], true, 1).await;
    setup.endpoint("acc_a", "ep_loopback", &https_loopback, &[], true, 1).await;
    setup.outbox(&[(1, message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1"))]).await;
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
    runtime.client = recap_webhooks::SafeClient::new(recap_webhooks::ClientConfig::default());
    let (stop, task) = start(runtime);
    for (endpoint, error) in [("ep_http", "refused: scheme http (only https)"), ("ep_loopback", "refused: the host resolves to a loopback")] {
        eventually("the attempt is recorded", || async { !setup.webhooks.attempts("acc_a", endpoint, None, 10).await.unwrap().0.is_empty() }).await;
        let (attempts, _) = setup.webhooks.attempts("acc_a", endpoint, None, 10).await.unwrap();
        assert_eq!((attempts[0].outcome, attempts[0].error.as_deref()), (AttemptOutcome::Unreachable, Some(error)));
    }
    let _ = stop.send(true);
    task.await.unwrap();
    assert!(receiver.received().is_empty());
}

fn batch_of(seqs: std::ops::RangeInclusive<i64>, meeting: impl Fn(i64) -> String) -> Vec<recap_webhooks::ingest::LogMessage> {
    seqs.map(|seq| recap_webhooks::ingest::LogMessage::new(seq, "0", &message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &meeting(seq))))
        .collect()
}

/// The message log is the queue of first attempts: a batch read again (after a crash,
/// before the position covered it) appends the same feed rows and hands its first
/// attempts over again, in memory, without a row.
#[tokio::test]
async fn ingesting_a_batch_again_appends_the_same_feed_rows_and_hands_its_first_attempts_over_again() {
    let setup = setup().await;
    setup.endpoint("acc_a", "ep", "https://receiver.example/hook", &[], true, 1).await;
    let batch = batch_of(1..=3, |_| "mtg_1".into());
    let stats = recap_webhooks::Stats::default();
    let shards = recap_webhooks::Shards::fixed(&["0"]);
    let handoff = recap_webhooks::Handoff::new(100);
    let first = recap_webhooks::ingest::ingest(&setup.webhooks, &batch, START, &stats, &shards, &handoff).await.unwrap();
    let again = recap_webhooks::ingest::ingest(&setup.webhooks, &batch, START + 60 * SECOND, &stats, &shards, &handoff).await.unwrap();
    assert_eq!((first.appended, first.deliveries, first.written), (3, 3, 0));
    assert_eq!(again, first, "a replay of the same seqs claims its own ids again");
    assert_eq!(handoff.ledger().unsettled().0, 6, "each first attempt handed over twice, in memory");
    let clock = ManualClock::at(START);
    assert!(pending(&setup, &clock).await.is_empty(), "no row for a first attempt handed over");
    let twice = vec![batch[0].clone(), recap_webhooks::ingest::LogMessage { seq: 9, ..batch[0].clone() }];
    let within = recap_webhooks::ingest::ingest(&setup.webhooks, &twice, START, &stats, &shards, &handoff).await.unwrap();
    assert_eq!((within.appended, within.duplicates), (1, 1), "a message a batch carries twice keeps its first seq");
    let moved: Vec<_> = batch.iter().map(|entry| recap_webhooks::ingest::LogMessage { seq: entry.seq + 10, ..entry.clone() }).collect();
    let duplicate = recap_webhooks::ingest::ingest(&setup.webhooks, &moved, START, &stats, &shards, &handoff).await.unwrap();
    assert_eq!((duplicate.appended, duplicate.duplicates, duplicate.deliveries), (0, 3, 0), "the same messages at other seqs are duplicates");
    assert_eq!(setup.webhooks.feed_page("acc_a", None, 10, &[]).await.unwrap().messages.len(), 3);
}

/// A batch's claims are written with its feed rows, and the heads after them: one
/// write (one commit) on the embedded store, whose writes land all or nothing; two on
/// Cassandra, the heads only once the rows below them are written. A replay writes no
/// claim again.
#[tokio::test]
async fn a_batch_writes_its_claims_with_its_feed_rows_and_its_heads_last() {
    use recap_readmodel::tables::{FEED, FEED_FLOORS, FEED_HEADS, MESSAGE_CLAIMS};
    let setup = setup().await;
    setup.endpoint("acc_a", "ep", "https://receiver.example/hook", &[], true, 1).await;
    let writes = FaultyDriver::new(setup.driver());
    writes.record_writes();
    let store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(writes.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let (stats, shards, handoff) = (recap_webhooks::Stats::default(), recap_webhooks::Shards::fixed(&["0"]), recap_webhooks::Handoff::new(100));
    let batch = batch_of(1..=3, |seq| format!("mtg_{seq}"));
    recap_webhooks::ingest::ingest(&store, &batch, START, &stats, &shards, &handoff).await.unwrap();
    let tables = |write: &Vec<recap_readmodel::Mutation>| {
        let mut tables: Vec<&str> = write.iter().map(|row| row.table.name).collect();
        tables.dedup();
        tables
    };
    let written: Vec<Vec<&str>> = writes.take_recorded().iter().map(tables).collect();
    if store.writes_atomically() {
        assert_eq!(written, vec![vec![MESSAGE_CLAIMS.name, FEED.name, FEED_FLOORS.name, FEED_HEADS.name]]);
    } else {
        assert_eq!(written, vec![vec![MESSAGE_CLAIMS.name, FEED.name, FEED_FLOORS.name], vec![FEED_HEADS.name]]);
    }
    recap_webhooks::ingest::ingest(&store, &batch, START, &stats, &shards, &handoff).await.unwrap();
    let again: Vec<Vec<&str>> = writes.take_recorded().iter().map(tables).collect();
    assert!(again.iter().flatten().all(|table| *table != MESSAGE_CLAIMS.name), "a replay finds its claims: {again:?}");
    for entry in &batch {
        assert_eq!(setup.webhooks.message("acc_a", &entry.id).await.unwrap().map(|(seq, _)| seq), Some(entry.seq));
    }
}

/// A batch's reads overlap: its claims, and the endpoints of every account it delivers
/// for with their states and secrets, are read side by side, so a store whose reads
/// take a round trip (ScyllaDB's) keeps a batch waiting for two of them, not for one
/// a read. The round trip is long beside the rest of the batch's work, and the bound
/// leaves four of them for a busy machine: one after another, the reads take 28.
#[tokio::test]
async fn a_batch_reads_its_claims_and_every_accounts_endpoints_side_by_side() {
    let setup = setup().await;
    let accounts = ["acc_a", "acc_b", "acc_c", "acc_d"];
    for account in accounts {
        setup.endpoint(account, "ep_1", "https://receiver.example/hook", &[], true, 1).await;
        setup.endpoint(account, "ep_2", "https://receiver.example/other", &[], true, 1).await;
    }
    let batch: Vec<_> = (1..=12i64)
        .map(|seq| {
            let account = accounts[(seq % 4) as usize];
            recap_webhooks::ingest::LogMessage::new(seq, "0", &message(account, MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))
        })
        .collect();
    let reads = FaultyDriver::new(setup.driver());
    let round_trip = Duration::from_millis(250);
    reads.slow_gets(round_trip);
    let store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(reads.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let handoff = recap_webhooks::Handoff::new(100);
    let started = std::time::Instant::now();
    let ingested = recap_webhooks::ingest::ingest(&store, &batch, START, &recap_webhooks::Stats::default(), &recap_webhooks::Shards::fixed(&["0"]), &handoff)
        .await
        .unwrap();
    let waited = started.elapsed();
    assert_eq!((ingested.appended, ingested.deliveries), (12, 24));
    // The claims' marker, and per account 2 states and 2 secrets: 17 point reads, one
    // after another 17 round trips; the states wait for their account's endpoints, the
    // secrets for their states. An account's 3 claims are one scan.
    assert_eq!(reads.gets(), 17);
    assert!(waited < round_trip * 6, "the batch waited {waited:?}, {:.1} round trips", waited.as_secs_f64() / round_trip.as_secs_f64());
}

/// A batch reads the secrets of the endpoints that take one of its deliveries only: an
/// endpoint wanting none of the kinds its account has in the batch costs its state's
/// read, not its secrets'.
#[tokio::test]
async fn a_batch_reads_no_secrets_of_an_endpoint_that_wants_none_of_its_kinds() {
    let setup = setup().await;
    setup.endpoint("acc_a", "ep_teams", "https://receiver.example/teams", &[MessageKind::TeamJoined], true, 1).await;
    let reads = FaultyDriver::new(setup.driver());
    let store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(reads.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let batch = batch_of(1..=3, |seq| format!("mtg_{seq}"));
    let ingested = recap_webhooks::ingest::ingest(
        &store,
        &batch,
        START,
        &recap_webhooks::Stats::default(),
        &recap_webhooks::Shards::fixed(&["0"]),
        &recap_webhooks::Handoff::new(100),
    )
    .await
    .unwrap();
    assert_eq!((ingested.appended, ingested.deliveries), (3, 0));
    assert_eq!(reads.gets(), 1 + 1, "the claims' marker and the endpoint's state (the three claims are one scan)");
}

/// Memory holds a bounded number of deliveries: the first attempts past the bound are
/// written as rows, due at once, in the write of the batch's feed rows.
#[tokio::test]
async fn first_attempts_past_what_memory_holds_are_written_as_rows_due_at_once() {
    let setup = setup().await;
    setup.endpoint("acc_a", "ep", "https://receiver.example/hook", &[], true, 1).await;
    let batch = batch_of(1..=5, |seq| format!("mtg_{seq}"));
    let handoff = recap_webhooks::Handoff::new(2);
    let ingested =
        recap_webhooks::ingest::ingest(&setup.webhooks, &batch, START, &recap_webhooks::Stats::default(), &recap_webhooks::Shards::fixed(&["0"]), &handoff)
            .await
            .unwrap();
    assert_eq!((ingested.deliveries, ingested.written), (5, 3));
    assert_eq!(handoff.ledger().unsettled().0, 2, "the first two in memory");
    let rows = pending(&setup, &ManualClock::at(START)).await;
    let mut rows: Vec<(i64, i64, u32)> = rows.iter().map(|due| (due.due_at, due.delivery.seq, due.delivery.attempt)).collect();
    rows.sort();
    assert_eq!(rows, vec![(START, 3, 1), (START, 4, 1), (START, 5, 1)]);
}

/// A batch waits while the deliverer frees room only for its own deliveries: one whose
/// messages no endpoint takes goes through at once however full the window is, and one
/// whose deliveries do not fit waits at most the limit, then writes them as rows.
#[tokio::test]
async fn a_batch_waits_for_room_only_for_its_own_deliveries_and_at_most_the_limit() {
    use recap_webhooks::handoff::RoomWait;
    use recap_webhooks::Handoff;
    let setup = setup().await;
    setup.endpoint("acc_a", "ep", "https://receiver.example/hook", &[], true, 1).await;
    let (stats, shards) = (recap_webhooks::Stats::default(), recap_webhooks::Shards::fixed(&["0"]));
    let ingest = |handoff: &Handoff, batch: Vec<recap_webhooks::ingest::LogMessage>| {
        let (setup, stats, shards, handoff) = (&setup, &stats, &shards, handoff.clone());
        async move {
            let started = std::time::Instant::now();
            let ingested = recap_webhooks::ingest::ingest(&setup.webhooks, &batch, START, stats, shards, &handoff).await.unwrap();
            (ingested, started.elapsed())
        }
    };
    // Windows of two, filled by two deliveries nothing takes out; the probe is longer
    // than either limit, so only a limit ends a wait.
    let full = |limit: Duration| async move {
        let handoff = Handoff::with_room_wait(2, RoomWait { limit, probe: Duration::from_secs(600) });
        let (filled, _) = ingest(&handoff, batch_of(1..=2, |seq| format!("mtg_{seq}"))).await;
        assert_eq!((filled.deliveries, filled.written, handoff.room()), (2, 0, 0), "the window is full");
        handoff
    };

    let limit = Duration::from_secs(120);
    let handoff = full(limit).await;
    let others: Vec<_> = (3..=4)
        .map(|seq| recap_webhooks::ingest::LogMessage::new(seq, "0", &message("acc_b", MessageKind::MeetingCreated, &format!("evt_{seq}"), "mtg_b")))
        .collect();
    let (ingested, took) = ingest(&handoff, others).await;
    assert_eq!((ingested.appended, ingested.deliveries), (2, 0));
    assert!(took < limit / 2, "no endpoint takes them: no wait ({took:?})");

    let limit = Duration::from_secs(2);
    let handoff = full(limit).await;
    let (ingested, took) = ingest(&handoff, batch_of(5..=7, |seq| format!("mtg_{seq}"))).await;
    assert_eq!((ingested.deliveries, ingested.written), (3, 3));
    assert!(took >= limit, "nothing freed: the limit ends the wait ({took:?})");
}

/// The room a batch's first attempts go over in is taken before the batch is written:
/// another batch written meanwhile writes its own first attempts as rows in its own
/// write, never after its feed rows in a second write whose failure would leave first
/// attempts registered that nothing settles (the log position then held for good). A
/// batch whose write fails gives its room back and leaves nothing in memory.
#[tokio::test]
async fn a_batch_takes_its_room_before_its_write_and_gives_it_back_when_the_write_fails() {
    use recap_readmodel::tables::WEBHOOK_RETRIES;
    let setup = setup().await;
    setup.endpoint("acc_a", "ep", "https://receiver.example/hook", &[], true, 1).await;
    let faulty = FaultyDriver::new(setup.driver());
    let store = recap_readmodel::webhooks::WebhookStore::new(Arc::new(faulty.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let (stats, shards, handoff) = (recap_webhooks::Stats::default(), recap_webhooks::Shards::fixed(&["0"]), recap_webhooks::Handoff::new(3));
    let ingest = |batch: Vec<recap_webhooks::ingest::LogMessage>| {
        let (store, stats, shards, handoff) = (store.clone(), &stats, &shards, handoff.clone());
        async move { recap_webhooks::ingest::ingest(&store, &batch, START, stats, shards, &handoff).await }
    };

    faulty.fail_everything();
    assert!(ingest(batch_of(1..=3, |seq| format!("mtg_{seq}"))).await.is_err());
    assert_eq!((handoff.room(), handoff.ledger().unsettled().0), (3, 0), "a failed batch keeps no room and leaves nothing to settle");
    faulty.heal();

    // The second batch comes while the first one's write is held: once the first
    // took the window's room (or after a second, for a batch that would not take it
    // before its write). Rows cannot be written.
    faulty.fail_table(WEBHOOK_RETRIES.name);
    faulty.hold_writes();
    let (first, second) = tokio::join!(ingest(batch_of(1..=3, |seq| format!("mtg_{seq}"))), async {
        let waited = std::time::Instant::now();
        while handoff.room() > 0 && waited.elapsed() < Duration::from_secs(1) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let second = ingest(batch_of(4..=6, |seq| format!("mtg_{seq}")));
        let released = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            faulty.release_writes();
        };
        tokio::join!(second, released).0
    });
    let first = first.unwrap();
    assert_eq!((first.deliveries, first.written), (3, 0), "the first batch went over in memory");
    assert!(second.is_err(), "the second batch's first attempts are rows, in its own write, which fails");
    assert_eq!(handoff.ledger().unsettled().0, 3, "only the first batch's first attempts are in memory, each to settle");
}

#[tokio::test]
async fn a_store_that_fails_during_delivery_loses_no_message_and_repeats_only_with_the_same_id() {
    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let messages: Vec<_> = (1..=20i64).map(|seq| (seq, message("acc_a", MessageKind::MeetingCreated, &format!("evt_{seq}"), &format!("mtg_{seq}")))).collect();
    setup.outbox(&messages).await;
    let faulty = recap_testkit::FaultyDriver::new(setup.driver());
    // Nothing answers at first: neither the outbox nor the deliveries can be read.
    faulty.fail_everything();
    let clock = ManualClock::at(START);
    let mut runtime = runtime(&setup, &clock, Duration::from_secs(5));
    runtime.driver = std::sync::Arc::new(faulty.clone());
    runtime.store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(faulty.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
    let (stop, task) = start(runtime);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.received().is_empty());
    // Then deliveries go out but their attempts cannot be recorded: each is sent again,
    // for as long as the fault lasts (here until more than one round of them came).
    faulty.heal();
    faulty.fail_table("webhook_attempts");
    receiver.wait_for(|received| received.len() > 20).await;
    faulty.heal();
    let ids: std::collections::BTreeSet<String> = messages.iter().map(|(_, message)| message.message.id.clone()).collect();
    let received = receiver.wait_for(|received| ids.iter().all(|id| received.iter().any(|r| &r.header("webhook-id") == id))).await;
    eventually("every delivery is done", || async { committed_position(&setup).await == 20 && pending(&setup, &clock).await.is_empty() }).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert!(received.len() > ids.len(), "attempts that could not be recorded were sent again");
    for request in &received {
        let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(body["id"], request.header("webhook-id"));
        assert!(ids.contains(&request.header("webhook-id")));
    }
    let (attempts, _) = setup.webhooks.attempts("acc_a", "ep", None, 100).await.unwrap();
    assert_eq!(attempts.iter().filter(|attempt| attempt.outcome == AttemptOutcome::Succeeded).count(), 20, "one recorded success per message");
}

/// The deliverer as the runtime builds it, over `driver`, on `handoff` and shard "0".
fn deliverer_over(setup: &Setup, clock: &ManualClock, handoff: &recap_webhooks::Handoff) -> recap_webhooks::Deliverer {
    let runtime = runtime(setup, clock, Duration::from_secs(5));
    recap_webhooks::Deliverer::new(
        runtime.store,
        runtime.client,
        runtime.clock,
        runtime.stats,
        recap_webhooks::Shards::fixed(&["0"]),
        handoff.clone(),
        runtime.deliverer,
    )
}

/// Read-your-webhook holds for a first attempt handed over in memory too: it is sent
/// only once its account's feed head covers it, whoever wrote the head; until then it
/// holds its message's position.
#[tokio::test]
async fn a_first_attempt_handed_over_in_memory_waits_until_the_feed_head_covers_its_message() {
    use recap_webhooks::handoff::{FirstAttempt, PreparedEndpoint, PreparedMessage};

    let setup = setup().await;
    let receiver = Receiver::start(&[]).await;
    setup.endpoint("acc_a", "ep", &receiver.url, &[], true, 1).await;
    let created = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
    let store = &setup.webhooks;
    assert_eq!(store.claim_many(&[("acc_a", 1, &created.message)]).await.unwrap(), vec![recap_readmodel::webhooks::Claimed::New]);
    let delivery = recap_readmodel::webhooks::Delivery {
        account_id: "acc_a".into(),
        endpoint_id: "ep".into(),
        endpoint_created_version: Some(1),
        message_id: created.message.id.clone(),
        seq: 1,
        attempt: 1,
    };
    store.write(vec![store.feed_row("acc_a", 1, &created.message)]).await.unwrap();
    let (endpoint, _) = store.endpoint("acc_a", "ep").await.unwrap().unwrap();
    let secrets = store.secrets("acc_a", "ep").await.unwrap();
    let prepared = PreparedEndpoint {
        endpoint,
        signer: recap_webhooks::signing::Signer::new(&secrets),
        health: recap_webhooks::handoff::Health::Unknown,
        read_at: std::time::Instant::now(),
        changes: store.endpoint_changes(),
    };
    let handoff = recap_webhooks::Handoff::new(100);
    let ticket = handoff.ledger().register("0", 1, 1, START);
    handoff.ledger().read_to("0", 1);
    let first_attempt = FirstAttempt {
        due: recap_readmodel::webhooks::DueDelivery { shard: "0".into(), due_at: created.message.created_at.micros(), delivery },
        message: std::sync::Arc::new(PreparedMessage::new(1, &created.message)),
        endpoint: std::sync::Arc::new(prepared),
        ticket,
    };

    let clock = ManualClock::at(START);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(deliverer_over(&setup, &clock, &handoff).run(stopped));
    assert!(handoff.offer(vec![first_attempt]).is_empty(), "taken in memory");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.received().is_empty(), "not sent while the feed's head does not cover it");
    assert_eq!(handoff.ledger().position("0"), Some(0), "still to make: its message holds the position");

    store.write(vec![store.head_row("acc_a", 1)]).await.unwrap();
    let received = receiver.wait_for(|received| !received.is_empty()).await;
    assert_eq!(received[0].header("webhook-id"), created.message.id);
    assert_eq!(received[0].body, created.message.to_json(), "the message as the feed serves it");
    eventually("the first attempt is settled", || async { handoff.ledger().position("0") == Some(1) }).await;
    let _ = stop.send(true);
    task.await.unwrap();
    assert_eq!(receiver.received().len(), 1);
    assert!(pending(&setup, &clock).await.is_empty());
}

/// A receiver that answers 500 to a message's first request and 200 to the next ones,
/// calling `on_success` before each 200; the `webhook-id` of every request, in order.
async fn failing_once(on_success: impl Fn() + Clone + Send + Sync + 'static) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let ids = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let app = {
        let ids = ids.clone();
        axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let (ids, on_success) = (ids.clone(), on_success.clone());
            async move {
                let id = headers.get("webhook-id").and_then(|id| id.to_str().ok()).unwrap_or_default().to_owned();
                let mut ids = ids.lock().unwrap();
                let seen = ids.contains(&id);
                ids.push(id);
                if !seen {
                    return axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                }
                on_success();
                axum::http::StatusCode::OK
            }
        })
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, ids)
}

/// A row's removal lands only after its record: in the record's own write where the
/// store writes atomically (the embedded one), in a later write where it does not
/// (ScyllaDB). A process killed after the record and before the removal loses nothing:
/// the row is still due, and the delivery is made again with the same `webhook-id`.
#[tokio::test]
async fn a_delivery_whose_removal_never_landed_before_a_crash_is_made_again_with_the_same_id() {
    for atomic_store in [true, false] {
        let setup = setup().await;
        let faulty = recap_testkit::FaultyDriver::new(setup.driver());
        let faulty = if atomic_store { faulty } else { faulty.not_atomic() };
        let atomic = recap_readmodel::Driver::writes_atomically(&faulty);
        // The first attempt fails (its retry is a row); at the retry the receiver answers
        // 200, and from then on the store refuses every write of a retry row: the
        // removal never lands.
        let (url, ids) = failing_once({
            let faulty = faulty.clone();
            move || faulty.fail_table("webhook_retries")
        })
        .await;
        setup.endpoint("acc_a", "ep", &url, &[], true, 1).await;
        let created = message("acc_a", MessageKind::MeetingCreated, "evt_1", "mtg_1");
        setup.outbox(&[(1, created.clone())]).await;
        let clock = ManualClock::at(START);
        let mut crashing = runtime(&setup, &clock, Duration::from_secs(5));
        crashing.driver = std::sync::Arc::new(faulty.clone());
        crashing.store = recap_readmodel::webhooks::WebhookStore::new(std::sync::Arc::new(faulty.clone()), recap_readmodel::webhooks::DEFAULT_RETENTION);
        let (_stop, task) = start(crashing);
        let recorded = || async { setup.webhooks.attempts("acc_a", "ep", None, 100).await.unwrap().0.len() };
        eventually("the first attempt's failure is recorded", || async { recorded().await == 1 }).await;
        clock.advance(Duration::from_secs(5));
        eventually("the retry is sent", || async { ids.lock().unwrap().len() == 2 }).await;
        if !atomic {
            eventually("its record is written", || async { recorded().await == 2 }).await;
        }
        // Killed: whatever was under way stops where it is.
        task.abort();
        let _ = task.await;
        assert_eq!(pending(&setup, &clock).await.len(), 1, "atomic store: {atomic}; the retry is still due");
        if atomic {
            assert_eq!(recorded().await, 1, "the record shares the removal's write: neither landed");
        }

        let (stop, task) = start(runtime(&setup, &clock, Duration::from_secs(5)));
        eventually("the delivery is made again and done", || async { pending(&setup, &clock).await.is_empty() }).await;
        let _ = stop.send(true);
        task.await.unwrap();
        let ids = ids.lock().unwrap().clone();
        assert!(ids.len() >= 3, "sent again after the crash: {ids:?}");
        assert!(ids.iter().all(|id| *id == created.message.id), "always with the same webhook-id: {ids:?}");
    }
}
