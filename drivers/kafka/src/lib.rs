//! What every Kafka client of the distributed edition shares: the cluster it connects
//! to and the deployment's own client options ([`KafkaClient`]), and the lag of a
//! consumer group's partitions ([`partition_lags`]), and how a consumer keeps its place
//! in its group while a batch waits for the store ([`Paused`], [`poll_paused`]).
//!
//! The options are librdkafka properties applied to every client (consumers, producers)
//! before the settings each client needs: they say how to reach the cluster
//! (`security.protocol`, `sasl.mechanism`, `sasl.username`, `ssl.ca.location`, ...), and
//! a setting a client relies on (its group, its commits, its acknowledgements) cannot be
//! changed by them. librdkafka is built with TLS (OpenSSL), SASL PLAIN and SCRAM, and
//! every compression codec a producer may have used (gzip, snappy, lz4, zstd).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message as _};
use rdkafka::{ClientContext, TopicPartitionList};
use tokio::sync::watch;

/// The cluster and the deployment's client options. Its `Debug` names the options'
/// keys, never their values (a password may be among them).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct KafkaClient {
    /// Comma-separated bootstrap servers.
    pub brokers: String,
    /// librdkafka properties, in the order given.
    pub options: Vec<(String, String)>,
}

impl fmt::Debug for KafkaClient {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<&str> = self.options.iter().map(|(key, _)| key.as_str()).collect();
        formatter.debug_struct("KafkaClient").field("brokers", &self.brokers).field("option_keys", &keys).finish()
    }
}

impl KafkaClient {
    /// A client of `brokers` with no option.
    pub fn new(brokers: impl Into<String>) -> KafkaClient {
        KafkaClient { brokers: brokers.into(), options: Vec::new() }
    }

    /// With `options` too.
    pub fn with_options(mut self, options: impl IntoIterator<Item = (String, String)>) -> KafkaClient {
        self.options.extend(options);
        self
    }

    /// A client configuration: the bootstrap servers and the options; the caller then
    /// sets what its client needs, which overrides an option of the same name.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.brokers);
        for (key, value) in &self.options {
            config.set(key, value);
        }
        config
    }
}

/// A client's context that logs what librdkafka reports about the cluster (an
/// authentication refused, brokers unreachable) and keeps the last of it, so that a
/// delivery that then fails is told with its cause. Cheap to clone: the clones share it.
#[derive(Clone, Default)]
pub struct ClientErrors(Arc<Mutex<Option<String>>>);

impl ClientErrors {
    /// The last error reported, in librdkafka's words.
    pub fn last(&self) -> Option<String> {
        self.0.lock().ok().and_then(|last| last.clone())
    }

    /// `error`, told with what the cluster said last (a refused authentication, for one,
    /// ends in a timeout whose own words do not say why).
    pub fn with_cause(&self, error: String) -> String {
        match self.last() {
            Some(cause) => format!("{error} (the cluster: {cause})"),
            None => error,
        }
    }
}

impl ClientContext for ClientErrors {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::warn!(%error, reason, "kafka client error");
        if let Ok(mut last) = self.0.lock() {
            *last = Some(reason.to_owned());
        }
    }
}

/// A consumer that joins no group (it reads assigned partitions) needs nothing more.
impl ConsumerContext for ClientErrors {}

/// One option as given on the command line or in the environment: `KEY=VALUE`, the key
/// a librdkafka property name (the value may hold `=`).
pub fn parse_option(text: &str) -> Result<(String, String), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("a Kafka option is KEY=VALUE (a librdkafka property), not {:?}", shown(text)));
    };
    let key = key.trim();
    if key.is_empty() || !key.bytes().all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'.' || byte == b'_') {
        return Err(format!("a Kafka option's key is a librdkafka property name (lowercase, dots), not {:?}", shown(key)));
    }
    if key == "bootstrap.servers" {
        return Err("bootstrap.servers is given by --kafka-brokers (RECAP_KAFKA_BROKERS), not as an option".into());
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// The start of a refused option, never its value whole (it may be a password).
fn shown(text: &str) -> String {
    let key = text.split('=').next().unwrap_or_default();
    key.chars().take(64).collect()
}

/// How often a consumer's lag is refreshed ([`LagRefresh`]).
pub const LAG_REFRESH: Duration = Duration::from_secs(2);

/// The refresh of a consumer's lag, every [`LAG_REFRESH`], busy or idle, until dropped.
pub struct LagRefresh(tokio::task::JoinHandle<()>);

impl LagRefresh {
    /// Hands each new figure of [`partition_lags`] to `keep`; the committed offsets and
    /// watermarks are broker round trips, made off the async workers. A figure that
    /// cannot be read leaves the last one kept.
    pub fn start<C: ConsumerContext + 'static>(consumer: Arc<StreamConsumer<C>>, keep: impl Fn(BTreeMap<String, i64>) + Send + 'static) -> LagRefresh {
        LagRefresh(tokio::spawn(async move {
            let mut tick = tokio::time::interval(LAG_REFRESH);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let consumer = consumer.clone();
                if let Ok(Some(lags)) = tokio::task::spawn_blocking(move || partition_lags(&consumer)).await {
                    keep(lags);
                }
            }
        }))
    }
}

impl Drop for LagRefresh {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The lag of every partition assigned to `consumer` ("topic/partition" → messages not
/// yet committed by its group), None when the assignment or the committed offsets
/// cannot be read. Broker round trips: call it off the async workers.
pub fn partition_lags<C: ConsumerContext>(consumer: &StreamConsumer<C>) -> Option<BTreeMap<String, i64>> {
    let assignment = consumer.assignment().ok()?;
    let committed = consumer.committed_offsets(assignment, Duration::from_secs(1)).ok()?;
    let mut lags = BTreeMap::new();
    for element in committed.elements() {
        let Ok((low, high)) = consumer.fetch_watermarks(element.topic(), element.partition(), Duration::from_secs(1)) else { continue };
        let committed = match element.offset() {
            rdkafka::Offset::Offset(offset) => Some(offset),
            _ => None,
        };
        lags.insert(format!("{}/{}", element.topic(), element.partition()), lag(committed, low, high));
    }
    Some(lags)
}

/// Partitions paused while a batch the store refuses waits, so that polling the consumer
/// for the group's sake ([`poll_paused`]) delivers (almost) no message.
#[derive(Default)]
pub struct Paused {
    partitions: Option<TopicPartitionList>,
}

impl Paused {
    /// Pauses every assigned partition, once per batch.
    pub fn assignment<C: Consumer<X>, X: ConsumerContext>(&mut self, consumer: &C) {
        if self.partitions.is_some() {
            return;
        }
        let assignment = consumer.assignment().unwrap_or_default();
        if let Err(error) = consumer.pause(&assignment) {
            tracing::warn!(%error, "pausing the assignment failed");
        }
        self.partitions = Some(assignment);
    }

    /// Pauses one more partition (assigned while the batch waited).
    pub fn one<C: Consumer<X>, X: ConsumerContext>(&mut self, consumer: &C, topic: &str, partition: i32) {
        let mut one = TopicPartitionList::new();
        one.add_partition(topic, partition);
        if let Err(error) = consumer.pause(&one) {
            tracing::warn!(%error, topic, partition, "pausing a partition failed");
        }
        self.partitions.get_or_insert_with(TopicPartitionList::new).add_partition(topic, partition);
    }

    /// Resumes what was paused, and the whole assignment: a pause outlives a revocation,
    /// and a partition given back later must not stay paused.
    pub fn resume<C: Consumer<X>, X: ConsumerContext>(self, consumer: &C) {
        let Some(paused) = self.partitions else { return };
        for partitions in [paused, consumer.assignment().unwrap_or_default()] {
            if let Err(error) = consumer.resume(&partitions) {
                tracing::warn!(%error, "resuming partitions failed");
            }
        }
    }
}

/// Polls `consumer` for `wait` (or until a stop is asked for: true), so that the member
/// keeps its place in the group (`max.poll.interval.ms` never runs out) and takes part
/// in rebalances while a batch waits for the store; call [`Paused::assignment`] first.
/// A message that still arrives (from a partition assigned meanwhile, or received just
/// before the pause) goes to `keep`, for the next batch, and its partition is paused.
pub async fn poll_paused<C: ConsumerContext + 'static>(
    consumer: &StreamConsumer<C>,
    wait: Duration,
    stop: &mut watch::Receiver<bool>,
    paused: &mut Paused,
    mut keep: impl FnMut(BorrowedMessage<'_>),
) -> bool {
    let until = tokio::time::Instant::now() + wait;
    loop {
        tokio::select! {
            message = consumer.recv() => match message {
                Ok(message) => {
                    paused.one(consumer, message.topic(), message.partition());
                    keep(message);
                }
                Err(error) => tracing::warn!(%error, "kafka consumer error"),
            },
            _ = tokio::time::sleep_until(until) => return false,
            _ = stop.changed() => return true,
        }
    }
}

/// Messages of a partition not yet committed: from its committed offset, or from the
/// low watermark when the group has committed nothing there yet (`auto.offset.reset`
/// is earliest).
pub fn lag(committed: Option<i64>, low: i64, high: i64) -> i64 {
    (high - committed.unwrap_or(low).max(low)).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_is_a_property_name_and_a_value_which_may_hold_equals_signs() {
        assert_eq!(parse_option("sasl.username=recap"), Ok(("sasl.username".into(), "recap".into())));
        assert_eq!(parse_option(" security.protocol =SASL_SSL"), Ok(("security.protocol".into(), "SASL_SSL".into())));
        assert_eq!(parse_option("sasl.password=a=b"), Ok(("sasl.password".into(), "a=b".into())));
        for bad in ["sasl.password", "=x", "Sasl.Username=x", "bootstrap.servers=x:9092"] {
            assert!(parse_option(bad).is_err(), "{bad}");
        }
        let refused = parse_option("sasl password=hunter2").unwrap_err();
        assert!(!refused.contains("hunter2"), "a refusal never shows the value: {refused}");
    }

    #[test]
    fn the_options_are_set_after_the_brokers_and_their_values_are_never_shown() {
        let client = KafkaClient::new("b:9092").with_options([("sasl.password".to_owned(), "hunter2".to_owned()), ("client.id".to_owned(), "x".to_owned())]);
        let config = client.config();
        assert_eq!((config.get("bootstrap.servers"), config.get("sasl.password"), config.get("client.id")), (Some("b:9092"), Some("hunter2"), Some("x")));
        assert!(!format!("{client:?}").contains("hunter2"));
    }

    #[test]
    fn librdkafka_is_built_with_tls_sasl_and_every_codec() {
        let client = KafkaClient::new("127.0.0.1:1").with_options(
            [("security.protocol", "SASL_SSL"), ("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.username", "recap"), ("sasl.password", "secret")]
                .map(|(key, value)| (key.to_owned(), value.to_owned())),
        );
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            let mut config = client.config();
            config.set("compression.type", codec);
            let created: Result<rdkafka::producer::BaseProducer, _> = config.create();
            assert!(created.is_ok(), "{codec}: {:?}", created.err());
        }
    }

    #[test]
    fn lag_counts_from_the_committed_offset() {
        assert_eq!(lag(Some(40), 0, 100), 60);
        assert_eq!(lag(Some(100), 0, 100), 0);
    }

    #[test]
    fn lag_of_a_partition_never_committed_counts_every_retained_message() {
        assert_eq!(lag(None, 0, 100), 100);
        assert_eq!(lag(None, 30, 100), 70, "messages below the low watermark are gone, not lagging");
        assert_eq!(lag(None, 0, 0), 0, "an empty partition has no lag, and still has a figure");
    }

    #[test]
    fn lag_is_never_negative() {
        assert_eq!(lag(Some(10), 20, 15), 0);
        assert_eq!(lag(Some(5), 10, 30), 20, "a committed offset below the retention counts from the low watermark");
    }
}
