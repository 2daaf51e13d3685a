//! What the webhooks runtime tells OpenTelemetry: messages appended to feeds, attempts
//! and deliveries by outcome, attempt latency, and the delivery queue (depth and age of
//! the soonest due delivery, refreshed by the deliverer). Instruments come from the
//! global meter provider, a no-op until the binary installs one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use opentelemetry::metrics::{Counter, Histogram};
use opentelemetry::KeyValue;

/// The instrumentation scope every recap crate reports under.
const SCOPE: &str = "recap";

/// Live figures of one runtime, for metrics and tests.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages appended to a feed.
    pub appended: AtomicU64,
    /// Messages dropped because another seq carried them first.
    pub duplicates: AtomicU64,
    /// Deliveries scheduled.
    pub scheduled: AtomicU64,
    /// First attempts the ingest wrote as rows because the deliverer's window had no room
    /// (not those the deliverer writes as rows after holding them too long).
    pub written_as_rows: AtomicU64,
    /// Deliveries that ended with a 2xx answer.
    pub delivered: AtomicU64,
    /// Attempts that failed (any outcome but success).
    pub failed_attempts: AtomicU64,
    /// Deliveries given up after the last attempt.
    pub given_up: AtomicU64,
    /// Deliveries dropped unsent (endpoint deleted or disabled, message expired).
    pub dropped: AtomicU64,
    /// Retry rows removed unsent because their attempt was made already: the second row
    /// of an attempt made twice (after a crash, or a retry made again late).
    pub repeats_removed: AtomicU64,
    /// Pending deliveries of the shards held, at the last count.
    pub queue_depth: AtomicU64,
    /// Due time (microseconds) of the soonest pending delivery; 0 when none.
    pub soonest_due_micros: AtomicI64,
    /// The distributed edition's message log: per partition held ("topic/partition"),
    /// the messages its group has not committed (not read, or with first attempts not
    /// settled), refreshed every 2 s.
    pub partition_lag: Mutex<BTreeMap<String, i64>>,
}

impl Stats {
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
}

struct Instruments {
    messages: Counter<u64>,
    attempts: Counter<u64>,
    deliveries: Counter<u64>,
    repeats_removed: Counter<u64>,
    duration: Histogram<f64>,
}

fn instruments() -> &'static Instruments {
    static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();
    INSTRUMENTS.get_or_init(|| {
        let meter = opentelemetry::global::meter(SCOPE);
        Instruments {
            messages: meter
                .u64_counter("recap.webhooks.messages")
                .with_unit("{message}")
                .with_description("Messages read from the message log, by outcome (appended to the feed, or a duplicate dropped)")
                .build(),
            attempts: meter
                .u64_counter("recap.webhooks.attempts")
                .with_unit("{attempt}")
                .with_description("Delivery attempts, by outcome (succeeded, failed, timed_out, unreachable)")
                .build(),
            deliveries: meter
                .u64_counter("recap.webhooks.deliveries")
                .with_unit("{delivery}")
                .with_description("Deliveries that ended, by outcome (delivered, given_up, dropped)")
                .build(),
            repeats_removed: meter
                .u64_counter("recap.webhooks.repeats_removed")
                .with_unit("{row}")
                .with_description("Retry rows removed unsent because their attempt was made already (an attempt made twice, after a crash or a late retry)")
                .build(),
            duration: meter
                .f64_histogram("recap.webhooks.attempt.duration")
                .with_unit("s")
                .with_description("Time from sending a delivery to its answer, or to the failure")
                .with_boundaries(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
                .build(),
        }
    })
}

pub(crate) fn record_messages(outcome: &'static str, count: u64) {
    if count > 0 {
        instruments().messages.add(count, &[KeyValue::new("outcome", outcome)]);
    }
}

pub(crate) fn record_attempt(outcome: &'static str, seconds: f64) {
    let instruments = instruments();
    instruments.attempts.add(1, &[KeyValue::new("outcome", outcome)]);
    instruments.duration.record(seconds, &[KeyValue::new("outcome", outcome)]);
}

pub(crate) fn record_delivery(outcome: &'static str) {
    instruments().deliveries.add(1, &[KeyValue::new("outcome", outcome)]);
}

pub(crate) fn record_repeat_removed() {
    instruments().repeats_removed.add(1, &[]);
}

/// Reports the queue of `stats` as gauges: `recap.webhooks.queue_depth`,
/// `recap.webhooks.oldest_pending_age` (seconds the soonest due delivery is overdue) and,
/// reading Kafka, `recap.webhooks.partition_lag{partition}`.
pub fn observe_queue(stats: Arc<Stats>, clock: Arc<dyn crate::schedule::Clock>) {
    let meter = opentelemetry::global::meter(SCOPE);
    let depth = stats.clone();
    let lags = stats.clone();
    meter
        .i64_observable_gauge("recap.webhooks.partition_lag")
        .with_unit("{message}")
        .with_description("Messages of a partition of the message log not committed yet: not read, or first attempts not settled")
        .with_callback(move |observer| {
            if let Ok(lags) = lags.partition_lag.lock() {
                for (partition, lag) in lags.iter() {
                    observer.observe(*lag, &[KeyValue::new("partition", partition.clone())]);
                }
            }
        })
        .build();
    meter
        .u64_observable_gauge("recap.webhooks.queue_depth")
        .with_unit("{delivery}")
        .with_description("Deliveries due now in the shards this process delivers: first attempts not settled, retries whose time came")
        .with_callback(move |observer| observer.observe(depth.queue_depth.load(Ordering::Relaxed), &[]))
        .build();
    meter
        .f64_observable_gauge("recap.webhooks.oldest_pending_age")
        .with_unit("s")
        .with_description("How long the soonest due pending delivery has been due (0 when none is)")
        .with_callback(move |observer| {
            let soonest = stats.soonest_due_micros.load(Ordering::Relaxed);
            let overdue = if soonest == 0 { 0 } else { (clock.now_micros() - soonest).max(0) };
            observer.observe(overdue as f64 / 1e6, &[]);
        })
        .build();
}
