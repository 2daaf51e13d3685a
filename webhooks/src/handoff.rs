//! What the log reader hands the deliverer in memory: the first attempt of each
//! delivery of the messages it appended to the feed, prepared (the message's body as
//! the feed stores it, the endpoint and its secrets as the batch read them), the feed
//! heads it wrote, and the [`Ledger`] of the first attempts not yet settled. A first
//! attempt so handed over has no row in the store and reads nothing from it before it
//! sends: not the message, the endpoint, its secrets or the head.
//!
//! The message log is the queue of first attempts: the reader commits its position
//! (the outbox position, the Kafka offsets) only up to the messages whose first
//! attempts are all settled, that is recorded (a failure's record carrying its retry
//! row) or turned into a row of `webhook_retries`, so a process killed with first
//! attempts in memory reads their messages again on its next start and makes them
//! again. What the deliverer holds in memory is bounded ([`Handoff::with_room_wait`]):
//! a batch whose deliveries do not fit waits a little while the deliverer frees room
//! ([`Handoff::wait_for_room`]), and past the bound the ingest then writes a first
//! attempt as a row, due at once, instead.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use recap_readmodel::messages::{Message, MessageKind};
use recap_readmodel::webhooks::{DueDelivery, EndpointRecord, EndpointState};
use tokio::sync::Notify;

use crate::signing::Signer;

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

/// What an endpoint's last attempts said, as the deliverer weighs it when it starts an
/// attempt (which share of the process's slots the attempt takes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Health {
    /// Never attempted, or not known here.
    #[default]
    Unknown,
    /// Its last attempt succeeded.
    Answering,
    /// Its last attempt failed.
    Failing,
}

impl Health {
    pub fn of(state: &EndpointState) -> Health {
        match (state.failing_since, state.last_success_at) {
            (Some(_), _) => Health::Failing,
            (None, Some(_)) => Health::Answering,
            (None, None) => Health::Unknown,
        }
    }
}

/// An endpoint and its secrets, as read at one instant, with its health then.
#[derive(Clone, Debug)]
pub struct PreparedEndpoint {
    pub endpoint: EndpointRecord,
    /// Its secrets, keyed.
    pub signer: Signer,
    pub health: Health,
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
    /// Its message in the [`Ledger`]: settled once the attempt is recorded or written
    /// as a row.
    pub ticket: Ticket,
}

/// A message whose first attempts are in memory, as the [`Ledger`] knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub shard: String,
    pub seq: i64,
    /// The holding of the shard it was registered in: a shard given up and held again
    /// starts a new ledger, which a ticket of the old one leaves alone.
    generation: u64,
}

/// The first attempts in memory of each shard held, by the seq of their message, and
/// how far each shard's log has been read: what the log position may be committed up
/// to. A message is settled once each of its first attempts is recorded (a failure's
/// record carries its retry row), dropped, or written as a row of `webhook_retries`;
/// the position covers every message up to the first one not settled, never further
/// than what was read. Cheap to clone.
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<LedgerShards>>);

#[derive(Default)]
struct LedgerShards {
    by_shard: HashMap<String, ShardLedger>,
    generations: u64,
    /// Shards given up so far ([`Ledger::revocations`]).
    revocations: u64,
}

struct ShardLedger {
    generation: u64,
    /// The last seq read, appended and handed over.
    read_to: Option<i64>,
    /// Messages with first attempts not settled: how many, and since when (the
    /// clock's microseconds when they were handed over).
    unsettled: BTreeMap<i64, (usize, i64)>,
}

impl Ledger {
    fn shard<'a>(shards: &'a mut LedgerShards, shard: &str) -> &'a mut ShardLedger {
        if !shards.by_shard.contains_key(shard) {
            shards.generations += 1;
            let generation = shards.generations;
            shards.by_shard.insert(shard.to_owned(), ShardLedger { generation, read_to: None, unsettled: BTreeMap::new() });
        }
        // Inserted just above when absent.
        shards.by_shard.get_mut(shard).expect("the shard's ledger")
    }

    /// `count` first attempts of the message at `seq` go into memory at `now`.
    pub fn register(&self, shard: &str, seq: i64, count: usize, now: i64) -> Ticket {
        let Ok(mut shards) = self.0.lock() else { return Ticket { shard: shard.to_owned(), seq, generation: 0 } };
        let ledger = Ledger::shard(&mut shards, shard);
        let entry = ledger.unsettled.entry(seq).or_insert((0, now));
        entry.0 += count;
        Ticket { shard: shard.to_owned(), seq, generation: ledger.generation }
    }

    /// The shard's log is read, appended and handed over up to `seq`.
    pub fn read_to(&self, shard: &str, seq: i64) {
        if let Ok(mut shards) = self.0.lock() {
            let ledger = Ledger::shard(&mut shards, shard);
            ledger.read_to = Some(ledger.read_to.map_or(seq, |read_to| read_to.max(seq)));
        }
    }

    /// One first attempt of the ticket's message is settled.
    pub fn settle(&self, ticket: &Ticket) {
        let Ok(mut shards) = self.0.lock() else { return };
        let Some(ledger) = shards.by_shard.get_mut(&ticket.shard).filter(|ledger| ledger.generation == ticket.generation) else { return };
        if let Some(entry) = ledger.unsettled.get_mut(&ticket.seq) {
            entry.0 = entry.0.saturating_sub(1);
            if entry.0 == 0 {
                ledger.unsettled.remove(&ticket.seq);
            }
        }
    }

    /// The last seq of the shard's log whose messages, and every earlier one read, are
    /// settled: where its position may be committed. None before anything was read.
    pub fn position(&self, shard: &str) -> Option<i64> {
        let shards = self.0.lock().ok()?;
        let ledger = shards.by_shard.get(shard)?;
        let read_to = ledger.read_to?;
        Some(ledger.unsettled.keys().next().map_or(read_to, |first| (first - 1).min(read_to)))
    }

    /// The shard is given up: its tickets settle nothing any more.
    pub fn forget(&self, shard: &str) {
        if let Ok(mut shards) = self.0.lock() {
            shards.by_shard.remove(shard);
            shards.revocations += 1;
        }
    }

    /// How many times a shard was given up: the Kafka reader notes it with each record
    /// it receives, and a record received before a later revocation moves no position
    /// (its shard may have been given up and held again meanwhile, and is then fetched
    /// again from its committed position).
    pub fn revocations(&self) -> u64 {
        self.0.lock().map(|shards| shards.revocations).unwrap_or(u64::MAX)
    }

    /// How many first attempts are unsettled, and since when the oldest is (queue figures).
    pub fn unsettled(&self) -> (usize, Option<i64>) {
        let Ok(shards) = self.0.lock() else { return (0, None) };
        let mut count = 0;
        let mut oldest: Option<i64> = None;
        for ledger in shards.by_shard.values() {
            for (left, since) in ledger.unsettled.values() {
                count += left;
                oldest = Some(oldest.map_or(*since, |oldest| oldest.min(*since)));
            }
        }
        (count, oldest)
    }
}

/// How long the ingest of a batch whose deliveries do not fit in the deliverer's window
/// waits for room ([`Handoff::wait_for_room`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomWait {
    /// At most this long a batch; zero never waits.
    pub limit: Duration,
    /// The wait ends after this long without room freed: a window that does not drain.
    pub probe: Duration,
}

impl Default for RoomWait {
    fn default() -> RoomWait {
        RoomWait { limit: Duration::from_millis(20), probe: Duration::from_millis(2) }
    }
}

/// Room in the deliverer's window taken for first attempts ([`Handoff::reserve`]);
/// what is left of it is given back when dropped.
pub struct Reservation {
    handoff: Handoff,
    count: usize,
}

impl Reservation {
    /// How many first attempts it still holds room for.
    pub fn count(&self) -> usize {
        self.count
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.count > 0 {
            self.handoff.release(self.count);
        }
    }
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
    /// Rings when deliveries leave the window (an ingest waiting for room).
    room_freed: Notify,
    room_wait: RoomWait,
    scan_wanted: AtomicBool,
    ledger: Ledger,
    /// Set once the deliverer stopped and its attempts in flight ended.
    delivering_ended: AtomicBool,
    ended: Notify,
}

/// The channel from the log reader to the deliverer of one process. Cheap to clone.
/// [`Handoff::default`] takes nothing (its bound is 0): what is offered is refused.
#[derive(Clone, Default)]
pub struct Handoff(Arc<Shared>);

impl Handoff {
    /// A hand-off that holds up to `bound` deliveries in memory (offered, or queued in
    /// the deliverer's window), an ingest waiting for room as [`RoomWait::default`].
    pub fn new(bound: usize) -> Handoff {
        Handoff::with_room_wait(bound, RoomWait::default())
    }

    /// A hand-off that holds up to `bound` deliveries in memory, an ingest waiting for
    /// room as `room_wait` says.
    pub fn with_room_wait(bound: usize, room_wait: RoomWait) -> Handoff {
        Handoff(Arc::new(Shared { bound, room_wait, ..Shared::default() }))
    }

    /// The first attempts not settled, shared by the log reader and the deliverer.
    pub fn ledger(&self) -> &Ledger {
        &self.0.ledger
    }

    /// How many more deliveries fit in memory now. The deliverer frees room as its
    /// attempts start, and takes some for the rows its scans queue: an offer of that
    /// many right after may still be refused in part.
    pub fn room(&self) -> usize {
        self.0.bound.saturating_sub(self.0.queued.load(Ordering::Acquire))
    }

    /// Offers first attempts whose feed rows and heads are written, registered in the
    /// ledger; what is refused (past the bound) is the caller's to write as rows.
    pub fn offer(&self, mut attempts: Vec<FirstAttempt>) -> Vec<FirstAttempt> {
        let reservation = self.reserve(attempts.len());
        let refused = attempts.split_off(reservation.count());
        self.offer_reserved(reservation, attempts);
        refused
    }

    /// Takes room for up to `want` first attempts, as much as there is: what the
    /// ingest then hands over in memory, counted before its write so that nothing the
    /// deliverer queues meanwhile (a scan's rows) can take it, and an offer of them
    /// ([`Handoff::offer_reserved`]) is never refused. What is not handed over is
    /// given back when the reservation is dropped (the batch failed, or made fewer).
    pub fn reserve(&self, want: usize) -> Reservation {
        let mut taken = 0;
        let _ = self.0.queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
            taken = want.min(self.0.bound.saturating_sub(queued));
            Some(queued + taken)
        });
        Reservation { handoff: self.clone(), count: taken }
    }

    /// Offers first attempts within room reserved for them: all are taken.
    pub fn offer_reserved(&self, mut reservation: Reservation, mut attempts: Vec<FirstAttempt>) {
        debug_assert!(attempts.len() <= reservation.count, "more first attempts than the room reserved");
        if attempts.is_empty() {
            return;
        }
        let beyond = attempts.len().saturating_sub(reservation.count);
        reservation.count = reservation.count.saturating_sub(attempts.len());
        self.0.queued.fetch_add(beyond, Ordering::AcqRel);
        if let Ok(mut offered) = self.0.offered.lock() {
            offered.append(&mut attempts);
        }
        self.0.ready.notify_one();
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
        if count > 0 {
            self.0.room_freed.notify_one();
        }
    }

    /// Waits while the deliverer frees room for `want` deliveries (at most the whole
    /// bound), so that they go over in memory rather than as rows the deliverer would
    /// read and remove again: until they fit, after the probe without room freed (a
    /// window that does not drain: endpoints that hang), or at the limit.
    pub async fn wait_for_room(&self, want: usize) {
        let RoomWait { limit, probe } = self.0.room_wait;
        let want = want.min(self.0.bound);
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let now = tokio::time::Instant::now();
            if self.room() >= want || now >= deadline {
                return;
            }
            // Room freed since the look left a permit: this await returns at once, and
            // the loop looks again.
            if tokio::time::timeout_at((now + probe).min(deadline), self.0.room_freed.notified()).await.is_err() {
                return;
            }
        }
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

    /// The deliverer stopped, and its attempts in flight ended (each settled, or left
    /// unsettled to be made again).
    pub(crate) fn delivering_ended(&self) {
        self.0.delivering_ended.store(true, Ordering::Release);
        self.0.ended.notify_waiters();
    }

    /// Waits until [`Handoff::delivering_ended`]: a reader's last commit follows it, so
    /// that a clean stop covers every first attempt that settled and nothing is read
    /// again.
    pub(crate) async fn delivering_has_ended(&self) {
        loop {
            let ended = self.0.ended.notified();
            if self.0.delivering_ended.load(Ordering::Acquire) {
                return;
            }
            ended.await;
        }
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
        let message = Message {
            id: format!("msg_{seq}"),
            kind: MessageKind::MeetingCreated,
            created_at: Timestamp(0),
            data: recap_readmodel::messages::raw_json(&serde_json::json!({"meeting_id": "mtg"})),
        };
        let endpoint = EndpointRecord {
            id: "ep".into(),
            url: "https://receiver.example/".into(),
            description: None,
            types: vec![],
            enabled: true,
            version: 1,
            created_version: 1,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        };
        FirstAttempt {
            due: DueDelivery {
                shard: "0".into(),
                due_at: 0,
                delivery: Delivery {
                    account_id: "acc".into(),
                    endpoint_id: "ep".into(),
                    endpoint_created_version: Some(1),
                    message_id: message.id.clone(),
                    seq,
                    attempt: 1,
                },
            },
            message: Arc::new(PreparedMessage::new(seq, &message)),
            endpoint: Arc::new(PreparedEndpoint { endpoint, signer: Signer::default(), health: Health::Unknown, read_at: Instant::now(), changes: None }),
            ticket: Ledger::default().register("0", seq, 1, 0),
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

    /// The ingest's wait for room ends once the room wanted is freed, after the probe
    /// when nothing is freed (a window that does not drain), and at the limit. Real
    /// time, with margins for a loaded machine.
    #[tokio::test]
    async fn a_wait_for_room_ends_at_the_room_wanted_at_the_probe_or_at_the_limit() {
        let full = |limit: Duration, probe: Duration| {
            let handoff = Handoff::with_room_wait(100, RoomWait { limit, probe });
            assert!(handoff.offer((1..=100).map(first_attempt).collect()).is_empty());
            handoff
        };
        let releasing = |handoff: &Handoff, every: Duration, count: usize| {
            let handoff = handoff.clone();
            tokio::spawn(async move {
                for _ in 0..count {
                    tokio::time::sleep(every).await;
                    handoff.release(1);
                }
            })
        };
        let (long, longer) = (Duration::from_secs(30), Duration::from_secs(60));

        let handoff = full(long, Duration::from_millis(50));
        let started = Instant::now();
        handoff.wait_for_room(5).await;
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(50) && elapsed < Duration::from_secs(10), "nothing freed: the probe ends it ({elapsed:?})");

        let handoff = full(long, longer);
        let releases = releasing(&handoff, Duration::from_millis(5), 10);
        let started = Instant::now();
        handoff.wait_for_room(10).await;
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(10), "the tenth room freed ends it, long before the limit ({elapsed:?})");
        releases.await.unwrap();
        assert_eq!(handoff.room(), 10);

        let handoff = full(Duration::from_millis(300), longer);
        let started = Instant::now();
        handoff.wait_for_room(20).await;
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(10), "the limit ends it, whatever the probe ({elapsed:?})");

        let handoff = full(long, longer);
        handoff.release(100);
        let started = Instant::now();
        handoff.wait_for_room(1_000).await;
        assert!(started.elapsed() < Duration::from_secs(1), "more than the bound is wanted: the whole bound is enough");
    }

    #[test]
    fn the_position_stops_before_the_first_message_whose_first_attempts_are_not_all_settled() {
        let ledger = Ledger::default();
        assert_eq!(ledger.position("0"), None, "nothing read yet");
        let two = ledger.register("0", 2, 2, 10);
        let five = ledger.register("0", 5, 1, 20);
        ledger.read_to("0", 7);
        assert_eq!(ledger.position("0"), Some(1), "seq 2 holds it");
        ledger.settle(&two);
        assert_eq!(ledger.position("0"), Some(1), "one of seq 2's two attempts is settled");
        assert_eq!(ledger.unsettled(), (2, Some(10)));
        ledger.settle(&two);
        assert_eq!(ledger.position("0"), Some(4));
        ledger.settle(&five);
        assert_eq!(ledger.position("0"), Some(7), "all settled: up to what was read");
        ledger.read_to("0", 3);
        assert_eq!(ledger.position("0"), Some(7), "what was read never shrinks");
        // A shard given up and held again: tickets of the old holding settle nothing.
        let old = ledger.register("0", 9, 1, 30);
        let revocations = ledger.revocations();
        ledger.forget("0");
        assert_eq!(ledger.revocations(), revocations + 1, "a reader sees that a shard was given up");
        let new = ledger.register("0", 9, 1, 40);
        ledger.read_to("0", 9);
        ledger.settle(&old);
        assert_eq!(ledger.position("0"), Some(8));
        ledger.settle(&new);
        assert_eq!(ledger.position("0"), Some(9));
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
