//! The deployment's Kafka client options against the real broker (`make up`), whose
//! SASL/PLAIN listener stands in for a secured cluster: the projector and the event
//! producer reach it with the options, events compressed with each codec a producer may
//! use are applied, and a wrong password is refused with a reason. Run with
//! `cargo test -p recap-projector --test kafka_client -- --ignored`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use recap_kafka::KafkaClient;
use recap_lmdb::EmbeddedDriver;
use recap_projector::kafka::{produce, run, KafkaConfig};
use recap_projector::Stats;
use recap_readmodel::ReadModel;
use recap_schemas::build::{Epoch, Events};
use recap_testkit::cluster::{engine_setting, sasl_options};
use tokio::sync::watch;

fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect()
}

/// The broker's SASL/PLAIN listener, with `password`.
fn sasl_client(password: &str) -> KafkaClient {
    KafkaClient::new(engine_setting("RECAP_ENGINES_KAFKA_SASL_BROKERS", "127.0.0.1:9094")).with_options(sasl_options(password))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Kafka broker (`make up`)"]
async fn a_cluster_reached_through_sasl_gets_events_compressed_with_every_codec_and_the_projector_applies_them() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    let prefix = format!("t{}_client{}.", std::process::id(), micros % 1_000_000_000);
    let (events_topic, messages_topic) = (format!("{prefix}recap.meetings.v1"), format!("{prefix}recap.messages.v1"));
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        KafkaClient::new(engine_setting("RECAP_KAFKA_BROKERS", "127.0.0.1:9092")).config().create().expect("admin");
    let new = [NewTopic::new(&events_topic, 3, TopicReplication::Fixed(1)), NewTopic::new(&messages_topic, 3, TopicReplication::Fixed(1))];
    let results = admin.create_topics(&new, &AdminOptions::new()).await.expect("create topics");
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    let password = engine_setting("RECAP_ENGINES_KAFKA_SASL_PASSWORD", "recap-engines-sasl");
    let client = sasl_client(&password);
    let events = Events::new(Epoch::from_unix_seconds(1_767_225_600));
    let codecs = ["gzip", "snappy", "lz4", "zstd"];
    for (index, codec) in codecs.iter().enumerate() {
        let compressed = client.clone().with_options(options(&[("compression.type", codec)]));
        let line = events.meeting("acc_1", format!("mtg_{index}")).title("Weekly").to_line();
        assert_eq!(produce(&compressed, &[line.into_bytes()], Some(&events_topic), "").await, Ok(1), "{codec}");
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let driver = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).expect("store"));
    let (stop, shutdown) = watch::channel(false);
    let config = KafkaConfig {
        client: client.clone(),
        topics: vec![events_topic.clone()],
        group_id: format!("{prefix}group"),
        dead_letter_topic: format!("{prefix}recap.deadletter.v1"),
        messages_topic: messages_topic.clone(),
        max_batch: 100,
        batch_wait: Duration::from_millis(5),
        max_poll_interval: Duration::from_secs(300),
    };
    let projector = tokio::spawn(run(driver.clone(), config, Arc::new(Stats::default()), shutdown));
    let readmodel = ReadModel::new(driver);
    let deadline = Instant::now() + Duration::from_secs(60);
    for (index, codec) in codecs.iter().enumerate() {
        let meeting = format!("mtg_{index}");
        while readmodel.meeting_detail("acc_1", &meeting).await.unwrap().is_none() {
            assert!(Instant::now() < deadline, "{meeting}, sent {codec}-compressed, was never applied");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let _ = stop.send(true);
    projector.await.expect("projector task").expect("projector");

    let line = events.meeting("acc_1", "mtg_refused").title("Weekly").to_line();
    let refused = produce(&sasl_client("not-the-password"), &[line.into_bytes()], Some(&events_topic), "").await;
    let reason = refused.expect_err("a wrong password is refused");
    assert!(reason.to_lowercase().contains("authentication"), "the reason names the authentication: {reason}");
    assert!(!reason.contains("not-the-password"), "never the password: {reason}");
    let _ = admin.delete_topics(&[&events_topic, &messages_topic], &AdminOptions::new()).await;
}
