//! Group commit of the deliverer's records: attempts that end together share their
//! store writes. An attempt hands in the rows of its record (with the endpoint's state)
//! and, when its delivery has a row, the row's removal, and waits until each is written; the recorder
//! writes everything handed in while its previous write was under way as one
//! [`WebhookStore::write`] (one commit on the embedded store, instead of one per attempt
//! and step).
//!
//! A delivery's removal never lands before its record (and the retry row the record
//! may carry): where the store applies a write atomically (the embedded one), the
//! removal shares its record's write; where it does not (ScyllaDB, whose rows of one
//! write land concurrently), the removal waits for its record's write to succeed and
//! goes out with the next group, which the recorder then starts without waiting for
//! new hand-ins. A record whose write failed takes its removal with it: the row stays,
//! and the delivery is tried again.
//!
//! A group that starts with few hand-ins waits a little for more ([`Linger`]): on the
//! embedded store a write is a commit, whose cost (the B-tree's path pages, the meta
//! page, the sync) is the same for one attempt as for a hundred, so a busy deliverer
//! makes several times fewer commits. The wait ends early once the group holds
//! [`Linger::hand_ins`] hand-ins: each is an attempt holding one of the process's
//! attempt slots until its record is written, and a group must never hold most of them.
//!
//! Endpoint states are handed in keyed by endpoint: of the states of one endpoint that
//! meet in one write, only the last handed in is written, and only it is made into a
//! row (a busy endpoint's attempts in one group leave one row to encode, not one each).
//! The deliverer hands them in under the endpoint's lock, so the last is the newest.

use std::collections::HashMap;
use std::time::Duration;

use recap_readmodel::webhooks::{EndpointState, WebhookStore};
use recap_readmodel::{Mutation, StoreError};
use tokio::sync::{mpsc, oneshot};

/// Rows written at once, at most (a group closes when it has this many).
const GROUP_ROWS: usize = 4_096;

/// How long a group waits for more hand-ins, and up to how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Linger {
    /// Counted from the group's first hand-in; zero writes at once.
    pub wait: Duration,
    /// The group is written without waiting further once it holds this many.
    pub hand_ins: usize,
}

impl Default for Linger {
    /// Two milliseconds, or 64 hand-ins (a quarter of the default 256 attempt slots).
    fn default() -> Linger {
        Linger { wait: Duration::from_millis(2), hand_ins: 64 }
    }
}

/// An endpoint: account id and endpoint id.
pub type EndpointKey = (String, String);

type Written = oneshot::Sender<Result<(), StoreError>>;

/// An endpoint's state as an attempt left it, and the timestamp its row is written with.
#[derive(Clone, Debug)]
pub struct StateWrite {
    pub endpoint: EndpointKey,
    pub state: EndpointState,
    pub ts: i64,
}

struct Submission {
    rows: Vec<Mutation>,
    state: Option<StateWrite>,
    written: Written,
    /// A removal (with the delivery's progress, for a retry) written only after
    /// `rows`, and told through its own sender.
    removal: Option<(Vec<Mutation>, Written)>,
}

impl Submission {
    /// The rows it adds to a group: its own, its endpoint's state and its removal's.
    fn rows(&self) -> usize {
        self.rows.len() + 1 + self.removal.as_ref().map_or(0, |(removal, _)| removal.len())
    }
}

/// The deliverer's writer. Cheap to clone; its task ends with the last clone.
#[derive(Clone)]
pub struct Recorder {
    submissions: mpsc::UnboundedSender<Submission>,
}

/// A step handed in: resolves once its rows are written, or with why not.
pub struct Pending(oneshot::Receiver<Result<(), StoreError>>);

impl Pending {
    pub async fn written(self) -> Result<(), StoreError> {
        self.0.await.unwrap_or_else(|_| Err(StoreError::Unavailable("the delivery recorder stopped".into())))
    }
}

impl Recorder {
    /// Starts the writer task on the current runtime.
    pub fn start(store: WebhookStore, linger: Linger) -> Recorder {
        let (submissions, received) = mpsc::unbounded_channel();
        tokio::spawn(run(store, linger, received));
        Recorder { submissions }
    }

    /// Hands in `rows` and, when given, an endpoint's state; the order of hand-ins is
    /// the order of states.
    pub fn submit(&self, rows: Vec<Mutation>, state: Option<StateWrite>) -> Pending {
        let (written, pending) = oneshot::channel();
        // A send fails only once the task is gone; `Pending` then tells so.
        let _ = self.submissions.send(Submission { rows, state, written, removal: None });
        Pending(pending)
    }

    /// Hands in an attempt's record (`rows` and the endpoint's `state`, when it has one
    /// to keep) and, for a delivery that has a row, the row's removal (and the rows
    /// that go with it): the first resolves once the record is written, the second once
    /// the removal is, never before the record.
    pub fn submit_attempt(&self, rows: Vec<Mutation>, state: Option<StateWrite>, removal: Option<Vec<Mutation>>) -> (Pending, Option<Pending>) {
        let (written, record) = oneshot::channel();
        let Some(removal) = removal else {
            let _ = self.submissions.send(Submission { rows, state, written, removal: None });
            return (Pending(record), None);
        };
        let (removed, removal_pending) = oneshot::channel();
        let _ = self.submissions.send(Submission { rows, state, written, removal: Some((removal, removed)) });
        (Pending(record), Some(Pending(removal_pending)))
    }

    /// Writes `rows` with the next group and waits for them.
    pub async fn write(&self, rows: Vec<Mutation>) -> Result<(), StoreError> {
        self.submit(rows, None).written().await
    }
}

async fn run(store: WebhookStore, linger: Linger, mut received: mpsc::UnboundedReceiver<Submission>) {
    let atomic = store.writes_atomically();
    // Removals whose records are written, for the next group (non-atomic stores).
    let mut removals: Vec<(Vec<Mutation>, Written)> = Vec::new();
    loop {
        let first = if removals.is_empty() {
            match received.recv().await {
                Some(submission) => Some(submission),
                None => break,
            }
        } else {
            received.try_recv().ok()
        };
        let mut count = removals.iter().map(|(removal, _)| removal.len()).sum::<usize>();
        let mut group = Vec::new();
        if let Some(first) = first {
            count += first.rows();
            group.push(first);
        }
        while count < GROUP_ROWS {
            match received.try_recv() {
                Ok(submission) => {
                    count += submission.rows();
                    group.push(submission);
                }
                Err(_) => break,
            }
        }
        if !linger.wait.is_zero() && !group.is_empty() {
            let until = tokio::time::Instant::now() + linger.wait;
            while count < GROUP_ROWS && group.len() < linger.hand_ins {
                match tokio::time::timeout_at(until, received.recv()).await {
                    Ok(Some(submission)) => {
                        count += submission.rows();
                        group.push(submission);
                    }
                    // The wait is over, or every sender is gone: write what there is.
                    Ok(None) | Err(_) => break,
                }
            }
        }
        let mut rows = Vec::with_capacity(count);
        let mut told = Vec::with_capacity(group.len() + removals.len());
        for (removal, removed) in removals.drain(..) {
            rows.extend(removal);
            told.push(removed);
        }
        let mut states: HashMap<EndpointKey, (EndpointState, i64)> = HashMap::new();
        let mut after = Vec::new();
        for submission in group {
            rows.extend(submission.rows);
            if let Some(StateWrite { endpoint, state, ts }) = submission.state {
                states.insert(endpoint, (state, ts));
            }
            told.push(submission.written);
            match submission.removal {
                Some((removal, removed)) if atomic => {
                    rows.extend(removal);
                    told.push(removed);
                }
                Some(removal) => after.push(removal),
                None => {}
            }
        }
        rows.extend(states.into_iter().map(|((account_id, endpoint_id), (state, ts))| store.endpoint_state_row(&account_id, &endpoint_id, &state, ts)));
        let result = if rows.is_empty() { Ok(()) } else { store.write(rows).await };
        for written in told {
            let _ = written.send(result.clone());
        }
        for (removal, removed) in after {
            match &result {
                Ok(()) => removals.push((removal, removed)),
                Err(error) => {
                    let _ = removed.send(Err(error.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use recap_lmdb::EmbeddedDriver;
    use recap_readmodel::webhooks::{WebhookStore, DEFAULT_RETENTION};
    use recap_readmodel::Driver;
    use recap_schemas::Timestamp;

    use super::*;

    #[tokio::test]
    async fn of_one_endpoints_states_in_a_group_the_last_handed_in_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
        let store = WebhookStore::new(driver, DEFAULT_RETENTION);
        let recorder = Recorder::start(store.clone(), Linger::default());
        let key = ("acc".to_owned(), "ep".to_owned());
        // One timestamp for all: were they all written, the store would keep the
        // greatest body (the tie rule), the first handed in here.
        let pending: Vec<Pending> = (1..=50)
            .rev()
            .map(|second| {
                let state = EndpointState { last_attempt_at: Some(Timestamp(second * 1_000_000)), ..EndpointState::default() };
                recorder.submit(vec![], Some(StateWrite { endpoint: key.clone(), state, ts: 7 }))
            })
            .collect();
        // The test's runtime runs one task at a time: the writer sees all fifty at once.
        for pending in pending {
            pending.written().await.unwrap();
        }
        assert_eq!(store.endpoint_state("acc", "ep").await.unwrap().last_attempt_at, Some(Timestamp(1_000_000)));
    }

    fn recording_store() -> (tempfile::TempDir, recap_testkit::FaultyDriver, WebhookStore) {
        let dir = tempfile::tempdir().unwrap();
        let embedded: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
        let faulty = recap_testkit::FaultyDriver::new(embedded);
        faulty.record_writes();
        let store = WebhookStore::new(Arc::new(faulty.clone()), DEFAULT_RETENTION);
        (dir, faulty, store)
    }

    fn state_write(endpoint: &str) -> Option<StateWrite> {
        Some(StateWrite { endpoint: ("acc".to_owned(), endpoint.to_owned()), state: EndpointState::default(), ts: 7 })
    }

    #[tokio::test]
    async fn a_group_waits_for_attempts_ending_soon_after_its_first_and_commits_them_once() {
        let (_dir, faulty, store) = recording_store();
        let recorder = Recorder::start(store.clone(), Linger { wait: Duration::from_millis(300), hand_ins: 64 });
        let first = recorder.submit(vec![], state_write("ep_1"));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let second = recorder.submit(vec![], state_write("ep_2"));
        first.written().await.unwrap();
        second.written().await.unwrap();
        assert_eq!(faulty.take_recorded().len(), 1, "both hand-ins in one write");

        // Without a wait, the first is written alone, at once.
        let recorder = Recorder::start(store.clone(), Linger { wait: Duration::ZERO, hand_ins: 64 });
        let first = recorder.submit(vec![], state_write("ep_1"));
        tokio::time::sleep(Duration::from_millis(30)).await;
        let second = recorder.submit(vec![], state_write("ep_2"));
        first.written().await.unwrap();
        second.written().await.unwrap();
        assert_eq!(faulty.take_recorded().len(), 2);
    }

    #[tokio::test]
    async fn a_group_holding_its_bound_of_attempts_is_written_without_waiting_longer() {
        let (_dir, faulty, store) = recording_store();
        let recorder = Recorder::start(store.clone(), Linger { wait: Duration::from_secs(30), hand_ins: 3 });
        let started = std::time::Instant::now();
        let pending: Vec<Pending> = ["ep_1", "ep_2", "ep_3"].into_iter().map(|endpoint| recorder.submit(vec![], state_write(endpoint))).collect();
        for pending in pending {
            pending.written().await.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(10), "written after {:?}, not after the 30 s wait", started.elapsed());
        assert_eq!(faulty.take_recorded().len(), 1);
    }

    /// The tables each recorded write touched, in order.
    fn tables_of(batches: Vec<Vec<Mutation>>) -> Vec<Vec<&'static str>> {
        batches.into_iter().map(|batch| batch.iter().map(|mutation| mutation.table.name).collect()).collect()
    }

    #[tokio::test]
    async fn a_removal_shares_its_records_write_only_where_writes_are_atomic_and_otherwise_follows_it() {
        use recap_readmodel::messages::MessageKind;
        use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, Delivery, DueDelivery};

        for atomic in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let embedded: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
            let faulty = recap_testkit::FaultyDriver::new(embedded);
            let faulty = if atomic { faulty } else { faulty.not_atomic() };
            faulty.record_writes();
            let store = WebhookStore::new(Arc::new(faulty.clone()), DEFAULT_RETENTION);
            let recorder = Recorder::start(store.clone(), Linger::default());
            let due = DueDelivery {
                shard: "0".into(),
                due_at: 5,
                delivery: Delivery {
                    account_id: "acc".into(),
                    endpoint_id: "ep".into(),
                    endpoint_created_version: Some(1),
                    message_id: "msg_1".into(),
                    seq: 1,
                    attempt: 1,
                },
            };
            let record = AttemptRecord {
                id: "att_1".into(),
                endpoint_created_version: Some(1),
                message_id: "msg_1".into(),
                kind: MessageKind::MeetingCreated,
                attempt: 1,
                attempted_at: Timestamp(7),
                outcome: AttemptOutcome::Succeeded,
                status: Some(200),
                error: None,
                duration_ms: 1,
                next_attempt_at: None,
            };
            let state = StateWrite { endpoint: ("acc".into(), "ep".into()), state: EndpointState::default(), ts: 7 };
            let (recorded, removed) =
                recorder.submit_attempt(vec![store.attempt_row("acc", "ep", &record)], Some(state), Some(vec![store.retry_done_row(&due)]));
            recorded.written().await.unwrap();
            removed.unwrap().written().await.unwrap();
            let expected = if atomic {
                vec![vec!["webhook_attempts", "webhook_retries", "webhook_endpoint_states"]]
            } else {
                vec![vec!["webhook_attempts", "webhook_endpoint_states"], vec!["webhook_retries"]]
            };
            assert_eq!(tables_of(faulty.take_recorded()), expected, "atomic writes: {atomic}");

            // A record that cannot be written takes its removal with it.
            faulty.fail_table("webhook_attempts");
            let state = StateWrite { endpoint: ("acc".into(), "ep".into()), state: EndpointState::default(), ts: 8 };
            let (recorded, removed) =
                recorder.submit_attempt(vec![store.attempt_row("acc", "ep", &record)], Some(state), Some(vec![store.retry_done_row(&due)]));
            assert!(recorded.written().await.is_err());
            assert!(removed.unwrap().written().await.is_err(), "atomic writes: {atomic}");
            assert!(faulty.take_recorded().is_empty(), "nothing written: the refused write is not recorded, and no removal follows it");
        }
    }
}
