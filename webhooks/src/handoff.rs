//! What the log reader hands the deliverer in memory, besides the rows it writes: the
//! first attempt of each delivery it scheduled, prepared (the message's body as the
//! feed stores it, the endpoint and its secrets as the batch read them), and the feed
//! heads it wrote. A first attempt so handed over reads nothing from the store before
//! it sends: not the message's claim, not the endpoint, its secrets or the head.
//!
//! The store stays the truth, the hand-off only a shortcut: every delivery handed over
//! has its row written first, so a process killed with deliveries in memory finds them
//! again on its next scan. What the deliverer holds in memory is bounded
//! ([`Handoff::new`]): past the bound a first attempt is refused, and the ingest lowers
//! its shard's scan mark instead, so the scan finds its row.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hyper::body::Bytes;
use recap_readmodel::messages::{Message, MessageKind};
use recap_readmodel::webhooks::{DueDelivery, EndpointRecord, SecretsRecord};
use tokio::sync::Notify;

/// A message as a delivery sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedMessage {
    pub id: String,
    pub kind: MessageKind,
    /// Its seq in the account's feed: sent only once the feed's head covers it.
    pub seq: i64,
    /// The message's JSON, exactly as the feed stores it and `GET /v1/events/{id}` serves it.
    pub body: Bytes,
}

impl PreparedMessage {
    pub fn new(seq: i64, message: &Message) -> PreparedMessage {
        PreparedMessage::with_body(seq, message, message.to_json())
    }

    /// With the JSON already made (the feed row's body).
    pub fn with_body(seq: i64, message: &Message, body: String) -> PreparedMessage {
        PreparedMessage { id: message.id.clone(), kind: message.kind, seq, body: Bytes::from(body) }
    }
}

/// An endpoint and its secrets, as read at one instant.
#[derive(Clone, Debug)]
pub struct PreparedEndpoint {
    pub endpoint: EndpointRecord,
    pub secrets: SecretsRecord,
    pub read_at: Instant,
    /// The change counts of the endpoint and secret tables taken before they were read,
    /// where the store keeps them (the embedded one): while both are unchanged, nothing
    /// was written to any endpoint since.
    pub changes: Option<(u64, u64)>,
}

/// One first attempt, prepared by the ingest.
#[derive(Clone, Debug)]
pub struct FirstAttempt {
    pub due: DueDelivery,
    pub message: Arc<PreparedMessage>,
    pub endpoint: Arc<PreparedEndpoint>,
}

/// Accounts whose heads are remembered, at most: past it the memory starts over (a
/// head not remembered is read from the store).
const HEADS_KEPT: usize = 100_000;

#[derive(Default)]
struct Shared {
    offered: Mutex<Vec<FirstAttempt>>,
    /// First attempts offered and deliveries queued in the deliverer's window, not yet
    /// started: what the bound counts.
    queued: AtomicUsize,
    bound: usize,
    /// The greatest head written per account: a head only grows.
    heads: Mutex<HashMap<String, i64>>,
    /// Rings when there is something to take, or to scan.
    ready: Notify,
    scan_wanted: AtomicBool,
}

/// The channel from the log reader to the deliverer of one process. Cheap to clone.
/// [`Handoff::default`] takes nothing (its bound is 0): what is offered is refused.
#[derive(Clone, Default)]
pub struct Handoff(Arc<Shared>);

impl Handoff {
    /// A hand-off that holds up to `bound` deliveries in memory (offered, or queued in
    /// the deliverer's window).
    pub fn new(bound: usize) -> Handoff {
        Handoff(Arc::new(Shared { bound, ..Shared::default() }))
    }

    /// Offers first attempts whose rows and feed heads are written; what is refused
    /// (past the bound) is the caller's to make findable by a scan.
    pub fn offer(&self, attempts: Vec<FirstAttempt>) -> Vec<FirstAttempt> {
        if attempts.is_empty() {
            return attempts;
        }
        let room = self.0.bound.saturating_sub(self.0.queued.load(Ordering::Acquire));
        let mut accepted = attempts;
        let refused = if accepted.len() > room { accepted.split_off(room) } else { Vec::new() };
        if !accepted.is_empty() {
            self.0.queued.fetch_add(accepted.len(), Ordering::AcqRel);
            if let Ok(mut offered) = self.0.offered.lock() {
                offered.append(&mut accepted);
            }
            self.0.ready.notify_one();
        }
        refused
    }

    /// What was offered since the last take.
    pub(crate) fn take(&self) -> Vec<FirstAttempt> {
        self.0.offered.lock().map(|mut offered| std::mem::take(&mut *offered)).unwrap_or_default()
    }

    /// Whether `more` deliveries fit in memory.
    pub(crate) fn has_room(&self, more: usize) -> bool {
        self.0.queued.load(Ordering::Acquire).saturating_add(more) <= self.0.bound
    }

    /// `count` deliveries queued in the window besides those offered.
    pub(crate) fn hold(&self, count: usize) {
        self.0.queued.fetch_add(count, Ordering::AcqRel);
    }

    /// `count` queued deliveries left the window (started, or discarded).
    pub(crate) fn release(&self, count: usize) {
        let _ = self.0.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| Some(queued.saturating_sub(count)));
    }

    /// The account's feed head is written at `seq`.
    pub fn head_written(&self, account_id: &str, seq: i64) {
        let Ok(mut heads) = self.0.heads.lock() else { return };
        if heads.len() >= HEADS_KEPT && !heads.contains_key(account_id) {
            heads.clear();
        }
        let head = heads.entry(account_id.to_owned()).or_insert(seq);
        *head = (*head).max(seq);
    }

    /// Whether the account's feed head is known to cover `seq`.
    pub fn covers(&self, account_id: &str, seq: i64) -> bool {
        self.0.heads.lock().ok().and_then(|heads| heads.get(account_id).copied()).is_some_and(|head| head >= seq)
    }

    /// Delivery rows were written that nothing holds in memory: the deliverer scans soon.
    pub fn wake_scan(&self) {
        self.0.scan_wanted.store(true, Ordering::Release);
        self.0.ready.notify_one();
    }

    pub(crate) async fn ready(&self) {
        self.0.ready.notified().await
    }

    /// Whether a scan was asked for since the last call.
    pub(crate) fn take_scan_wanted(&self) -> bool {
        self.0.scan_wanted.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use recap_readmodel::webhooks::Delivery;
    use recap_schemas::Timestamp;

    use super::*;

    fn first_attempt(seq: i64) -> FirstAttempt {
        let message =
            Message { id: format!("msg_{seq}"), kind: MessageKind::MeetingCreated, created_at: Timestamp(0), data: serde_json::json!({"meeting_id": "mtg"}) };
        let endpoint = EndpointRecord {
            id: "ep".into(),
            url: "https://receiver.example/".into(),
            description: None,
            types: vec![],
            enabled: true,
            version: 1,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        };
        FirstAttempt {
            due: DueDelivery {
                shard: "0".into(),
                due_at: 0,
                delivery: Delivery { account_id: "acc".into(), endpoint_id: "ep".into(), message_id: message.id.clone(), seq, attempt: 1 },
            },
            message: Arc::new(PreparedMessage::new(seq, &message)),
            endpoint: Arc::new(PreparedEndpoint { endpoint, secrets: SecretsRecord::default(), read_at: Instant::now(), changes: None }),
        }
    }

    #[test]
    fn past_its_bound_a_handoff_refuses_and_takes_again_once_deliveries_leave_memory() {
        let handoff = Handoff::new(3);
        let refused = handoff.offer((1..=5).map(first_attempt).collect());
        assert_eq!(refused.iter().map(|attempt| attempt.due.delivery.seq).collect::<Vec<_>>(), vec![4, 5], "the first three fit");
        assert_eq!(handoff.take().len(), 3);
        assert!(!handoff.has_room(1), "taken into the window, they still count");
        handoff.release(2);
        assert_eq!(handoff.offer(vec![first_attempt(6), first_attempt(7), first_attempt(8)]).len(), 1);
        assert_eq!(Handoff::default().offer(vec![first_attempt(1)]).len(), 1, "the default holds nothing");
    }

    #[test]
    fn a_head_is_covered_only_up_to_the_greatest_seq_written() {
        let handoff = Handoff::new(1);
        assert!(!handoff.covers("acc", 1), "nothing written yet");
        handoff.head_written("acc", 7);
        handoff.head_written("acc", 3);
        assert!(handoff.covers("acc", 7) && handoff.covers("acc", 2));
        assert!(!handoff.covers("acc", 8));
        assert!(!handoff.covers("other", 1));
    }
}
