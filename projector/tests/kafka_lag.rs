//! The per-partition lag of the Kafka projector against the real broker (`make up`):
//! it has a figure for every assigned partition while idle, and keeps refreshing while
//! a batch is held up by the store. Run with
//! `cargo test -p recap-projector --test kafka_lag -- --ignored`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use recap_kafka::LAG_REFRESH;
use recap_lmdb::EmbeddedDriver;
use recap_projector::kafka::{run, KafkaConfig};
use recap_projector::Stats;
use recap_schemas::build::{Epoch, Events};
use recap_testkit::FaultyDriver;
use tokio::sync::watch;

fn brokers() -> String {
    if let Ok(brokers) = std::env::var("RECAP_KAFKA_BROKERS") {
        return brokers;
    }
    let path = std::path::Path::new(&std::env::var("HOME").unwrap_or_default()).join(".cache/recap/engines/env");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.trim().trim_start_matches("export ").strip_prefix("RECAP_KAFKA_BROKERS=").map(|value| value.trim_matches('"').to_string()))
        .unwrap_or_else(|| "127.0.0.1:9092".into())
}

fn lags(stats: &Stats) -> BTreeMap<String, i64> {
    stats.partition_lag.lock().map(|lags| lags.clone()).unwrap_or_default()
}

/// Waits (bounded) until `check` holds for the lag figures.
async fn wait_for(stats: &Stats, what: &str, check: impl Fn(&BTreeMap<String, i64>) -> bool) {
    let deadline = Instant::now() + LAG_REFRESH * 3 + Duration::from_secs(10);
    while !check(&lags(stats)) {
        assert!(Instant::now() < deadline, "{what}: lag is {:?}", lags(stats));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Kafka broker (`make up`)"]
async fn lag_is_reported_while_idle_and_while_a_batch_is_held_up() {
    let brokers = brokers();
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    let topic = format!("lagtest{}_{}.recap.meetings.v1", std::process::id(), micros % 1_000_000_000);
    {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
        let results = admin.create_topics(&[NewTopic::new(&topic, 3, TopicReplication::Fixed(1))], &AdminOptions::new()).await.expect("create topic");
        assert!(results.iter().all(Result::is_ok), "{results:?}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    // An embedded store whose writes wait until the test lets them through.
    let gated = Arc::new(FaultyDriver::new(Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).expect("store"))));
    gated.hold_writes();
    let stats = Arc::new(Stats::default());
    let (stop, shutdown) = watch::channel(false);
    let config = KafkaConfig {
        client: recap_kafka::KafkaClient::new(brokers.clone()),
        topics: vec![topic.clone()],
        group_id: format!("{topic}-group"),
        dead_letter_topic: format!("{topic}-deadletter"),
        messages_topic: format!("{topic}-messages"),
        max_batch: 100,
        batch_wait: Duration::from_millis(5),
        max_poll_interval: Duration::from_secs(300),
    };
    let projector = tokio::spawn(run(gated.clone(), config, stats.clone(), shutdown));

    // Idle, nothing ever consumed or committed: every assigned partition has a figure, 0.
    wait_for(&stats, "idle", |lags| lags.len() == 3 && lags.values().all(|lag| *lag == 0)).await;

    // Ten events the store does not take yet: the lag shows them while the batch waits.
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("producer");
    let events = Events::new(Epoch::from_unix_seconds(1_767_225_600));
    for index in 0..10 {
        let line = events.meeting_deleted("acc_1", format!("mtg_{index}")).to_line();
        producer.send(FutureRecord::to(&topic).key("acc_1").payload(&line), Duration::from_secs(10)).await.expect("produce");
    }
    wait_for(&stats, "held up", |lags| lags.values().sum::<i64>() == 10).await;

    // Once written and committed, the lag goes back to 0 without any further event.
    gated.release_writes();
    wait_for(&stats, "caught up", |lags| lags.len() == 3 && lags.values().all(|lag| *lag == 0)).await;

    let _ = stop.send(true);
    projector.await.expect("projector task").expect("projector");

    // The run's topic goes with it (one left by a killed run goes at the next `make up`).
    use rdkafka::admin::{AdminClient, AdminOptions};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
    let _ = admin.delete_topics(&[&topic], &AdminOptions::new()).await;
}
