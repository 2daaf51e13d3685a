//! The distributed edition's message log against the real broker (`make up`): the
//! messages a batch announces reach the messages topic, keyed by account, once the
//! batch's rows are written. Run with
//! `cargo test -p recap-projector --test kafka_messages -- --ignored`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use recap_lmdb::EmbeddedDriver;
use recap_projector::kafka::{run, KafkaConfig};
use recap_projector::Stats;
use recap_readmodel::messages::AccountMessage;
use recap_readmodel::ReadModel;
use recap_schemas::build::{Epoch, Events};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Kafka broker (`make up`)"]
async fn the_messages_topic_receives_each_batchs_messages_keyed_by_account_after_its_rows() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let brokers = brokers();
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    let prefix = format!("msgtest{}_{}.", std::process::id(), micros % 1_000_000_000);
    let (events_topic, messages_topic) = (format!("{prefix}recap.meetings.v1"), format!("{prefix}recap.messages.v1"));
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("admin");
    let new = [NewTopic::new(&events_topic, 3, TopicReplication::Fixed(1)), NewTopic::new(&messages_topic, 3, TopicReplication::Fixed(1))];
    let results = admin.create_topics(&new, &AdminOptions::new()).await.expect("create topics");
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    let dir = tempfile::tempdir().expect("temp dir");
    let driver = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).expect("store"));
    let (stop, shutdown) = watch::channel(false);
    let config = KafkaConfig {
        client: recap_kafka::KafkaClient::new(brokers.clone()),
        topics: vec![events_topic.clone()],
        group_id: format!("{prefix}group"),
        dead_letter_topic: format!("{prefix}recap.deadletter.v1"),
        messages_topic: messages_topic.clone(),
        max_batch: 100,
        batch_wait: Duration::from_millis(5),
        max_poll_interval: Duration::from_secs(300),
    };
    let projector = tokio::spawn(run(driver.clone(), config, Arc::new(Stats::default()), shutdown));

    let events = Events::new(Epoch::from_unix_seconds(1_767_225_600));
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", &brokers).create().expect("producer");
    for (account, meeting) in [("acc_1", "mtg_1"), ("acc_2", "mtg_2"), ("acc_1", "mtg_3")] {
        let line = events.meeting(account, meeting).title("Weekly").to_line();
        producer.send(FutureRecord::to(&events_topic).key(account).payload(&line), Duration::from_secs(10)).await.expect("produce");
    }

    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", format!("{prefix}reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[&messages_topic]).expect("subscribe");
    let mut received: Vec<(String, i32, AccountMessage)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.len() < 3 {
        assert!(Instant::now() < deadline, "received only {received:?}");
        let Ok(Ok(message)) = tokio::time::timeout(Duration::from_secs(1), consumer.recv()).await else { continue };
        let key = String::from_utf8(message.key().unwrap_or_default().to_vec()).unwrap();
        let told: AccountMessage = serde_json::from_slice(message.payload().unwrap_or_default()).unwrap();
        received.push((key, message.partition(), told));
    }
    let _ = stop.send(true);
    projector.await.expect("projector task").expect("projector");

    let meeting_of = |told: &AccountMessage| told.message.data()["meeting_id"].as_str().unwrap_or_default().to_owned();
    received.sort_by_key(|(_, _, told)| meeting_of(told));
    let meetings: Vec<String> = received.iter().map(|(_, _, told)| meeting_of(told)).collect();
    let told: Vec<(&str, &str, &str, &str)> = received
        .iter()
        .zip(&meetings)
        .map(|((key, _, told), meeting)| (key.as_str(), told.account_id.as_str(), told.message.kind.as_str(), meeting.as_str()))
        .collect();
    assert_eq!(
        told,
        [("acc_1", "acc_1", "meeting.created", "mtg_1"), ("acc_2", "acc_2", "meeting.created", "mtg_2"), ("acc_1", "acc_1", "meeting.created", "mtg_3")]
    );
    assert_eq!(received[0].1, received[2].1, "an account's messages share a partition");
    // What a message announces is readable once it is received.
    let readmodel = ReadModel::new(driver);
    for ((_, _, told), meeting_id) in received.iter().zip(&meetings) {
        assert!(readmodel.meeting_detail(&told.account_id, meeting_id).await.unwrap().is_some(), "{meeting_id}");
    }
    let _ = admin.delete_topics(&[&events_topic, &messages_topic], &AdminOptions::new()).await;
}
