//! The deliverer: takes the due deliveries of the shards this process holds and makes
//! their attempts, each endpoint with a bounded number in flight (and the process with
//! a global bound), so a slow or dead endpoint only ever holds its own slots.
//!
//! Deliveries reach it two ways: first attempts handed over in memory by the log
//! reader, prepared ([`crate::handoff`]), and the rows its scans of the store find
//! (retries, deliveries written before a restart or by another process, first attempts
//! past the hand-off's bound). Both queue in one window by endpoint, and a delivery held
//! in memory (queued, under way, or just ended) is never queued twice.
//!
//! One attempt, in order:
//! 1. what to send: a first attempt handed over uses the message, endpoint and secrets
//!    the ingest had while they are current (the embedded store: no endpoint written
//!    since they were read; ScyllaDB: read at most [`DelivererConfig::prepared_for`]
//!    ago), any other reads them from the store. A delivery to an endpoint the account
//!    deleted or disabled, or one disabled for failing too long, is dropped (receivers
//!    catch up from the feed); so is one whose message expired; one whose message the
//!    feed head does not cover yet waits (the head the ingest wrote, else the store's);
//! 2. the message is signed with every secret signing now and POSTed;
//! 3. the endpoint's slot is freed (it bounds requests in flight to the endpoint, not
//!    the bookkeeping after them);
//! 4. the attempt is recorded, with the next delivery row when one is due (a failure
//!    with attempts left) and the endpoint's state, and the delivery row is removed,
//!    through the [`Recorder`]: in the same write where the store applies a write
//!    atomically (the embedded one), in the next one once the record is written where it
//!    does not (ScyllaDB). A crash before the removal repeats the attempt (at least once:
//!    the receiver sees the same `webhook-id` again), never loses it.
//!
//! An endpoint's state is kept in memory while the endpoint has attempts under way
//! (loaded from the store at the first), updated under the endpoint's lock and handed
//! in with a timestamp newer than the last, so the newest state is the one the store
//! keeps.
//!
//! When the last attempt of a delivery fails and the endpoint has failed without a
//! success for the whole retry span, the endpoint is disabled at its current version
//! (its state names the version); its pending deliveries are then dropped as they come
//! due, and an upsert of the endpoint (a newer version) re-enables it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recap_readmodel::driver::now_micros;
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, Delivery, DueDelivery, EndpointState, WebhookStore};
use recap_readmodel::StoreError;
use recap_schemas::Timestamp;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::client::{SafeClient, SendError};
use crate::handoff::{FirstAttempt, Handoff, PreparedEndpoint, PreparedMessage};
use crate::metrics::Stats;
use crate::recorder::Recorder;
use crate::schedule::{Clock, RetrySchedule};

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
    /// Deliveries queued in memory for one endpoint, at most: a dead endpoint's backlog
    /// stays in the store, not in memory.
    pub window_per_endpoint: usize,
    /// How long the endpoint and secrets a first attempt was handed over with are used
    /// where the store cannot tell whether an endpoint was written since (ScyllaDB).
    pub prepared_for: Duration,
    /// How often the queue figures are refreshed.
    pub queue_interval: Duration,
    /// How often every shard is scanned from its start (see [`Shards`]).
    pub sweep: Duration,
    pub schedule: RetrySchedule,
}

impl Default for DelivererConfig {
    fn default() -> DelivererConfig {
        DelivererConfig {
            per_endpoint: 4,
            global: 256,
            poll: Duration::from_millis(200),
            scan: 2_000,
            window: 20_000,
            window_per_endpoint: 2_000,
            prepared_for: Duration::from_secs(1),
            queue_interval: Duration::from_secs(5),
            sweep: Duration::from_secs(60),
            schedule: RetrySchedule::default(),
        }
    }
}

/// The shards this process delivers: `"0"` in the embedded edition, the numbers of the
/// `recap.messages.v1` partitions it holds in the distributed one; and, per shard, the
/// due time its scans start at.
///
/// A delivery row's removal leaves a tombstone in the store until it is purged, and a
/// shard's rows are one partition: a scan from the partition's start would step over
/// every delivery ever removed. So each shard keeps a mark at or below the due time of
/// every live row that this process does not hold in memory: whoever writes a delivery
/// row that nothing holds lowers the mark to the row's due time once it is written (the
/// ingest, for what it did not hand over; an attempt scheduling its retry), an attempt
/// that ends without removing its row lowers it too, and a scan raises it to the
/// earliest row it found and could not queue, or to the time it scanned up to when it
/// queued all it found, but never past a row lowered to while it ran. A shard newly
/// held, and every shard once a sweep interval, is scanned from its start: what another
/// process wrote (a retry recorded late by a former holder) is found within that
/// interval.
#[derive(Clone, Default)]
pub struct Shards(Arc<Mutex<Marks>>);

#[derive(Default)]
struct Marks {
    by_shard: BTreeMap<String, Mark>,
    /// Whether a mark was lowered (or reset) since the last scan began: only then can
    /// a scan find what the poll's would not.
    lowered: bool,
}

/// A shard's scan mark, and the lowest due time lowered to since its last scan began.
#[derive(Clone, Copy, Debug)]
struct Mark {
    at: i64,
    lowered: i64,
}

/// The mark of a shard scanned from its start.
const FROM_THE_START: Mark = Mark { at: i64::MIN, lowered: i64::MAX };

impl Shards {
    pub fn fixed(shards: &[&str]) -> Shards {
        let by_shard = shards.iter().map(|shard| ((*shard).to_owned(), FROM_THE_START)).collect();
        Shards(Arc::new(Mutex::new(Marks { by_shard, lowered: true })))
    }

    pub fn add(&self, shard: String) {
        if let Ok(mut shards) = self.0.lock() {
            shards.by_shard.insert(shard, FROM_THE_START);
            shards.lowered = true;
        }
    }

    pub fn remove(&self, shard: &str) {
        if let Ok(mut shards) = self.0.lock() {
            shards.by_shard.remove(shard);
        }
    }

    pub fn held(&self) -> Vec<String> {
        self.0.lock().map(|shards| shards.by_shard.keys().cloned().collect()).unwrap_or_default()
    }

    pub fn holds(&self, shard: &str) -> bool {
        self.0.lock().is_ok_and(|shards| shards.by_shard.contains_key(shard))
    }

    /// Where the shard's next scan starts (its start for a shard not held).
    pub fn mark(&self, shard: &str) -> i64 {
        self.0.lock().ok().and_then(|shards| shards.by_shard.get(shard).map(|mark| mark.at)).unwrap_or(i64::MIN)
    }

    /// A delivery row due at `due_at` that nothing holds in memory is written in `shard`.
    pub fn lower(&self, shard: &str, due_at: i64) {
        if let Ok(mut shards) = self.0.lock() {
            if let Some(mark) = shards.by_shard.get_mut(shard) {
                mark.at = mark.at.min(due_at);
                mark.lowered = mark.lowered.min(due_at);
                shards.lowered = true;
            }
        }
    }

    /// Whether a mark was lowered since the last scan began.
    fn lowered(&self) -> bool {
        self.0.lock().is_ok_and(|shards| shards.lowered)
    }

    /// A scan of the shard begins; where it starts.
    fn begin_scan(&self, shard: &str) -> i64 {
        let Ok(mut shards) = self.0.lock() else { return i64::MIN };
        shards.lowered = false;
        let Some(mark) = shards.by_shard.get_mut(shard) else { return i64::MIN };
        mark.lowered = i64::MAX;
        mark.at
    }

    /// The scan that began at `seen` left no row it could not queue before `to`.
    fn raise(&self, shard: &str, seen: i64, to: i64) {
        if let Ok(mut shards) = self.0.lock() {
            if let Some(mark) = shards.by_shard.get_mut(shard) {
                // A row lowered to while the scan ran may be one its read did not see.
                if mark.at == seen {
                    mark.at = to.min(mark.lowered).max(seen);
                }
            }
        }
    }

    /// Every shard's next scan starts at its start.
    fn sweep(&self) {
        if let Ok(mut shards) = self.0.lock() {
            shards.by_shard.values_mut().for_each(|mark| *mark = FROM_THE_START);
            shards.lowered = true;
        }
    }
}

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
}

/// A delivery row's key: shard, due time, delivery id.
type DeliveryKey = (String, i64, String);

/// An endpoint: account id and endpoint id.
type EndpointKey = (String, String);

fn key_of(due: &DueDelivery) -> DeliveryKey {
    (due.shard.clone(), due.due_at, due.delivery.id())
}

/// What this process holds of a delivery in memory.
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

/// A delivery in the window: as scanned, or handed over prepared.
struct Queued {
    due: DueDelivery,
    prepared: Option<(Arc<PreparedMessage>, Arc<PreparedEndpoint>)>,
}

/// One endpoint's queue in the window, with its slots and state lock once looked up.
#[derive(Default)]
struct EndpointQueue {
    queued: VecDeque<Queued>,
    slots: Option<(Arc<Semaphore>, Arc<tokio::sync::Mutex<CachedState>>)>,
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
}

/// The deliverer of one process.
pub struct Deliverer {
    shared: Arc<Shared>,
    shards: Shards,
    /// Rings when an attempt freed its endpoint's slot: the window has what to start.
    freed: Arc<Notify>,
    global: Arc<Semaphore>,
    /// The deliveries queued and not started, by endpoint in the order they came: an
    /// attempt that frees a slot starts the next of its endpoint without a scan.
    window: Mutex<HashMap<EndpointKey, EndpointQueue>>,
    /// The shards held at the last scan.
    scanned_shards: Mutex<Vec<String>>,
}

/// What became of one attempt, for the attempt record.
struct Sent {
    outcome: AttemptOutcome,
    status: Option<u16>,
    error: Option<String>,
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
        let recorder = Recorder::start(store.clone());
        let shared =
            Shared { store, recorder, shards: shards.clone(), handoff, client, clock, stats, config, held: Mutex::default(), endpoints: Mutex::default() };
        Deliverer { shared: Arc::new(shared), shards, freed: Arc::new(Notify::new()), global, window: Mutex::default(), scanned_shards: Mutex::default() }
    }

    /// Delivers until `stop` turns true, then waits for the attempts in flight (each
    /// bounded by the client's timeout).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut attempts = JoinSet::new();
        let mut last_queue = None::<Instant>;
        let mut last_sweep = Instant::now();
        let (handoff, freed) = (self.shared.handoff.clone(), self.freed.clone());
        let mut scan = true;
        while !*stop.borrow() {
            if last_sweep.elapsed() >= self.shared.config.sweep {
                last_sweep = Instant::now();
                self.shards.sweep();
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
                _ = tokio::time::sleep(self.shared.config.poll) => true,
                _ = handoff.ready() => handoff.take_scan_wanted(),
                _ = freed.notified() => false,
                _ = stop.changed() => true,
            };
        }
        while attempts.join_next().await.is_some() {}
    }

    /// Starts an attempt for every queued delivery that has a free slot at its endpoint
    /// and in the process: those handed over since the last round and those of the
    /// window, after a scan of the store when `scan` is set, or when the window is empty
    /// and a mark was lowered since the last scan (a scan could find nothing else).
    pub async fn round(&self, attempts: &mut JoinSet<()>, scan: bool) -> Result<(), StoreError> {
        self.take_handed_over();
        let window_empty = self.window.lock().map(|window| window.is_empty()).unwrap_or(true);
        let scanned = if scan || (window_empty && self.shards.lowered()) { self.scan().await } else { Ok(()) };
        self.start_window(attempts);
        scanned
    }

    /// Queues the first attempts the log reader handed over, unless held already (a
    /// scan found the row first) or past the endpoint's share of the window (then the
    /// row is left to a scan).
    fn take_handed_over(&self) {
        let offered = self.shared.handoff.take();
        if offered.is_empty() {
            return;
        }
        let (Ok(mut window), Ok(mut held)) = (self.window.lock(), self.shared.held.lock()) else { return };
        let mut left = 0;
        for FirstAttempt { due, message, endpoint } in offered {
            let key = key_of(&due);
            if held.contains_key(&key) {
                left += 1;
                continue;
            }
            let queue = &mut window.entry((due.delivery.account_id.clone(), due.delivery.endpoint_id.clone())).or_default().queued;
            if queue.len() >= self.shared.config.window_per_endpoint {
                left += 1;
                self.shards.lower(&due.shard, due.due_at);
                continue;
            }
            held.insert(key, Held::Queued);
            queue.push_back(Queued { due, prepared: Some((message, endpoint)) });
        }
        window.retain(|_, queue| !queue.queued.is_empty());
        self.shared.handoff.release(left);
    }

    /// Scans the shards held from their marks up to now, and queues the due deliveries
    /// found that nothing holds in memory, while the window has room.
    async fn scan(&self) -> Result<(), StoreError> {
        let now = self.shared.clock.now_micros();
        let held_shards = self.shards.held();
        self.forget_shards_not_held(&held_shards);
        for shard in held_shards {
            let scan_started = Instant::now();
            let seen = self.shards.begin_scan(&shard);
            let due_rows = self.shared.store.due_from(&shard, seen, now, self.shared.config.scan).await?;
            let mut left_out = None;
            {
                let (Ok(mut window), Ok(mut held)) = (self.window.lock(), self.shared.held.lock()) else { continue };
                // Rows removed before this scan began were not listed by it.
                held.retain(|_, state| !matches!(state, Held::Finished(at) if *at < scan_started));
                for due in &due_rows {
                    let key = key_of(due);
                    if held.contains_key(&key) {
                        continue;
                    }
                    let queue = &mut window.entry((due.delivery.account_id.clone(), due.delivery.endpoint_id.clone())).or_default().queued;
                    if queue.len() >= self.shared.config.window_per_endpoint || !self.shared.handoff.has_room(1) {
                        left_out = left_out.or(Some(due.due_at));
                        continue;
                    }
                    held.insert(key, Held::Queued);
                    self.shared.handoff.hold(1);
                    queue.push_back(Queued { due: due.clone(), prepared: None });
                }
                window.retain(|_, queue| !queue.queued.is_empty());
            }
            let read_all = due_rows.len() < self.shared.config.scan;
            let to = left_out.unwrap_or_else(|| if read_all { now } else { due_rows.last().map_or(now, |due| due.due_at) });
            self.shards.raise(&shard, seen, to);
        }
        Ok(())
    }

    /// Forgets the queued deliveries of shards no longer held (revoked in a rebalance):
    /// their next holder delivers them.
    fn forget_shards_not_held(&self, held_shards: &[String]) {
        let Ok(mut scanned) = self.scanned_shards.lock() else { return };
        if scanned.as_slice() == held_shards {
            return;
        }
        *scanned = held_shards.to_vec();
        let (Ok(mut window), Ok(mut held)) = (self.window.lock(), self.shared.held.lock()) else { return };
        let mut forgotten = 0;
        for queue in window.values_mut() {
            queue.queued.retain(|queued| {
                let keep = held_shards.contains(&queued.due.shard);
                if !keep {
                    held.remove(&key_of(&queued.due));
                    forgotten += 1;
                }
                keep
            });
        }
        window.retain(|_, queue| !queue.queued.is_empty());
        self.shared.handoff.release(forgotten);
    }

    /// Starts the window's deliveries, each endpoint's in order, while its endpoint
    /// and the process have free slots.
    fn start_window(&self, attempts: &mut JoinSet<()>) {
        let Ok(mut window) = self.window.lock() else { return };
        'endpoints: for (endpoint, queue) in window.iter_mut() {
            if queue.queued.is_empty() {
                continue;
            }
            let (in_flight, state_lock) = match &queue.slots {
                Some(slots) => slots.clone(),
                None => {
                    let Some(slots) = self.endpoint_slots(endpoint) else { continue };
                    queue.slots.insert(slots).clone()
                }
            };
            while !queue.queued.is_empty() {
                let Ok(endpoint_permit) = in_flight.clone().try_acquire_owned() else { continue 'endpoints };
                let Ok(global_permit) = self.global.clone().try_acquire_owned() else { break 'endpoints };
                let Some(queued) = queue.queued.pop_front() else { break };
                self.start(attempts, queued, endpoint_permit, global_permit, state_lock.clone());
            }
        }
        window.retain(|_, queue| !queue.queued.is_empty());
    }

    fn start(
        &self,
        attempts: &mut JoinSet<()>,
        queued: Queued,
        endpoint_permit: OwnedSemaphorePermit,
        global_permit: OwnedSemaphorePermit,
        state_lock: Arc<tokio::sync::Mutex<CachedState>>,
    ) {
        let key = key_of(&queued.due);
        if let Ok(mut held) = self.shared.held.lock() {
            held.insert(key.clone(), Held::InFlight);
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
            attempt = delivery.attempt,
            outcome = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
        );
        attempts.spawn(
            async move {
                let _global_permit = global_permit;
                let removed = match attempt(&shared, &queued, endpoint_permit, &state_lock, &freed).await {
                    Ok(removed) => removed,
                    Err(error) => {
                        tracing::warn!(%error, "recording a delivery attempt failed; it is tried again");
                        false
                    }
                };
                if let Ok(mut held) = shared.held.lock() {
                    held.insert(key, Held::Finished(Instant::now()));
                }
                if !removed {
                    // Its row is still there, and nothing holds it any more.
                    shared.shards.lower(&queued.due.shard, queued.due.due_at);
                }
                // Its process slot is free too.
                freed.notify_one();
            }
            .instrument(span),
        );
    }

    /// The endpoint's in-flight bound and state lock, kept with its queue in the window
    /// (while held there, refreshes keep them too).
    fn endpoint_slots(&self, endpoint: &EndpointKey) -> Option<(Arc<Semaphore>, Arc<tokio::sync::Mutex<CachedState>>)> {
        let mut endpoints = self.shared.endpoints.lock().ok()?;
        let slots = endpoints.entry(endpoint.clone()).or_default();
        let semaphore = slots.in_flight.get_or_insert_with(|| Arc::new(Semaphore::new(self.shared.config.per_endpoint.max(1)))).clone();
        Some((semaphore, slots.state.clone()))
    }

    async fn refresh_queue(&self) {
        let (mut depth, mut soonest) = (0usize, None::<i64>);
        for shard in self.shards.held() {
            match self.shared.store.queue(&shard).await {
                Ok((shard_depth, shard_soonest)) => {
                    depth += shard_depth;
                    soonest = match (soonest, shard_soonest) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(error) => tracing::debug!(%error, "counting pending deliveries failed"),
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

/// Drops a delivery that will never be sent; whether its row is removed.
async fn drop_delivery(shared: &Shared, due: &DueDelivery, why: &'static str) -> Result<bool, StoreError> {
    shared.recorder.write(vec![shared.store.delivery_done_row(due)]).await?;
    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
    crate::metrics::record_delivery("dropped");
    tracing::info!(why, "delivery dropped");
    Ok(true)
}

/// Sends the delivery, signed; what became of it.
async fn send(shared: &Shared, url: &str, message: &PreparedMessage, now: i64, secrets: &[&str]) -> Sent {
    let headers = match crate::signing::headers(secrets, &message.id, now.div_euclid(1_000_000), &message.body) {
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

/// What an attempt sends and to whom: the hand-over's while current, else the store's.
/// None when the delivery was dropped (its endpoint or message is gone).
async fn what_to_send(shared: &Shared, queued: &Queued) -> Result<Option<(Arc<PreparedMessage>, Arc<PreparedEndpoint>)>, StoreError> {
    if let Some((message, endpoint)) = queued.prepared.as_ref().filter(|(_, endpoint)| shared.current(endpoint)) {
        return Ok(Some((message.clone(), endpoint.clone())));
    }
    let delivery = &queued.due.delivery;
    let store = &shared.store;
    let changes = store.endpoint_changes();
    let read_at = Instant::now();
    let Some(endpoint) = store.endpoint_record(&delivery.account_id, &delivery.endpoint_id).await? else {
        drop_delivery(shared, &queued.due, "endpoint deleted").await?;
        return Ok(None);
    };
    let Some((seq, message)) = store.claimed(&delivery.account_id, &delivery.message_id).await? else {
        drop_delivery(shared, &queued.due, "message expired").await?;
        return Ok(None);
    };
    let secrets = store.secrets(&delivery.account_id, &delivery.endpoint_id).await?;
    Ok(Some((Arc::new(PreparedMessage::new(seq, &message)), Arc::new(PreparedEndpoint { endpoint, secrets, read_at, changes }))))
}

/// One attempt of a queued delivery (see the module's steps); whether its row was
/// removed (false: it is still due, and tried again).
async fn attempt(
    shared: &Shared,
    queued: &Queued,
    endpoint_permit: OwnedSemaphorePermit,
    state_lock: &tokio::sync::Mutex<CachedState>,
    freed: &Notify,
) -> Result<bool, StoreError> {
    let due = &queued.due;
    let delivery = &due.delivery;
    let store = &shared.store;
    let Some((message, prepared)) = what_to_send(shared, queued).await? else { return Ok(true) };
    let endpoint = &prepared.endpoint;
    if !endpoint.enabled {
        return drop_delivery(shared, due, "endpoint disabled by the account").await;
    }
    let disabled = {
        let mut cached = state_lock.lock().await;
        let state = match cached.state.take() {
            Some(state) => state,
            None => store.endpoint_state(&delivery.account_id, &delivery.endpoint_id).await?,
        };
        cached.state.insert(state).disables(endpoint)
    };
    if disabled {
        return drop_delivery(shared, due, "endpoint disabled for failing").await;
    }
    if !shared.handoff.covers(&delivery.account_id, message.seq) {
        match store.head(&delivery.account_id).await? {
            Some(head) if head >= message.seq => shared.handoff.head_written(&delivery.account_id, head),
            // Its feed row is written, its head not yet: sent once the feed shows it.
            _ => return Ok(false),
        }
    }
    let now = shared.clock.now_micros();
    let signing = prepared.secrets.signing_at(Timestamp(now));
    let started = Instant::now();
    let sent = send(shared, &endpoint.url, &message, now, &signing).await;
    let elapsed = started.elapsed();
    drop(endpoint_permit);
    // The endpoint's slot is free: its next due delivery need not wait for the poll.
    freed.notify_one();
    let label = outcome_label(sent.outcome);
    let span = tracing::Span::current();
    span.record("outcome", label);
    if let Some(status) = sent.status {
        span.record("http.response.status_code", status);
    }
    crate::metrics::record_attempt(label, elapsed.as_secs_f64());

    let succeeded = sent.outcome == AttemptOutcome::Succeeded;
    let next_due = if succeeded { None } else { shared.config.schedule.next_due(delivery.attempt, now) };
    let record = AttemptRecord {
        id: format!("att_{}", uuid::Uuid::new_v4().simple()),
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
        rows.push(store.delivery_row(&due.shard, next_due, &Delivery { attempt: delivery.attempt + 1, ..delivery.clone() }));
    }
    let (recorded, removed) = {
        let mut cached = state_lock.lock().await;
        let ts = now_micros().max(cached.ts + 1);
        cached.ts = ts;
        let state = match cached.state.take() {
            Some(state) => state,
            None => store.endpoint_state(&delivery.account_id, &delivery.endpoint_id).await?,
        };
        let state = cached.state.insert(state);
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
                tracing::warn!(version = endpoint.version, "endpoint disabled after failing through the whole retry schedule");
            }
        }
        let state_row = store.endpoint_state_row(&delivery.account_id, &delivery.endpoint_id, state, ts);
        // Handed in under the lock: the recorder keeps the last of one endpoint's states.
        let endpoint_key = (delivery.account_id.clone(), delivery.endpoint_id.clone());
        shared.recorder.submit_attempt(rows, (endpoint_key, state_row), store.delivery_done_row(due))
    };
    recorded.written().await?;
    if let Some(next_due) = next_due {
        shared.shards.lower(&due.shard, next_due);
    }
    removed.written().await?;
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
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_raises_its_shards_mark_unless_a_row_below_was_written_meanwhile() {
        let shards = Shards::fixed(&["0"]);
        assert_eq!(shards.mark("0"), i64::MIN, "a shard is first scanned from its start");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 100);
        assert_eq!(shards.mark("0"), 100);
        shards.lower("0", 150);
        assert_eq!(shards.mark("0"), 100, "a row above the mark leaves it");
        // A scan started at 100; meanwhile a row due at 40 was written.
        let seen = shards.begin_scan("0");
        shards.lower("0", 40);
        shards.raise("0", seen, 200);
        assert_eq!(shards.mark("0"), 40, "the row written during the scan is found by the next");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 200);
        assert_eq!(shards.mark("0"), 200);
        shards.sweep();
        assert_eq!(shards.mark("0"), i64::MIN, "a sweep scans from the start again");
        shards.lower("1", 5);
        assert_eq!(shards.held(), vec!["0".to_owned()], "a shard not held keeps no mark");
        shards.add("1".into());
        assert_eq!(shards.mark("1"), i64::MIN);
    }

    /// A scan reads a snapshot: a row written after it began, due between the mark and
    /// the time it scans up to, may be missing from what it read, so the scan does not
    /// raise the mark past it.
    #[test]
    fn a_scan_never_raises_its_mark_past_a_row_written_while_it_ran_above_the_mark() {
        let shards = Shards::fixed(&["0"]);
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 100);
        let seen = shards.begin_scan("0");
        shards.lower("0", 150);
        shards.raise("0", seen, 300);
        assert_eq!(shards.mark("0"), 150, "the next scan starts at the row written during this one");
        let seen = shards.begin_scan("0");
        shards.raise("0", seen, 300);
        assert_eq!(shards.mark("0"), 300, "a scan with nothing written meanwhile raises it all the way");
    }
}
