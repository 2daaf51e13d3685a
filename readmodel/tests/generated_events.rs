//! Generated events: the contract's examples (one per type) with any of their values
//! or subtrees replaced by odd ones (empty, longest and over-long identifiers, extreme
//! instants and numbers, wrong types, colliding identifiers). Whatever comes out:
//! - decoding never panics, and a refusal says why (contract: "Invalid events are
//!   dead-lettered with the reason");
//! - every event that decodes is applied and written without an error (a store error on
//!   valid input would stop a projector for good), and every query then answers;
//! - the answers do not depend on how the events were batched;
//! - delivering everything again changes nothing (Rules 1 and 2: an event whose version
//!   is not higher than its entity's last applied one changes nothing).

mod common;

use common::Store;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use recap_schemas::{DecodeError, Envelope, KNOWN_TYPES};
use recap_testkit::snapshot::{snapshot, Universe};
use serde_json::{json, Value};

const EXAMPLES: &str = include_str!("../../schemas/tests/fixtures/contract-examples.jsonl");

fn examples() -> Vec<Value> {
    EXAMPLES.lines().map(|line| serde_json::from_str(line).expect("an example is JSON")).collect()
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every node of `value` below the root (objects and arrays too, so whole subtrees are
/// replaced), as paths.
fn nodes(value: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                path.push(Step::Key(key.clone()));
                out.push(path.clone());
                nodes(field, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                path.push(Step::Index(index));
                out.push(path.clone());
                nodes(item, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn at<'a>(value: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(value, |node, step| match step {
        Step::Key(key) => &mut node[key.as_str()],
        Step::Index(index) => &mut node[*index],
    })
}

/// What a node may become.
fn replacements() -> Vec<Value> {
    let mut values = vec![
        json!(""),
        json!("acc_01"),
        json!("acc_02"),
        json!("mtg_01"),
        json!("tok_01"),
        json!("team_01"),
        json!("shr_01"),
        json!("hum_1"),
        json!("x"),
        json!("🙂 ü \u{202e} \u{0}"),
        json!("todo"),
        json!("done"),
        json!("in_progress"),
        json!("note"),
        json!("summary"),
        json!("viewer"),
        json!("flow"),
        json!("enterprise"),
        json!("0001-01-01T00:00:00Z"),
        json!("9999-12-31T23:59:59.999999Z"),
        json!("1970-01-01T00:00:00Z"),
        json!("1969-12-31T23:59:59.999999Z"),
        json!("2026-02-30T00:00:00Z"),
        json!("2026-11-20T09:00:00+14:00"),
        json!("2026-11-20T09:00:00-12:00"),
        json!("2026-11-20T09:00:00.123456789Z"),
        json!("2026-11-20"),
        json!(0),
        json!(1),
        json!(-1),
        json!(7),
        json!(9_007_199_254_740_991u64),
        json!(9_007_199_254_740_993u64),
        json!(u64::MAX),
        json!(1e308),
        json!(-0.5),
        json!(null),
        json!(true),
        json!([]),
        json!({}),
        json!(["acc_01", "acc_02"]),
        json!({"id": "team_01", "name": "n"}),
        json!([{"id": "seg", "track": "mic", "start_ms": 5, "end_ms": 1, "text": ""}]),
    ];
    for length in [255, 256, 257] {
        values.push(Value::String("i".repeat(length)));
    }
    values.push(Value::String("é".repeat(128)));
    values.push(Value::String("word ".repeat(20_000)));
    values.push(Value::String(KNOWN_TYPES[3].to_string()));
    values.push(Value::String("meeting.archived".to_string()));
    values
}

#[derive(Clone, Debug)]
struct Event {
    example: usize,
    /// (which node, modulo the example's count; which replacement).
    mutations: Vec<(usize, usize)>,
}

fn build(examples: &[Value], replacements: &[Value], event: &Event) -> Vec<u8> {
    let mut value = examples[event.example].clone();
    for &(node, replacement) in &event.mutations {
        let mut paths = Vec::new();
        nodes(&value, &mut Vec::new(), &mut paths);
        if paths.is_empty() {
            break;
        }
        *at(&mut value, &paths[node % paths.len()]) = replacements[replacement].clone();
    }
    value.to_string().into_bytes()
}

/// The lines of two snapshots that differ, side by side.
fn diff(expected: &str, actual: &str) -> String {
    let (expected, actual): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut out: Vec<String> = expected.iter().filter(|line| !actual.contains(line)).map(|line| format!("- {line}")).collect();
    out.extend(actual.iter().filter(|line| !expected.contains(line)).map(|line| format!("+ {line}")));
    out.join("\n")
}

#[test]
fn contract_odd_but_valid_events_apply_and_converge_and_invalid_ones_say_why() {
    let examples = examples();
    let replacements = replacements();
    let event = (0..examples.len(), proptest::collection::vec((any::<usize>(), 0..replacements.len()), 0..4))
        .prop_map(|(example, mutations)| Event { example, mutations });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let cases: u32 = std::env::var("RECAP_GENERATED_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(150);
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let result = runner.run(&(proptest::collection::vec(event, 1..25), 1..6usize), |(events, batch_size)| {
        let (mut decoded, mut lines) = (Vec::new(), Vec::new());
        for event in &events {
            let bytes = build(&examples, &replacements, event);
            match Envelope::decode(&bytes) {
                Ok(envelope) => {
                    decoded.push(envelope);
                    lines.push(String::from_utf8_lossy(&bytes).into_owned());
                }
                Err(DecodeError::Invalid(reason)) => prop_assert!(!reason.trim().is_empty(), "a refusal says why: {}", String::from_utf8_lossy(&bytes)),
                Err(DecodeError::UnknownType(name)) => prop_assert!(!KNOWN_TYPES.contains(&name.as_str()), "{} is known", name),
            }
        }
        runtime.block_on(async {
            let universe = Universe::of(&decoded);
            // A store error panics in `Store::apply`; the runner reports it with the events.
            let mut one_by_one = Store::new();
            one_by_one.apply(&decoded, 1).await;
            let expected = snapshot(&one_by_one.readmodel, &universe).await.map_err(|error| TestCaseError::fail(format!("snapshot: {error}")))?;
            let mut batched = Store::new();
            batched.apply(&decoded, batch_size).await;
            let answers = snapshot(&batched.readmodel, &universe).await.map_err(|error| TestCaseError::fail(format!("snapshot: {error}")))?;
            if answers != expected {
                return Err(TestCaseError::fail(format!(
                    "batches of {batch_size} answer otherwise than one by one:\n{}\nevents:\n{}",
                    diff(&expected, &answers),
                    lines.join("\n")
                )));
            }
            batched.apply(&decoded, batch_size).await;
            let again = snapshot(&batched.readmodel, &universe).await.map_err(|error| TestCaseError::fail(format!("snapshot: {error}")))?;
            if again != expected {
                return Err(TestCaseError::fail(format!("delivering everything again changed:\n{}\nevents:\n{}", diff(&expected, &again), lines.join("\n"))));
            }
            Ok(())
        })
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
