//! The event stream the distributed suites and the soak produce, and the comparison of
//! a cluster's read model with the reference fold of what was produced.

use std::sync::Arc;
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::{Batch, Driver, ReadModel};
use recap_schemas::Envelope;
use recap_scylla::{ScyllaConfig, ScyllaDriver};

use crate::cluster::Cluster;
use crate::events::*;
use crate::process::EventLine;
use crate::snapshot::{snapshot, Universe};

/// The accounts of [`stream`], each with the token it creates for it.
pub const STREAM_OWNERS: [&str; 6] = ["acc_a", "acc_b", "acc_c", "acc_d", "acc_e", "acc_f"];

pub fn stream_token(account_id: &str) -> String {
    format!("svc_pat_stream_{account_id}_0123456789abcdef")
}

pub fn stream_tokens() -> Vec<String> {
    STREAM_OWNERS.iter().map(|account_id| stream_token(account_id)).collect()
}

/// A stream of many events of every kind over a few accounts and one team.
pub fn stream(count: usize, seed: usize) -> Vec<Envelope> {
    // Six owners and direct shares beside the team's: keys (account_id, share_id) that
    // land on every partition of the 3-partition topics, so that every projector of a
    // rebalanced group has events to apply.
    const OWNERS: [&str; 6] = STREAM_OWNERS;
    let owner = |n: usize| OWNERS[n % OWNERS.len()];
    let mut lines = vec![team("team_1", "Team", Some("business"), true, 1)];
    for (index, account_id) in OWNERS.iter().enumerate() {
        lines.push(account(account_id, Some(if index % 2 == 0 { "flow" } else { "enterprise" }), None, 1));
        lines.push(token_created(account_id, &format!("tok_{account_id}"), &stream_token(account_id), 1));
    }
    lines.push(member("team_1", "acc_a", 1));
    lines.push(member("team_1", "acc_b", 1));
    let mut versions = std::collections::HashMap::<String, u64>::new();
    for index in 0..count {
        let n = (index * 7919 + seed) % 1_000;
        let mut next = |key: String| {
            let version = versions.entry(key).or_insert(1);
            *version += 1;
            *version
        };
        let line = match index % 10 {
            0..=5 => {
                let id = format!("mtg_{n}");
                let items = [item(&format!("ai_{n}"), ["todo", "in_progress", "done"][index % 3], Some("hum_1"), n as i64)];
                let series = n.is_multiple_of(4).then(|| ["ser_a", "ser_b"][n / 4 % 2]);
                let draft = meeting_draft(owner(n), &id, if n.is_multiple_of(3) { "Budget review" } else { "Design sync" }, n as i64);
                draft.action_items(items).series_id(series).version(next(id.clone())).envelope()
            }
            6 => transcript(owner(n), &format!("mtg_{n}"), "hello world", Some(vec![word("hello", 0)]), next(format!("mtg_{n}"))),
            7 => meeting_deleted(owner(n), &format!("mtg_{n}"), next(format!("mtg_{n}"))),
            8 => {
                let id = format!("shr_{}", n % 50);
                // A third of the shares go directly to two accounts, keyed by share id.
                let direct = (n % 50).is_multiple_of(3);
                let team = if direct { None } else { Some(("team_1", "Team")) };
                let recipients = if direct { vec!["acc_a", "acc_c"] } else { vec![] };
                share(&id, "acc_b", n as i64).title("Planning").team(team).recipients(recipients).text("budget decisions").version(next(id.clone())).envelope()
            }
            _ => team_item("team_1", &format!("tai_{}", n % 30), "todo", n as i64, next(format!("tai_{}", n % 30))),
        };
        lines.push(line);
    }
    lines
}

/// Where the cluster's read model differs from the reference fold, if anywhere.
pub fn difference<E: EventLine>(cluster: &Cluster, events: &[E]) -> Option<String> {
    let envelopes: Vec<Envelope> = events.iter().filter_map(|event| Envelope::decode(event.event_line().as_bytes()).ok()).collect();
    let universe = Universe::of(&envelopes);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (expected, actual) = runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let reference: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("reference.lmdb")).unwrap());
        let mut batch = Batch::new(reference.clone());
        for (position, envelope) in envelopes.iter().enumerate() {
            batch.apply(envelope, position as i64 + 1).await.unwrap();
        }
        reference.write(batch.into_mutations()).await.unwrap();
        let expected = snapshot(&ReadModel::new(reference), &universe).await.unwrap();
        let config = ScyllaConfig {
            cluster: cluster.engines.scylla(),
            keyspace: cluster.keyspace.clone(),
            consistency: recap_scylla::Consistency::LocalQuorum,
            timeout: Duration::from_secs(10),
            write_concurrency: 64,
        };
        let driver: Arc<dyn Driver> = Arc::new(ScyllaDriver::connect(config).await.unwrap());
        let actual = snapshot(&ReadModel::new(driver), &universe).await.unwrap();
        (expected, actual)
    });
    if expected == actual {
        return None;
    }
    let first = expected.lines().zip(actual.lines()).find(|(a, b)| a != b);
    Some(format!("the read model differs from the reference fold: {first:?} ({} vs {} lines)", expected.lines().count(), actual.lines().count()))
}
