//! Fidelity: the read model converges to the same answers whatever the interleaving of
//! message keys, with duplicates and replayed suffixes (docs/events.md, Transport:
//! "the projector must not rely on order across keys, and must converge to the same
//! state whatever the interleaving of different keys"; rules 1, 2 and 6). Each event is
//! applied at its offset in its key's stream, as Kafka offsets are ordered only within a
//! partition, so a share that moves between keys is covered as Kafka delivers it.

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use recap_schemas::Envelope;
use recap_testkit::snapshot::{snapshot, Universe};

const ACCOUNTS: [&str; 3] = ["acc_a", "acc_b", "acc_c"];
const TEAMS: [&str; 2] = ["team_x", "team_y"];
const WORDS: [&str; 4] = ["budget", "design", "hiring", "roadmap"];
const STATUSES: [&str; 3] = ["todo", "in_progress", "done"];

#[derive(Clone, Debug)]
enum Op {
    Account(usize, Option<usize>),
    TokenCreate(usize),
    TokenRevoke(usize),
    MeetingUpsert { meeting: usize, word: usize, created: i64, series: bool, items: Vec<(usize, usize, Option<usize>)> },
    Transcript(usize, bool),
    MeetingDelete(usize),
    ItemUpsert(usize, usize, Option<usize>),
    ItemDelete(usize),
    TeamUpsert(usize, bool, bool),
    TeamDelete(usize),
    MemberUpsert(usize, usize),
    MemberRemove(usize, usize),
    Share { share: usize, owner: usize, team: Option<usize>, recipients: Vec<usize>, word: usize, published: i64 },
    Unshare(usize),
    TeamItemUpsert(usize, usize),
    TeamItemDelete(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, proptest::option::of(0..3usize)).prop_map(|(a, p)| Op::Account(a, p)),
        (0..4usize).prop_map(Op::TokenCreate),
        (0..4usize).prop_map(Op::TokenRevoke),
        (0..6usize, 0..4usize, 0..20i64, any::<bool>(), proptest::collection::vec((0..6usize, 0..3usize, proptest::option::of(0..2usize)), 0..3))
            .prop_map(|(meeting, word, created, series, items)| Op::MeetingUpsert { meeting, word, created, series, items }),
        (0..6usize, any::<bool>()).prop_map(|(m, w)| Op::Transcript(m, w)),
        (0..6usize).prop_map(Op::MeetingDelete),
        (0..4usize, 0..3usize, proptest::option::of(0..2usize)).prop_map(|(i, s, a)| Op::ItemUpsert(i, s, a)),
        (0..4usize).prop_map(Op::ItemDelete),
        // A team that cannot collaborate now and then (a quarter of its upserts).
        (0..2usize, any::<bool>(), 0..4u8).prop_map(|(t, i, c)| Op::TeamUpsert(t, i, c != 0)),
        (0..2usize).prop_map(Op::TeamDelete),
        (0..2usize, 0..3usize).prop_map(|(t, a)| Op::MemberUpsert(t, a)),
        (0..2usize, 0..3usize).prop_map(|(t, a)| Op::MemberRemove(t, a)),
        (0..4usize, 0..3usize, proptest::option::of(0..2usize), proptest::collection::vec(0..3usize, 0..3), 0..4usize, 0..20i64)
            .prop_map(|(share, owner, team, recipients, word, published)| Op::Share { share, owner, team, recipients, word, published }),
        (0..4usize).prop_map(Op::Unshare),
        (0..4usize, 0..3usize).prop_map(|(i, s)| Op::TeamItemUpsert(i, s)),
        (0..4usize).prop_map(Op::TeamItemDelete),
    ]
}

/// Turns operations into envelopes with strictly increasing versions per entity, each
/// with the (topic, key) it travels under.
fn history(ops: &[Op]) -> Vec<((String, String), Envelope)> {
    let mut versions: BTreeMap<String, u64> = BTreeMap::new();
    let mut next = |entity: String| {
        let version = versions.entry(entity).or_insert(0);
        *version += 1;
        *version
    };
    let mut share_keys: BTreeMap<usize, String> = BTreeMap::new();
    let mut out = Vec::new();
    for op in ops {
        let (key, envelope) = match op {
            Op::Account(a, plan) => {
                let tier = plan.map(|p| ["flow", "enterprise", "starter"][p]);
                (("accounts", ACCOUNTS[*a].to_string()), account(ACCOUNTS[*a], tier).version(next(format!("acc{a}"))).envelope())
            }
            Op::TokenCreate(t) => {
                let acc = ACCOUNTS[t % 3];
                let data = token_created(acc, format!("tok_{t}"), &format!("{:064x}", t + 1));
                (("accounts", acc.to_string()), data.version(next(format!("tok{t}"))).envelope())
            }
            Op::TokenRevoke(t) => {
                let acc = ACCOUNTS[t % 3];
                (("accounts", acc.to_string()), token_revoked(acc, format!("tok_{t}")).version(next(format!("tok{t}"))).envelope())
            }
            Op::MeetingUpsert { meeting: m, word, created, series, items } => {
                let acc = ACCOUNTS[m % 3];
                // Item ids are unique within a meeting snapshot.
                let mut by_id = BTreeMap::new();
                for (i, s, assignee) in items {
                    by_id.insert(*i, item(&format!("mi_{m}_{i}"), STATUSES[*s], assignee.map(|a| ["hum_1", "hum_2"][a]), *created + *i as i64));
                }
                let items: Vec<_> = by_id.into_values().collect();
                let title = format!("{} meeting {m}", WORDS[*word]);
                let data = common::meeting(acc, &format!("mtg_{m}"), &title, *created, series.then_some("ser_1"), items);
                (("meetings", acc.to_string()), data.version(next(format!("mtg{m}"))).envelope())
            }
            Op::Transcript(m, with_words) => {
                let acc = ACCOUNTS[m % 3];
                let words = with_words.then(|| vec![EVENTS.word("hello", 0, 100, "mic")]);
                let data = EVENTS.transcript(acc, format!("mtg_{m}"), "hello").words(words);
                (("meetings", acc.to_string()), data.version(next(format!("mtg{m}"))).envelope())
            }
            Op::MeetingDelete(m) => {
                let acc = ACCOUNTS[m % 3];
                (("meetings", acc.to_string()), EVENTS.meeting_deleted(acc, format!("mtg_{m}")).version(next(format!("mtg{m}"))).envelope())
            }
            Op::ItemUpsert(i, s, assignee) => {
                let acc = ACCOUNTS[i % 3];
                let data = EVENTS.action_item(acc, item(&format!("ai_{i}"), STATUSES[*s], assignee.map(|a| ["hum_1", "hum_2"][a]), *i as i64));
                (("meetings", acc.to_string()), data.version(next(format!("ai{i}"))).envelope())
            }
            Op::ItemDelete(i) => {
                let acc = ACCOUNTS[i % 3];
                (("meetings", acc.to_string()), EVENTS.action_item_deleted(acc, format!("ai_{i}")).version(next(format!("ai{i}"))).envelope())
            }
            Op::TeamUpsert(t, includes, collaborates) => {
                (("sharing", TEAMS[*t].to_string()), team_collaborating(TEAMS[*t], *includes, *collaborates).version(next(format!("team{t}"))).envelope())
            }
            Op::TeamDelete(t) => (("sharing", TEAMS[*t].to_string()), EVENTS.team_deleted(TEAMS[*t]).version(next(format!("team{t}"))).envelope()),
            Op::MemberUpsert(t, a) => {
                let data = EVENTS.member(TEAMS[*t], ACCOUNTS[*a]);
                (("sharing", TEAMS[*t].to_string()), data.version(next(format!("member{t}{a}"))).envelope())
            }
            Op::MemberRemove(t, a) => {
                let data = EVENTS.member_removed(TEAMS[*t], ACCOUNTS[*a]);
                (("sharing", TEAMS[*t].to_string()), data.version(next(format!("member{t}{a}"))).envelope())
            }
            Op::Share { share: s, owner, team, recipients, word, published } => {
                let recipients: Vec<&str> = recipients.iter().map(|r| ACCOUNTS[*r]).collect();
                let team_id = team.map(|t| TEAMS[t]);
                let data = common::share(&format!("shr_{s}"), ACCOUNTS[*owner], team_id, &recipients, &format!("{} note {s}", WORDS[*word]), *published);
                let key = team_id.map(str::to_string).unwrap_or_else(|| format!("shr_{s}"));
                share_keys.insert(*s, key.clone());
                (("sharing", key), data.version(next(format!("share{s}"))).envelope())
            }
            Op::Unshare(s) => {
                let key = share_keys.get(s).cloned().unwrap_or_else(|| format!("shr_{s}"));
                (("sharing", key), EVENTS.unshared(format!("shr_{s}")).version(next(format!("share{s}"))).envelope())
            }
            Op::TeamItemUpsert(i, s) => {
                let team_id = TEAMS[i % 2];
                (("sharing", team_id.to_string()), team_item(team_id, &format!("tai_{i}"), STATUSES[*s], *i as i64).version(next(format!("tai{i}"))).envelope())
            }
            Op::TeamItemDelete(i) => {
                let team_id = TEAMS[i % 2];
                (("sharing", team_id.to_string()), EVENTS.team_item_deleted(team_id, format!("tai_{i}")).version(next(format!("tai{i}"))).envelope())
            }
        };
        out.push(((key.0.to_string(), key.1), envelope));
    }
    out
}

/// Interleaves the per-key streams at random (keeping each key's order), then delivers
/// random earlier events again and replays a suffix of some keys. Each event keeps the
/// position it has in its key's stream, as a Kafka offset is only ordered within its
/// partition (one key per partition here: the worst case).
fn shuffled(events: &[((String, String), Envelope)], seed: u64) -> Vec<(Envelope, i64)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut streams: BTreeMap<&(String, String), Vec<(&Envelope, i64)>> = BTreeMap::new();
    for (key, envelope) in events {
        let stream = streams.entry(key).or_default();
        let offset = stream.len() as i64 + 1;
        stream.push((envelope, offset));
    }
    let mut streams: Vec<Vec<(&Envelope, i64)>> = streams.into_values().collect();
    for stream in &mut streams {
        if rng.random_bool(0.5) && !stream.is_empty() {
            let from = rng.random_range(0..stream.len());
            let suffix: Vec<(&Envelope, i64)> = stream[from..].to_vec();
            stream.extend(suffix);
        }
    }
    let mut cursors = vec![0usize; streams.len()];
    let mut delivered: Vec<(Envelope, i64)> = Vec::new();
    loop {
        let open: Vec<usize> = (0..streams.len()).filter(|&i| cursors[i] < streams[i].len()).collect();
        let Some(&pick) = open.choose(&mut rng) else { break };
        let (envelope, offset) = streams[pick][cursors[pick]];
        delivered.push((envelope.clone(), offset));
        cursors[pick] += 1;
        if rng.random_bool(0.1) {
            let again = delivered[rng.random_range(0..delivered.len())].clone();
            delivered.push(again);
        }
    }
    delivered
}

fn run(ops: Vec<Op>, seed: u64, batch_size: usize) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let events = history(&ops);
        let in_order: Vec<Envelope> = events.iter().map(|(_, envelope)| envelope.clone()).collect();
        let universe = Universe::of(&in_order);
        let mut reference = Store::new();
        reference.apply(&in_order, 1).await;
        let mut other = Store::new();
        other.apply_at(&shuffled(&events, seed), batch_size).await;
        let expected = snapshot(&reference.readmodel, &universe).await.expect("snapshot");
        let actual = snapshot(&other.readmodel, &universe).await.expect("snapshot");
        if expected != actual {
            let diff: Vec<String> =
                expected.lines().zip(actual.lines()).filter(|(a, b)| a != b).take(5).map(|(a, b)| format!("in order: {a}\nshuffled: {b}")).collect();
            return Err(TestCaseError::fail(format!("snapshots differ:\n{}", diff.join("\n"))));
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Any interleaving of keys, with duplicates and replayed suffixes, in batches of
    /// any size, answers every query like the in-order run.
    #[test]
    fn every_query_answers_the_same_whatever_the_interleaving(ops in proptest::collection::vec(op(), 1..60), seed: u64, batch_size in 1..20usize) {
        run(ops, seed, batch_size)?;
    }
}
