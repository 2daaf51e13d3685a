//! Webhooks against the real `recap serve` (embedded edition), from events alone: an
//! endpoint (a `webhook_endpoint.upserted` event) and meetings appended to the data dir's
//! log become messages that reach a local receiver signed the Standard Webhooks way; a
//! `kill -9` of the server in the middle of delivering loses none (every message
//! arrives at least once after the restart, a repeat always with the same
//! `webhook-id`); a second upsert with a new secret signs with both secrets for the
//! overlap, then with the new one only; and the official Python `standardwebhooks`
//! library verifies every delivered request with either secret and refuses a tampered
//! body and a stale timestamp (ignored by a plain `cargo test` for needing Python:
//! `make test` runs it).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use recap_testkit::receiver;

use recap_readmodel::messages::{message_id, MessageKind};
use recap_schemas::{Envelope, Timestamp};
use recap_testkit::events::*;
use recap_testkit::process::{append_lines, get};
use recap_testkit::server::Server;
use receiver::{Received, Receiver};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The key `previous-secret-key-of-32-bytes!` (a contract secret is 24 to 64 bytes).
const PREVIOUS_SECRET: &str = "whsec_cHJldmlvdXMtc2VjcmV0LWtleS1vZi0zMi1ieXRlcyE=";
const ACCOUNT: &str = "acc_hooks";
const ENDPOINT: &str = "ep_hooks";
const HOUR_MICROS: i64 = 3_600_000_000;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The endpoint at `version`, signing with `secret`, upserted at `occurred_at`.
fn endpoint(receiver: &Receiver, secret: &str, version: u64, occurred_at: Timestamp) -> Envelope {
    EVENTS.webhook_endpoint(ACCOUNT, ENDPOINT, receiver.url(ENDPOINT)).secret(secret).occurred_at(occurred_at).version(version).envelope()
}

/// `count` meetings of the account without notes: each announces one
/// `meeting.created`. Gives the events and the ids of their messages.
fn meetings(count: usize) -> (Vec<Envelope>, BTreeSet<String>) {
    let events: Vec<Envelope> = (0..count)
        .map(|index| {
            meeting_draft(ACCOUNT, &format!("mtg_{index}"), "Weekly", 0)
                .with(|event| {
                    event.meeting.note.text = String::new();
                    event.meeting.summaries.clear();
                })
                .version(1)
                .envelope()
        })
        .collect();
    let ids = events
        .iter()
        .enumerate()
        .map(|(index, event)| message_id(event.id.as_ref(), ACCOUNT, MessageKind::MeetingCreated, &format!("mtg_{index}"), event.occurred_at))
        .collect();
    (events, ids)
}

/// Appends `events` to the log of a new data dir, before any server reads it.
fn log_with(data_dir: &Path, events: &[Envelope]) {
    std::fs::create_dir_all(data_dir).unwrap();
    let output = append_lines(data_dir, events);
    assert!(output.status.success(), "recap events append failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn server(data_dir: &Path) -> Server {
    Server::builder().data_dir(data_dir).arg("--webhooks-allow-insecure").embedded().start()
}

const WITHIN: Duration = Duration::from_secs(60);

/// The ids of the account's whole feed, oldest first.
fn feed_ids(server: &Server, token: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut url = format!("{}/events?limit=100", server.base_url);
    loop {
        let (status, _, body) = get(&url, Some(token));
        let page: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status, 200, "{page}");
        ids.extend(page["data"].as_array().unwrap().iter().map(|event| event["id"].as_str().unwrap().to_owned()));
        if page["has_more"] != true {
            return ids;
        }
        url = format!("{}/events?limit=100&cursor={}", server.base_url, page["next_cursor"].as_str().unwrap());
    }
}

#[test]
fn a_kill_9_while_delivering_loses_no_message_and_repeats_only_with_the_same_id() {
    // Slow enough that the kill lands with deliveries in flight and pending.
    let receiver = Receiver::builder().delay(Duration::from_millis(15)).start();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let (meetings, ids) = meetings(300);
    let token = new_token();
    let mut events =
        vec![account(ACCOUNT, Some("enterprise"), None, 1), token_created(ACCOUNT, "tok_hooks", &token, 1), endpoint(&receiver, SECRET, 1, Timestamp::now())];
    events.extend(meetings);
    log_with(&data_dir, &events);

    let mut server = server(&data_dir);
    receiver.wait_until(WITHIN, "the first deliveries", |requests| requests.len() >= 40);
    server.kill9();
    let before_restart = receiver.requests().len();
    assert!(before_restart < ids.len(), "the kill came before every message was delivered ({before_restart})");

    server.restart();
    let received = receiver.wait_for_ids(ENDPOINT, &ids, WITHIN);
    // The feed lists each message once, whatever the kill interrupted.
    let listed = feed_ids(&server, &token);
    server.stop();
    assert_eq!(listed.len(), ids.len(), "each message listed once");
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), ids);
    for request in &received {
        let id = request.webhook_id();
        assert!(ids.contains(id), "only the messages of the events appended are delivered");
        assert_eq!(request.json()["id"], id, "a repeat carries the id of its message");
        let timestamp: i64 = request.header("webhook-timestamp").parse().unwrap();
        let expected = recap_webhooks::signing::signature(SECRET, id, timestamp, request.body.as_bytes()).unwrap();
        assert_eq!(request.header("webhook-signature"), expected);
    }
    let repeats = received.len() - ids.len();
    assert!(repeats <= 4 + 256, "at most the attempts in flight at the kill are repeated, {repeats} were");
}

/// Delivers `count` meetings to an endpoint upserted with PREVIOUS_SECRET, then
/// rotated to SECRET by a second upsert `rotated_ago` ago.
fn deliver_after_rotation(rotated_ago: i64, count: usize) -> (tempfile::TempDir, Vec<Received>) {
    let receiver = Receiver::start();
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let rotated_at = Timestamp(Timestamp::now().0 - rotated_ago);
    let (meetings, ids) = meetings(count);
    let mut events = vec![endpoint(&receiver, PREVIOUS_SECRET, 1, Timestamp(rotated_at.0 - HOUR_MICROS)), endpoint(&receiver, SECRET, 2, rotated_at)];
    events.extend(meetings);
    log_with(&data_dir, &events);
    let mut server = server(&data_dir);
    let received = receiver.wait_for_ids(ENDPOINT, &ids, WITHIN);
    server.stop();
    (temp, received)
}

fn signed_with(request: &Received, secrets: &[&str]) -> String {
    let timestamp: i64 = request.header("webhook-timestamp").parse().unwrap();
    let [_, _, (_, signature)] = recap_webhooks::signing::headers(secrets, request.webhook_id(), timestamp, request.body.as_bytes()).unwrap();
    signature
}

#[test]
fn a_rotated_secret_signs_beside_the_new_one_for_the_overlap_and_not_after_it() {
    // docs/webhooks.md, Signing: after an upsert with a new secret, the previous one
    // keeps signing beside it for 24 hours from that upsert.
    let (_temp, during) = deliver_after_rotation(HOUR_MICROS, 5);
    for request in &during {
        assert_eq!(request.header("webhook-signature"), signed_with(request, &[SECRET, PREVIOUS_SECRET]), "both signatures during the overlap");
    }
    let (_temp, after) = deliver_after_rotation(25 * HOUR_MICROS, 5);
    for request in &after {
        assert_eq!(request.header("webhook-signature"), signed_with(request, &[SECRET]), "the new secret only once the overlap is over");
    }
}

#[test]
#[ignore = "needs the Python standardwebhooks library from scripts/setup-python.sh: make test runs it"]
fn the_official_standard_webhooks_library_verifies_every_delivery_with_either_secret_during_a_rotation_and_refuses_tampering_and_staleness() {
    let output = Command::new("bash").arg(repo().join("scripts/setup-python.sh")).output().expect("setup-python.sh");
    assert!(output.status.success(), "setup-python.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    let python = String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim().to_owned();

    // A rotation in progress: the previous secret signs beside the current one, and a
    // receiver verifies with either.
    let (temp, received) = deliver_after_rotation(HOUR_MICROS, 20);

    let mut lines = Vec::new();
    let record = |expect: &str, headers: &[(String, String)], body: &str| {
        let headers: serde_json::Map<String, serde_json::Value> = headers.iter().map(|(key, value)| (key.clone(), value.clone().into())).collect();
        serde_json::json!({ "expect": expect, "headers": headers, "body": body }).to_string()
    };
    for request in &received {
        lines.push(record("valid", &request.headers, &request.body));
    }
    let first = &received[0];
    lines.push(record("tampered", &first.headers, &first.body.replace("mtg_", "mtg_x")));
    // Correctly signed with both secrets, ten minutes old: past the verifier's
    // five-minute tolerance.
    let stale = Timestamp::now().0 / 1_000_000 - 600;
    let headers = recap_webhooks::signing::headers(&[SECRET, PREVIOUS_SECRET], first.webhook_id(), stale, first.body.as_bytes()).unwrap();
    let headers: Vec<(String, String)> = headers.into_iter().map(|(key, value)| (key.to_owned(), value)).collect();
    lines.push(record("stale", &headers, &first.body));
    let file = temp.path().join("recorded.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();

    for secret in [SECRET, PREVIOUS_SECRET] {
        let output = Command::new(&python)
            .arg(repo().join("tests/python/verify_webhooks.py"))
            .env("WEBHOOKS_RECORDED", &file)
            .env("WEBHOOK_SECRET", secret)
            .output()
            .expect("run the verifier");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "verification with {} failed: {stdout}{}",
            if secret == SECRET { "the new secret" } else { "the previous secret" },
            String::from_utf8_lossy(&output.stderr)
        );
        let counts: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(counts, serde_json::json!({ "valid": received.len(), "tampered": 1, "stale": 1 }));
    }
}
