//! The embedded edition's message log: the messages a batch announces land in
//! `message_outbox` in the same commit as its rows, at consecutive seqs from 1, exactly
//! once per change, also when a batch's write fails and the batch is projected again.

use std::sync::Arc;

use recap_lmdb::EmbeddedDriver;
use recap_projector::{committed_progress, EmbeddedProjector, EventLog, LoopConfig};
use recap_readmodel::messages::AccountMessage;
use recap_readmodel::tables::MESSAGE_OUTBOX;
use recap_readmodel::{Driver, ScanRange, Val};
use recap_schemas::build::{Epoch, Events};
use recap_testkit::faulty::FaultyDriver;

const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_790_000_000));

fn lines(envelopes: Vec<recap_schemas::Envelope>) -> Vec<u8> {
    envelopes.iter().map(|envelope| envelope.to_line() + "\n").collect::<String>().into_bytes()
}

/// The outbox: (seq, account, type, message id), in seq order.
async fn outbox(driver: &dyn Driver) -> Vec<(i64, String, String, String)> {
    let rows = driver.scan(&MESSAGE_OUTBOX, &[Val::text("log")], &ScanRange::all(), usize::MAX).await.unwrap();
    rows.into_iter()
        .map(|row| {
            let told: AccountMessage = serde_json::from_str(&row.body).unwrap();
            (row.clustering[0].as_int().unwrap(), told.account_id, told.message.kind.as_str().to_string(), told.message.id)
        })
        .collect()
}

fn first_events() -> Vec<recap_schemas::Envelope> {
    vec![EVENTS.meeting("acc", "m1").title("Weekly").version(1).envelope(), EVENTS.share("s1", "acc").recipients(["bob"]).envelope()]
}

fn second_events() -> Vec<recap_schemas::Envelope> {
    vec![
        EVENTS.meeting("acc", "m1").title("Renamed").version(2).envelope(),
        EVENTS.unshared("s1").version(2).envelope(),
        // Stale: announces nothing.
        EVENTS.meeting("acc", "m1").title("Old").version(1).envelope(),
    ]
}

#[tokio::test]
async fn messages_land_in_the_outbox_at_consecutive_seqs_with_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    let log = EventLog::new(dir.path().join("events.log"));
    log.append("test", &lines(first_events())).unwrap();
    let projector = EmbeddedProjector::new(driver.clone(), log.clone(), dir.path().join("dl"), LoopConfig::default());
    let progress = projector.drain().await.unwrap();
    let kinds: Vec<(i64, String, String)> = outbox(driver.as_ref()).await.into_iter().map(|(seq, account, kind, _)| (seq, account, kind)).collect();
    assert_eq!(kinds, vec![(1, "acc".into(), "meeting.created".into()), (2, "bob".into(), "shared_note.received".into())]);
    assert_eq!(progress.messages, 2, "the committed count is the last seq");
    assert_eq!(committed_progress(driver.as_ref()).await.unwrap().messages, 2);
    // Nothing new in the log: nothing new in the outbox.
    projector.drain().await.unwrap();
    assert_eq!(outbox(driver.as_ref()).await.len(), 2);
}

#[tokio::test]
async fn a_batch_projected_again_after_a_failed_write_writes_its_messages_once_at_the_same_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    let faulty = FaultyDriver::new(store.clone());
    let driver: Arc<dyn Driver> = Arc::new(faulty.clone());
    let log = EventLog::new(dir.path().join("events.log"));
    log.append("test", &lines(first_events())).unwrap();
    let projector = EmbeddedProjector::new(driver.clone(), log.clone(), dir.path().join("dl"), LoopConfig::default());
    projector.drain().await.unwrap();
    log.append("test", &lines(second_events())).unwrap();
    faulty.fail_table(MESSAGE_OUTBOX.name);
    assert!(projector.drain().await.is_err(), "the batch's write fails");
    assert_eq!(outbox(store.as_ref()).await.len(), 2, "nothing of the failed batch is written");
    faulty.heal();
    let progress = projector.drain().await.unwrap();
    let written = outbox(store.as_ref()).await;
    let seqs: Vec<i64> = written.iter().map(|(seq, ..)| *seq).collect();
    assert_eq!(seqs, (1..=4).collect::<Vec<i64>>(), "consecutive, no gap, no repeat");
    assert_eq!(progress.messages, 4);
    let kinds: Vec<&str> = written[2..].iter().map(|(_, _, kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["meeting.updated", "shared_note.withdrawn"]);
    // The same stream projected into a fresh store announces the same messages at the
    // same seqs.
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&fresh_dir.path().join("store.lmdb")).unwrap());
    EmbeddedProjector::new(fresh.clone(), log.clone(), fresh_dir.path().join("dl"), LoopConfig::default()).drain().await.unwrap();
    assert_eq!(outbox(fresh.as_ref()).await, written);
}
