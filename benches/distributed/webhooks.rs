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
//! Each rate is printed with its ratio to the projector's rate alone, and each role's
//! CPU time a message (Kafka's and Cassandra's are not counted).

use std::sync::Arc;
use std::time::Duration;

use recap_schemas::build::{Epoch, Events};
use recap_testkit::bench::receiver::{receiver, Received};

use crate::engines::{self, Role};
use crate::events::Event;
use crate::{env_usize, produce, wait_accounted, Bench};

/// The events happen on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

fn event(envelope: &recap_schemas::Envelope) -> Event {
    let line = serde_json::to_string(envelope).expect("an event line");
    (envelope.event.topic().to_string(), envelope.event.message_key().to_string(), line)
}

/// The endpoint of each account (every round upserts it again: the same event, so
/// stale after the first round), then `meetings` meetings named after `round`.
fn round_events(url: &str, accounts: usize, meetings: usize, round: &str) -> Vec<Event> {
    let endpoints = (0..accounts).map(|account| {
        event(&EVENTS.webhook_endpoint(format!("acc_wh{account}"), format!("ep_wh{account}"), url).id(format!("ep_evt_wh{account}")).envelope())
    });
    let meetings = (0..meetings).map(|index| {
        let created = EVENTS.minute(index as i64);
        let meeting =
            EVENTS.meeting(format!("acc_wh{}", index % accounts), format!("mtg_wh{round}{index:07}")).title(format!("Meeting {index}")).times(created);
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
        "  recap webhooks alone     {delivered:>8.0} delivered/s   ratio to the projector {:.2}   CPU {:>5.0} us a delivery (whole process), Cassandra's {:>5.0}",
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
    println!(
        "  both together            {together:>8.0} delivered/s   ratio to the projector {:.2}   (the projector alone in this round: {:.0} messages/s; CPU {:.0} + {:.0} us a message; target >= 1.0)",
        together / projected,
        meetings as f64 / done.duration_since(first).as_secs_f64(),
        per_message(projector_cpu),
        per_message(webhooks_cpu)
    );
}
