//! The deliverer: takes the due deliveries of the shards this process holds and makes
//! their attempts, each endpoint with a bounded number in flight (and the process with
//! a global bound), so a slow or dead endpoint only ever holds its own slots.
//!
//! One attempt, in order:
//! 1. the endpoint, its state and the message are read; a delivery to an endpoint the
//!    account deleted or disabled, or one disabled for failing too long, is dropped
//!    (receivers catch up from the feed); so is one whose message expired; one whose
//!    message the feed head does not cover yet waits;
//! 2. the message is signed with every secret signing now and POSTed;
//! 3. the endpoint's slot is freed (it bounds requests in flight to the endpoint, not
//!    the bookkeeping after them);
//! 4. the attempt is recorded, with the next delivery row when one is due (a failure
//!    with attempts left) and the endpoint's state, in one write; then the delivery
//!    row is removed. A crash before the removal repeats the attempt (at least once:
//!    the receiver sees the same `webhook-id` again), never loses it.
//!
//! Both writes go through the [`Recorder`], which commits the steps of attempts that
//! end together as one write. An endpoint's state is kept in memory while the
//! endpoint has attempts under way (loaded from the store at the first), updated
//! under the endpoint's lock and handed in with a timestamp newer than the last, so
//! the newest state is the one the store keeps.
//!
//! When the last attempt of a delivery fails and the endpoint has failed without a
//! success for the whole retry span, the endpoint is disabled at its current version
//! (its state names the version); its pending deliveries are then dropped as they come
//! due, and an upsert of the endpoint (a newer version) re-enables it.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use recap_readmodel::driver::now_micros;
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, Delivery, DueDelivery, EndpointRecord, EndpointState, WebhookStore};
use recap_readmodel::StoreError;
use recap_schemas::Timestamp;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::client::{SafeClient, SendError};
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
    /// Due deliveries read per shard and round: a dead endpoint's backlog can delay
    /// others by one round only while it is smaller than this.
    pub scan: usize,
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
/// every live row: every process that writes a delivery row lowers the mark to the
/// row's due time once it is written (the ingest, an attempt scheduling its retry), and
/// a scan raises it to the earliest row it found live, or to the time it scanned up to
/// when it found none, unless it was lowered meanwhile. A shard newly held, and every
/// shard once a sweep interval, is scanned from its start: what another process wrote
/// (a retry recorded late by a former holder) is found within that interval.
#[derive(Clone, Default)]
pub struct Shards(Arc<Mutex<BTreeMap<String, i64>>>);

/// The mark of a shard scanned from its start.
const FROM_THE_START: i64 = i64::MIN;

impl Shards {
    pub fn fixed(shards: &[&str]) -> Shards {
        Shards(Arc::new(Mutex::new(shards.iter().map(|shard| ((*shard).to_owned(), FROM_THE_START)).collect())))
    }

    pub fn add(&self, shard: String) {
        if let Ok(mut shards) = self.0.lock() {
            shards.insert(shard, FROM_THE_START);
        }
    }

    pub fn remove(&self, shard: &str) {
        if let Ok(mut shards) = self.0.lock() {
            shards.remove(shard);
        }
    }

    pub fn held(&self) -> Vec<String> {
        self.0.lock().map(|shards| shards.keys().cloned().collect()).unwrap_or_default()
    }

    /// Where the shard's next scan starts (its start for a shard not held).
    pub fn mark(&self, shard: &str) -> i64 {
        self.0.lock().ok().and_then(|shards| shards.get(shard).copied()).unwrap_or(FROM_THE_START)
    }

    /// A delivery row due at `due_at` is written in `shard`.
    pub fn lower(&self, shard: &str, due_at: i64) {
        if let Ok(mut shards) = self.0.lock() {
            if let Some(mark) = shards.get_mut(shard) {
                *mark = (*mark).min(due_at);
            }
        }
    }

    /// A scan that started at `seen` found no live row before `to`.
    fn raise(&self, shard: &str, seen: i64, to: i64) {
        if let Ok(mut shards) = self.0.lock() {
            if let Some(mark) = shards.get_mut(shard) {
                if *mark == seen {
                    *mark = to.max(seen);
                }
            }
        }
    }

    /// Every shard's next scan starts at its start.
    fn sweep(&self) {
        if let Ok(mut shards) = self.0.lock() {
            shards.values_mut().for_each(|mark| *mark = FROM_THE_START);
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

/// What the deliverer shares with its attempts.
struct Shared {
    store: WebhookStore,
    recorder: Recorder,
    shards: Shards,
    client: SafeClient,
    clock: Arc<dyn Clock>,
    stats: Arc<Stats>,
    config: DelivererConfig,
    /// Deliveries being attempted, by shard, due time and id.
    in_flight: Mutex<HashSet<DeliveryKey>>,
    /// Deliveries whose attempt ended, and when: a round whose scan began before that
    /// may still list the row the attempt removed, and must not start it again.
    finished: Mutex<HashMap<DeliveryKey, Instant>>,
    endpoints: Mutex<HashMap<(String, String), EndpointSlots>>,
}

/// The deliverer of one process.
pub struct Deliverer {
    shared: Arc<Shared>,
    shards: Shards,
    /// Rings when new deliveries may be due (the log reader wrote some): a new scan.
    wake: Arc<Notify>,
    /// Rings when an attempt freed its endpoint's slot: the window has what to start.
    freed: Arc<Notify>,
    global: Arc<Semaphore>,
    /// The due deliveries the last scan found and no attempt has started yet, by
    /// endpoint in due order: an attempt that frees a slot starts the next of its
    /// endpoint without a scan (a scan reads and decodes up to `scan` rows).
    window: Mutex<HashMap<(String, String), VecDeque<DueDelivery>>>,
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
        wake: Arc<Notify>,
        config: DelivererConfig,
    ) -> Deliverer {
        let global = Arc::new(Semaphore::new(config.global.max(1)));
        let recorder = Recorder::start(store.clone());
        let shared = Shared {
            store,
            recorder,
            shards: shards.clone(),
            client,
            clock,
            stats,
            config,
            in_flight: Mutex::default(),
            finished: Mutex::default(),
            endpoints: Mutex::default(),
        };
        Deliverer { shared: Arc::new(shared), shards, wake, freed: Arc::new(Notify::new()), global, window: Mutex::default() }
    }

    /// Delivers until `stop` turns true, then waits for the attempts in flight (each
    /// bounded by the client's timeout).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut attempts = JoinSet::new();
        let mut last_queue = None::<Instant>;
        let mut last_sweep = Instant::now();
        let (wake, freed) = (self.wake.clone(), self.freed.clone());
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
                _ = wake.notified() => true,
                _ = freed.notified() => false,
                _ = stop.changed() => true,
            };
        }
        while attempts.join_next().await.is_some() {}
    }

    /// Starts an attempt for every due delivery of the shards held that has a free
    /// slot at its endpoint and in the process: those of the last scan's window, after
    /// a new scan when `scan` is set or the window is empty.
    pub async fn round(&self, attempts: &mut JoinSet<()>, scan: bool) -> Result<(), StoreError> {
        let window_empty = self.window.lock().map(|window| window.is_empty()).unwrap_or(true);
        if scan || window_empty {
            let now = self.shared.clock.now_micros();
            let scan_started = Instant::now();
            let fresh = self.scan(now).await?;
            // Rows removed before this scan began were not listed by it.
            if let Ok(mut finished) = self.shared.finished.lock() {
                finished.retain(|_, at| *at >= scan_started);
            }
            if let Ok(mut window) = self.window.lock() {
                *window = fresh;
            }
        }
        self.start_window(attempts);
        Ok(())
    }

    /// The due deliveries of the shards held that no attempt has under way or just
    /// ended, by endpoint in due order.
    async fn scan(&self, now: i64) -> Result<HashMap<(String, String), VecDeque<DueDelivery>>, StoreError> {
        let mut window: HashMap<(String, String), VecDeque<DueDelivery>> = HashMap::new();
        for shard in self.shards.held() {
            let mark = self.shards.mark(&shard);
            let due_rows = self.shared.store.due_from(&shard, mark, now, self.shared.config.scan).await?;
            self.shards.raise(&shard, mark, due_rows.first().map_or(now, |due| due.due_at));
            for due in due_rows {
                let key = (due.shard.clone(), due.due_at, due.delivery.id());
                let busy = self.shared.in_flight.lock().map(|in_flight| in_flight.contains(&key)).unwrap_or(true)
                    || self.shared.finished.lock().map(|finished| finished.contains_key(&key)).unwrap_or(true);
                if !busy {
                    window.entry((due.delivery.account_id.clone(), due.delivery.endpoint_id.clone())).or_default().push_back(due);
                }
            }
        }
        Ok(window)
    }

    /// Starts the window's deliveries, each endpoint's in due order, while its endpoint
    /// and the process have free slots.
    fn start_window(&self, attempts: &mut JoinSet<()>) {
        let Ok(mut window) = self.window.lock() else { return };
        'endpoints: for queue in window.values_mut() {
            while let Some(due) = queue.front() {
                let Some((endpoint_permit, state_lock)) = self.endpoint_slot(&due.delivery) else { continue 'endpoints };
                let Ok(global_permit) = self.global.clone().try_acquire_owned() else { break 'endpoints };
                let Some(due) = queue.pop_front() else { break };
                self.start(attempts, due, endpoint_permit, global_permit, state_lock);
            }
        }
        window.retain(|_, queue| !queue.is_empty());
    }

    fn start(
        &self,
        attempts: &mut JoinSet<()>,
        due: DueDelivery,
        endpoint_permit: OwnedSemaphorePermit,
        global_permit: OwnedSemaphorePermit,
        state_lock: Arc<tokio::sync::Mutex<CachedState>>,
    ) {
        let key = (due.shard.clone(), due.due_at, due.delivery.id());
        if let Ok(mut in_flight) = self.shared.in_flight.lock() {
            in_flight.insert(key.clone());
        }
        let shared = self.shared.clone();
        let freed = self.freed.clone();
        let span = tracing::info_span!(
            "webhooks.attempt",
            otel.kind = "client",
            account_id = %due.delivery.account_id,
            endpoint_id = %due.delivery.endpoint_id,
            message_id = %due.delivery.message_id,
            attempt = due.delivery.attempt,
            outcome = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
        );
        attempts.spawn(
            async move {
                let _global_permit = global_permit;
                if let Err(error) = attempt(&shared, &due, endpoint_permit, &state_lock, &freed).await {
                    tracing::warn!(%error, "recording a delivery attempt failed; it is tried again");
                }
                if let Ok(mut finished) = shared.finished.lock() {
                    finished.insert(key.clone(), Instant::now());
                }
                if let Ok(mut in_flight) = shared.in_flight.lock() {
                    in_flight.remove(&key);
                }
                // Its process slot is free too.
                freed.notify_one();
            }
            .instrument(span),
        );
    }

    fn endpoint_slot(&self, delivery: &Delivery) -> Option<(OwnedSemaphorePermit, Arc<tokio::sync::Mutex<CachedState>>)> {
        let mut endpoints = self.shared.endpoints.lock().ok()?;
        let slots = endpoints.entry((delivery.account_id.clone(), delivery.endpoint_id.clone())).or_default();
        let semaphore = slots.in_flight.get_or_insert_with(|| Arc::new(Semaphore::new(self.shared.config.per_endpoint.max(1)))).clone();
        let permit = semaphore.try_acquire_owned().ok()?;
        Some((permit, slots.state.clone()))
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

/// Drops a delivery that will never be sent.
async fn drop_delivery(shared: &Shared, due: &DueDelivery, why: &'static str) -> Result<(), StoreError> {
    shared.recorder.write(vec![shared.store.delivery_done_row(due)]).await?;
    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
    crate::metrics::record_delivery("dropped");
    tracing::info!(why, "delivery dropped");
    Ok(())
}

/// Sends the delivery, signed; what became of it.
async fn send(shared: &Shared, endpoint: &EndpointRecord, body: Vec<u8>, message_id: &str, now: i64, secrets: &[&str]) -> Sent {
    let headers = match crate::signing::headers(secrets, message_id, now.div_euclid(1_000_000), &body) {
        Ok(headers) => headers,
        Err(error) => return Sent { outcome: AttemptOutcome::Unreachable, status: None, error: Some(error.to_string()) },
    };
    match shared.client.post(&endpoint.url, &headers, body).await {
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

/// One attempt of `due` (see the module's steps).
async fn attempt(
    shared: &Shared,
    due: &DueDelivery,
    endpoint_permit: OwnedSemaphorePermit,
    state_lock: &tokio::sync::Mutex<CachedState>,
    freed: &Notify,
) -> Result<(), StoreError> {
    let delivery = &due.delivery;
    let store = &shared.store;
    let Some((endpoint, state)) = store.endpoint(&delivery.account_id, &delivery.endpoint_id).await? else {
        return drop_delivery(shared, due, "endpoint deleted").await;
    };
    if !endpoint.enabled {
        return drop_delivery(shared, due, "endpoint disabled by the account").await;
    }
    if state.disables(&endpoint) {
        return drop_delivery(shared, due, "endpoint disabled for failing").await;
    }
    let Some((seq, message)) = store.claimed(&delivery.account_id, &delivery.message_id).await? else {
        return drop_delivery(shared, due, "message expired").await;
    };
    if store.head(&delivery.account_id).await?.is_none_or(|head| head < seq) {
        // Its feed row is written, its head not yet: sent once the feed shows it.
        return Ok(());
    }
    let now = shared.clock.now_micros();
    let secrets = store.secrets(&delivery.account_id, &delivery.endpoint_id).await?;
    let signing = secrets.signing_at(Timestamp(now));
    let started = Instant::now();
    let sent = send(shared, &endpoint, message.to_json().into_bytes(), &message.id, now, &signing).await;
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
    let recorded = {
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
        shared.recorder.submit(rows, Some((endpoint_key, state_row)))
    };
    recorded.written().await?;
    if let Some(next_due) = next_due {
        shared.shards.lower(&due.shard, next_due);
    }

    shared.recorder.write(vec![store.delivery_done_row(due)]).await?;
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scan_raises_its_shards_mark_unless_a_row_below_was_written_meanwhile() {
        let shards = Shards::fixed(&["0"]);
        assert_eq!(shards.mark("0"), FROM_THE_START, "a shard is first scanned from its start");
        shards.raise("0", FROM_THE_START, 100);
        assert_eq!(shards.mark("0"), 100);
        shards.lower("0", 150);
        assert_eq!(shards.mark("0"), 100, "a row above the mark leaves it");
        // A scan started at 100; meanwhile a row due at 40 was written.
        shards.lower("0", 40);
        shards.raise("0", 100, 200);
        assert_eq!(shards.mark("0"), 40, "the row written during the scan is found by the next");
        shards.raise("0", 40, 200);
        assert_eq!(shards.mark("0"), 200);
        shards.sweep();
        assert_eq!(shards.mark("0"), FROM_THE_START, "a sweep scans from the start again");
        shards.lower("1", 5);
        assert_eq!(shards.held(), vec!["0".to_owned()], "a shard not held keeps no mark");
        shards.add("1".into());
        assert_eq!(shards.mark("1"), FROM_THE_START);
    }
}
