//! Group commit of the deliverer's records: attempts that end together share their
//! store writes. An attempt hands in the rows of one step and waits until they are
//! written; the recorder writes everything handed in while its previous write was under
//! way as one [`WebhookStore::write`] (one commit on the embedded store, instead of one
//! per attempt and step).
//!
//! An attempt's own steps stay in order: it waits for one to be written before it hands
//! in the next, so on ScyllaDB, where the rows of one write land concurrently, no step
//! of a delivery overtakes an earlier one of the same delivery.
//!
//! Endpoint states are handed in keyed by endpoint: of the states of one endpoint that
//! meet in one write, only the last handed in is written. The deliverer hands them in
//! under the endpoint's lock, so the last is the newest.

use std::collections::HashMap;

use recap_readmodel::webhooks::WebhookStore;
use recap_readmodel::{Mutation, StoreError};
use tokio::sync::{mpsc, oneshot};

/// Rows written at once, at most (a group closes when it has this many).
const GROUP_ROWS: usize = 4_096;

/// An endpoint: account id and endpoint id.
pub type EndpointKey = (String, String);

struct Submission {
    rows: Vec<Mutation>,
    state: Option<(EndpointKey, Mutation)>,
    written: oneshot::Sender<Result<(), StoreError>>,
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
    pub fn start(store: WebhookStore) -> Recorder {
        let (submissions, received) = mpsc::unbounded_channel();
        tokio::spawn(run(store, received));
        Recorder { submissions }
    }

    /// Hands in `rows` and, when given, an endpoint's state row; the order of hand-ins
    /// is the order of states.
    pub fn submit(&self, rows: Vec<Mutation>, state: Option<(EndpointKey, Mutation)>) -> Pending {
        let (written, pending) = oneshot::channel();
        // A send fails only once the task is gone; `Pending` then tells so.
        let _ = self.submissions.send(Submission { rows, state, written });
        Pending(pending)
    }

    /// Writes `rows` with the next group and waits for them.
    pub async fn write(&self, rows: Vec<Mutation>) -> Result<(), StoreError> {
        self.submit(rows, None).written().await
    }
}

async fn run(store: WebhookStore, mut received: mpsc::UnboundedReceiver<Submission>) {
    while let Some(first) = received.recv().await {
        let mut count = first.rows.len() + 1;
        let mut group = vec![first];
        while count < GROUP_ROWS {
            match received.try_recv() {
                Ok(submission) => {
                    count += submission.rows.len() + 1;
                    group.push(submission);
                }
                Err(_) => break,
            }
        }
        let mut rows = Vec::with_capacity(count);
        let mut states: HashMap<EndpointKey, Mutation> = HashMap::new();
        let mut waiting = Vec::with_capacity(group.len());
        for submission in group {
            rows.extend(submission.rows);
            if let Some((endpoint, state)) = submission.state {
                states.insert(endpoint, state);
            }
            waiting.push(submission.written);
        }
        rows.extend(states.into_values());
        let result = if rows.is_empty() { Ok(()) } else { store.write(rows).await };
        for written in waiting {
            let _ = written.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use recap_lmdb::EmbeddedDriver;
    use recap_readmodel::webhooks::{EndpointState, WebhookStore, DEFAULT_RETENTION};
    use recap_readmodel::Driver;
    use recap_schemas::Timestamp;

    use super::*;

    #[tokio::test]
    async fn of_one_endpoints_states_in_a_group_the_last_handed_in_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
        let store = WebhookStore::new(driver, DEFAULT_RETENTION);
        let recorder = Recorder::start(store.clone());
        let key = ("acc".to_owned(), "ep".to_owned());
        // One timestamp for all: were they all written, the store would keep the
        // greatest body (the tie rule), the first handed in here.
        let pending: Vec<Pending> = (1..=50)
            .rev()
            .map(|second| {
                let state = EndpointState { last_attempt_at: Some(Timestamp(second * 1_000_000)), ..EndpointState::default() };
                recorder.submit(vec![], Some((key.clone(), store.endpoint_state_row("acc", "ep", &state, 7))))
            })
            .collect();
        // The test's runtime runs one task at a time: the writer sees all fifty at once.
        for pending in pending {
            pending.written().await.unwrap();
        }
        assert_eq!(store.endpoint_state("acc", "ep").await.unwrap().last_attempt_at, Some(Timestamp(1_000_000)));
    }
}
