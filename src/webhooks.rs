//! The webhooks runtime in the binary: its flags (the feed's retention, shared with the
//! read side, and the delivery settings), the task inside `recap serve`, and the
//! distributed role `recap webhooks`, which consumes `<prefix>recap.messages.v1` in the
//! group `<prefix>recap-webhooks` and delivers the shards of the partitions it holds
//! (`docs/webhooks.md`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use recap_readmodel::{Driver, ReadModel};
use recap_webhooks::kafka::KafkaReaderConfig;
use recap_webhooks::{ClientConfig, DelivererConfig, RetrySchedule, Runtime};

use crate::distributed::{serve_admin, shutdown_watch, KafkaArgs, ScyllaArgs};
use crate::telemetry::Telemetry;

/// How deliveries go out.
#[derive(Args, Debug, Clone)]
pub struct DeliveryArgs {
    /// Development and tests only: also deliver to `http` URLs and to loopback and
    /// private addresses. Without it a delivery goes only to `https` URLs resolving to
    /// public addresses.
    #[arg(long = "webhooks-allow-insecure", env = "RECAP_WEBHOOKS_ALLOW_INSECURE")]
    pub allow_insecure: bool,
    /// Attempts in flight to one endpoint, at most: a slow endpoint holds only these.
    #[arg(long = "webhooks-endpoint-concurrency", env = "RECAP_WEBHOOKS_ENDPOINT_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub endpoint_concurrency: u64,
    /// Attempts in flight in the process, at most.
    #[arg(long = "webhooks-concurrency", env = "RECAP_WEBHOOKS_CONCURRENCY", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: u64,
    /// Development and tests only: multiplies every delay of the retry schedule (0.001
    /// turns 5 s, 5 min, 30 min, … into 5 ms, 300 ms, 1.8 s, …), so that a test sees a
    /// delivery retried on schedule and an endpoint disabled within seconds.
    #[arg(long = "webhooks-retry-scale", env = "RECAP_WEBHOOKS_RETRY_SCALE", default_value_t = 1.0, value_parser = retry_scale)]
    pub retry_scale: f64,
}

/// A retry scale: a finite number above 0 and at most 1.
fn retry_scale(text: &str) -> Result<f64, String> {
    let scale: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if !(scale > 0.0 && scale <= 1.0) {
        return Err(format!("{text} is not above 0 and at most 1"));
    }
    Ok(scale)
}

impl DeliveryArgs {
    fn runtime(&self, driver: Arc<dyn Driver>, retention: Duration) -> Runtime {
        let mut runtime = Runtime::new(driver, retention, ClientConfig { allow_insecure: self.allow_insecure, ..ClientConfig::default() });
        let mut deliverer =
            DelivererConfig { per_endpoint: self.endpoint_concurrency as usize, global: self.concurrency as usize, ..DelivererConfig::default() };
        deliverer.schedule = scaled_schedule(self.retry_scale);
        runtime.deliverer = deliverer;
        runtime
    }
}

/// The retry schedule with every delay multiplied by `scale` (the jitter unchanged).
fn scaled_schedule(scale: f64) -> RetrySchedule {
    let schedule = RetrySchedule::default();
    RetrySchedule { delays: schedule.delays.iter().map(|delay| delay.mul_f64(scale)).collect(), ..schedule }
}

/// The embedded edition's task: tails the outbox of `driver` until `stop`.
pub fn spawn_embedded(
    driver: Arc<dyn Driver>,
    feed: &recap_query_api::FeedConfig,
    delivery: &DeliveryArgs,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    if delivery.allow_insecure {
        tracing::warn!("webhooks may be delivered over http and to loopback and private addresses (--webhooks-allow-insecure)");
    }
    let runtime = delivery.runtime(driver, feed.feed_retention);
    recap_webhooks::metrics::observe_queue(runtime.stats.clone(), runtime.clock.clone());
    tokio::spawn(runtime.run_embedded(stop))
}

#[derive(Args, Debug, Clone)]
pub struct WebhooksRoleConfig {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub scylla: ScyllaArgs,
    #[command(flatten)]
    pub feed: recap_query_api::FeedConfig,
    #[command(flatten)]
    pub delivery: DeliveryArgs,
    /// Messages read per batch, at most.
    #[arg(long = "webhooks-max-batch", env = "RECAP_WEBHOOKS_MAX_BATCH", default_value_t = 500)]
    pub max_batch: usize,
    /// How long a batch waits for more messages once it has one, in milliseconds; 0
    /// takes only the messages already fetched (batches still fill under load, from
    /// what arrived while the previous one was written).
    #[arg(long = "webhooks-batch-wait-ms", env = "RECAP_WEBHOOKS_BATCH_WAIT_MS", default_value_t = 0)]
    pub batch_wait_ms: u64,
    /// Kafka's `max.poll.interval.ms`: the longest a member may go without polling
    /// before the group evicts it. The reader polls while a batch waits for the store,
    /// so a long store outage does not reach it; at least the session timeout (10,000).
    #[arg(long, env = "RECAP_KAFKA_MAX_POLL_INTERVAL_MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(10_000..=86_400_000))]
    pub max_poll_interval_ms: u64,
    /// Address of /livez, /readyz and /metrics.
    #[arg(long, env = "RECAP_ADMIN_LISTEN", default_value = "127.0.0.1:9464")]
    pub admin_listen: SocketAddr,
    #[command(flatten)]
    pub http: crate::http::HttpLimits,
}

/// `recap webhooks`: the message topic into the feed, and deliveries, until SIGTERM;
/// then commits and lets the attempts in flight finish.
pub async fn role(config: WebhooksRoleConfig, telemetry: Telemetry) -> anyhow::Result<()> {
    let mut shutdown = shutdown_watch();
    let driver = config.scylla.connect(&mut shutdown).await?;
    let readmodel = ReadModel::new(driver.clone());
    let admin =
        serve_admin(config.admin_listen, crate::admin::AdminState { readmodel, stats: None, log: None, telemetry }, &config.http, shutdown.clone()).await?;
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if config.delivery.allow_insecure {
        tracing::warn!("webhooks may be delivered over http and to loopback and private addresses (--webhooks-allow-insecure)");
    }
    let runtime = config.delivery.runtime(driver, config.feed.feed_retention);
    recap_webhooks::metrics::observe_queue(runtime.stats.clone(), runtime.clock.clone());
    let kafka = KafkaReaderConfig {
        client: config.kafka.client(),
        topic_prefix: config.kafka.topic_prefix.clone(),
        max_batch: config.max_batch,
        batch_wait: Duration::from_millis(config.batch_wait_ms),
        max_poll_interval: Duration::from_millis(config.max_poll_interval_ms),
    };
    runtime.run_distributed(kafka, shutdown).await.context("webhooks")?;
    let _ = admin.await;
    tracing::info!("webhooks stopped after committing its last batch");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_scale_is_a_number_above_0_and_at_most_1() {
        assert_eq!(retry_scale("1"), Ok(1.0));
        assert_eq!(retry_scale("0.0002"), Ok(0.0002));
        assert_eq!(retry_scale("0"), Err("0 is not above 0 and at most 1".to_owned()));
        assert_eq!(retry_scale("2"), Err("2 is not above 0 and at most 1".to_owned()));
        assert_eq!(retry_scale("NaN"), Err("NaN is not above 0 and at most 1".to_owned()));
        assert_eq!(retry_scale("fast"), Err("\"fast\" is not a number".to_owned()));
    }

    #[test]
    fn the_retry_scale_multiplies_every_delay_of_the_schedule_and_keeps_its_jitter() {
        assert_eq!(scaled_schedule(1.0), RetrySchedule::default());
        let quick = scaled_schedule(0.001);
        assert_eq!(quick.delays[..3], [Duration::from_millis(5), Duration::from_millis(300), Duration::from_millis(1_800)]);
        assert_eq!(quick.delays.len(), 9);
        assert_eq!(quick.jitter, 0.2);
    }
}
