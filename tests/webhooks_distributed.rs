//! Webhooks on the distributed edition against the real engines (`make up`): the
//! projector produces its messages to `<prefix>recap.messages.v1`, `recap webhooks`
//! (testkit/src/cluster.rs, `--webhooks-allow-insecure`) appends them to the feed and
//! delivers them to receivers on loopback. Under load and under faults (the deliverer
//! killed with SIGKILL, a receiver refusing, failing and timing out, an endpoint that
//! hangs, Cassandra paused, two deliverers sharing the partitions) every test ends with
//! the same check (docs/webhooks.md, Delivery): every message the projector produced is
//! delivered at least once to its account's endpoint, and a message that arrives more
//! than once always carries the same `webhook-id` and the same body.
//!
//! Some tests pause shared engines, so this suite runs one test at a time like
//! tests/distributed.rs (`make test` passes `--test-threads=1`), and every test is
//! ignored unless the engines are up. Retries are quickened with
//! `RECAP_WEBHOOKS_RETRY_SCALE` (the schedule's delays times the scale).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message as _;
use recap_readmodel::messages::AccountMessage;
use recap_schemas::build::{Epoch, Events};
use recap_schemas::Envelope;
use recap_testkit::cluster::Cluster;
use recap_testkit::events::new_token;
use recap_testkit::process::get;
use serde_json::Value;

/// Events dated a minute ago: a message's first delivery is due at its event's time, and
/// a message older than the feed's retention would be dropped unsent.
fn events() -> Events {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    Events::new(Epoch::from_unix_seconds(now - 60)).with_random_ids()
}

fn engine(script: &str, action: &str) -> bool {
    let path = format!("{}/scripts/engines/{script}", env!("CARGO_MANIFEST_DIR"));
    Command::new("bash").arg(path).arg(action).status().is_ok_and(|status| status.success())
}

/// An engine taken away for a while; brought back on drop too, so that a failing test
/// never leaves it paused under the tests that follow.
struct Outage {
    script: &'static str,
    restore: &'static str,
    ended: bool,
}

impl Outage {
    fn begin(script: &'static str, halt: &str, restore: &'static str) -> Outage {
        assert!(engine(script, halt), "{script} {halt} failed");
        Outage { script, restore, ended: false }
    }

    fn end(mut self) {
        self.ended = true;
        assert!(engine(self.script, self.restore), "{} {} failed", self.script, self.restore);
    }
}

impl Drop for Outage {
    fn drop(&mut self) {
        if !self.ended && !engine(self.script, self.restore) {
            eprintln!("could not {} after a failed test: run scripts/engines/{} {}", self.restore, self.script, self.restore);
        }
    }
}

/// How a receiver answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// 200 after the receiver's delay (and its check, if any).
    Up,
    /// 500 at once.
    Failing,
    /// Holds the request for a minute (the deliverer gives up after 10 s).
    Hanging,
}

/// One request a receiver got.
#[derive(Clone, Debug)]
struct Receipt {
    webhook_id: String,
    body: Value,
    at: Instant,
}

/// What a receiver checks on receipt (read-your-webhook): an error in words, or Ok.
type Check = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// A webhook receiver on 127.0.0.1: records every request it answers 200, answers as
/// its mode says, and can be taken down (connections refused) and up again on its port.
struct Receiver {
    url: String,
    port: u16,
    mode: Arc<Mutex<Mode>>,
    delay: Duration,
    received: Arc<Mutex<Vec<Receipt>>>,
    failures: Arc<Mutex<Vec<String>>>,
    check: Option<Check>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Receiver {
    fn start(runtime: &tokio::runtime::Runtime, delay: Duration, check: Option<Check>) -> Receiver {
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut receiver = Receiver {
            url: format!("http://127.0.0.1:{port}/hooks"),
            port,
            mode: Arc::new(Mutex::new(Mode::Up)),
            delay,
            received: Arc::default(),
            failures: Arc::default(),
            check,
            server: None,
        };
        receiver.serve(runtime, listener);
        receiver
    }

    fn serve(&mut self, runtime: &tokio::runtime::Runtime, listener: tokio::net::TcpListener) {
        let (mode, delay, received, failures, check) = (self.mode.clone(), self.delay, self.received.clone(), self.failures.clone(), self.check.clone());
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: String| {
            let (mode, received, failures, check) = (mode.clone(), received.clone(), failures.clone(), check.clone());
            async move {
                let current = *mode.lock().unwrap();
                match current {
                    Mode::Failing => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                    Mode::Hanging => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return StatusCode::OK.into_response();
                    }
                    Mode::Up => {}
                }
                tokio::time::sleep(delay).await;
                let at = Instant::now();
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                if let Some(check) = check {
                    let message = body.clone();
                    if let Err(failure) = tokio::task::spawn_blocking(move || check(&message)).await.unwrap() {
                        failures.lock().unwrap().push(failure);
                    }
                }
                let webhook_id = headers.get("webhook-id").and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned();
                received.lock().unwrap().push(Receipt { webhook_id, body, at });
                StatusCode::OK.into_response()
            }
        });
        self.server = Some(runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }

    /// Stops listening: new connections are refused; a connection kept alive from before
    /// is answered 500 until [`Receiver::up`].
    fn down(&mut self) {
        *self.mode.lock().unwrap() = Mode::Failing;
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }

    /// Listens again on the same port and answers 200.
    fn up(&mut self, runtime: &tokio::runtime::Runtime) {
        if self.server.is_none() {
            let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", self.port))).unwrap();
            self.serve(runtime, listener);
        }
        self.set(Mode::Up);
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn received(&self) -> Vec<Receipt> {
        self.received.lock().unwrap().clone()
    }

    fn ids(&self) -> BTreeSet<String> {
        self.received().into_iter().map(|receipt| receipt.webhook_id).collect()
    }
}

/// An account on a plan that reads the API.
fn account(events: Events, account_id: &str) -> Envelope {
    events.account(account_id).plan("flow", None, events.minute(0)).envelope()
}

/// An account with a token and one endpoint at `url` (every kind), and the token.
fn subscriber(events: Events, account_id: &str, url: &str) -> (Vec<Envelope>, String) {
    let token = new_token();
    let lines = vec![
        account(events, account_id),
        events.token_created(account_id, format!("tok_{account_id}"), recap_access::token_sha256(&token)).envelope(),
        events.webhook_endpoint(account_id, format!("ep_{account_id}"), url).envelope(),
    ];
    (lines, token)
}

/// `count` meeting events of `account_id`: meetings created, a third of them renamed,
/// a sixth of them deleted afterwards.
fn meetings(events: Events, account_id: &str, count: usize) -> Vec<Envelope> {
    let mut lines = Vec::new();
    let mut index = 0;
    while lines.len() < count {
        let id = format!("mtg_{account_id}_{index}");
        lines.push(events.meeting(account_id, &id).title(format!("First title {index}")).version(1).envelope());
        if index % 3 == 1 {
            lines.push(events.meeting(account_id, &id).title(format!("Second title {index}")).version(2).envelope());
        }
        if index % 6 == 2 {
            lines.push(events.meeting_deleted(account_id, &id).version(3).envelope());
        }
        index += 1;
    }
    lines.truncate(count);
    lines
}

/// Every message the projector produced to the cluster's message topic, by account:
/// the topic read from its start to its high watermarks.
fn produced_messages(cluster: &Cluster) -> BTreeMap<String, BTreeSet<String>> {
    let topic = format!("{}recap.messages.v1", cluster.topic_prefix);
    let consumer: BaseConsumer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &cluster.engines.brokers)
        .set("group.id", format!("{}-reader", cluster.id))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let metadata = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10)).unwrap();
    let partitions: Vec<i32> = metadata.topics()[0].partitions().iter().map(|partition| partition.id()).collect();
    let mut assignment = rdkafka::TopicPartitionList::new();
    let mut remaining = BTreeMap::new();
    for partition in &partitions {
        let (low, high) = consumer.fetch_watermarks(&topic, *partition, Duration::from_secs(10)).unwrap();
        if high > low {
            remaining.insert(*partition, high);
        }
        assignment.add_partition_offset(&topic, *partition, rdkafka::Offset::Beginning).unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut messages: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !remaining.is_empty() {
        assert!(Instant::now() < deadline, "the message topic was not read to its end: {remaining:?} left");
        let Some(record) = consumer.poll(Duration::from_millis(200)) else { continue };
        let record = record.unwrap();
        let message: AccountMessage = serde_json::from_slice(record.payload().unwrap()).unwrap();
        messages.entry(message.account_id).or_default().insert(message.message.id);
        if remaining.get(&record.partition()).is_some_and(|high| record.offset() + 1 >= *high) {
            remaining.remove(&record.partition());
        }
    }
    messages
}

/// Produces `lines` to the cluster, and keeps them in `sent`: what the test's
/// receivers must be told is derived from them.
fn send(cluster: &Cluster, sent: &mut Vec<Envelope>, lines: &[Envelope]) {
    cluster.produce(lines);
    sent.extend_from_slice(lines);
}

/// The messages `events` announce, by account, as the projection derives them: applied
/// in the order sent, one at a time, over an embedded store in this process.
fn announced(events: &[Envelope]) -> BTreeMap<String, BTreeSet<String>> {
    let dir = tempfile::tempdir().unwrap();
    let driver: Arc<dyn recap_readmodel::Driver> = Arc::new(recap_lmdb::EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
    let projection = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut announced: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    projection.block_on(async {
        for (position, event) in events.iter().enumerate() {
            let mut batch = recap_readmodel::projection::Batch::new(driver.clone());
            batch.apply(event, position as i64 + 1).await.unwrap();
            for told in batch.take_messages() {
                announced.entry(told.account_id).or_default().insert(told.message.id);
            }
            driver.write(batch.into_mutations()).await.unwrap();
        }
    });
    announced
}

/// Waits until every receiver got every message produced for its account, once the
/// message topic holds exactly what the events sent announce for the receivers'
/// accounts: a message the projector failed to produce, or produced under another id,
/// fails here rather than passing unnoticed.
fn wait_delivered(cluster: &Cluster, sent: &[Envelope], receivers: &[(&str, &Receiver)], within: Duration) -> BTreeMap<String, BTreeSet<String>> {
    cluster.wait_projected();
    let produced = produced_messages(cluster);
    let announced = announced(sent);
    for (account_id, _) in receivers {
        assert_eq!(produced.get(*account_id), announced.get(*account_id), "{account_id}: the message topic holds what the events announce");
    }
    let deadline = Instant::now() + within;
    for (account_id, receiver) in receivers {
        let want = produced.get(*account_id).cloned().unwrap_or_default();
        assert!(!want.is_empty(), "{account_id} was told something");
        loop {
            let got = receiver.ids();
            let missing: Vec<&String> = want.difference(&got).collect();
            if missing.is_empty() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{account_id}: {} of {} messages never delivered, e.g. {:?}",
                missing.len(),
                want.len(),
                &missing[..missing.len().min(3)]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    produced
}

/// The closing check of every test: each receiver got exactly its account's messages
/// (every one at least once, no other), and a message received more than once always
/// came with the same `webhook-id`, which is its id, and the same body.
fn assert_at_least_once_without_strangers(produced: &BTreeMap<String, BTreeSet<String>>, receivers: &[(&str, &Receiver)]) -> usize {
    let mut duplicates = 0;
    for (account_id, receiver) in receivers {
        let want = produced.get(*account_id).cloned().unwrap_or_default();
        let mut bodies: BTreeMap<String, Value> = BTreeMap::new();
        for receipt in receiver.received() {
            assert_eq!(receipt.body["id"].as_str(), Some(receipt.webhook_id.as_str()), "webhook-id is the message's id");
            assert!(want.contains(&receipt.webhook_id), "{account_id} received a message not produced for it: {}", receipt.body);
            match bodies.get(&receipt.webhook_id) {
                Some(first) => {
                    duplicates += 1;
                    assert_eq!(first, &receipt.body, "a message delivered twice carries the same body");
                }
                None => {
                    bodies.insert(receipt.webhook_id.clone(), receipt.body.clone());
                }
            }
        }
        assert_eq!(bodies.len(), want.len(), "{account_id}: every message delivered");
    }
    duplicates
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap()
}

fn unlimited() -> (String, String) {
    ("RECAP_REST_RATE_LIMIT_PER_MINUTE".into(), "1000000".into())
}

/// The MCP tool-call limit, raised as the REST one is: the stream's reads are many more
/// than an account's minute allows.
fn unlimited_mcp() -> (String, String) {
    ("RECAP_MCP_TOOL_CALLS_PER_MINUTE".into(), "1000000".into())
}

/// Retries 5000 times sooner: 1 ms, 60 ms, 360 ms, 1.4 s, 3.6 s, 7.2 s, 10 s, 14 s,
/// 17 s (about 54 s in all, so an endpoint failing for over 43 s may be disabled).
/// How much quicker than the real schedule the retries of these tests come.
const RETRY_SCALE: f64 = 0.0002;

fn quick_retries() -> (String, String) {
    ("RECAP_WEBHOOKS_RETRY_SCALE".into(), RETRY_SCALE.to_string())
}

// docs/webhooks.md: "A message is not sent before its account's feed head covers it,
// so a receiver that reads `GET /v1/events/{id}` on receipt finds it", and the
// projector publishes a message only once the rows it announces are written
// (read-your-webhook): under a load of thousands of events over several accounts, the
// receiver's API calls on receipt see the message in the feed and the meeting as new
// as the message announces, or gone for `meeting.deleted`, every time.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn read_your_webhook_the_api_shows_what_every_message_announces_on_receipt_under_load() {
    const PER_ACCOUNT: usize = 500;
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    // More attempts in flight per endpoint than by default: every receipt waits for two
    // API calls.
    let mut cluster = Cluster::start(&[unlimited(), unlimited_mcp(), ("RECAP_WEBHOOKS_ENDPOINT_CONCURRENCY".into(), "16".into())]);
    cluster.add_webhooks();
    let accounts = ["acc_ryw_a", "acc_ryw_b", "acc_ryw_c", "acc_ryw_d"];
    let mut receivers = Vec::new();
    let mut setup = Vec::new();
    let mut load = Vec::new();
    let urls = [cluster.query_apis[0].url.clone(), cluster.query_apis[1].url.clone()];
    for (index, account_id) in accounts.iter().enumerate() {
        let token = new_token();
        let check_token = token.clone();
        let base_url = urls[index % 2].clone();
        let check: Check = Arc::new(move |message: &Value| read_your_webhook(&base_url, &check_token, message));
        let receiver = Receiver::start(&runtime, Duration::ZERO, Some(check));
        setup.push(account(events, account_id));
        setup.push(events.token_created(*account_id, format!("tok_{account_id}"), recap_access::token_sha256(&token)).envelope());
        setup.push(events.webhook_endpoint(*account_id, format!("ep_{account_id}"), &receiver.url).envelope());
        load.push(meetings(events, account_id, PER_ACCOUNT));
        receivers.push(receiver);
    }
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    // Interleaved, produced in a few large appends, as fast as the tool writes them.
    let mut lines = Vec::new();
    for index in 0..PER_ACCOUNT {
        lines.extend(load.iter().map(|account| account[index].clone()));
    }
    let started = Instant::now();
    for chunk in lines.chunks(1_000) {
        send(&cluster, &mut sent, chunk);
    }
    eprintln!("produced {} events in {:?}", lines.len(), started.elapsed());
    let pairs: Vec<(&str, &Receiver)> = accounts.iter().copied().zip(receivers.iter()).collect();
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(120));
    let messages: usize = produced.values().map(BTreeSet::len).sum();
    eprintln!("{messages} messages delivered {:?} after the first event was produced", started.elapsed());
    assert!(messages >= 2_000, "thousands of messages: {messages}");
    for (account_id, receiver) in &pairs {
        let failures = receiver.failures.lock().unwrap().clone();
        assert_eq!(failures.len(), 0, "{account_id}: the API did not show what was announced: {:?}", &failures[..failures.len().min(5)]);
    }
    assert_at_least_once_without_strangers(&produced, &pairs);
}

/// What a receiver sees on receipt of `message` (read-your-webhook): the message in the
/// feed, and its meeting as the message announces it (a title at least as new) or gone.
fn read_your_webhook(base_url: &str, token: &str, message: &Value) -> Result<(), String> {
    let id = message["id"].as_str().unwrap_or_default();
    let (status, _, body) = get(&format!("{base_url}/events/{id}"), Some(token));
    if status != 200 {
        return Err(format!("GET /v1/events/{id}: {status} {body}"));
    }
    let kind = message["type"].as_str().unwrap_or_default();
    let Some(meeting_id) = message["data"]["meeting_id"].as_str() else { return Ok(()) };
    let (status, _, body) = get(&format!("{base_url}/meetings/{meeting_id}"), Some(token));
    if kind == "meeting.deleted" {
        // A deleted meeting of this load never comes back.
        return if status == 404 { Ok(()) } else { Err(format!("{kind} {meeting_id}: GET answered {status}")) };
    }
    // Meetings of the load deleted later (index % 6 == 2) may be gone already.
    let index: usize = meeting_id.rsplit('_').next().and_then(|n| n.parse().ok()).unwrap_or_default();
    if status == 404 && index % 6 == 2 {
        return Ok(());
    }
    if status != 200 {
        return Err(format!("{kind} {meeting_id}: GET answered {status} {body}"));
    }
    let shown: Value = serde_json::from_str(&body).unwrap_or_default();
    let shown_title = shown["title"].as_str().or(shown["data"]["title"].as_str()).unwrap_or_default().to_owned();
    let announced = message["data"]["meeting"]["title"].as_str().unwrap_or_default();
    let rank = |title: &str| {
        if title.starts_with("Second") {
            2
        } else if title.starts_with("First") {
            1
        } else {
            0
        }
    };
    if rank(&shown_title) < rank(announced) || rank(&shown_title) == 0 {
        return Err(format!("{kind} {meeting_id}: announced {announced:?}, the API shows {shown_title:?}"));
    }
    Ok(())
}

// docs/webhooks.md: "the deliverer can be killed (`kill -9`) at any instant without
// losing a delivery: what was not recorded is attempted again. Deliveries are at least
// once: a receiver can get a message more than once, always with the same
// `webhook-id`".
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn delivery_at_least_once_a_deliverer_killed_with_sigkill_mid_batch_loses_nothing_and_repeats_with_the_same_webhook_id() {
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let mut cluster = Cluster::start(&[]);
    let deliverer = cluster.add_webhooks();
    let accounts = ["acc_kill_a", "acc_kill_b", "acc_kill_c"];
    let receivers: Vec<Receiver> = accounts.iter().map(|_| Receiver::start(&runtime, Duration::from_millis(15), None)).collect();
    let mut setup = Vec::new();
    for (account_id, receiver) in accounts.iter().zip(&receivers) {
        setup.extend(subscriber(events, account_id, &receiver.url).0);
    }
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    let lines: Vec<Envelope> = accounts.iter().flat_map(|account_id| meetings(events, account_id, 400)).collect();
    send(&cluster, &mut sent, &lines);
    // Killed while deliveries are under way: some received, most not yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    while receivers.iter().map(|receiver| receiver.received().len()).sum::<usize>() < 100 {
        assert!(Instant::now() < deadline, "deliveries started");
        std::thread::sleep(Duration::from_millis(5));
    }
    cluster.webhooks[deliverer].kill9();
    let at_kill: usize = receivers.iter().map(|receiver| receiver.received().len()).sum();
    assert!(at_kill < 1_200, "killed mid-batch: {at_kill} received");
    std::thread::sleep(Duration::from_secs(1));
    cluster.webhooks[deliverer].start();
    let pairs: Vec<(&str, &Receiver)> = accounts.iter().copied().zip(receivers.iter()).collect();
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(120));
    let duplicates = assert_at_least_once_without_strangers(&produced, &pairs);
    eprintln!("killed after {at_kill} receipts; {duplicates} messages delivered again after the restart");
}

// docs/webhooks.md, Retries: "A failed attempt is retried after 5 seconds, 5 minutes,
// 30 minutes, …" and anything but a 2xx (a refused connection, a 500, a timeout) is a
// failed attempt; the schedule is quickened a thousandfold here. A receiver that
// refuses connections, then answers 500, then times out, then comes back gets
// everything.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn retries_a_receiver_refusing_then_failing_then_timing_out_gets_everything_once_it_is_back() {
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let mut cluster = Cluster::start(&[quick_retries(), unlimited(), unlimited_mcp()]);
    cluster.add_webhooks();
    let mut receiver = Receiver::start(&runtime, Duration::ZERO, None);
    let (setup, token) = subscriber(events, "acc_down", &receiver.url);
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    receiver.down();
    send(&cluster, &mut sent, &meetings(events, "acc_down", 60));
    cluster.wait_projected();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(receiver.received().len(), 0, "nothing arrives while connections are refused");
    receiver.up(&runtime);
    receiver.set(Mode::Failing);
    send(&cluster, &mut sent, &meetings(events, "acc_down", 90)[60..]);
    std::thread::sleep(Duration::from_secs(3));
    receiver.set(Mode::Hanging);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(receiver.received().len(), 0, "nothing is accepted while the receiver fails or hangs");
    receiver.set(Mode::Up);
    // The next retries (seconds apart, scaled) catch up, past the 10 s attempts that hang.
    let pairs = [("acc_down", &receiver)];
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(90));
    assert_at_least_once_without_strangers(&produced, &pairs);
    // The endpoint's attempts name each way it failed, and the retries that followed.
    let attempts = attempts(&cluster.query_apis[0].url, &token, "ep_acc_down");
    let outcomes: BTreeSet<&str> = attempts.iter().filter_map(|attempt| attempt["outcome"].as_str()).collect();
    assert_eq!(outcomes, BTreeSet::from(["failed", "succeeded", "timed_out", "unreachable"]), "outcomes of the endpoint's attempts");
    assert!(attempts.iter().any(|attempt| attempt["outcome"] == "failed" && attempt["response_status"] == 500), "a 500 is a failed attempt with its status");
    assert!(attempts.iter().any(|attempt| attempt["attempt"].as_u64() > Some(3)), "deliveries were retried on schedule, several times");
    assert_retried_on_schedule(&attempts, RETRY_SCALE);
}

/// The retry schedule (docs/webhooks.md, Retries) scaled by `scale`: each failed
/// attempt names its retry's time, the attempt's scheduled delay moved by at most ±20 %
/// (not every delay of one attempt number the same: the jitter is each delivery's own),
/// counted from when the attempt was made, or, for a retry made within half that delay
/// of its planned time (the time the attempt before it named), from that planned time;
/// and the retry is made at that time or later, never before.
fn assert_retried_on_schedule(attempts: &[Value], scale: f64) {
    const DELAYS_SECONDS: [f64; 9] = [5.0, 300.0, 1_800.0, 7_200.0, 18_000.0, 36_000.0, 50_400.0, 72_000.0, 86_400.0];
    let micros = |value: &Value| serde_json::from_value::<recap_schemas::Timestamp>(value.clone()).map(|at| at.0).ok();
    let of = |attempt: &Value, number: u64| attempts.iter().find(|other| other["event_id"] == attempt["event_id"] && other["attempt"].as_u64() == Some(number));
    let in_range = |factor: f64| (0.8 - 1e-3..=1.2 + 1e-3).contains(&factor);
    let mut factors: BTreeMap<u64, BTreeSet<i64>> = BTreeMap::new();
    let mut checked = 0;
    for attempt in attempts.iter().filter(|attempt| attempt["outcome"] != "succeeded") {
        let number = attempt["attempt"].as_u64().expect("an attempt number");
        let (Some(at), Some(next)) = (micros(&attempt["attempted_at"]), micros(&attempt["next_attempt_at"])) else { continue };
        let scheduled = DELAYS_SECONDS[usize::try_from(number).unwrap() - 1] * scale * 1e6;
        // A retry's planned time: what the attempt before it named.
        let planned = if number > 1 { of(attempt, number - 1).and_then(|before| micros(&before["next_attempt_at"])) } else { None };
        let factor = match planned {
            Some(planned) if in_range((next - planned) as f64 / scheduled) && (at - planned) <= (next - planned) / 2 => (next - planned) as f64 / scheduled,
            _ => (next - at) as f64 / scheduled,
        };
        assert!(
            in_range(factor),
            "attempt {number} of {}: made {} µs after its planned time {planned:?}, retried {} µs after it was made, {factor:.3} of the schedule",
            attempt["event_id"],
            planned.map_or(0, |planned| at - planned),
            next - at
        );
        factors.entry(number).or_default().insert((factor * 1_000.0).round() as i64);
        if let Some(made) = of(attempt, number + 1).and_then(|retry| micros(&retry["attempted_at"])) {
            assert!(made >= next, "attempt {} of {} was made {} µs before its time", number + 1, attempt["event_id"], next - made);
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} failed attempts named their retry");
    assert!(factors.values().any(|seen| seen.len() > 1), "the delays are moved by each delivery's jitter: {factors:?}");
}

/// Every attempt listed for `endpoint_id`, page by page.
fn attempts(base_url: &str, token: &str, endpoint_id: &str) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base_url}/webhook-endpoints/{endpoint_id}/attempts?limit=100");
        if let Some(cursor) = &cursor {
            url.push_str(&format!("&cursor={cursor}"));
        }
        let (status, _, body) = get(&url, Some(token));
        assert_eq!(status, 200, "{body}");
        let page: Value = serde_json::from_str(&body).unwrap();
        all.extend(page["data"].as_array().unwrap().iter().cloned());
        if page["has_more"] != true {
            return all;
        }
        cursor = page["next_cursor"].as_str().map(str::to_owned);
    }
}

// docs/webhooks.md: "a slow or dead endpoint holds only its own slots and never delays
// another endpoint's or another account's deliveries": while one account's endpoint
// hangs every request, another account's messages arrive within seconds.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn isolation_an_endpoint_that_hangs_never_delays_another_accounts_deliveries() {
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let mut cluster = Cluster::start(&[quick_retries()]);
    cluster.add_webhooks();
    let hanging = Receiver::start(&runtime, Duration::ZERO, None);
    hanging.set(Mode::Hanging);
    let healthy = Receiver::start(&runtime, Duration::ZERO, None);
    let mut setup = subscriber(events, "acc_hangs", &hanging.url).0;
    setup.extend(subscriber(events, "acc_on_time", &healthy.url).0);
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    // The hanging endpoint's backlog first (more than its 4 slots hold), then the
    // healthy account's messages. Each attempt to it hangs until the 10 s timeout.
    send(&cluster, &mut sent, &meetings(events, "acc_hangs", 12));
    std::thread::sleep(Duration::from_secs(1));
    for round in 0..5 {
        let before = healthy.received().len();
        let produced_at = Instant::now();
        let lines: Vec<Envelope> =
            (0..10).map(|index| events.meeting("acc_on_time", format!("mtg_round_{round}_{index}")).title("On time").version(1).envelope()).collect();
        send(&cluster, &mut sent, &lines);
        let deadline = produced_at + Duration::from_secs(5);
        while healthy.received().len() < before + lines.len() {
            assert!(Instant::now() < deadline, "round {round}: the healthy endpoint got {} of 10 within 5 s", healthy.received().len() - before);
            std::thread::sleep(Duration::from_millis(10));
        }
        let latency = healthy.received().last().unwrap().at - produced_at;
        assert!(latency < Duration::from_secs(5), "round {round}: {latency:?}");
    }
    assert_eq!(hanging.received().len(), 0, "the hanging endpoint accepted nothing");
    hanging.set(Mode::Up);
    let pairs = [("acc_hangs", &hanging), ("acc_on_time", &healthy)];
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(90));
    assert_at_least_once_without_strangers(&produced, &pairs);
}

// docs/webhooks.md, "Delivery": deliveries are at least once, and the reader's position
// is committed only up to the messages whose first attempts all settled (recorded,
// dropped, or written as a retry row), so a store that stops answering while
// deliveries go out loses none: with Cassandra paused in the middle of delivering
// (requests accepted, never answered), the deliverer waits, and every message arrives
// once Cassandra is back.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn store_outage_cassandra_paused_during_delivery_loses_nothing() {
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let mut cluster = Cluster::start(&[("RECAP_STORE_TIMEOUT_MS".into(), "1000".into()), quick_retries()]);
    cluster.add_webhooks();
    let receiver = Receiver::start(&runtime, Duration::from_millis(20), None);
    let (setup, _) = subscriber(events, "acc_store", &receiver.url);
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    let lines = meetings(events, "acc_store", 600);
    send(&cluster, &mut sent, &lines);
    let deadline = Instant::now() + Duration::from_secs(60);
    while receiver.received().len() < 50 {
        assert!(Instant::now() < deadline, "deliveries started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let outage = Outage::begin("cassandra.sh", "pause", "resume");
    std::thread::sleep(Duration::from_secs(6));
    outage.end();
    let pairs = [("acc_store", &receiver)];
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(120));
    assert_at_least_once_without_strangers(&produced, &pairs);
}

// docs/webhooks.md (Delivery, distributed edition): a batch the store refuses waits with
// the reader's partitions paused and its consumer still polled, so a store outage longer
// than `max.poll.interval.ms` leaves the member in its group (its partitions never move
// to another process delivering the same shards); a rebalance that still comes while
// the batch waits (a member joining, then leaving) fences it; and every message arrives
// once the store is back.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn store_outage_past_max_poll_interval_keeps_the_reader_in_its_group_and_loses_nothing() {
    use recap_readmodel::messages::{raw_json, Message, MessageKind};
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let max_poll = Duration::from_secs(10);
    let mut cluster = Cluster::start(&[
        ("RECAP_STORE_TIMEOUT_MS".into(), "1000".into()),
        quick_retries(),
        ("RECAP_KAFKA_MAX_POLL_INTERVAL_MS".into(), max_poll.as_millis().to_string()),
    ]);
    cluster.add_webhooks();
    let (flowing, direct) = (Receiver::start(&runtime, Duration::ZERO, None), Receiver::start(&runtime, Duration::ZERO, None));
    let (setup, _) = subscriber(events, "acc_poll", &flowing.url);
    send(&cluster, &mut sent, &setup);
    let (setup, _) = subscriber(events, "acc_direct", &direct.url);
    send(&cluster, &mut sent, &setup);
    send(&cluster, &mut sent, &meetings(events, "acc_poll", 30));
    let deadline = Instant::now() + Duration::from_secs(60);
    while flowing.received().is_empty() {
        assert!(Instant::now() < deadline, "deliveries started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let group_id = format!("{}recap-webhooks", cluster.topic_prefix);
    let client: BaseConsumer = rdkafka::config::ClientConfig::new().set("bootstrap.servers", &cluster.engines.brokers).create().unwrap();
    let membership = || recap_testkit::cluster::group_membership(&client, &group_id);
    let before = membership();
    assert_eq!((before.0.as_str(), before.1.len()), ("Stable", 1), "one reader, settled: {before:?}");

    let outage = Outage::begin("cassandra.sh", "stop", "start");
    // Messages the store has never seen, straight to the log: the reader's next batch
    // holds them while the store is away.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let held: Vec<AccountMessage> = (0..20)
        .map(|index| AccountMessage {
            account_id: "acc_direct".into(),
            message: Message {
                id: format!("msg_outage_{index}_{}", cluster.id),
                kind: MessageKind::MeetingCreated,
                created_at: recap_schemas::Timestamp(now),
                data: raw_json(&serde_json::json!({ "meeting_id": format!("mtg_outage_{index}") })),
            },
        })
        .collect();
    let topic = format!("{}recap.messages.v1", cluster.topic_prefix);
    runtime.block_on(async {
        let producer: rdkafka::producer::FutureProducer =
            rdkafka::config::ClientConfig::new().set("bootstrap.servers", &cluster.engines.brokers).set("acks", "all").create().unwrap();
        for message in &held {
            let value = serde_json::to_string(message).unwrap();
            let record = rdkafka::producer::FutureRecord::to(&topic).key(&message.account_id).payload(&value);
            producer.send(record, Duration::from_secs(10)).await.map_err(|(error, _)| error).expect("produce a message");
        }
    });
    // Three intervals without a batch written: the member stays, the same one.
    let until = Instant::now() + max_poll * 3;
    let mut samples = 0;
    while Instant::now() < until {
        assert_eq!(membership(), before, "the group's membership changed while the batch waited ({samples} samples in)");
        samples += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    // A member joining and leaving while the batch waits: each rebalance revokes the
    // reader's partitions, which fences the waiting batch (its messages are read again
    // from the committed offsets when the partitions come back), and none may be lost.
    {
        let visitor: BaseConsumer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", &cluster.engines.brokers)
            .set("group.id", &group_id)
            .set("enable.auto.commit", "false")
            .set("session.timeout.ms", "10000")
            .create()
            .unwrap();
        visitor.subscribe(&[topic.as_str()]).unwrap();
        let until = Instant::now() + Duration::from_secs(60);
        while membership().1.len() < 2 {
            assert!(Instant::now() < until, "a second member joined: {:?}", membership());
            let _ = visitor.poll(Duration::from_millis(100));
        }
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            let _ = visitor.poll(Duration::from_millis(100));
        }
    }
    let until = Instant::now() + Duration::from_secs(60);
    while membership() != before {
        assert!(Instant::now() < until, "the reader alone in the group again: {:?}", membership());
        std::thread::sleep(Duration::from_millis(200));
    }
    outage.end();
    let pairs = [("acc_poll", &flowing)];
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(120));
    assert_at_least_once_without_strangers(&produced, &pairs);
    let want: BTreeSet<String> = held.iter().map(|message| message.message.id.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !want.is_subset(&direct.ids()) {
        assert!(Instant::now() < deadline, "the messages held through the outage are delivered: {:?} of {}", direct.ids().len(), want.len());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(direct.ids(), want, "nothing else reached acc_direct");
    assert_eq!(membership(), before, "still the same member after the outage and the visit");
}

// docs/webhooks.md: "each process delivers the shards of the partitions it holds, so
// the role scales with the partitions … a rebalance hands a partition's reading and
// delivering to the next holder together": a second `recap webhooks` joining while
// messages flow loses none.
#[test]
#[ignore = "needs the real engines: `make up` (make test runs it)"]
fn scale_two_webhooks_processes_share_the_partitions_and_lose_nothing() {
    let runtime = runtime();
    let events = events();
    let mut sent = Vec::new();
    let mut cluster = Cluster::start(&[]);
    cluster.add_webhooks();
    let accounts = ["acc_scale_a", "acc_scale_b", "acc_scale_c", "acc_scale_d", "acc_scale_e", "acc_scale_f"];
    let receivers: Vec<Receiver> = accounts.iter().map(|_| Receiver::start(&runtime, Duration::from_millis(5), None)).collect();
    let mut setup = Vec::new();
    for (account_id, receiver) in accounts.iter().zip(&receivers) {
        setup.extend(subscriber(events, account_id, &receiver.url).0);
    }
    send(&cluster, &mut sent, &setup);
    cluster.wait_projected();
    let load: Vec<Vec<Envelope>> = accounts.iter().map(|account_id| meetings(events, account_id, 200)).collect();
    send(&cluster, &mut sent, &load.iter().flat_map(|lines| lines[..100].to_vec()).collect::<Vec<_>>());
    cluster.add_webhooks();
    send(&cluster, &mut sent, &load.iter().flat_map(|lines| lines[100..].to_vec()).collect::<Vec<_>>());
    let pairs: Vec<(&str, &Receiver)> = accounts.iter().copied().zip(receivers.iter()).collect();
    let produced = wait_delivered(&cluster, &sent, &pairs, Duration::from_secs(120));
    assert_at_least_once_without_strangers(&produced, &pairs);
    // Both processes run and answer.
    for role in &cluster.webhooks {
        assert_eq!(get(&format!("{}readyz", role.admin_url), None).0, 200);
    }
}
