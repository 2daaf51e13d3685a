//! The runtime as a whole, as `recap serve` and `recap webhooks` start it: a message
//! log reader (the outbox, or the Kafka topic) and the deliverer, sharing the store,
//! the clock, the figures and the shards held.

use std::sync::Arc;

use recap_readmodel::webhooks::WebhookStore;
use recap_readmodel::Driver;
use tokio::sync::watch;

use crate::client::{ClientConfig, SafeClient};
use crate::deliver::{Deliverer, DelivererConfig, Shards};
use crate::handoff::Handoff;
use crate::kafka::{KafkaReaderConfig, KafkaReaderError};
use crate::metrics::Stats;
use crate::outbox::{OutboxConfig, OutboxReader, EMBEDDED_SHARD};
use crate::schedule::{Clock, SystemClock};

/// Everything the runtime is made of; [`Runtime::new`] gives the production defaults.
pub struct Runtime {
    pub driver: Arc<dyn Driver>,
    pub store: WebhookStore,
    pub client: SafeClient,
    pub clock: Arc<dyn Clock>,
    pub stats: Arc<Stats>,
    pub deliverer: DelivererConfig,
    pub outbox: OutboxConfig,
}

impl Runtime {
    /// The runtime over `driver`, keeping the feed for `retention`.
    pub fn new(driver: Arc<dyn Driver>, retention: std::time::Duration, client: ClientConfig) -> Runtime {
        Runtime {
            store: WebhookStore::new(driver.clone(), retention),
            driver,
            client: SafeClient::new(client),
            clock: Arc::new(SystemClock),
            stats: Arc::new(Stats::default()),
            deliverer: DelivererConfig::default(),
            outbox: OutboxConfig::default(),
        }
    }

    fn deliverer(&self, shards: Shards, handoff: Handoff) -> Deliverer {
        Deliverer::new(self.store.clone(), self.client.clone(), self.clock.clone(), self.stats.clone(), shards, handoff, self.deliverer.clone())
    }

    /// The embedded edition: tails the outbox and delivers shard `"0"` until `stop`.
    pub async fn run_embedded(self, stop: watch::Receiver<bool>) {
        let handoff = Handoff::with_room_wait(self.deliverer.window, self.deliverer.room_wait);
        let shards = Shards::fixed(&[EMBEDDED_SHARD]);
        let deliverer = self.deliverer(shards.clone(), handoff.clone());
        let reader = OutboxReader {
            shards,
            driver: self.driver.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
            stats: self.stats.clone(),
            handoff,
            config: self.outbox.clone(),
        };
        tokio::join!(reader.run(stop.clone()), deliverer.run(stop));
    }

    /// The distributed edition: consumes the message topic and delivers the shards of
    /// the partitions held until `stop`.
    pub async fn run_distributed(self, kafka: KafkaReaderConfig, stop: watch::Receiver<bool>) -> Result<(), KafkaReaderError> {
        let handoff = Handoff::with_room_wait(self.deliverer.window, self.deliverer.room_wait);
        let shards = Shards::default();
        let deliverer = self.deliverer(shards.clone(), handoff.clone());
        let (reading, ()) = tokio::join!(
            crate::kafka::run(kafka, self.store.clone(), self.clock.clone(), self.stats.clone(), shards, handoff, stop.clone()),
            deliverer.run(stop)
        );
        reading
    }
}
