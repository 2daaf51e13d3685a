//! The distributed edition's message log against the real broker (`make up`): messages
//! produced to `<prefix>recap.messages.v1` reach their accounts' feeds at their offsets
//! and are delivered from every partition; after a restart the group resumes after its
//! committed offsets. Run with `cargo test -p recap-webhooks --test kafka -- --ignored`
//! (with `RECAP_TEST_WORLD=cassandra` over Cassandra).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use recap_readmodel::messages::{AccountMessage, MessageKind};
use recap_testkit::cluster::{create_topics, delete_topics, run_id};
use recap_webhooks::kafka::KafkaReaderConfig;
use recap_webhooks::ManualClock;
use tokio::sync::watch;

fn brokers() -> String {
    std::env::var("RECAP_KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// Produces each message keyed by its account; the (partition, offset) of each.
async fn produce(brokers: &str, topic: &str, messages: &[AccountMessage]) -> Vec<(i32, i64)> {
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", brokers).set("acks", "all").create().unwrap();
    let mut placed = Vec::new();
    for message in messages {
        let value = serde_json::to_string(message).unwrap();
        let record = FutureRecord::to(topic).key(&message.account_id).payload(&value);
        let delivery = producer.send(record, Duration::from_secs(10)).await.map_err(|(error, _)| error).unwrap();
        placed.push((delivery.partition, delivery.offset));
    }
    placed
}

fn start_distributed(setup: &Setup, clock: &ManualClock, prefix: &str) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let runtime = runtime(setup, clock, Duration::from_secs(5));
    let kafka = KafkaReaderConfig {
        client: recap_kafka::KafkaClient::new(brokers()),
        topic_prefix: prefix.to_owned(),
        max_batch: 50,
        batch_wait: Duration::ZERO,
        max_poll_interval: Duration::from_secs(300),
    };
    let (stop, stopped) = watch::channel(false);
    (stop, tokio::spawn(async move { runtime.run_distributed(kafka, stopped).await.unwrap() }))
}

#[test]
#[ignore = "needs the real Kafka broker (`make up`)"]
fn messages_reach_the_feed_at_their_offsets_from_every_partition_and_a_restart_resumes_after_the_commit() {
    let brokers = brokers();
    let prefix = format!("{}.", run_id());
    let topic = format!("{prefix}recap.messages.v1");
    create_topics(&brokers, &[(topic.clone(), 3)]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let setup = setup().await;
        let receiver = Receiver::start(&[]).await;
        let accounts: Vec<String> = (0..6).map(|index| format!("acc_{index}")).collect();
        for account in &accounts {
            setup.endpoint(account, "ep", &receiver.url, &[], true, 1).await;
        }
        let messages: Vec<AccountMessage> = (0..30)
            .map(|index| message(&accounts[index % accounts.len()], MessageKind::MeetingUpdated, &format!("evt_{index}"), &format!("mtg_{index}")))
            .collect();
        let placed = produce(&brokers, &topic, &messages).await;
        let partitions: std::collections::BTreeSet<i32> = placed.iter().map(|(partition, _)| *partition).collect();
        assert!(partitions.len() > 1, "the accounts spread over several partitions: {partitions:?}");

        let clock = ManualClock::at(START);
        let (stop, task) = start_distributed(&setup, &clock, &prefix);
        receiver.wait_for(|received| received.len() == messages.len()).await;

        let mut expected: BTreeMap<&str, Vec<(i64, String)>> = BTreeMap::new();
        for (message, (_, offset)) in messages.iter().zip(&placed) {
            expected.entry(message.account_id.as_str()).or_default().push((*offset, message.message.id.clone()));
        }
        for (account, entries) in &expected {
            eventually("the feed head covers the account's messages", || async {
                setup.webhooks.head(account).await.unwrap() == entries.last().map(|(offset, _)| *offset)
            })
            .await;
            let page = setup.webhooks.feed_page(account, None, 100, &[]).await.unwrap();
            let seqs: Vec<(i64, String)> = page.messages.iter().map(|(seq, message)| (*seq, message.id.clone())).collect();
            assert_eq!(&seqs, entries, "{account}'s feed is its messages at their offsets");
        }
        for partition in &partitions {
            let shard = partition.to_string();
            eventually("every partition's deliveries are done", || async {
                setup.webhooks.scheduled(&shard, START - 3_600_000_000, START + 3_600_000_000).await.unwrap().is_empty()
            })
            .await;
        }
        let _ = stop.send(true);
        task.await.unwrap();

        let later = message("acc_0", MessageKind::MeetingDeleted, "evt_later", "mtg_0");
        produce(&brokers, &topic, std::slice::from_ref(&later)).await;
        let (stop, task) = start_distributed(&setup, &clock, &prefix);
        let received = receiver.wait_for(|received| received.len() > messages.len()).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let _ = stop.send(true);
        task.await.unwrap();
        assert_eq!(receiver.received().len(), messages.len() + 1, "the committed messages are not read again");
        assert_eq!(received.last().unwrap().header("webhook-id"), later.message.id);
    });
    delete_topics(&brokers, &[topic]);
}
