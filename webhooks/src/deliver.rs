//! The deliverer: makes the attempts of the deliveries of the shards this process
//! holds, each endpoint with a bounded number in flight (and the process with a global
//! bound), so a slow or dead endpoint only ever holds its own slots; endpoints not known
//! to answer (never attempted, or failing) share three quarters of the process's slots
//! between them, and those known to be failing a quarter, so many dead at once, new or
//! known, leave the rest to the endpoints that answer.
//!
//! Deliveries reach it two ways: first attempts handed over in memory by the log
//! reader, prepared ([`crate::handoff`]), which have no row; and the rows of
//! `webhook_retries` its scans find (retries, first attempts that did not fit in memory
//! or were not made at once, rows written before a restart or by another process). Both
//! queue in one window by endpoint, and a row held in memory (queued, under way, or just
//! ended) is never queued twice. The store is scanned at least once a poll, however
//! often the deliverer is woken meanwhile (nothing wakes it when a retry comes due). A
//! scan queues a bounded number of rows of each endpoint (fewer for one not known to
//! answer) and goes on past the rest, which it reads again once that endpoint's queue
//! has drained ([`EndpointQueue::left_out`]): one endpoint's backlog never keeps the
//! others' rows unread.
//!
//! A first attempt holds its message's log position until it settles (the ledger,
//! [`crate::handoff::Ledger`]): so that a dead endpoint's backlog never holds it, a
//! first attempt still queued [`DelivererConfig::first_attempt_hold`] after it was
//! handed over is written as a row, due at once, and leaves memory; one under way holds
//! the position at most the attempt's timeout.
//!
//! One attempt, in order:
//! 0. a retry row whose attempt the delivery's progress covers (that attempt or a later
//!    one made from another row of it, or the message delivered) is removed unsent
//!    ([`WebhookStore::progress`]);
//! 1. what to send: a first attempt handed over uses the message, endpoint and secrets
//!    the ingest had while they are current (the embedded store: no endpoint written
//!    since they were read; ScyllaDB: read at most [`DelivererConfig::prepared_for`]
//!    ago), any other reads them from the store. A delivery to an endpoint the account
//!    deleted (also when another endpoint was created under its id since) or disabled,
//!    one whose type its `types` no longer include, or one disabled for failing too
//!    long, is dropped (receivers
//!    catch up from the feed); so is one whose message expired; one whose message the
//!    feed head does not cover yet waits (the head the ingest wrote, else the store's);
//! 2. the message is signed with every secret signing now and POSTed;
//! 3. the endpoint's slot is freed (it bounds requests in flight to the endpoint, not
//!    the bookkeeping after them);
//! 4. the attempt is recorded, with the next delivery's row when one is due (a failure
//!    with attempts left) and the endpoint's state, through the [`Recorder`]; then a
//!    first attempt settles, and a row is removed: in the record's own write where the
//!    store applies a write atomically (the embedded one), in the next one once the
//!    record is written where it does not (ScyllaDB), with the delivery's progress when
//!    the row was a retry's. A crash before that repeats the
//!    attempt (at least once: the receiver sees the same `webhook-id` again), never
//!    loses it. An attempt whose record could not be written is made again.
//!
//! An endpoint's state is kept in memory while the endpoint has attempts under way
//! (loaded from the store at the first), updated under the endpoint's lock and handed
//! in with a timestamp newer than the last, so the newest state is the one the store
//! keeps. The state names the endpoint it is of (the version that created it): an
//! attempt to an endpoint deleted and created again under its id since leaves the new
//! endpoint's state alone, and the new endpoint starts afresh from the deleted one's.
//!
//! When the last attempt of a delivery fails and the endpoint has failed without a
//! success for the whole retry span, the endpoint is disabled at its current version
//! (its state names the version); its pending deliveries are then dropped as they come
//! due, and an upsert of the endpoint (a newer version) re-enables it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::Either;
use futures::FutureExt;
use recap_readmodel::driver::now_micros;
use recap_readmodel::webhooks::{minute_start, AttemptOutcome, AttemptRecord, Delivery, DueDelivery, EndpointState, WebhookStore};
use recap_readmodel::StoreError;
use recap_schemas::Timestamp;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::client::{SafeClient, SendError};
use crate::handoff::{FirstAttempt, Handoff, Health, PreparedEndpoint, PreparedMessage, RoomWait, Ticket};
use crate::metrics::Stats;
use crate::recorder::{Linger, Recorder, StateWrite};
use crate::schedule::{Clock, RetrySchedule};
pub use crate::shards::Shards;
use crate::signing::Signer;

/// Settings of the deliverer.
#[derive(Clone, Debug)]
pub struct DelivererConfig {
    /// Attempts in flight to one endpoint, at most.
    pub per_endpoint: usize,
    /// Attempts in flight in the process, at most.
    pub global: usize,
    /// How often the due deliveries are looked for when nothing woke the deliverer.
    pub poll: Duration,
    /// Due deliveries read per shard and scan.
    pub scan: usize,
    /// Deliveries queued in memory (handed over or scanned, not yet started), at most.
    pub window: usize,
    /// How long the ingest of a batch whose deliveries do not fit in the window waits
    /// while room is freed.
    pub room_wait: RoomWait,
    /// Scanned deliveries queued in memory for one endpoint whose last attempt
    /// succeeded, at most (for any other, twice `per_endpoint`): a dead endpoint's
    /// backlog stays in the store, not in memory.
    pub window_per_endpoint: usize,
    /// How long the endpoint and secrets a first attempt was handed over with are used
    /// where the store cannot tell whether an endpoint was written since (ScyllaDB).
    pub prepared_for: Duration,
    /// How long a first attempt handed over may wait in the window before it is
    /// written as a row (and stops holding its message's log position).
    pub first_attempt_hold: Duration,
    /// How often the queue figures are refreshed.
    pub queue_interval: Duration,
    /// How often the marks go back to the grace before now and the low minutes move up
    /// (see [`Shards`]).
    pub sweep: Duration,
    pub schedule: RetrySchedule,
    /// How long the recorder's group of attempt records waits for more attempts to end
    /// (see [`crate::recorder`]).
    pub record_linger: Linger,
}

impl Default for DelivererConfig {
    fn default() -> DelivererConfig {
        DelivererConfig {
            per_endpoint: 4,
            global: 256,
            poll: Duration::from_millis(200),
            scan: 2_000,
            window: 20_000,
            room_wait: RoomWait::default(),
            window_per_endpoint: 2_000,
            prepared_for: Duration::from_secs(1),
            first_attempt_hold: Duration::from_secs(5),
            queue_interval: Duration::from_secs(5),
            sweep: Duration::from_secs(60),
            schedule: RetrySchedule::default(),
            record_linger: Linger::default(),
        }
    }
}

/// How long a first attempt whose record could not be written waits before it is made
/// again.
const AGAIN_AFTER_ERROR: Duration = Duration::from_secs(1);

/// How often queued first attempts are looked at for being held too long.
const HOLD_CHECK: Duration = Duration::from_millis(100);

/// One endpoint's slots, and its state under the lock it is updated with.
#[derive(Default)]
struct EndpointSlots {
    in_flight: Option<Arc<Semaphore>>,
    state: Arc<tokio::sync::Mutex<CachedState>>,
}

/// An endpoint's state as last handed in, and that row's timestamp.
#[derive(Default)]
struct CachedState {
    state: Option<EndpointState>,
    ts: i64,
    /// The state disables the endpoint and that disable's record is being written:
    /// later states carry it, and an attempt that finds it waits for the write (the
    /// same one the disabling attempt waits for), then drops its delivery if it was
    /// written and sends it if it failed. None once written.
    disable_write: Option<RecordWrite>,
}

/// An attempt's record being written, which more than one attempt may wait for.
type RecordWrite = futures::future::Shared<futures::future::BoxFuture<'static, Result<(), StoreError>>>;

/// A row's key: shard, due time, delivery id.
type DeliveryKey = (String, i64, String);

/// An endpoint: account id and endpoint id.
type EndpointKey = (String, String);

fn key_of(due: &DueDelivery) -> DeliveryKey {
    (due.shard.clone(), due.due_at, due.delivery.id())
}

/// What this process holds of a row in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// In the window, not started.
    Queued,
    /// Its attempt is under way.
    InFlight,
    /// Its attempt ended then: a scan that began before may still list the row the
    /// attempt removed, and must not queue it again.
    Finished(Instant),
}

/// Where a queued delivery came from, and so what ends it.
#[derive(Clone, Debug)]
enum Origin {
    /// A first attempt handed over in memory, without a row: it settles its ticket.
    Handed { ticket: Ticket, handed_at: Instant },
    /// A row of `webhook_retries`: its removal ends it.
    Row,
}

/// A delivery in the window: as scanned, or handed over prepared.
struct Queued {
    due: DueDelivery,
    prepared: Option<(Arc<PreparedMessage>, Arc<PreparedEndpoint>)>,
    origin: Origin,
}

impl Queued {
    fn endpoint(&self) -> EndpointKey {
        (self.due.delivery.account_id.clone(), self.due.delivery.endpoint_id.clone())
    }

    /// Whether it is a retry made from its row: such an attempt reads and leaves the
    /// delivery's progress ([`WebhookStore::progress`]).
    fn is_retry_row(&self) -> bool {
        matches!(self.origin, Origin::Row) && self.due.delivery.attempt > 1
    }
}

/// One endpoint's queue in the window, with its slots and state lock once looked up.
#[derive(Default)]
struct EndpointQueue {
    queued: VecDeque<Queued>,
    /// How many of `queued` came from scans (the per-endpoint bound counts those).
    scanned: usize,
    slots: Option<(Arc<Semaphore>, Arc<tokio::sync::Mutex<CachedState>>)>,
    /// Rows of this endpoint scans found past its bound ([`Deliverer::scan`]): the
    /// shard, the soonest one's due time, and how many were queued when the first was.
    /// The scans go on past them; once the queue has drained to a quarter of that (or
    /// leaves the window), the shard's mark goes back to that due time
    /// ([`Deliverer::revisit`]) so that a scan reads them again.
    left_out: Option<(String, i64, usize)>,
}

impl EndpointQueue {
    fn push(&mut self, queued: Queued, front: bool) {
        if matches!(queued.origin, Origin::Row) {
            self.scanned += 1;
        }
        if front {
            self.queued.push_front(queued);
        } else {
            self.queued.push_back(queued);
        }
    }

    fn pop(&mut self) -> Option<Queued> {
        let queued = self.queued.pop_front()?;
        if matches!(queued.origin, Origin::Row) {
            self.scanned -= 1;
        }
        Some(queued)
    }
}

/// The deliveries queued and not started: each endpoint's queue, and the order the
/// endpoints take their turns in ([`Deliverer::start_window`]).
#[derive(Default)]
struct Window {
    queues: HashMap<EndpointKey, EndpointQueue>,
    /// Every endpoint with a queue, once, the one whose turn is next first.
    turns: VecDeque<EndpointKey>,
}

impl Window {
    /// The endpoint's queue, made (its turn after every other's) when it has none.
    fn queue(&mut self, endpoint: EndpointKey) -> &mut EndpointQueue {
        match self.queues.entry(endpoint) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                self.turns.push_back(entry.key().clone());
                entry.insert(EndpointQueue::default())
            }
        }
    }

    fn queues(&mut self) -> impl Iterator<Item = &mut EndpointQueue> {
        self.queues.values_mut()
    }

    fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Removes the queues left empty, each handed to `dropped` first, and their turns.
    fn drop_empty(&mut self, mut dropped: impl FnMut(&mut EndpointQueue)) {
        let before = self.queues.len();
        self.queues.retain(|_, queue| {
            if !queue.queued.is_empty() {
                return true;
            }
            dropped(queue);
            false
        });
        if self.queues.len() < before {
            let queues = &self.queues;
            self.turns.retain(|endpoint| queues.contains_key(endpoint));
        }
    }
}

/// What an endpoint's turn did ([`Deliverer::start_window`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// It started its next delivery.
    Started,
    /// It has nothing to start, or no slot of its own or of its share free.
    Waits,
    /// The process's slots are all taken.
    ProcessFull,
}

/// What the deliverer shares with its attempts.
struct Shared {
    store: WebhookStore,
    recorder: Recorder,
    shards: Shards,
    handoff: Handoff,
    client: SafeClient,
    clock: Arc<dyn Clock>,
    stats: Arc<Stats>,
    config: DelivererConfig,
    held: Mutex<HashMap<DeliveryKey, Held>>,
    endpoints: Mutex<HashMap<EndpointKey, EndpointSlots>>,
    /// First attempts to make again once their instant has come (their record could
    /// not be written, or their feed head was not written yet).
    later: Mutex<Vec<(Instant, Queued)>>,
}

/// The deliverer of one process.
pub struct Deliverer {
    shared: Arc<Shared>,
    shards: Shards,
    /// Rings when an attempt freed its endpoint's slot: the window has what to start.
    freed: Arc<Notify>,
    global: Arc<Semaphore>,
    /// The slots endpoints known to be failing may hold between them (a quarter of
    /// `global`), besides a slot of `global` and one of `unproven` each: many dead
    /// endpoints at once (a region of receivers down) hold at most these, and the rest
    /// stay for endpoints that answer.
    failing: Arc<Semaphore>,
    /// The slots endpoints not known to answer (never attempted, failing, or whose
    /// state is not known here) may hold between them (three quarters of `global`),
    /// besides a slot of `global` each: a wave of new endpoints that hang (many created
    /// at once at a dead address) leaves a quarter of the slots to endpoints whose last
    /// attempt succeeded.
    unproven: Arc<Semaphore>,
    /// The deliveries queued and not started, by endpoint in the order they came: an
    /// attempt that frees a slot starts the next of its endpoint without a scan.
    window: Mutex<Window>,
    /// First attempts taken out of the window to be written as rows, whose write has
    /// not succeeded yet.
    converting: Mutex<Vec<Queued>>,
    last_hold_check: Mutex<Instant>,
    /// The shards held at the last scan.
    scanned_shards: Mutex<Vec<String>>,
    /// Whether the last scan left rows due unread (it read a full page) or unqueued
    /// (for want of room): the next scan need not wait for the poll.
    more_due: AtomicBool,
    /// Rows queued in the window at the end of the last round.
    rows_queued: AtomicUsize,
    /// Rows left out by scans, to read again ([`Deliverer::revisit`]).
    revisits: Mutex<Revisits>,
}

/// Per shard, the soonest due time of rows scans left out that are to be read again,
/// and when the marks last went back to such rows.
#[derive(Default)]
struct Revisits {
    due: HashMap<String, i64>,
    last: Option<Instant>,
}

/// How often, at most, the marks go back to rows scans left out: each time, the next
/// scan reads again from there.
const REVISIT_EVERY: Duration = Duration::from_secs(1);

/// Pages a scan reads in a row of a shard, at most, while a full page queues nothing.
const PAGES_A_SCAN: usize = 8;

/// What became of one attempt, for the attempt record.
struct Sent {
    outcome: AttemptOutcome,
    status: Option<u16>,
    error: Option<String>,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Recorded, or dropped: a first attempt is settled, a row removed.
    Done,
    /// Nothing sent yet: its message's feed head is not written.
    NotYet,
}

impl Deliverer {
    pub fn new(
        store: WebhookStore,
        client: SafeClient,
        clock: Arc<dyn Clock>,
        stats: Arc<Stats>,
        shards: Shards,
        handoff: Handoff,
        config: DelivererConfig,
    ) -> Deliverer {
        let global = Arc::new(Semaphore::new(config.global.max(1)));
        // A quarter of the process's attempt slots: the failing endpoints' share, and
        // the most a recorder's group waits on.
        let quarter = (config.global / 4).max(1);
        let failing = Arc::new(Semaphore::new(quarter));
        let unproven = Arc::new(Semaphore::new(config.global.max(1).saturating_sub(quarter).max(1)));
        let linger = Linger { hand_ins: config.record_linger.hand_ins.min(quarter).max(1), ..config.record_linger };
        let recorder = Recorder::start(store.clone(), linger);
        let shared = Shared {
            store,
            recorder,
            shards: shards.clone(),
            handoff,
            client,
            clock,
            stats,
            config,
            held: Mutex::default(),
            endpoints: Mutex::default(),
            later: Mutex::default(),
        };
        Deliverer {
            shared: Arc::new(shared),
            shards,
            freed: Arc::new(Notify::new()),
            global,
            failing,
            unproven,
            window: Mutex::default(),
            converting: Mutex::default(),
            last_hold_check: Mutex::new(Instant::now()),
            scanned_shards: Mutex::default(),
            more_due: AtomicBool::new(false),
            rows_queued: AtomicUsize::new(0),
            revisits: Mutex::default(),
        }
    }

    /// Delivers until `stop` turns true, then waits for the attempts in flight (each
    /// bounded by the client's timeout).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut attempts = JoinSet::new();
        let mut last_queue = None::<Instant>;
        let mut last_sweep = Instant::now();
        let (handoff, freed) = (self.shared.handoff.clone(), self.freed.clone());
        let mut scan = true;
        // The store is scanned at least once a poll however often the deliverer is
        // woken: retries come due, and rows are written, with nothing to wake it.
        let mut next_poll = tokio::time::Instant::now();
        while !*stop.borrow() {
            scan |= tokio::time::Instant::now() >= next_poll;
            if scan {
                next_poll = tokio::time::Instant::now() + self.shared.config.poll;
            }
            if last_sweep.elapsed() >= self.shared.config.sweep {
                last_sweep = Instant::now();
                self.sweep().await;
            }
            if let Err(error) = self.round(&mut attempts, scan).await {
                tracing::warn!(%error, "reading due deliveries failed; retrying");
            }
            if last_queue.is_none_or(|at| at.elapsed() >= self.shared.config.queue_interval) {
                last_queue = Some(Instant::now());
                self.refresh_queue().await;
            }
            while attempts.try_join_next().is_some() {}
            scan = tokio::select! {
                _ = tokio::time::sleep_until(next_poll) => true,
                _ = handoff.ready() => handoff.take_scan_wanted(),
                // A backlog of rows is read a page after another as the window
                // empties, not a page a poll.
                _ = freed.notified() => self.rows_running_low(),
                _ = stop.changed() => true,
            };
        }
        while attempts.join_next().await.is_some() {}
        self.shared.handoff.delivering_ended();
    }

    /// Starts an attempt for every queued delivery that has a free slot at its endpoint
    /// and in the process: those handed over since the last round and those of the
    /// window, after a scan of the store when `scan` is set, or when the window is empty
    /// and a mark was lowered since the last scan (a scan could find nothing else).
    /// First attempts held too long are written as rows first.
    pub async fn round(&self, attempts: &mut JoinSet<()>, scan: bool) -> Result<(), StoreError> {
        self.take_handed_over();
        self.take_later();
        // Before anything starts: what a shard given up since holds is its next holder's.
        self.forget_shards_not_held(&self.shards.held());
        self.convert_held_too_long().await;
        let scan = self.revisit_due() || scan;
        let window_empty = self.window.lock().map(|window| window.is_empty()).unwrap_or(true);
        let scanned = if scan || (window_empty && self.shards.lowered()) { self.scan().await } else { Ok(()) };
        self.start_window(attempts);
        scanned
    }

    /// Queues the first attempts the log reader handed over (the hand-off's bound is
    /// theirs; the per-endpoint bound is for scanned rows).
    fn take_handed_over(&self) {
        let offered = self.shared.handoff.take();
        if offered.is_empty() {
            return;
        }
        let Ok(mut window) = self.window.lock() else { return };
        let handed_at = Instant::now();
        for FirstAttempt { due, message, endpoint, ticket } in offered {
            let queued = Queued { due, prepared: Some((message, endpoint)), origin: Origin::Handed { ticket, handed_at } };
            window.queue(queued.endpoint()).push(queued, false);
        }
    }

    /// Queues again, first in their endpoint's queue, the first attempts whose time to
    /// be made again has come.
    fn take_later(&self) {
        let ready: Vec<Queued> = {
            let Ok(mut later) = self.shared.later.lock() else { return };
            if later.is_empty() {
                return;
            }
            let now = Instant::now();
            let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut *later).into_iter().partition(|(at, _)| *at <= now);
            *later = waiting;
            ready.into_iter().map(|(_, queued)| queued).collect()
        };
        let Ok(mut window) = self.window.lock() else { return };
        self.shared.handoff.hold(ready.len());
        for queued in ready {
            window.queue(queued.endpoint()).push(queued, true);
        }
    }

    /// Writes as rows, due now, the first attempts queued longer than the hold (and
    /// those whose write failed before), so that they stop holding the log position;
    /// the scans find the rows.
    async fn convert_held_too_long(&self) {
        let hold = self.shared.config.first_attempt_hold;
        {
            let Ok(mut last) = self.last_hold_check.lock() else { return };
            if last.elapsed() < HOLD_CHECK {
                return;
            }
            *last = Instant::now();
        }
        let mut taken = self.converting.lock().map(|mut converting| std::mem::take(&mut *converting)).unwrap_or_default();
        // Handed over at or before `cutoff`: held for `hold` or longer (one clock read
        // for the whole window, not one a queued attempt).
        let cutoff = Instant::now().checked_sub(hold);
        let held_too_long = |queued: &Queued| matches!((&queued.origin, cutoff), (Origin::Handed { handed_at, .. }, Some(cutoff)) if *handed_at <= cutoff);
        if let Ok(mut window) = self.window.lock() {
            for queue in window.queues() {
                if !queue.queued.iter().any(held_too_long) {
                    continue;
                }
                let (old, kept): (VecDeque<Queued>, VecDeque<Queued>) = std::mem::take(&mut queue.queued).into_iter().partition(held_too_long);
                queue.queued = kept;
                taken.extend(old);
            }
            self.drop_empty_queues(&mut window);
        }
        if taken.is_empty() {
            return;
        }
        let shared = &self.shared;
        let now = shared.clock.now_micros();
        let mut rows = Vec::with_capacity(taken.len());
        let mut prepared = Ok(());
        for queued in &taken {
            prepared = prepared.and(shared.shards.prepare(&shared.store, &queued.due.shard, now).await);
            rows.push(shared.store.retry_row(&queued.due.shard, now, &queued.due.delivery));
        }
        let written = match prepared {
            Ok(()) => shared.recorder.write(rows).await,
            Err(error) => Err(error),
        };
        match written {
            Ok(()) => {
                shared.handoff.release(taken.len());
                for queued in &taken {
                    shared.shards.lower(&queued.due.shard, now);
                    if let Origin::Handed { ticket, .. } = &queued.origin {
                        shared.handoff.ledger().settle(ticket);
                    }
                }
                tracing::debug!(count = taken.len(), "first attempts not made at once written as rows");
            }
            Err(error) => {
                tracing::warn!(%error, count = taken.len(), "writing first attempts as rows failed; retrying");
                if let Ok(mut converting) = self.converting.lock() {
                    converting.extend(taken);
                }
            }
        }
    }

    /// Scans the shards held from their marks up to now, and queues the due deliveries
    /// found that nothing holds in memory, while the window has room. A full page of
    /// which nothing could be queued (rows of endpoints at their bound, or held) is
    /// followed by the next at once, up to [`PAGES_A_SCAN`]: a dead endpoint's backlog,
    /// read again after its queue drained, is crossed in one scan, not a page a poll.
    async fn scan(&self) -> Result<(), StoreError> {
        let now = self.shared.clock.now_micros();
        let held_shards = self.shards.held();
        self.more_due.store(false, Ordering::Relaxed);
        let page = self.shared.config.scan;
        for shard in held_shards {
            self.shards.prepare(&self.shared.store, &shard, now).await?;
            let scan_started = Instant::now();
            let seen = self.shards.begin_scan(&shard);
            if seen > now {
                self.shards.raise(&shard, seen, seen);
                continue;
            }
            let (mut from, mut pages) = (seen, 0);
            let to = loop {
                pages += 1;
                let due_rows = self.shared.store.due_between(&shard, from, now, page).await?;
                let (queued, left_out) = self.queue_scanned(&due_rows, scan_started);
                let read_all = due_rows.len() < page;
                let last = due_rows.last().map_or(now, |due| due.due_at);
                if read_all || left_out.is_some() || queued > 0 || pages >= PAGES_A_SCAN || last <= from {
                    if !read_all || left_out.is_some() {
                        self.more_due.store(true, Ordering::Relaxed);
                    }
                    break left_out.unwrap_or(if read_all { now } else { last });
                }
                from = last;
            };
            self.shards.raise(&shard, seen, to);
        }
        Ok(())
    }

    /// Queues the rows of a page that nothing holds in memory, each endpoint up to its
    /// bound; returns how many were queued, and the first row left out for want of room
    /// (the mark stays there). Rows past their endpoint's bound are not left out: the
    /// scan goes on past them (an endpoint's backlog never keeps the others' rows
    /// unread), and the endpoint's queue keeps the soonest one's due time
    /// ([`EndpointQueue::left_out`]) to read them again once it drains.
    fn queue_scanned(&self, due_rows: &[DueDelivery], scan_started: Instant) -> (usize, Option<i64>) {
        let (Ok(mut window), Ok(mut held)) = (self.window.lock(), self.shared.held.lock()) else { return (0, None) };
        // Rows removed before this scan began were not listed by it.
        held.retain(|_, state| !matches!(state, Held::Finished(at) if *at < scan_started));
        let (mut queued, mut left_out) = (0, None);
        for due in due_rows {
            let key = key_of(due);
            if held.contains_key(&key) {
                continue;
            }
            let endpoint = (due.delivery.account_id.clone(), due.delivery.endpoint_id.clone());
            let queue = window.queue(endpoint);
            if queue.scanned >= self.shared.config.window_per_endpoint.min(self.not_answering_bound())
                && (queue.scanned >= self.shared.config.window_per_endpoint || !self.answering(queue, &due.delivery))
            {
                // The soonest left out: a scan from a mark lowered since (a retry
                // written) may leave out a row due before the last one's.
                queue.left_out = match queue.left_out.take() {
                    Some((shard, due_at, queued_then)) if shard == due.shard => Some((shard, due_at.min(due.due_at), queued_then)),
                    Some((shard, due_at, _)) => {
                        // Another shard's (an endpoint's deliveries moved with its
                        // account): read again soon, this one once the queue drains.
                        self.revisit(&shard, due_at);
                        Some((due.shard.clone(), due.due_at, queue.scanned))
                    }
                    None => Some((due.shard.clone(), due.due_at, queue.scanned)),
                };
                continue;
            }
            if !self.shared.handoff.has_room(1) {
                left_out = left_out.or(Some(due.due_at));
                continue;
            }
            held.insert(key, Held::Queued);
            self.shared.handoff.hold(1);
            queue.push(Queued { due: due.clone(), prepared: None, origin: Origin::Row }, false);
            queued += 1;
        }
        self.drop_empty_queues(&mut window);
        (queued, left_out)
    }

    /// Rows left out at `due_at` of `shard` are to be read again: the shard's mark goes
    /// back to them at the next [`Deliverer::revisit_due`].
    fn revisit(&self, shard: &str, due_at: i64) {
        if let Ok(mut revisits) = self.revisits.lock() {
            let soonest = revisits.due.entry(shard.to_owned()).or_insert(due_at);
            *soonest = (*soonest).min(due_at);
        }
    }

    /// Lowers the marks to the rows to read again, at most once every
    /// [`REVISIT_EVERY`] (each lowering has the next scan read again from there, past
    /// every row of endpoints still at their bound); whether it did.
    fn revisit_due(&self) -> bool {
        let Ok(mut revisits) = self.revisits.lock() else { return false };
        if revisits.due.is_empty() || revisits.last.is_some_and(|last| last.elapsed() < REVISIT_EVERY) {
            return false;
        }
        for (shard, due_at) in std::mem::take(&mut revisits.due) {
            self.shards.lower(&shard, due_at);
        }
        revisits.last = Some(Instant::now());
        true
    }

    /// Removes the queues left empty from the window; the rows one left out are read
    /// again.
    fn drop_empty_queues(&self, window: &mut Window) {
        window.drop_empty(|queue| {
            if let Some((shard, due_at, _)) = queue.left_out.take() {
                self.revisit(&shard, due_at);
            }
        });
    }

    /// The rows queued for one endpoint not known to answer, at most: twice what it may
    /// have in flight, as its attempts may each take the client's whole timeout (and
    /// many such endpoints at once must leave the window to the others).
    fn not_answering_bound(&self) -> usize {
        self.shared.config.per_endpoint.max(1) * 2
    }

    /// Whether the endpoint of a queue is known to answer (its last attempt succeeded).
    fn answering(&self, queue: &EndpointQueue, delivery: &Delivery) -> bool {
        let answering = |state_lock: &tokio::sync::Mutex<CachedState>| health(state_lock, None) == Health::Answering;
        if let Some((_, state_lock)) = &queue.slots {
            return answering(state_lock);
        }
        let key = (delivery.account_id.clone(), delivery.endpoint_id.clone());
        self.shared.endpoints.lock().is_ok_and(|endpoints| endpoints.get(&key).is_some_and(|slots| answering(&slots.state)))
    }

    /// Forgets the queued deliveries of shards no longer held (revoked in a rebalance):
    /// their next holder delivers them (a first attempt's message is read again, as the
    /// position did not pass it).
    fn forget_shards_not_held(&self, held_shards: &[String]) {
        let Ok(mut scanned) = self.scanned_shards.lock() else { return };
        if scanned.as_slice() == held_shards {
            return;
        }
        *scanned = held_shards.to_vec();
        let mut forgotten = 0;
        {
            let (Ok(mut window), Ok(mut held)) = (self.window.lock(), self.shared.held.lock()) else { return };
            for queue in window.queues() {
                let mut kept = VecDeque::with_capacity(queue.queued.len());
                while let Some(queued) = queue.pop() {
                    if held_shards.contains(&queued.due.shard) {
                        kept.push_back(queued);
                    } else {
                        held.remove(&key_of(&queued.due));
                        forgotten += 1;
                    }
                }
                for queued in kept {
                    queue.push(queued, false);
                }
            }
            self.drop_empty_queues(&mut window);
        }
        if let Ok(mut converting) = self.converting.lock() {
            let before = converting.len();
            converting.retain(|queued| held_shards.contains(&queued.due.shard));
            forgotten += before - converting.len();
        }
        if let Ok(mut later) = self.shared.later.lock() {
            later.retain(|(_, queued)| held_shards.contains(&queued.due.shard));
        }
        self.shared.handoff.release(forgotten);
    }

    /// Starts the window's deliveries, each endpoint's in order, while its endpoint and
    /// the process have free slots. The endpoints take turns: they are offered a slot in
    /// the order of their turns, and one that starts a delivery goes to the back. So
    /// while the process's slots are all taken, each slot freed goes to the endpoint
    /// that has waited longest since it last started one (one endpoint's backlog never
    /// goes whole before another's next delivery), and an endpoint that cannot take it
    /// (no slot of its own or of its share free) keeps its place.
    fn start_window(&self, attempts: &mut JoinSet<()>) {
        let Ok(mut window) = self.window.lock() else { return };
        let window = &mut *window;
        let (mut turn, mut started) = (0, false);
        loop {
            if turn == window.turns.len() {
                // Another pass while the last one started something: those that started
                // may have slots left, behind the others.
                if !std::mem::take(&mut started) {
                    break;
                }
                turn = 0;
                continue;
            }
            let Some(queue) = window.queues.get_mut(&window.turns[turn]) else {
                window.turns.remove(turn);
                continue;
            };
            match self.take_turn(attempts, &window.turns[turn], queue) {
                Turn::Started => {
                    started = true;
                    if let Some(endpoint) = window.turns.remove(turn) {
                        window.turns.push_back(endpoint);
                    }
                }
                Turn::Waits => turn += 1,
                Turn::ProcessFull => break,
            }
        }
        // An endpoint drained to a quarter of what it held when a scan left rows of it
        // out: those rows are read again.
        for queue in window.queues() {
            if let Some((shard, due_at, queued_then)) = &queue.left_out {
                if queue.scanned <= queued_then / 4 {
                    self.revisit(shard, *due_at);
                    queue.left_out = None;
                }
            }
        }
        self.drop_empty_queues(window);
        self.rows_queued.store(window.queues().map(|queue| queue.scanned).sum(), Ordering::Relaxed);
    }

    /// An endpoint's turn: starts its next queued delivery if its endpoint, its share
    /// and the process each have a slot free.
    fn take_turn(&self, attempts: &mut JoinSet<()>, endpoint: &EndpointKey, queue: &mut EndpointQueue) -> Turn {
        if queue.queued.is_empty() {
            return Turn::Waits;
        }
        let (in_flight, state_lock) = match &queue.slots {
            Some(slots) => slots.clone(),
            None => {
                let Some(slots) = self.endpoint_slots(endpoint) else { return Turn::Waits };
                queue.slots.insert(slots).clone()
            }
        };
        let Ok(endpoint_permit) = in_flight.try_acquire_owned() else { return Turn::Waits };
        // An endpoint not known to answer also takes a slot of the unproven share, and
        // one whose attempts fail a slot of the failing share too.
        let health = health(&state_lock, queue.queued.front());
        let Some(shares) = self.shares(health) else { return Turn::Waits };
        let Ok(global_permit) = self.global.clone().try_acquire_owned() else { return Turn::ProcessFull };
        let Some(queued) = queue.pop() else { return Turn::Waits };
        self.start(attempts, queued, endpoint_permit, (global_permit, shares), state_lock);
        Turn::Started
    }

    /// Whether the next round scans again at once: the last scan left more rows due,
    /// fewer than a quarter of a scan's page of rows are still queued, and memory has
    /// room for at least as many (a scan that could queue none waits for the poll).
    fn rows_running_low(&self) -> bool {
        let quarter = self.shared.config.scan / 4;
        self.more_due.load(Ordering::Relaxed) && self.rows_queued.load(Ordering::Relaxed) <= quarter && self.shared.handoff.has_room(quarter.max(1))
    }

    fn start(
        &self,
        attempts: &mut JoinSet<()>,
        queued: Queued,
        endpoint_permit: OwnedSemaphorePermit,
        process_permits: (OwnedSemaphorePermit, Vec<OwnedSemaphorePermit>),
        state_lock: Arc<tokio::sync::Mutex<CachedState>>,
    ) {
        if matches!(queued.origin, Origin::Row) {
            if let Ok(mut held) = self.shared.held.lock() {
                held.insert(key_of(&queued.due), Held::InFlight);
            }
        }
        self.shared.handoff.release(1);
        let shared = self.shared.clone();
        let freed = self.freed.clone();
        let delivery = &queued.due.delivery;
        let span = tracing::info_span!(
            "webhooks.attempt",
            otel.kind = "client",
            account_id = %delivery.account_id,
            endpoint_id = %delivery.endpoint_id,
            message_id = %delivery.message_id,
            attempt = i64::from(delivery.attempt),
            outcome = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
        );
        attempts.spawn(
            async move {
                let _process_permits = process_permits;
                // Boxed: the task then holds a pointer, not the attempt's whole state
                // (the request under way included), which it would copy on spawning and
                // again when it ends.
                let ended = Box::pin(attempt(&shared, &queued, endpoint_permit, &state_lock, &freed)).await;
                if let Err(error) = &ended {
                    tracing::warn!(%error, "a delivery attempt failed in the store (reading what it needs, or recording it); it is tried again");
                }
                match queued.origin {
                    Origin::Row => {
                        if let Ok(mut held) = shared.held.lock() {
                            held.insert(key_of(&queued.due), Held::Finished(Instant::now()));
                        }
                        if ended != Ok(Ended::Done) {
                            // Its row is still there, and nothing holds it any more.
                            shared.shards.lower(&queued.due.shard, queued.due.due_at);
                        }
                    }
                    Origin::Handed { ref ticket, .. } => match ended {
                        Ok(Ended::Done) => shared.handoff.ledger().settle(ticket),
                        // No row: it is made again from memory, holding its position.
                        Ok(Ended::NotYet) => again_later(&shared, queued, shared.config.poll),
                        Err(_) => again_later(&shared, queued, AGAIN_AFTER_ERROR),
                    },
                }
                // Its process slot is free too.
                freed.notify_one();
            }
            .instrument(span),
        );
    }

    /// The slots of the shares an attempt to an endpoint of `health` takes besides its
    /// slot of the process's; None when one of them is full.
    fn shares(&self, health: Health) -> Option<Vec<OwnedSemaphorePermit>> {
        let mut permits = Vec::new();
        if health != Health::Answering {
            permits.push(self.unproven.clone().try_acquire_owned().ok()?);
        }
        if health == Health::Failing {
            permits.push(self.failing.clone().try_acquire_owned().ok()?);
        }
        Some(permits)
    }

    /// The endpoint's in-flight bound and state lock, kept with its queue in the window
    /// (while held there, refreshes keep them too).
    fn endpoint_slots(&self, endpoint: &EndpointKey) -> Option<(Arc<Semaphore>, Arc<tokio::sync::Mutex<CachedState>>)> {
        let mut endpoints = self.shared.endpoints.lock().ok()?;
        let slots = endpoints.entry(endpoint.clone()).or_default();
        let semaphore = slots.in_flight.get_or_insert_with(|| Arc::new(Semaphore::new(self.shared.config.per_endpoint.max(1)))).clone();
        Some((semaphore, slots.state.clone()))
    }

    /// Every sweep interval: the marks go back to the grace before now, and each low
    /// minute moves up past the empty minutes before it.
    async fn sweep(&self) {
        let now = self.shared.clock.now_micros();
        self.shards.sweep(now);
        for shard in self.shards.held() {
            if let Err(error) = self.shards.advance_low(&self.shared.store, &shard, now).await {
                tracing::debug!(%error, shard, "moving the low minute up failed");
            }
        }
    }

    /// The queue figures: the rows due now (from each shard's low minute) and the first
    /// attempts not settled, and since when the oldest of them is due.
    async fn refresh_queue(&self) {
        let now = self.shared.clock.now_micros();
        let (mut depth, mut soonest) = self.shared.handoff.ledger().unsettled();
        for shard in self.shards.held() {
            let Some(low) = self.shards.low(&shard) else { continue };
            match self.shared.store.count_due(&shard, minute_start(low), now).await {
                Ok((shard_depth, shard_soonest)) => {
                    depth += shard_depth;
                    soonest = match (soonest, shard_soonest) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(error) => tracing::debug!(%error, "counting due deliveries failed"),
            }
        }
        self.shared.stats.queue_depth.store(depth as u64, Ordering::Relaxed);
        self.shared.stats.soonest_due_micros.store(soonest.unwrap_or(0), Ordering::Relaxed);
        // Endpoints with nothing under way keep no slots, and no state in memory (an
        // attempt holds its endpoint's state until its records are written).
        if let Ok(mut endpoints) = self.shared.endpoints.lock() {
            endpoints.retain(|_, slots| {
                Arc::strong_count(&slots.state) > 1
                    || slots.in_flight.as_ref().is_some_and(|semaphore| semaphore.available_permits() < self.shared.config.per_endpoint.max(1))
            });
        }
    }
}

/// What is known of an endpoint's answers when its next queued delivery starts: its
/// state in memory while it has attempts under way (the newest), else (and while that
/// state's lock is taken) the state the ingest read with a first attempt handed over;
/// unknown otherwise (a row's delivery: a retry row exists because an attempt failed).
fn health(state_lock: &tokio::sync::Mutex<CachedState>, next: Option<&Queued>) -> Health {
    let cached = state_lock.try_lock().ok().and_then(|cached| cached.state.as_ref().map(Health::of));
    cached.or_else(|| next.and_then(|queued| queued.prepared.as_ref()).map(|(_, endpoint)| endpoint.health)).unwrap_or_default()
}

/// Puts a first attempt back, to be made again after `delay` (still in memory, still
/// holding its message's position).
fn again_later(shared: &Shared, queued: Queued, delay: Duration) {
    if let Ok(mut later) = shared.later.lock() {
        later.push((Instant::now() + delay, queued));
    }
}

impl Shared {
    /// Whether the endpoint and secrets a first attempt was handed over with are still
    /// those of the store.
    fn current(&self, prepared: &PreparedEndpoint) -> bool {
        match (prepared.changes, self.store.endpoint_changes()) {
            (Some(then), Some(now)) => then == now,
            _ => prepared.read_at.elapsed() < self.config.prepared_for,
        }
    }
}

/// Drops a delivery that will never be sent: a row is removed, a first attempt settles.
async fn drop_delivery(shared: &Shared, queued: &Queued, why: &'static str) -> Result<Ended, StoreError> {
    if matches!(queued.origin, Origin::Row) {
        shared.recorder.write(vec![shared.store.retry_done_row(&queued.due)]).await?;
    }
    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
    crate::metrics::record_delivery("dropped");
    tracing::info!(why, "delivery dropped");
    Ok(Ended::Done)
}

/// Sends the delivery, signed; what became of it.
async fn send(shared: &Shared, url: &str, message: &PreparedMessage, now: i64, signer: &Signer) -> Sent {
    let headers = match signer.headers(Timestamp(now), &message.id, &message.body) {
        Ok(headers) => headers,
        Err(error) => return Sent { outcome: AttemptOutcome::Unreachable, status: None, error: Some(error.to_string()) },
    };
    match shared.client.post(url, &headers, message.body.clone()).await {
        Ok(status) if (200..300).contains(&status) => Sent { outcome: AttemptOutcome::Succeeded, status: Some(status), error: None },
        Ok(status) => Sent { outcome: AttemptOutcome::Failed, status: Some(status), error: Some(format!("answered {status}")) },
        Err(SendError::TimedOut) => Sent { outcome: AttemptOutcome::TimedOut, status: None, error: Some(SendError::TimedOut.to_string()) },
        Err(error) => Sent { outcome: AttemptOutcome::Unreachable, status: None, error: Some(error.to_string()) },
    }
}

fn outcome_label(outcome: AttemptOutcome) -> &'static str {
    match outcome {
        AttemptOutcome::Succeeded => "succeeded",
        AttemptOutcome::Failed => "failed",
        AttemptOutcome::TimedOut => "timed_out",
        AttemptOutcome::Unreachable => "unreachable",
    }
}

/// What an attempt sends and to whom: the hand-over's while current, else the store's
/// (the message is the feed row at the delivery's seq). None when the delivery was
/// dropped (its endpoint or message is gone).
async fn what_to_send(shared: &Shared, queued: &Queued) -> Result<Option<(Arc<PreparedMessage>, Arc<PreparedEndpoint>)>, StoreError> {
    if let Some((message, endpoint)) = queued.prepared.as_ref().filter(|(_, endpoint)| shared.current(endpoint)) {
        return Ok(Some((message.clone(), endpoint.clone())));
    }
    let delivery = &queued.due.delivery;
    let store = &shared.store;
    let changes = store.endpoint_changes();
    let read_at = Instant::now();
    let Some(endpoint) = store.endpoint_record(&delivery.account_id, &delivery.endpoint_id).await? else {
        drop_delivery(shared, queued, "endpoint deleted").await?;
        return Ok(None);
    };
    let message = match queued.prepared.as_ref() {
        Some((message, _)) => message.clone(),
        None => match store.feed_message(&delivery.account_id, delivery.seq).await? {
            Some((message, body)) if message.id == delivery.message_id => Arc::new(PreparedMessage::with_body(delivery.seq, &message, body)),
            _ => {
                drop_delivery(shared, queued, "message expired").await?;
                return Ok(None);
            }
        },
    };
    let secrets = store.secrets(&delivery.account_id, &delivery.endpoint_id).await?;
    Ok(Some((message, Arc::new(PreparedEndpoint { endpoint, signer: Signer::new(&secrets), health: Health::Unknown, read_at, changes }))))
}

/// One attempt of a queued delivery (see the module's steps).
async fn attempt(
    shared: &Shared,
    queued: &Queued,
    endpoint_permit: OwnedSemaphorePermit,
    state_lock: &tokio::sync::Mutex<CachedState>,
    freed: &Notify,
) -> Result<Ended, StoreError> {
    let due = &queued.due;
    let delivery = &due.delivery;
    let store = &shared.store;
    if queued.is_retry_row() && store.progress(delivery).await?.is_some_and(|progress| progress.covers(delivery.attempt)) {
        // Another row of the same attempt was made already (or the message delivered):
        // this one is a leftover, removed without counting as a delivery's end.
        shared.recorder.write(vec![store.retry_done_row(due)]).await?;
        shared.stats.repeats_removed.fetch_add(1, Ordering::Relaxed);
        crate::metrics::record_repeat_removed();
        tracing::debug!(attempt = delivery.attempt, "retry made already: its second row removed");
        return Ok(Ended::Done);
    }
    let Some((message, prepared)) = what_to_send(shared, queued).await? else { return Ok(Ended::Done) };
    let endpoint = &prepared.endpoint;
    if !delivery.is_for(endpoint) {
        return drop_delivery(shared, queued, "endpoint deleted").await;
    }
    if !endpoint.enabled {
        return drop_delivery(shared, queued, "endpoint disabled by the account").await;
    }
    // The endpoint as it is now decides, as it does for its URL and secrets: a type the
    // account took out of its filter since the delivery was queued is not sent.
    if !endpoint.wants(message.kind) {
        return drop_delivery(shared, queued, "type no longer subscribed").await;
    }
    let disabled = {
        let mut cached = state_lock.lock().await;
        let state = match cached.state.take() {
            Some(state) => state,
            None => store.endpoint_state(&delivery.account_id, &delivery.endpoint_id).await?,
        };
        let disables = cached.state.insert(state).disables(endpoint);
        disables.then(|| cached.disable_write.clone())
    };
    let disabled = match disabled {
        None => false,
        Some(None) => true,
        // The disable's record is still being written: acted on once it is.
        Some(Some(write)) => write.await.is_ok(),
    };
    if disabled {
        return drop_delivery(shared, queued, "endpoint disabled for failing").await;
    }
    if !shared.handoff.covers(&delivery.account_id, message.seq) {
        match store.head(&delivery.account_id).await? {
            Some(head) if head >= message.seq => shared.handoff.head_written(&delivery.account_id, head),
            // Its feed row is written, its head not yet: sent once the feed shows it.
            _ => return Ok(Ended::NotYet),
        }
    }
    let now = shared.clock.now_micros();
    let started = Instant::now();
    let sent = send(shared, &endpoint.url, &message, now, &prepared.signer).await;
    let elapsed = started.elapsed();
    drop(endpoint_permit);
    // The endpoint's slot is free: its next due delivery need not wait for the poll.
    freed.notify_one();
    let label = outcome_label(sent.outcome);
    let span = tracing::Span::current();
    span.record("outcome", label);
    if let Some(status) = sent.status {
        span.record("http.response.status_code", i64::from(status));
    }
    crate::metrics::record_attempt(label, elapsed.as_secs_f64());

    let succeeded = sent.outcome == AttemptOutcome::Succeeded;
    let next_due = if succeeded { None } else { shared.config.schedule.next_due(&delivery.id(), delivery.attempt, due.due_at, now) };
    let record = AttemptRecord {
        id: format!("att_{}", uuid::Uuid::new_v4().simple()),
        endpoint_created_version: Some(endpoint.created_version),
        message_id: message.id.clone(),
        kind: message.kind,
        attempt: delivery.attempt,
        attempted_at: Timestamp(now),
        outcome: sent.outcome,
        status: sent.status,
        error: sent.error,
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        next_attempt_at: next_due.map(Timestamp),
    };
    let mut rows = vec![store.attempt_row(&delivery.account_id, &delivery.endpoint_id, &record)];
    if let Some(next_due) = next_due {
        shared.shards.prepare(store, &due.shard, now).await?;
        rows.push(store.retry_row(&due.shard, next_due, &Delivery { attempt: delivery.attempt + 1, ..delivery.clone() }));
    }
    // A retry's removal says how far the delivery went: a second row of this attempt
    // (a first attempt made twice, a retry made again late) is then dropped when it
    // comes due, not made into a second chain of retries.
    let removal = matches!(queued.origin, Origin::Row).then(|| {
        let mut removal = vec![store.retry_done_row(due)];
        removal.extend(queued.is_retry_row().then(|| store.progress_row(delivery, succeeded)));
        removal
    });
    let mut disabling = false;
    let (recorded, removed) = {
        let mut cached = state_lock.lock().await;
        let ts = now_micros().max(cached.ts + 1);
        cached.ts = ts;
        let state = match cached.state.take() {
            Some(state) => state,
            None => store.endpoint_state(&delivery.account_id, &delivery.endpoint_id).await?,
        };
        // An attempt to an endpoint since deleted and created again under its id leaves
        // the new endpoint's state alone: it is no state of the endpoint attempted.
        let state = if state.endpoint_created_version.is_some_and(|created| created > endpoint.created_version) {
            cached.state = Some(state);
            None
        } else {
            let state = cached.state.insert(state.of(endpoint));
            state.last_attempt_at = Some(Timestamp(now));
            if succeeded {
                state.failing_since = None;
                state.last_success_at = Some(Timestamp(now));
            } else {
                let failing_since = *state.failing_since.get_or_insert(Timestamp(now));
                let failing_for_the_whole_span = now.saturating_sub(failing_since.0) >= shared.config.schedule.shortest_span();
                if next_due.is_none() && failing_for_the_whole_span && state.disabled_version != Some(endpoint.version) {
                    state.disabled_version = Some(endpoint.version);
                    state.disabled_at = Some(Timestamp(now));
                    disabling = true;
                    tracing::warn!(version = endpoint.version, "endpoint disabled after failing through the whole retry schedule");
                }
            }
            // Handed in under the lock: the recorder keeps the last of one endpoint's states.
            Some(StateWrite { endpoint: (delivery.account_id.clone(), delivery.endpoint_id.clone()), state: state.clone(), ts })
        };
        let (recorded, removed) = shared.recorder.submit_attempt(rows, state, removal);
        // A disable's record is waited for by the attempts that find the disable too.
        let recorded = if disabling {
            let write = recorded.written().boxed().shared();
            cached.disable_write = Some(write.clone());
            Either::Right(write)
        } else {
            Either::Left(recorded)
        };
        (recorded, removed)
    };
    let (written, disable) = match recorded {
        Either::Left(pending) => (pending.written().await, None),
        Either::Right(write) => (write.clone().await, Some(write)),
    };
    if let Err(error) = written {
        // The state handed in with the record may not be the store's: read again at the
        // next attempt, so that nothing not written (a disable above all) is acted on.
        let mut cached = state_lock.lock().await;
        cached.state = None;
        cached.disable_write = None;
        return Err(error);
    }
    if let Some(write) = disable {
        // Written: from now on the endpoint's deliveries are dropped at once.
        let mut cached = state_lock.lock().await;
        if cached.disable_write.as_ref().is_some_and(|pending| pending.ptr_eq(&write)) {
            cached.disable_write = None;
        }
    }
    if let Some(next_due) = next_due {
        shared.shards.lower(&due.shard, next_due);
    }
    if let Some(removed) = removed {
        removed.written().await?;
    }
    if succeeded {
        shared.stats.delivered.fetch_add(1, Ordering::Relaxed);
        crate::metrics::record_delivery("delivered");
    } else {
        shared.stats.failed_attempts.fetch_add(1, Ordering::Relaxed);
        if next_due.is_none() {
            shared.stats.given_up.fetch_add(1, Ordering::Relaxed);
            crate::metrics::record_delivery("given_up");
        }
    }
    Ok(Ended::Done)
}
