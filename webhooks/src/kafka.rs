//! The distributed edition's message log reader: a consumer of
//! `<prefix>recap.messages.v1` in the group `<prefix>recap-webhooks`. A record's offset
//! is the message's seq in its account's feed (an account's messages all travel in one
//! partition, keyed by account), and its partition number is the shard of its
//! deliveries: the process that holds a partition reads its messages and delivers its
//! shard, so the role scales with the partitions (up to ten replicas) and a rebalance
//! moves reading and delivering together.
//!
//! Offsets are committed by hand, only after [`crate::ingest`] wrote a batch's rows and
//! heads, so a crash or a rebalance replays, never skips; replaying writes the same
//! rows. While the store refuses a batch, it is retried with backoff without
//! committing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::message::Message as _;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use recap_readmodel::webhooks::{decode_account_message, WebhookStore};
use tokio::sync::watch;

use crate::deliver::Shards;
use crate::handoff::Handoff;
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
    pub brokers: String,
    pub topic_prefix: String,
    /// Messages per batch, at most.
    pub max_batch: usize,
    /// How long a batch waits for more messages once it has one.
    pub batch_wait: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum KafkaReaderError {
    #[error("kafka: {0}")]
    Client(#[from] rdkafka::error::KafkaError),
}

/// The offsets written through, committed with every commit.
#[derive(Default)]
struct Written(Mutex<BTreeMap<i32, i64>>);

impl Written {
    fn list(&self, topic: &str) -> Option<TopicPartitionList> {
        let written = self.0.lock().ok()?;
        if written.is_empty() {
            return None;
        }
        let mut list = TopicPartitionList::new();
        for (partition, next) in written.iter() {
            list.add_partition_offset(topic, *partition, Offset::Offset(*next)).ok()?;
        }
        Some(list)
    }
}

struct ShardContext {
    topic: String,
    shards: Shards,
    written: Arc<Written>,
}

impl ClientContext for ShardContext {}

impl ConsumerContext for ShardContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            if let Some(offsets) = self.written.list(&self.topic) {
                if let Err(error) = consumer.commit(&offsets, CommitMode::Sync) {
                    tracing::warn!(%error, "committing offsets before a revocation failed; the next holder replays");
                }
            }
            for element in partitions.elements() {
                self.shards.remove(&element.partition().to_string());
                if let Ok(mut written) = self.written.0.lock() {
                    written.remove(&element.partition());
                }
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
    let written = Arc::new(Written::default());
    let consumer: StreamConsumer<ShardContext> = ClientConfig::new()
        .set("bootstrap.servers", &config.brokers)
        .set("group.id", format!("{}{GROUP}", config.topic_prefix))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .set("queued.max.messages.kbytes", "16384")
        .create_with_context(ShardContext { topic: topic.clone(), shards: shards.clone(), written: written.clone() })?;
    consumer.subscribe(&[topic.as_str()])?;
    'batches: loop {
        let first = tokio::select! {
            message = consumer.recv() => message,
            _ = stop.changed() => break,
        };
        let mut records = match first {
            Ok(message) => vec![message.detach()],
            Err(error) => {
                tracing::warn!(%error, "kafka consumer error");
                continue;
            }
        };
        let deadline = tokio::time::Instant::now() + config.batch_wait;
        while records.len() < config.max_batch {
            match tokio::time::timeout_at(deadline, consumer.recv()).await {
                Ok(Ok(message)) => records.push(message.detach()),
                Ok(Err(error)) => tracing::warn!(%error, "kafka consumer error"),
                Err(_) => break,
            }
        }
        let mut batch = Vec::with_capacity(records.len());
        for record in &records {
            match decode_account_message(std::str::from_utf8(record.payload().unwrap_or_default()).unwrap_or_default()) {
                Ok(message) => batch.push(LogMessage { seq: record.offset(), shard: record.partition().to_string(), message }),
                Err(error) => tracing::error!(partition = record.partition(), offset = record.offset(), %error, "record is not a message; skipped"),
            }
        }
        let mut backoff = Duration::from_millis(100);
        while let Err(error) = ingest(&store, &batch, clock.now_micros(), &stats, &shards, &handoff).await {
            tracing::warn!(%error, messages = batch.len(), "message batch not written; retrying without committing");
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                // Not committed: whoever holds the partitions next reads the batch again.
                _ = stop.changed() => break 'batches,
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        // A partition revoked while the batch was read is its next holder's to commit.
        let held = shards.held();
        if let Ok(mut next) = written.0.lock() {
            for record in records.iter().filter(|record| held.contains(&record.partition().to_string())) {
                let entry = next.entry(record.partition()).or_insert(0);
                *entry = (*entry).max(record.offset() + 1);
            }
        }
        if let Some(offsets) = written.list(&topic) {
            if let Err(error) = consumer.commit(&offsets, CommitMode::Async) {
                tracing::warn!(%error, "committing offsets failed; the next commit carries them");
            }
        }
    }
    if let Some(offsets) = written.list(&topic) {
        if let Err(error) = consumer.commit(&offsets, CommitMode::Sync) {
            tracing::warn!(%error, "committing offsets at stop failed; the next holder replays");
        }
    }
    Ok(())
}
