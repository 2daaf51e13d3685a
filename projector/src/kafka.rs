//! The Kafka source of the distributed edition: a consumer group over the contract's
//! topics, applying batches through the same projection as the embedded log.
//!
//! Choices, and why:
//! - `enable.auto.commit` and `enable.auto.offset.store` are off. A partition's offset is
//!   stored only after the store acknowledged the writes of its event and of every
//!   earlier one of that partition (a batch is written whole, then its offsets are
//!   stored and committed), so a crash anywhere replays, never skips. The commit goes
//!   out asynchronously, so the next batch is not held up by the broker's round trip
//!   (freshness). Each commit carries the written-through offset of every partition
//!   held, so one that fails is covered by the next; the last is made again,
//!   synchronously, before partitions are revoked and before the projector stops.
//! - Rebalances happen only inside `recv()`, and `recv()` is called only between
//!   batches and between the attempts of a batch the store refused, so no write is in
//!   flight when partitions are revoked. Messages received from a revoked partition are
//!   fenced: dropped unprocessed and uncommitted, whether they wait for the next batch
//!   or belong to the batch being retried (the partition's next owner reads them from
//!   the committed offset).
//! - A transient store error retries the batch with backoff without storing any
//!   offset; the projection is idempotent, so retrying is safe. While it waits, the
//!   consumer keeps polling with its partitions paused: it stays in the group however
//!   long the store is away (`max.poll.interval.ms` never runs out), and a rebalance
//!   completes within one attempt instead of waiting for the store to return.
//! - Invalid events go to the dead-letter topic with their raw bytes and headers naming
//!   the source topic, partition, offset and reason; if that produce fails, the batch
//!   is retried and no offset advances.
//! - The messages a batch announces are produced to the messages topic after its rows
//!   are acknowledged and before its entity states are written (so a crash replays and
//!   produces them again, same ids), and the batch waits for their acks; a failed
//!   produce fails the batch like a failed row write.
//! - librdkafka's queues are capped explicitly so memory stays bounded under backlog.
//! - The per-partition lag (high watermark minus committed offset) is refreshed every
//!   2 s by a task of its own, idle or busy, with its broker round trips off the async
//!   workers.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::message::{Header, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientContext, TopicPartitionList};
use recap_kafka::{ClientErrors, KafkaClient, Paused};
use recap_readmodel::messages::AccountMessage;
use recap_readmodel::{Applied, Batch, Driver, StoreError};
use recap_schemas::{DecodeError, Envelope};
use tokio::sync::watch;
use tracing::Instrument;

use crate::embedded::Stats;

/// The producer of the messages, the dead letters and `recap events append`.
pub type Producer = FutureProducer<ClientErrors>;

/// Settings of the Kafka source.
#[derive(Clone, Debug)]
pub struct KafkaConfig {
    /// The cluster and the deployment's client options.
    pub client: KafkaClient,
    pub topics: Vec<String>,
    pub group_id: String,
    pub dead_letter_topic: String,
    /// Where the messages batches announce go (`<prefix>` + [`MESSAGES_TOPIC`]).
    pub messages_topic: String,
    /// Events per batch, at most.
    pub max_batch: usize,
    /// How long a batch waits for more events once it has one.
    pub batch_wait: Duration,
    /// Kafka's `max.poll.interval.ms` (at least the 10 s session timeout).
    pub max_poll_interval: Duration,
}

/// The message log of the distributed edition (prefixed like the contract's topics):
/// key = the account id, value = the `AccountMessage` JSON.
pub const MESSAGES_TOPIC: &str = "recap.messages.v1";

/// Why the Kafka projector stopped.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("kafka: {0}")]
    Client(#[from] rdkafka::error::KafkaError),
}

/// Revocations seen by the consumer, for fencing buffered messages.
#[derive(Default)]
struct Fence {
    /// Sequence number of the next message the loop receives.
    received: AtomicU64,
    /// Partition → sequence number at its last revocation: messages received before it
    /// belong to an assignment that is gone.
    revoked_at: Mutex<HashMap<(String, i32), u64>>,
    /// Partition → the offset after its last written event, for the partitions held;
    /// and whether the last commit of it went out asynchronously (unconfirmed).
    written: Mutex<Written>,
}

#[derive(Default)]
struct Written {
    next: BTreeMap<(String, i32), i64>,
    unconfirmed: bool,
}

impl Written {
    fn offsets(&self) -> Result<TopicPartitionList, rdkafka::error::KafkaError> {
        let mut offsets = TopicPartitionList::new();
        for ((topic, partition), offset) in &self.next {
            offsets.add_partition_offset(topic, *partition, rdkafka::Offset::Offset(*offset))?;
        }
        Ok(offsets)
    }
}

/// Messages received and not yet written, each with the sequence number it was
/// received at (see [`Fence::revoked_at`]).
#[derive(Default)]
struct Held {
    sequences: Vec<u64>,
    messages: Vec<OwnedMessage>,
}

impl Held {
    fn push(&mut self, fence: &Fence, message: OwnedMessage) {
        self.sequences.push(fence.received.fetch_add(1, Ordering::SeqCst));
        self.messages.push(message);
    }

    fn len(&self) -> usize {
        self.messages.len()
    }

    fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Drops the messages received before their partition's last revocation; returns
    /// how many.
    fn fence(&mut self, fence: &Fence) -> usize {
        let revoked = fence.revoked_at.lock().map(|revoked| revoked.clone()).unwrap_or_default();
        if revoked.is_empty() {
            return 0;
        }
        let before = self.messages.len();
        let held = std::mem::take(self);
        for (sequence, message) in held.sequences.into_iter().zip(held.messages) {
            if revoked.get(&(message.topic().to_string(), message.partition())).is_none_or(|at| sequence >= *at) {
                self.sequences.push(sequence);
                self.messages.push(message);
            }
        }
        before - self.messages.len()
    }
}

impl Fence {
    /// Marks a batch written: its partitions' next offsets, committed asynchronously
    /// together with every other partition's.
    fn commit_written<C: Consumer<X>, X: ConsumerContext>(&self, consumer: &C, messages: &[OwnedMessage]) {
        let Ok(mut written) = self.written.lock() else { return };
        for message in messages {
            let entry = written.next.entry((message.topic().to_string(), message.partition())).or_insert(0);
            *entry = (*entry).max(message.offset() + 1);
        }
        match written.offsets().and_then(|offsets| consumer.commit(&offsets, CommitMode::Async)) {
            Ok(()) => written.unconfirmed = true,
            // Not even queued: the next batch's commit carries these offsets too.
            Err(error) => tracing::warn!(%error, "committing offsets failed"),
        }
    }

    /// Commits the written offsets synchronously, if the last commit is unconfirmed.
    fn commit_pending<C: Consumer<X>, X: ConsumerContext>(&self, consumer: &C) {
        let Ok(mut written) = self.written.lock() else { return };
        if !written.unconfirmed {
            return;
        }
        written.unconfirmed = false;
        if let Err(error) = written.offsets().and_then(|offsets| consumer.commit(&offsets, CommitMode::Sync)) {
            // Whoever holds the partitions next replays from the last committed offset;
            // the projection is idempotent.
            tracing::warn!(%error, "committing offsets failed");
        }
    }
}

struct FencingContext {
    fence: Arc<Fence>,
}

impl ClientContext for FencingContext {}

impl ConsumerContext for FencingContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            self.fence.commit_pending(consumer);
            let sequence = self.fence.received.load(Ordering::SeqCst);
            if let Ok(mut revoked) = self.fence.revoked_at.lock() {
                for element in partitions.elements() {
                    revoked.insert((element.topic().to_string(), element.partition()), sequence);
                }
            }
            // Their next holder commits them from now on.
            if let Ok(mut written) = self.fence.written.lock() {
                for element in partitions.elements() {
                    written.next.remove(&(element.topic().to_string(), element.partition()));
                }
            }
            tracing::info!(partitions = partitions.count(), "partitions revoked; buffered messages of them are fenced");
        }
    }
}

/// A consumer with its queues capped, offsets stored and committed by hand.
fn consumer(config: &KafkaConfig, fence: Arc<Fence>) -> Result<StreamConsumer<FencingContext>, KafkaError> {
    let consumer: StreamConsumer<FencingContext> = config
        .client
        .config()
        .set("group.id", &config.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .set("max.poll.interval.ms", config.max_poll_interval.as_millis().to_string())
        // Bounded prefetch: at most ~16 MiB or 20k messages waiting per consumer.
        .set("queued.max.messages.kbytes", "16384")
        .set("queued.min.messages", "20000")
        .set("fetch.max.bytes", "8388608")
        .set("max.partition.fetch.bytes", "1048576")
        .create_with_context(FencingContext { fence })?;
    let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics)?;
    Ok(consumer)
}

/// A producer for the messages and the dead letters, queues capped.
pub fn producer(client: &KafkaClient) -> Result<Producer, KafkaError> {
    producer_with(client, ClientErrors::default())
}

/// A producer whose client errors `errors` keeps.
fn producer_with(client: &KafkaClient, errors: ClientErrors) -> Result<Producer, KafkaError> {
    Ok(client
        .config()
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("message.timeout.ms", "10000")
        .set("queue.buffering.max.messages", "20000")
        .set("queue.buffering.max.kbytes", "16384")
        .set("linger.ms", "2")
        .create_with_context(errors)?)
}

/// One dead letter, as produced to the dead-letter topic.
struct Letter {
    key: Option<Vec<u8>>,
    payload: Vec<u8>,
    topic: String,
    partition: i32,
    offset: i64,
    reason: String,
}

/// Enqueues one record, in call order (the idempotent producer keeps that order per
/// partition); a full queue waits for deliveries to make room rather than letting a
/// later record in first.
async fn enqueue<K, P>(producer: &Producer, mut record: FutureRecord<'_, K, P>) -> Result<rdkafka::producer::DeliveryFuture, String>
where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    loop {
        match producer.send_result(record) {
            Ok(delivery) => return Ok(delivery),
            Err((rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), returned)) => {
                record = returned;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((error, _)) => return Err(error.to_string()),
        }
    }
}
async fn send_letters(producer: &Producer, topic: &str, letters: &[Letter]) -> Result<(), String> {
    for letter in letters {
        let partition = letter.partition.to_string();
        let offset = letter.offset.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header { key: "source_topic", value: Some(letter.topic.as_bytes()) })
            .insert(Header { key: "source_partition", value: Some(partition.as_bytes()) })
            .insert(Header { key: "source_offset", value: Some(offset.as_bytes()) })
            .insert(Header { key: "reason", value: Some(letter.reason.as_bytes()) });
        let mut record = FutureRecord::to(topic).payload(&letter.payload).headers(headers);
        if let Some(key) = &letter.key {
            record = record.key(key);
        }
        producer.send(record, Duration::from_secs(10)).await.map_err(|(error, _)| error.to_string())?;
    }
    Ok(())
}

/// Produces a batch's messages, keyed by account (an account's messages stay in one
/// partition, in order), and waits until the broker has acknowledged every one.
async fn send_messages(producer: &Producer, topic: &str, messages: &[AccountMessage]) -> Result<(), String> {
    let mut deliveries = Vec::with_capacity(messages.len());
    for told in messages {
        // A message holds strings, numbers, booleans and objects only.
        let payload = serde_json::to_vec(told).map_err(|error| error.to_string())?;
        let record = FutureRecord::to(topic).payload(&payload).key(&told.account_id);
        // Enqueued in order (the idempotent producer keeps it per partition); a full
        // queue waits for deliveries to make room.
        let delivery = enqueue(producer, record).await?;
        deliveries.push(delivery);
    }
    for delivery in deliveries {
        match delivery.await {
            Ok(Ok(_)) => {}
            Ok(Err((error, _))) => return Err(error.to_string()),
            Err(_) => return Err("the producer was dropped before delivering".into()),
        }
    }
    Ok(())
}

/// Applies one batch: projection, dead letters, write. Offsets are not touched.
async fn apply_batch(driver: &Arc<dyn Driver>, producer: &Producer, config: &KafkaConfig, messages: &[OwnedMessage], stats: &Stats) -> Result<(), StoreError> {
    let mut batch = Batch::new(driver.clone());
    let mut letters = Vec::new();
    let (mut applied, mut stale, mut skipped, mut newest) = (0u64, 0u64, 0u64, 0i64);
    let decoded: Vec<Result<Envelope, DecodeError>> = messages.iter().map(|message| Envelope::decode(message.payload().unwrap_or_default())).collect();
    // One concurrent read of every entity state the batch needs, instead of one store
    // round trip per event while applying.
    batch.prefetch(decoded.iter().filter_map(|envelope| envelope.as_ref().ok())).await?;
    for (message, envelope) in messages.iter().zip(decoded) {
        let payload = message.payload().unwrap_or_default();
        match envelope {
            // Offsets only grow within a partition: the LWW clock of rows derived from
            // several entities, which are written from one partition (one message key),
            // except a share's, which keep a clock of their own across partitions.
            Ok(envelope) => {
                match batch.apply(&envelope, message.offset()).await? {
                    Applied::Applied => applied += 1,
                    Applied::Stale => stale += 1,
                }
                newest = newest.max(envelope.occurred_at.micros());
            }
            Err(DecodeError::UnknownType(event_type)) => {
                tracing::debug!(topic = message.topic(), partition = message.partition(), offset = message.offset(), %event_type, "skipping an event of an unknown type");
                skipped += 1;
            }
            Err(DecodeError::Invalid(reason)) => letters.push(Letter {
                key: message.key().map(<[u8]>::to_vec),
                payload: payload.to_vec(),
                topic: message.topic().to_string(),
                partition: message.partition(),
                offset: message.offset(),
                reason,
            }),
        }
    }
    // Rows, then the batch's messages, then entity states (see `into_mutation_steps`),
    // then dead letters. A message goes out only once the rows it announces are
    // acknowledged (a receiver reading the API sees them), and before the states: should
    // producing fail or the process die after it, the states still say the events are
    // new, so the batch is applied again and announces the same messages, with the same
    // ids (duplicates, never a loss). A store error retries the batch before any letter
    // is sent, so letters repeat only when sending them failed.
    let messages = batch.take_messages();
    let (rows, states) = batch.into_mutation_steps();
    driver.write(rows).await?;
    send_messages(producer, &config.messages_topic, &messages).await.map_err(|error| StoreError::Unavailable(format!("messages topic: {error}")))?;
    driver.write(states).await?;
    if !letters.is_empty() {
        send_letters(producer, &config.dead_letter_topic, &letters).await.map_err(|error| StoreError::Unavailable(format!("dead-letter topic: {error}")))?;
    }
    stats.applied.fetch_add(applied, Ordering::Relaxed);
    stats.stale.fetch_add(stale, Ordering::Relaxed);
    stats.skipped_unknown.fetch_add(skipped, Ordering::Relaxed);
    stats.dead_lettered.fetch_add(letters.len() as u64, Ordering::Relaxed);
    if newest > 0 {
        stats.newest_occurred_at_us.fetch_max(newest as u64, Ordering::Relaxed);
    }
    for letter in &letters {
        tracing::warn!(topic = %letter.topic, partition = letter.partition, offset = letter.offset, reason = %letter.reason, "dead-lettered an invalid event");
    }
    Ok(())
}

/// One `projector.batch` span per partition of a batch, open until its offsets are
/// committed; never empty for a non-empty batch.
fn batch_spans(messages: &[OwnedMessage]) -> Vec<tracing::Span> {
    let mut ranges: BTreeMap<(&str, i32), (i64, i64, usize)> = BTreeMap::new();
    for message in messages {
        let range = ranges.entry((message.topic(), message.partition())).or_insert((message.offset(), message.offset(), 0));
        range.0 = range.0.min(message.offset());
        range.1 = range.1.max(message.offset());
        range.2 += 1;
    }
    ranges
        .into_iter()
        .map(|((topic, partition), (first, last, count))| {
            tracing::info_span!(
                "projector.batch",
                otel.kind = "consumer",
                messaging.system = "kafka",
                messaging.destination.name = topic,
                messaging.destination.partition.id = partition.to_string(),
                recap.offset.first = first,
                recap.offset.last = last,
                messaging.batch.message_count = count as i64,
            )
        })
        .collect()
}

/// Consumes until `shutdown`, committing after each batch; returns after the batch in
/// hand is written and committed.
pub async fn run(driver: Arc<dyn Driver>, config: KafkaConfig, stats: Arc<Stats>, mut shutdown: watch::Receiver<bool>) -> Result<(), KafkaError> {
    let fence = Arc::new(Fence::default());
    let consumer = Arc::new(consumer(&config, fence.clone())?);
    let producer = producer(&config.client)?;
    // The lag is refreshed on its own clock, so it keeps moving while the loop waits for
    // events or retries a batch the store refuses (when it matters most).
    let lags = stats.clone();
    let _lag_refresh = recap_kafka::LagRefresh::start(consumer.clone(), move |figures| {
        if let Ok(mut partition_lag) = lags.partition_lag.lock() {
            *partition_lag = figures;
        }
    });
    // Messages received while a refused batch waited, for the next batch.
    let mut carried = Held::default();
    loop {
        // Collect a batch: wait for one message, then take what arrives within batch_wait.
        let mut batch = std::mem::take(&mut carried);
        if batch.is_empty() {
            let first = tokio::select! {
                message = consumer.recv() => message,
                _ = shutdown.changed() => break,
            };
            match first {
                Ok(message) => batch.push(&fence, message.detach()),
                Err(error) => {
                    tracing::warn!(%error, "kafka consumer error");
                    continue;
                }
            }
        }
        let deadline = tokio::time::Instant::now() + config.batch_wait;
        while batch.len() < config.max_batch {
            match tokio::time::timeout_at(deadline, consumer.recv()).await {
                Ok(Ok(message)) => batch.push(&fence, message.detach()),
                Ok(Err(error)) => tracing::warn!(%error, "kafka consumer error"),
                Err(_) => break,
            }
        }
        // Fence what was received from partitions revoked since.
        stats.fenced.fetch_add(batch.fence(&fence) as u64, Ordering::Relaxed);
        if batch.is_empty() {
            continue;
        }
        let mut spans = batch_spans(&batch.messages);
        let mut paused = Paused::default();
        let mut backoff = Duration::from_millis(50);
        let written = loop {
            // The store's spans hang under the batch's first partition span.
            match apply_batch(&driver, &producer, &config, &batch.messages, &stats).instrument(spans.first().cloned().unwrap_or_else(tracing::Span::none)).await
            {
                Ok(()) => break true,
                Err(error) => {
                    tracing::warn!(%error, backoff_ms = backoff.as_millis() as u64, events = batch.len(), "batch not written; retrying without advancing");
                    paused.assignment(consumer.as_ref());
                    // A stop asked for while the store refuses is not held up by it: the
                    // batch's offsets are not committed, so whoever owns its partitions
                    // next applies it again (the projection is idempotent).
                    let stopping = *shutdown.borrow()
                        || recap_kafka::poll_paused(consumer.as_ref(), backoff, &mut shutdown, &mut paused, |message| carried.push(&fence, message.detach()))
                            .await;
                    if stopping {
                        tracing::info!(events = batch.len(), "stopping with a batch not written; it is applied again from the committed offsets");
                        fence.commit_pending(consumer.as_ref());
                        return Ok(());
                    }
                    // Partitions revoked meanwhile belong to another member now: their
                    // messages leave the batch before the next attempt.
                    let fenced = batch.fence(&fence);
                    stats.fenced.fetch_add(fenced as u64, Ordering::Relaxed);
                    if fenced > 0 {
                        tracing::info!(fenced, events = batch.len(), "partitions of the batch were revoked while it waited; their messages are fenced");
                        spans = batch_spans(&batch.messages);
                    }
                    if batch.is_empty() {
                        break false;
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        };
        if written {
            // Every write of the batch is acknowledged: commit each partition's next offset.
            fence.commit_written(consumer.as_ref(), &batch.messages);
        }
        drop(spans);
        paused.resume(consumer.as_ref());
        if *shutdown.borrow() {
            break;
        }
    }
    fence.commit_pending(consumer.as_ref());
    Ok(())
}

/// Publishes contract events (JSON Lines) to their topics with the contract's keys:
/// account_id, the meeting's owner, team_id or share_id. Lines that do not decode are
/// published as they are (tests publish poison events this way), keyed by what can be
/// read of them.
pub async fn produce(client: &KafkaClient, lines: &[Vec<u8>], topic_override: Option<&str>, topic_prefix: &str) -> Result<usize, String> {
    let errors = ClientErrors::default();
    let producer = producer_with(client, errors.clone()).map_err(|error| error.to_string())?;
    // A delivery that fails is told with what the cluster said last.
    let with_cause = |error: String| errors.with_cause(error);
    let mut deliveries = Vec::with_capacity(lines.len());
    for line in lines {
        let (topic, key) = route(line);
        let topic = topic_override.map(str::to_string).unwrap_or_else(|| format!("{topic_prefix}{topic}"));
        let record = FutureRecord::to(&topic).payload(line.as_slice()).key(&key);
        // Enqueued one after the other, in input order (the idempotent producer keeps
        // that order per partition): a key's events arrive as they were written. A full
        // queue waits for deliveries to make room rather than letting a later line in.
        let delivery = enqueue(&producer, record).await?;
        deliveries.push(delivery);
    }
    let mut sent = 0;
    for delivery in deliveries {
        match delivery.await {
            Ok(Ok(_)) => sent += 1,
            Ok(Err((error, _))) => return Err(with_cause(error.to_string())),
            Err(_) => return Err("the producer was dropped before delivering".into()),
        }
    }
    Ok(sent)
}

/// The dead letters of `topic`, read from the first each partition keeps to its end as it
/// was when called: each partition's in its order, partitions one after the other. A
/// letter sent again (the projector retried its batch) is read once: letters are told
/// apart by their source. Nothing is committed and no group is joined (librdkafka's
/// assignment wants a group's name all the same: `group.id` among the client's options,
/// else `recap-dead-letters-reader`), so reading them changes nothing for anyone. `None`
/// when the topic does not exist: nothing was ever dead-lettered there. A record
/// produced there by something else (no `source_*` headers) is named by its own place in
/// `topic`, its reason saying so. Fails when no partition moves on for `timeout`.
pub async fn read_dead_letters(client: &KafkaClient, topic: &str, timeout: Duration) -> Result<Option<Vec<crate::DeadLetter>>, String> {
    let (client, topic) = (client.clone(), topic.to_owned());
    tokio::task::spawn_blocking(move || read_dead_letters_blocking(&client, &topic, timeout)).await.map_err(|error| error.to_string())?
}

fn read_dead_letters_blocking(client: &KafkaClient, topic: &str, timeout: Duration) -> Result<Option<Vec<crate::DeadLetter>>, String> {
    use rdkafka::message::Headers;
    let errors = ClientErrors::default();
    let with_cause = |error: String| errors.with_cause(error);
    let mut config = client.config();
    if config.get("group.id").is_none() {
        config.set("group.id", "recap-dead-letters-reader");
    }
    let consumer: BaseConsumer<ClientErrors> = config
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("allow.auto.create.topics", "false")
        // Letters the retention removed while they were read are skipped, not waited for;
        // the end of a partition is told, gaps (compaction) and all.
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        .create_with_context(errors.clone())
        .map_err(|error| error.to_string())?;
    let metadata = consumer.fetch_metadata(Some(topic), timeout).map_err(|error| with_cause(error.to_string()))?;
    let Some(found) = metadata.topics().iter().find(|found| found.name() == topic) else { return Ok(None) };
    match found.error() {
        None => {}
        Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => return Ok(None),
        Some(code) => return Err(format!("{topic}: {}", rdkafka::types::RDKafkaErrorCode::from(code))),
    }
    // Where each partition ends now: the letters before it are read, later ones are not.
    let mut ends = BTreeMap::new();
    let mut assignment = TopicPartitionList::new();
    for partition in found.partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, partition.id(), timeout).map_err(|error| with_cause(error.to_string()))?;
        if high > low {
            ends.insert(partition.id(), high);
            assignment.add_partition_offset(topic, partition.id(), rdkafka::Offset::Offset(low)).map_err(|error| error.to_string())?;
        }
    }
    if ends.is_empty() {
        return Ok(Some(Vec::new()));
    }
    consumer.assign(&assignment).map_err(|error| error.to_string())?;
    let done = |partition: i32, ends: &mut BTreeMap<i32, i64>| {
        ends.remove(&partition);
        let mut finished = TopicPartitionList::new();
        finished.add_partition(topic, partition);
        // Only spares the broker the later letters, which are not read anyway.
        let _ = consumer.pause(&finished);
    };
    let mut read: BTreeMap<i32, Vec<crate::DeadLetter>> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    let (mut moved_at, mut last_error) = (std::time::Instant::now(), None);
    while !ends.is_empty() {
        if moved_at.elapsed() >= timeout {
            let left: Vec<String> = ends.keys().map(|partition| format!("{topic}/{partition}")).collect();
            let error = last_error.map(|error| format!(" (last error: {error})")).unwrap_or_default();
            return Err(with_cause(format!("{} did not reach its end within {timeout:?}{error}", left.join(", "))));
        }
        let message = match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Ok(message)) => message,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(partition))) => {
                moved_at = std::time::Instant::now();
                done(partition, &mut ends);
                continue;
            }
            // The consumer recovers from what it reports here (a broker going away, a
            // leader moving): read on until nothing moves for `timeout`.
            Some(Err(error)) => {
                last_error = Some(error.to_string());
                continue;
            }
        };
        let Some(end) = ends.get(&message.partition()).copied() else { continue };
        if message.offset() >= end {
            done(message.partition(), &mut ends);
            continue;
        }
        moved_at = std::time::Instant::now();
        let header = |name: &str| {
            message
                .headers()
                .and_then(|headers| headers.iter().find(|header| header.key == name))
                .and_then(|header| header.value)
                .map(|value| String::from_utf8_lossy(value).into_owned())
        };
        let source = (
            header("source_topic"),
            header("source_partition").and_then(|value| value.parse().ok()),
            header("source_offset").and_then(|value| value.parse().ok()),
        );
        let letter = match source {
            (Some(source_topic), Some(partition), Some(offset)) => {
                crate::DeadLetter::of(source_topic, partition, offset, header("reason").unwrap_or_default(), message.payload().unwrap_or_default())
            }
            _ => crate::DeadLetter::of(
                topic.to_owned(),
                message.partition().max(0) as u32,
                message.offset().max(0) as u64,
                "not a dead letter of recap: no source_topic, source_partition and source_offset headers".into(),
                message.payload().unwrap_or_default(),
            ),
        };
        if seen.insert((letter.topic.clone(), letter.partition, letter.offset)) {
            read.entry(message.partition()).or_default().push(letter);
        }
        if message.offset() + 1 >= end {
            done(message.partition(), &mut ends);
        }
    }
    Ok(Some(read.into_values().flatten().collect()))
}

/// The topic and key of an envelope per the contract's transport table.
pub fn route(line: &[u8]) -> (String, String) {
    if let Ok(envelope) = Envelope::decode(line) {
        return (envelope.event.topic().to_string(), envelope.event.message_key().to_string());
    }
    let value: serde_json::Value = serde_json::from_slice(line).unwrap_or_default();
    let event_type = value["type"].as_str().unwrap_or_default();
    let data = &value["data"];
    let key = ["account_id", "team_id", "share_id", "meeting_id"]
        .iter()
        .find_map(|field| data[*field].as_str())
        .or_else(|| value["id"].as_str())
        .unwrap_or_default()
        .to_string();
    (recap_schemas::topic_of(event_type).to_string(), key)
}
