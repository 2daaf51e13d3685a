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

// `recap events dead-letters --kafka` reads the topic through `read_dead_letters`: every
// partition to its end (an empty one too), each in its order, a letter the projector sent
// again read once, a record without the projector's headers named by its own place, the
// exact bytes of an event that is not UTF-8 kept; nothing committed to the group name
// librdkafka's assignment wants; a topic that does not exist holds none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Kafka broker (`make up`)"]
async fn dead_letters_are_read_from_every_partition_once_each_and_nothing_is_committed() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::{FutureProducer, FutureRecord};
    use recap_projector::kafka::read_dead_letters;
    let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or_default();
    let topic = format!("t{}_letters{}.recap.deadletter.v1", std::process::id(), micros % 1_000_000_000);
    let client = KafkaClient::new(engine_setting("RECAP_KAFKA_BROKERS", "127.0.0.1:9092"));
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = client.config().create().expect("admin");
    let results = admin.create_topics(&[NewTopic::new(&topic, 3, TopicReplication::Fixed(1))], &AdminOptions::new()).await.expect("create topic");
    assert!(results.iter().all(Result::is_ok), "{results:?}");

    let producer: FutureProducer = client.config().create().expect("producer");
    let letter = |source: (&str, &str, &str), reason: &str| {
        OwnedHeaders::new()
            .insert(Header { key: "source_topic", value: Some(source.0) })
            .insert(Header { key: "source_partition", value: Some(source.1) })
            .insert(Header { key: "source_offset", value: Some(source.2) })
            .insert(Header { key: "reason", value: Some(reason) })
    };
    let torn: Vec<u8> = [&br#"{"id":"e2","type":"meeting.upserted","title":"caf"#[..], &[0xC3]].concat();
    let records: Vec<(i32, Vec<u8>, Option<OwnedHeaders>)> = vec![
        (0, br#"{"id":"e1"}"#.to_vec(), Some(letter(("recap.meetings.v1", "1", "5"), "envelope: missing field `type`"))),
        (0, br#"{"id":"e1"}"#.to_vec(), Some(letter(("recap.meetings.v1", "1", "5"), "envelope: missing field `type`"))),
        (0, b"put there by hand".to_vec(), None),
        (2, torn.clone(), Some(letter(("recap.accounts.v1", "0", "7"), "not UTF-8"))),
    ];
    for (partition, payload, headers) in &records {
        let mut record = FutureRecord::<(), _>::to(&topic).partition(*partition).payload(payload);
        if let Some(headers) = headers {
            record = record.headers(headers.clone());
        }
        producer.send(record, Duration::from_secs(10)).await.expect("produced");
    }

    let letters = read_dead_letters(&client, &topic, Duration::from_secs(30)).await.expect("read").expect("the topic exists");
    let summary: Vec<(String, u32, u64, String, Vec<u8>)> =
        letters.iter().map(|letter| (letter.topic.clone(), letter.partition, letter.offset, letter.reason.clone(), letter.bytes())).collect();
    assert_eq!(
        summary,
        vec![
            ("recap.meetings.v1".into(), 1, 5, "envelope: missing field `type`".into(), br#"{"id":"e1"}"#.to_vec()),
            (
                topic.clone(),
                0,
                2,
                "not a dead letter of recap: no source_topic, source_partition and source_offset headers".into(),
                b"put there by hand".to_vec()
            ),
            ("recap.accounts.v1".into(), 0, 7, "not UTF-8".into(), torn),
        ]
    );
    assert!(letters[2].raw_base64.is_some() && letters[0].raw_base64.is_none());

    let group: BaseConsumer = client.config().set("group.id", "recap-dead-letters-reader").create().expect("consumer");
    let mut partitions = rdkafka::TopicPartitionList::new();
    for partition in 0..3 {
        partitions.add_partition(&topic, partition);
    }
    let committed = group.committed_offsets(partitions, Duration::from_secs(10)).expect("committed offsets");
    assert!(committed.elements().iter().all(|element| element.offset() == rdkafka::Offset::Invalid), "{committed:?}");

    assert_eq!(read_dead_letters(&client, &format!("{topic}.absent"), Duration::from_secs(30)).await, Ok(None));
    let _ = admin.delete_topics(&[&topic], &AdminOptions::new()).await;
}
