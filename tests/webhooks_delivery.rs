//! Webhooks against the real `recap serve` (embedded edition): messages waiting in the
//! data dir's outbox reach a local receiver signed the Standard Webhooks way; a
//! `kill -9` of the server in the middle of delivering loses none (every message
//! arrives at least once after the restart, a repeat always with the same
//! `webhook-id`); and the official Python `standardwebhooks` library verifies every
//! delivered request and refuses a tampered body and a stale timestamp (ignored by a
//! plain `cargo test` for needing Python: `make test` runs it).
//!
//! The endpoint and the messages are written into the data dir's store before the
//! server starts, as the projection and the projector write them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use recap_lmdb::EmbeddedDriver;
use recap_readmodel::messages::{message_id, AccountMessage, Message, MessageKind};
use recap_readmodel::tables::{MESSAGE_OUTBOX, WEBHOOK_ENDPOINTS, WEBHOOK_SECRETS};
use recap_readmodel::webhooks::{EndpointRecord, SecretsRecord, SigningSecret};
use recap_readmodel::{Driver, Mutation, Op, Val};
use recap_schemas::Timestamp;
use recap_testkit::server::Server;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PREVIOUS_SECRET: &str = "whsec_cHJldmlvdXMtc2VjcmV0LWtleQ==";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[derive(Clone, Debug)]
struct Received {
    headers: Vec<(String, String)>,
    body: String,
}

impl Received {
    fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str()).unwrap_or_default()
    }
}

/// A receiver on loopback that records every request and answers 200 after `delay`.
fn receiver(runtime: &tokio::runtime::Runtime, delay: Duration) -> (String, Arc<Mutex<Vec<Received>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
        let log = log.clone();
        async move {
            tokio::time::sleep(delay).await;
            let headers = headers.iter().map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned())).collect();
            log.lock().unwrap().push(Received { headers, body });
            axum::http::StatusCode::OK
        }
    });
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}/hooks", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

fn message(index: usize) -> AccountMessage {
    let meeting = format!("mtg_{index}");
    AccountMessage {
        account_id: "acc_hooks".into(),
        message: Message {
            id: message_id(&format!("evt_{index}"), "acc_hooks", MessageKind::MeetingCreated, &meeting),
            kind: MessageKind::MeetingCreated,
            created_at: Timestamp::now(),
            data: serde_json::json!({ "meeting_id": meeting }),
        },
    }
}

/// Writes an endpoint (signing with `secrets`) and `count` messages into the data
/// dir's store, then closes it.
fn prepare(runtime: &tokio::runtime::Runtime, data_dir: &Path, url: &str, secrets: Vec<SigningSecret>, count: usize) -> Vec<String> {
    std::fs::create_dir_all(data_dir).unwrap();
    let driver = EmbeddedDriver::open(&data_dir.join("store.lmdb")).unwrap();
    let now = Timestamp::now();
    let endpoint = EndpointRecord {
        id: "ep_hooks".into(),
        url: url.into(),
        description: None,
        types: vec![],
        enabled: true,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let mut rows = vec![
        Mutation {
            table: &WEBHOOK_ENDPOINTS,
            partition: vec![Val::text("acc_hooks")],
            clustering: vec![Val::text("ep_hooks")],
            op: Op::Put { body: serde_json::to_string(&endpoint).unwrap(), expires_at: None },
            ts: 1,
        },
        Mutation {
            table: &WEBHOOK_SECRETS,
            partition: vec![Val::text("acc_hooks"), Val::text("ep_hooks")],
            clustering: vec![],
            op: Op::Put { body: serde_json::to_string(&SecretsRecord { secrets }).unwrap(), expires_at: None },
            ts: 1,
        },
    ];
    let messages: Vec<AccountMessage> = (0..count).map(message).collect();
    for (index, message) in messages.iter().enumerate() {
        let seq = index as i64 + 1;
        rows.push(Mutation {
            table: &MESSAGE_OUTBOX,
            partition: vec![Val::text("log")],
            clustering: vec![Val::Int(seq)],
            op: Op::Put { body: serde_json::to_string(message).unwrap(), expires_at: None },
            ts: seq,
        });
    }
    runtime.block_on(driver.write(rows)).unwrap();
    drop(driver);
    messages.into_iter().map(|message| message.message.id).collect()
}

fn server(data_dir: &Path) -> Server {
    Server::builder().data_dir(data_dir).arg("--webhooks-allow-insecure").embedded().start()
}

fn wait_for_ids(received: &Mutex<Vec<Received>>, ids: &BTreeSet<String>, within: Duration) -> Vec<Received> {
    let deadline = Instant::now() + within;
    loop {
        let received = received.lock().unwrap().clone();
        let seen: BTreeSet<String> = received.iter().map(|request| request.header("webhook-id").to_owned()).collect();
        if ids.is_subset(&seen) {
            return received;
        }
        assert!(Instant::now() < deadline, "{} of {} messages delivered", ids.intersection(&seen).count(), ids.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_kill_9_while_delivering_loses_no_message_and_repeats_only_with_the_same_id() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Slow enough that the kill lands with deliveries in flight and pending.
    let (url, received) = receiver(&runtime, Duration::from_millis(15));
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    let ids: BTreeSet<String> = prepare(&runtime, &data_dir, &url, vec![SigningSecret { secret: SECRET.into(), expires_at: None }], 300).into_iter().collect();

    let mut server = server(&data_dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    while received.lock().unwrap().len() < 40 {
        assert!(Instant::now() < deadline, "deliveries started");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.kill9();
    let before_restart = received.lock().unwrap().len();
    assert!(before_restart < ids.len(), "the kill came before every message was delivered ({before_restart})");

    server.restart();
    let received = wait_for_ids(&received, &ids, Duration::from_secs(60));
    server.stop();
    for request in &received {
        let id = request.header("webhook-id");
        assert!(ids.contains(id), "only the messages written are delivered");
        let body: serde_json::Value = serde_json::from_str(&request.body).unwrap();
        assert_eq!(body["id"], id, "a repeat carries the id of its message");
        let timestamp: i64 = request.header("webhook-timestamp").parse().unwrap();
        let expected = recap_webhooks::signing::signature(SECRET, id, timestamp, request.body.as_bytes()).unwrap();
        assert_eq!(request.header("webhook-signature"), expected);
    }
    let repeats = received.len() - ids.len();
    assert!(repeats <= 4 + 256, "at most the attempts in flight at the kill are repeated, {repeats} were");
}

#[test]
#[ignore = "needs the Python standardwebhooks library from scripts/setup-python.sh: make test runs it"]
fn the_official_standard_webhooks_library_verifies_every_delivery_and_refuses_tampering_and_staleness() {
    let output = Command::new("bash").arg(repo().join("scripts/setup-python.sh")).output().expect("setup-python.sh");
    assert!(output.status.success(), "setup-python.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    let python = String::from_utf8_lossy(&output.stdout).lines().last().unwrap_or_default().trim().to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (url, received) = receiver(&runtime, Duration::ZERO);
    let temp = tempfile::tempdir().unwrap();
    let data_dir = temp.path().join("data");
    // A rotation in progress: the previous secret signs beside the current one.
    let in_a_day = Timestamp(Timestamp::now().0 + 24 * 3_600_000_000);
    let secrets = vec![SigningSecret { secret: SECRET.into(), expires_at: None }, SigningSecret { secret: PREVIOUS_SECRET.into(), expires_at: Some(in_a_day) }];
    let ids: BTreeSet<String> = prepare(&runtime, &data_dir, &url, secrets, 20).into_iter().collect();
    let mut server = server(&data_dir);
    let received = wait_for_ids(&received, &ids, Duration::from_secs(30));
    server.stop();

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
    // Correctly signed, ten minutes old: past the verifier's five-minute tolerance.
    let stale = Timestamp::now().0 / 1_000_000 - 600;
    let headers = recap_webhooks::signing::headers(&[SECRET], first.header("webhook-id"), stale, first.body.as_bytes()).unwrap();
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
        assert!(output.status.success(), "verification failed: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        if secret == SECRET {
            let counts: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
            assert_eq!(counts, serde_json::json!({ "valid": received.len(), "tampered": 1, "stale": 1 }));
        }
    }
}
