//! Section 6: `recap webhooks` against the Kafka projector on the same kind of events,
//! on the real engines. The distributed edition runs the two as roles of their own
//! (Deployments, so on cores of their own in production); here they share the
//! machine's two cores with Kafka and Cassandra.
//!
//! `RECAP_BENCH_WEBHOOK_EVENTS` meetings (20,000) over `RECAP_BENCH_WEBHOOK_ACCOUNTS`
//! accounts (4), one endpoint each at a bare receiver on loopback
//! (`recap_testkit::bench::receiver`): one `meeting.created` message a meeting, one
//! delivery a message. Two rounds, each on topics of its own and fresh meetings:
//!
//! 1. alone: the projector drains the events (from its first applied event to the
//!    last), then `recap webhooks` delivers the messages it produced (from the first
//!    delivery received to the last);
//! 2. together: `recap webhooks` is started and ready first, then the projector; from
//!    the projector's first applied event to the last delivery received.
//!
//! 3. latency: both roles running and warmed up (one delivery an account), meetings are
//!    produced at a tenth of the projector's rate alone, a quarter, then half of it, for
//!    `RECAP_BENCH_WEBHOOK_LATENCY_SECONDS` (10) each, every meeting timed from its send
//!    to Kafka to its delivery's arrival at the receiver; and, to tell the two roles'
//!    shares apart, to its message's timestamp in the message topic (set by the
//!    projector's producer, on the same machine's clock).
//!
//! Each rate is printed with its ratio to the projector's rate alone (together also
//! with its ratio to the projector's rate beside it, and how long after the projector's
//! last event the last delivery came: whether the webhooks role keeps up), and each
//! role's CPU time a message (Kafka's and Cassandra's are not counted).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use recap_schemas::build::{Epoch, Events};
use recap_testkit::bench::receiver::{receiver, Received};

use crate::engines::{self, Role};
use crate::events::Event;
use crate::{env_usize, load, produce, wait_accounted, Bench};

/// The events happen from 20 days before the bench began, a minute apart (the 20,000
/// meetings of a round over the following two weeks), so their messages' ids are of
/// days within the feed's retention, as a live stream's are: a batch's claims of an
/// account and day are read by one scan (docs/webhooks.md). With
/// `RECAP_BENCH_WEBHOOK_PAST=1` they happen from 2026-01-01 (UTC), as a rebuild from an
/// old log meets them: ids of days past the retention, whose claims are read by key.
fn events() -> Events {
    static EVENTS: std::sync::OnceLock<Events> = std::sync::OnceLock::new();
    *EVENTS.get_or_init(|| {
        if std::env::var_os("RECAP_BENCH_WEBHOOK_PAST").is_some_and(|past| past == "1") {
            return Events::new(Epoch::from_unix_seconds(1_767_225_600));
        }
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("a clock after 1970").as_secs() as i64;
        Events::new(Epoch::from_unix_seconds(now - now % 60 - 20 * 24 * 3_600))
    })
}

fn event(envelope: &recap_schemas::Envelope) -> Event {
    let line = serde_json::to_string(envelope).expect("an event line");
    (envelope.event.topic().to_string(), envelope.event.message_key().to_string(), line)
}

/// The endpoint of each account (every round upserts it again: the same event, so
/// stale after the first round), then `meetings` meetings named after `round`.
fn round_events(url: &str, accounts: usize, meetings: usize, round: &str) -> Vec<Event> {
    let endpoints = (0..accounts).map(|account| {
        event(&events().webhook_endpoint(format!("acc_wh{account}"), format!("ep_wh{account}"), url).id(format!("ep_evt_wh{account}")).envelope())
    });
    let meetings = (0..meetings).map(|index| {
        let created = events().minute(index as i64);
        let meeting =
            events().meeting(format!("acc_wh{}", index % accounts), format!("mtg_wh{round}{index:07}")).title(format!("Meeting {index}")).times(created);
        event(&meeting.id(format!("e_wh{round}{index}")).occurred_at(created).envelope())
    });
    endpoints.chain(meetings).collect()
}

fn webhooks_role(bench: &Bench, prefix: &str) -> Role {
    let mut envs = bench.envs(prefix);
    // The receiver is on loopback, over http.
    envs.push(("RECAP_WEBHOOKS_ALLOW_INSECURE".into(), "true".into()));
    Role::start("webhooks", &envs, None)
}

fn cpu_seconds(role: &Role) -> f64 {
    engines::usage(role.pid()).cpu_seconds
}

/// The CPU seconds the local Cassandra has used so far (0 when it is not local).
fn cassandra_seconds() -> f64 {
    engines::cassandra_pid().map_or(0.0, |pid| engines::usage(pid).cpu_seconds)
}

pub fn webhooks_vs_projector(bench: &mut Bench) {
    let meetings = env_usize("RECAP_BENCH_WEBHOOK_EVENTS", 20_000);
    let accounts = env_usize("RECAP_BENCH_WEBHOOK_ACCOUNTS", 4).max(1);
    let received = Arc::new(Received::default());
    let url = receiver(received.clone());
    let events = (meetings + accounts) as u64;
    let per_message = |cpu: f64| cpu * 1e6 / meetings as f64;
    println!("recap webhooks vs the projector: {meetings} meeting.created messages over {accounts} accounts, one endpoint each, bare receiver on loopback");

    // Alone: the projector, then the webhooks role on the messages it produced.
    let prefix = bench.topics("wh0");
    produce(&bench.engines.brokers, &prefix, &round_events(&url, accounts, meetings, "a"));
    let cassandra_before = cassandra_seconds();
    let projector = Role::start("projector", &bench.envs(&prefix), None);
    let (first, done) = wait_accounted(&projector, 0, events, Duration::from_secs(1_800));
    let projected = meetings as f64 / done.duration_since(first).as_secs_f64();
    let (projector_cpu, projector_cassandra) = (cpu_seconds(&projector), cassandra_seconds() - cassandra_before);
    projector.stop();
    received.reset();
    let cassandra_before = cassandra_seconds();
    let webhooks = webhooks_role(bench, &prefix);
    bench.runtime.block_on(received.wait_for(meetings as u64, Duration::from_secs(120)));
    let (first, last) = received.first_and_last().expect("deliveries");
    let delivered = meetings as f64 / last.duration_since(first).as_secs_f64();
    let (webhooks_cpu, webhooks_cassandra) = (cpu_seconds(&webhooks), cassandra_seconds() - cassandra_before);
    webhooks.stop();
    println!(
        "  projector alone          {projected:>8.0} messages/s                            CPU {:>5.0} us a message (whole process), Cassandra's {:>5.0}",
        per_message(projector_cpu),
        per_message(projector_cassandra)
    );
    println!(
        "  recap webhooks alone     {delivered:>8.0} delivered/s   ratio to the projector {:.2} (target >= 1.0)   CPU {:>5.0} us a delivery (whole process), Cassandra's {:>5.0}",
        delivered / projected,
        per_message(webhooks_cpu),
        per_message(webhooks_cassandra)
    );

    // Together: the webhooks role ready and waiting, then the projector.
    let prefix = bench.topics("wh1");
    produce(&bench.engines.brokers, &prefix, &round_events(&url, accounts, meetings, "b"));
    received.reset();
    let webhooks = webhooks_role(bench, &prefix);
    let projector = Role::start("projector", &bench.envs(&prefix), None);
    let (first, done) = wait_accounted(&projector, 0, events, Duration::from_secs(1_800));
    bench.runtime.block_on(received.wait_for(meetings as u64, Duration::from_secs(120)));
    let (_, last) = received.first_and_last().expect("deliveries");
    let together = meetings as f64 / last.saturating_duration_since(first).as_secs_f64();
    let (projector_cpu, webhooks_cpu) = (cpu_seconds(&projector), cpu_seconds(&webhooks));
    projector.stop();
    webhooks.stop();
    // Keeping up with the projector beside it: delivering at its rate, the last
    // delivery a moment after its last event. Against the projector alone, together
    // is bounded by the shared cores (what the webhooks role and its share of Kafka
    // and Cassandra cost comes out of the projector's).
    let beside = meetings as f64 / done.duration_since(first).as_secs_f64();
    println!(
        "  both together            {together:>8.0} delivered/s   ratio to the projector {:.2}   to the projector beside it ({beside:.0} messages/s) {:.2}, the last delivery {:.0} ms after its last event (target: keeps up); CPU {:.0} + {:.0} us a message",
        together / projected,
        together / beside,
        last.saturating_duration_since(done).as_secs_f64() * 1e3,
        per_message(projector_cpu),
        per_message(webhooks_cpu)
    );

    latency(bench, &url, &received, accounts, projected);
}

/// When a meeting's event was sent to Kafka: by the monotonic clock (for its arrival at
/// the receiver) and by the wall clock (for its message's timestamp).
struct Sent {
    at: Instant,
    wall_ms: f64,
}

/// Round 3: event → delivered at a tenth, a quarter and half of `projected` events/s, both
/// roles running.
fn latency(bench: &mut Bench, url: &str, received: &Received, accounts: usize, projected: f64) {
    let seconds = env_usize("RECAP_BENCH_WEBHOOK_LATENCY_SECONDS", 10);
    let prefix = bench.topics("wh2");
    // The endpoints, then a meeting an account: once each is delivered, both roles hold
    // their partitions and every stage is flowing.
    produce(&bench.engines.brokers, &prefix, &round_events(url, accounts, accounts, "w"));
    received.reset();
    let webhooks = webhooks_role(bench, &prefix);
    let projector = Role::start("projector", &bench.envs(&prefix), None);
    bench.runtime.block_on(received.wait_for(accounts as u64, Duration::from_secs(120)));

    let mut phases = Vec::new();
    for (share, round) in [(0.1, "l"), (0.25, "m"), (0.5, "h")] {
        received.reset();
        let rate = projected * share;
        let total = ((rate * seconds as f64) as usize).max(1);
        let events = round_events(url, accounts, total, round).split_off(accounts);
        let (sent, offered_in) = paced(&bench.engines.brokers, &prefix, &events, rate, |index| format!("mtg_wh{round}{index:07}"));
        bench.runtime.block_on(received.wait_for(total as u64, Duration::from_secs(300)));
        phases.push((share, total, offered_in, sent, received.take_first_arrivals()));
    }
    projector.stop();
    webhooks.stop();

    let produced = produced_at(&bench.engines.brokers, &format!("{prefix}{}", recap_projector::kafka::MESSAGES_TOPIC));
    for (share, total, offered_in, sent, first) in phases {
        let mut delivered: Vec<f64> = sent.iter().map(|(meeting, sent)| first[meeting].saturating_duration_since(sent.at).as_secs_f64() * 1e3).collect();
        let mut to_topic: Vec<f64> = sent.iter().filter_map(|(meeting, sent)| Some(*produced.get(meeting)? as f64 - sent.wall_ms)).collect();
        let (p50, p99, max) = load::percentiles(&mut delivered);
        let (topic_p50, topic_p99, _) = load::percentiles(&mut to_topic);
        println!(
            "  event -> delivered at {share} of the projector's rate ({:.0} events/s offered, {total} events in {:.1} s): p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms (event -> message in the topic: p50 {topic_p50:.1} ms, p99 {topic_p99:.1} ms)",
            total as f64 / offered_in.as_secs_f64(),
            offered_in.as_secs_f64()
        );
    }
}

/// Sends `events` at `rate` a second (what is due every millisecond, no linger), each
/// timed by the meeting `meeting(index)` names; returns the times and how long it took.
fn paced(brokers: &str, prefix: &str, events: &[Event], rate: f64, meeting: impl Fn(usize) -> String) -> (HashMap<String, Sent>, Duration) {
    let producer = engines::bulk_producer(brokers, 0);
    let mut sent = HashMap::with_capacity(events.len());
    let started = Instant::now();
    let mut next = 0;
    while next < events.len() {
        let due = ((started.elapsed().as_secs_f64() * rate) as usize + 1).min(events.len());
        for (index, (topic, key, line)) in events.iter().enumerate().take(due).skip(next) {
            let wall_ms = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_secs_f64() * 1e3;
            sent.insert(meeting(index), Sent { at: Instant::now(), wall_ms });
            engines::send(&producer, &format!("{prefix}{topic}"), key, line);
        }
        next = due;
        std::thread::sleep(Duration::from_millis(1));
    }
    let offered_in = started.elapsed();
    engines::flush(&producer);
    (sent, offered_in)
}

/// The timestamp (milliseconds, set by the projector's producer) of each message in
/// `topic`, by the meeting it announces: every partition read from its start (no group)
/// until the topic has been quiet for two seconds.
fn produced_at(brokers: &str, topic: &str) -> HashMap<String, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Message as _, Offset, TopicPartitionList};
    // A group id the consumer never joins (it assigns itself every partition) nor
    // commits for, which librdkafka still wants.
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("{topic}.timestamps"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("a consumer of the message topic");
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("the message topic's partitions");
    let mut partitions = TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|topic| topic.partitions()) {
        partitions.add_partition_offset(topic, partition.id(), Offset::Beginning).expect("a partition to read");
    }
    consumer.assign(&partitions).expect("reading the message topic");
    let mut produced = HashMap::new();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(2) {
        let Some(Ok(record)) = consumer.poll(Duration::from_millis(100)) else { continue };
        quiet_since = Instant::now();
        let (Some(timestamp), Some(payload)) = (record.timestamp().to_millis(), record.payload()) else { continue };
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(payload) else { continue };
        if let Some(meeting) = message.pointer("/message/data/meeting_id").and_then(serde_json::Value::as_str) {
            produced.insert(meeting.to_owned(), timestamp);
        }
    }
    produced
}
