//! The distributed edition's message log reader: a consumer of
//! `<prefix>recap.messages.v1` in the group `<prefix>recap-webhooks`. A record's offset
//! is the message's seq in its account's feed (an account's messages all travel in one
//! partition, keyed by account), and its partition number is the shard of its
//! deliveries: the process that holds a partition reads its messages and delivers its
//! shard, so the role scales with the partitions (as many replicas as the topic has) and a rebalance
//! moves reading and delivering together.
//!
//! Offsets are committed by hand, up to the messages whose first attempts are settled
//! ([`crate::handoff::Ledger`]): the topic is the queue of first attempts, so a crash
//! or a rebalance reads again, never skips, what the offsets do not cover (the same
//! feed rows, and the first attempts made again). While the store refuses a batch, it
//! is retried with backoff without committing, the partitions paused and the consumer
//! still polled: the member stays in the group however long the store is away
//! (`max.poll.interval.ms` never runs out), so its partitions do not move to another
//! process that would deliver the same shards beside it. A rebalance that still comes
//! (a member joining or leaving) fences the batch's records received before it, as the
//! projector does: they are their partitions' next holder's to read.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::message::Message as _;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use recap_kafka::{KafkaClient, Paused};
use recap_readmodel::webhooks::WebhookStore;
use tokio::sync::watch;

use crate::deliver::Shards;
use crate::handoff::{Handoff, Ledger};
use crate::ingest::{ingest, LogMessage};
use crate::metrics::Stats;
use crate::schedule::Clock;

/// The topic of the message log, after the prefix.
pub const MESSAGES_TOPIC: &str = "recap.messages.v1";
/// The consumer group, after the prefix.
pub const GROUP: &str = "recap-webhooks";

/// Settings of the Kafka reader.
#[derive(Clone, Debug)]
pub struct KafkaReaderConfig {
    /// The cluster and the deployment's client options.
    pub client: KafkaClient,
    pub topic_prefix: String,
    /// Messages per batch, at most.
    pub max_batch: usize,
    /// How long a batch waits for more messages once it has one; zero takes only
    /// those already fetched.
    pub batch_wait: Duration,
    /// Kafka's `max.poll.interval.ms` (at least the 10 s session timeout).
    pub max_poll_interval: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum KafkaReaderError {
    #[error("kafka: {0}")]
    Client(#[from] rdkafka::error::KafkaError),
}

/// How often the offsets are committed while the topic is idle (first attempts settle
/// meanwhile).
const COMMIT_EVERY: Duration = Duration::from_millis(200);

/// The offsets the ledger allows for the partitions held: the next offset to read after
/// each partition's position.
fn committable(topic: &str, shards: &Shards, ledger: &Ledger, only: Option<&[i32]>) -> Option<TopicPartitionList> {
    let mut list = TopicPartitionList::new();
    for shard in shards.held() {
        let Ok(partition) = shard.parse::<i32>() else { continue };
        if only.is_some_and(|only| !only.contains(&partition)) {
            continue;
        }
        let Some(position) = ledger.position(&shard) else { continue };
        list.add_partition_offset(topic, partition, Offset::Offset(position + 1)).ok()?;
    }
    (list.count() > 0).then_some(list)
}

struct ShardContext {
    topic: String,
    shards: Shards,
    ledger: Ledger,
}

impl ClientContext for ShardContext {}

impl ConsumerContext for ShardContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            let revoked: Vec<i32> = partitions.elements().iter().map(|element| element.partition()).collect();
            if let Some(offsets) = committable(&self.topic, &self.shards, &self.ledger, Some(&revoked)) {
                if let Err(error) = consumer.commit(&offsets, CommitMode::Sync) {
                    tracing::warn!(%error, "committing offsets before a revocation failed; the next holder reads more again");
                }
            }
            for partition in revoked {
                let shard = partition.to_string();
                self.shards.remove(&shard);
                self.ledger.forget(&shard);
            }
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(partitions) = rebalance {
            for element in partitions.elements() {
                self.shards.add(element.partition().to_string());
            }
            tracing::info!(shards = ?self.shards.held(), "delivering the shards of the partitions held");
        }
    }
}

/// Where a batch moves the read positions: to the last offset of each partition still
/// held among the records received since the last revocation. `received` holds each
/// record's partition, offset and the revocations counted when it came; `revocations`
/// is the count now. A partition revoked meanwhile is its next holder's to read; a
/// record received before any revocation moves nothing, even of a partition held again
/// (an eager rebalance revokes every partition and may assign one back at once): that
/// partition is fetched again from its committed offset, so offsets between it and the
/// stale record are not read yet under the new holding.
fn positions_read(received: &[(i32, i64, u64)], revocations: u64, holds: impl Fn(&str) -> bool) -> Vec<(String, i64)> {
    let mut read: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
    for (partition, offset, seen) in received {
        let shard = partition.to_string();
        if *seen == revocations && holds(&shard) {
            let last = read.entry(shard).or_insert(*offset);
            *last = (*last).max(*offset);
        }
    }
    read.into_iter().collect()
}

/// The messages of `records`; a record that is not one is logged and skipped.
fn decoded(records: &[(rdkafka::message::OwnedMessage, u64)]) -> Vec<LogMessage> {
    let mut batch = Vec::with_capacity(records.len());
    for (record, _) in records {
        match LogMessage::decode(record.offset(), record.partition().to_string(), std::str::from_utf8(record.payload().unwrap_or_default()).unwrap_or_default())
        {
            Ok(message) => batch.push(message),
            Err(error) => tracing::error!(partition = record.partition(), offset = record.offset(), %error, "record is not a message; skipped"),
        }
    }
    batch
}

/// Consumes the message log until `stop`, keeping `shards` to the partitions held.
pub async fn run(
    config: KafkaReaderConfig,
    store: WebhookStore,
    clock: Arc<dyn Clock>,
    stats: Arc<Stats>,
    shards: Shards,
    handoff: Handoff,
    mut stop: watch::Receiver<bool>,
) -> Result<(), KafkaReaderError> {
    let topic = format!("{}{MESSAGES_TOPIC}", config.topic_prefix);
    let ledger = handoff.ledger().clone();
    let consumer: StreamConsumer<ShardContext> = config
        .client
        .config()
        .set("group.id", format!("{}{GROUP}", config.topic_prefix))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .set("max.poll.interval.ms", config.max_poll_interval.as_millis().to_string())
        .set("queued.max.messages.kbytes", "16384")
        .create_with_context(ShardContext { topic: topic.clone(), shards: shards.clone(), ledger: ledger.clone() })?;
    consumer.subscribe(&[topic.as_str()])?;
    let consumer = Arc::new(consumer);
    let lags = stats.clone();
    let _lag_refresh = recap_kafka::LagRefresh::start(consumer.clone(), move |figures| {
        if let Ok(mut partition_lag) = lags.partition_lag.lock() {
            *partition_lag = figures;
        }
    });
    let commit = |mode: CommitMode| {
        if let Some(offsets) = committable(&topic, &shards, &ledger, None) {
            if let Err(error) = consumer.commit(&offsets, mode) {
                tracing::warn!(%error, "committing offsets failed; the next commit carries them");
            }
        }
    };
    let mut commit_tick = tokio::time::interval(COMMIT_EVERY);
    commit_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Records received while a refused batch waited, for the next batch.
    let mut carried = Vec::new();
    'batches: loop {
        // Each record with the revocations counted when it came: rebalances run inside
        // `recv`, so one may fall between two records of a batch.
        let mut records = std::mem::take(&mut carried);
        if records.is_empty() {
            let first = tokio::select! {
                message = consumer.recv() => message,
                _ = commit_tick.tick() => {
                    commit(CommitMode::Async);
                    continue;
                }
                _ = stop.changed() => break,
            };
            match first {
                Ok(message) => records.push((message.detach(), ledger.revocations())),
                Err(error) => {
                    tracing::warn!(%error, "kafka consumer error");
                    continue;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + config.batch_wait;
        while records.len() < config.max_batch {
            match tokio::time::timeout_at(deadline, consumer.recv()).await {
                Ok(Ok(message)) => records.push((message.detach(), ledger.revocations())),
                Ok(Err(error)) => tracing::warn!(%error, "kafka consumer error"),
                Err(_) => break,
            }
        }
        let mut backoff = Duration::from_millis(100);
        let mut paused = Paused::default();
        let mut batch = decoded(&records);
        loop {
            // Records received before a revocation are fenced: their partitions' next
            // holder reads them (this process too, from the committed offset, should it hold
            // one of them again), so writing them here would hand their first attempts over
            // twice. A rebalance may come while a refused batch waits, the consumer polled.
            let (revocations, received) = (ledger.revocations(), records.len());
            records.retain(|(_, seen)| *seen == revocations);
            if records.len() < received {
                batch = decoded(&records);
            }
            if batch.is_empty() {
                break;
            }
            match ingest(&store, &batch, clock.now_micros(), &stats, &shards, &handoff).await {
                Ok(_) => break,
                Err(error) => tracing::warn!(%error, messages = batch.len(), "message batch not written; retrying without committing"),
            }
            paused.assignment(consumer.as_ref());
            let keep = |message: rdkafka::message::BorrowedMessage<'_>| carried.push((message.detach(), ledger.revocations()));
            // Not committed: whoever holds the partitions next reads the batch again.
            if recap_kafka::poll_paused(consumer.as_ref(), backoff, &mut stop, &mut paused, keep).await {
                break 'batches;
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        paused.resume(consumer.as_ref());
        let received: Vec<(i32, i64, u64)> = records.iter().map(|(record, revocations)| (record.partition(), record.offset(), *revocations)).collect();
        for (shard, offset) in positions_read(&received, ledger.revocations(), |shard| shards.holds(shard)) {
            ledger.read_to(&shard, offset);
        }
        commit(CommitMode::Async);
    }
    // What settled before the stop, the attempts in flight included, is not read again.
    handoff.delivering_has_ended().await;
    commit(CommitMode::Sync);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_moves_the_positions_of_records_received_since_the_last_revocation_of_partitions_held() {
        // Partition 0 was revoked and assigned back between its offsets 6 and 3 (fetched
        // again from its committed offset); partition 2 is no longer held.
        let received = [(0, 5, 1), (0, 6, 1), (0, 3, 2), (0, 4, 2), (1, 9, 2), (2, 7, 2)];
        assert_eq!(positions_read(&received, 2, |shard| shard != "2"), vec![("0".to_owned(), 4), ("1".to_owned(), 9)]);
        // A revocation after the last record: nothing moves.
        assert_eq!(positions_read(&received, 3, |_| true), vec![]);
        // No revocation at all: every held partition to its last offset.
        assert_eq!(positions_read(&[(0, 5, 0), (0, 6, 0), (1, 2, 0)], 0, |_| true), vec![("0".to_owned(), 6), ("1".to_owned(), 2)]);
    }
}
