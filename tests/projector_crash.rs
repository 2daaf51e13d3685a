//! Crash safety of the embedded edition (contract rule 6: "Nothing is lost and nothing
//! counts twice across crashes and restarts"): `recap serve` is killed with SIGKILL in
//! the middle of projecting a large file, several times, restarted, and then every
//! query is compared with a run that was never killed. The committed counters prove
//! exactly-once: a batch applied twice would count its events again as stale.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use recap_lmdb::EmbeddedDriver;
use recap_projector::{EmbeddedProjector, EventLog, LoopConfig};
use recap_readmodel::{Driver, ReadModel};
use recap_schemas::Envelope;
use recap_testkit::events::*;
use recap_testkit::server::Server;
use recap_testkit::snapshot::{snapshot, Universe};

/// A large, varied stream: meetings with items and transcripts, updates, deletes,
/// standalone items, teams, members, shares and team items over many accounts.
fn large_stream(events: usize) -> Vec<Envelope> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut lines = Vec::with_capacity(events);
    let mut versions = std::collections::HashMap::<String, u64>::new();
    let mut next = |key: String| {
        let version = versions.entry(key).or_insert(0);
        *version += 1;
        *version
    };
    for account in 0..20 {
        lines.push(account_event(account, next(format!("acc{account}"))));
    }
    lines.push(team("team_a", "A", Some("business"), true, next("team_a".into())));
    lines.push(team("team_b", "B", None, false, next("team_b".into())));
    while lines.len() < events {
        let account = rng.random_range(0..20);
        let acc = format!("acc_{account}");
        match rng.random_range(0..100) {
            0..=59 => {
                let meeting = rng.random_range(0..3_000);
                let id = format!("mtg_{meeting}");
                let owner = format!("acc_{}", meeting % 20);
                let items: Vec<_> = (0..rng.random_range(0..3))
                    .map(|i| item(&format!("ai_{meeting}_{i}"), ["todo", "in_progress", "done"][i % 3], Some("hum_1"), meeting as i64))
                    .collect();
                let draft = meeting_draft(&owner, &id, if meeting % 3 == 0 { "Budget review" } else { "Design sync" }, meeting as i64);
                lines.push(draft.series_id((meeting % 10 == 0).then_some("ser_x")).action_items(items).version(next(id.clone())).envelope());
            }
            60..=69 => {
                let meeting = rng.random_range(0..3_000);
                let id = format!("mtg_{meeting}");
                lines.push(transcript(
                    &format!("acc_{}", meeting % 20),
                    &id,
                    "hello world",
                    Some(vec![word("hello", 0), word("world", 300)]),
                    next(id.clone()),
                ));
            }
            70..=72 => {
                let meeting = rng.random_range(0..3_000);
                let id = format!("mtg_{meeting}");
                lines.push(meeting_deleted(&format!("acc_{}", meeting % 20), &id, next(id.clone())));
            }
            73..=79 => {
                lines.push(action_item(&acc, item(&format!("solo_{account}_{}", rng.random_range(0..50)), "todo", None, 5), next(format!("solo{account}"))))
            }
            80..=87 => {
                let team_id = if rng.random_bool(0.5) { "team_a" } else { "team_b" };
                let who = format!("acc_{}", rng.random_range(0..20));
                if rng.random_bool(0.7) {
                    lines.push(member(team_id, &who, next(format!("{team_id}/{who}"))));
                } else {
                    lines.push(member_removed(team_id, &who, next(format!("{team_id}/{who}"))));
                }
            }
            88..=96 => {
                let share_number = rng.random_range(0..400);
                let id = format!("shr_{share_number}");
                let team = (share_number % 2 == 0).then_some(("team_a", "A"));
                let draft = share(&id, &acc, share_number as i64).title("Planning notes").team(team).recipients(["acc_1", "acc_2"]).text("Decisions\nbudget");
                lines.push(draft.version(next(id.clone())).envelope());
            }
            _ => {
                let item_id = format!("tai_{}", rng.random_range(0..100));
                lines.push(team_item("team_a", &item_id, "todo", 3, next(item_id.clone())));
            }
        }
    }
    lines
}

fn account_event(index: usize, version: u64) -> Envelope {
    account(&format!("acc_{index}"), Some("flow"), None, version)
}

fn store_snapshot(store: &std::path::Path, universe: &Universe) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(store).unwrap());
        snapshot(&ReadModel::new(driver), universe).await.unwrap()
    })
}

#[test]
fn kill_9_mid_projection_loses_nothing_and_applies_nothing_twice() {
    let lines = large_stream(24_000);
    let mut server = Server::start();
    server.append(&lines);
    let log_length = server.progress()["log_length"].as_u64().unwrap();
    let mut kills = 0;
    // Kill at three points of the projection, each time restarting over the same dir.
    for fraction in [0.15, 0.45, 0.75] {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let position = server.progress()["position"].as_u64().unwrap();
            if position as f64 >= log_length as f64 * fraction || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let position = server.progress()["position"].as_u64().unwrap();
        if position < log_length {
            server.kill9();
            kills += 1;
        }
        server.restart();
    }
    assert!(kills >= 1, "the projection finished before any kill: make the stream larger");
    server.wait_caught_up();
    let killed_counters = server.progress();
    assert!(server.stop().success());

    // The run that was never killed: the same log, projected once in process.
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_log = reference_dir.path().join("events.log");
    std::fs::copy(server.data_dir.join("events.log"), &reference_log).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let reference_progress = runtime.block_on(async {
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&reference_dir.path().join("store.lmdb")).unwrap());
        let projector = EmbeddedProjector::new(driver, EventLog::new(&reference_log), reference_dir.path().join("deadletter.jsonl"), LoopConfig::default());
        projector.drain().await.unwrap()
    });
    for (name, expected) in [("applied", reference_progress.applied), ("stale", reference_progress.stale), ("position", reference_progress.position)] {
        assert_eq!(killed_counters[name].as_u64(), Some(expected), "{name} after {kills} kills");
    }
    let universe = Universe::of(&lines);
    let killed = store_snapshot(&server.data_dir.join("store.lmdb"), &universe);
    let reference = store_snapshot(&reference_dir.path().join("store.lmdb"), &universe);
    assert!(killed.len() > 100_000, "the snapshot covers a real world ({} bytes)", killed.len());
    if killed != reference {
        let first = killed.lines().zip(reference.lines()).find(|(a, b)| a != b);
        panic!("the killed run differs from the reference: {first:?}");
    }
}
