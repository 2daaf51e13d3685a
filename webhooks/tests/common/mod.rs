//! What the webhooks suites share: a store per test (embedded, or a Cassandra keyspace
//! with `RECAP_TEST_WORLD=cassandra`), endpoint and outbox rows as the projection and
//! the projector write them, a runtime on a manual clock, and a receiver that records
//! what it is sent and answers as told.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use recap_readmodel::messages::{message_id, AccountMessage, Message, MessageKind};
use recap_readmodel::tables::{MESSAGE_OUTBOX, WEBHOOK_ENDPOINTS, WEBHOOK_SECRETS};
use recap_readmodel::webhooks::{EndpointRecord, SecretsRecord, SigningSecret, WebhookStore};
use recap_readmodel::{Driver, Mutation, Op, Val};
use recap_schemas::Timestamp;
use recap_testkit::store::TestStore;
use recap_testkit::Edition;
use recap_webhooks::{ClientConfig, DelivererConfig, ManualClock, RetrySchedule, Runtime};
use tokio::sync::watch;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// 2026-11-20T09:00:00Z, the clock's start.
pub const START: i64 = 1_795_165_200_000_000;

pub struct Setup {
    pub store: TestStore,
    pub webhooks: WebhookStore,
    _dir: tempfile::TempDir,
}

pub async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = match Edition::from_env() {
        Edition::Cassandra => TestStore::leased("webhooks").await.unwrap(),
        _ => TestStore::embedded(&dir.path().join("store.lmdb")).unwrap(),
    };
    let webhooks = WebhookStore::new(store.driver.clone(), recap_readmodel::webhooks::DEFAULT_RETENTION);
    Setup { store, webhooks, _dir: dir }
}

impl Setup {
    pub fn driver(&self) -> Arc<dyn Driver> {
        self.store.driver.clone()
    }

    /// Writes an endpoint and its secrets as the projection does.
    pub async fn endpoint(&self, account: &str, id: &str, url: &str, types: &[MessageKind], enabled: bool, version: u64) {
        self.endpoint_with_secrets(account, id, url, types, enabled, version, vec![SigningSecret { secret: SECRET.into(), expires_at: None }]).await;
    }

    /// Writes an endpoint of every kind created anew at `version` (its id deleted
    /// before), as the projection does.
    pub async fn recreated_endpoint(&self, account: &str, id: &str, url: &str, version: u64) {
        let record = EndpointRecord { created_version: version, ..endpoint_record(id, url, &[], true, version) };
        self.write_endpoint(account, &record, vec![SigningSecret { secret: SECRET.into(), expires_at: None }]).await;
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn endpoint_with_secrets(
        &self,
        account: &str,
        id: &str,
        url: &str,
        types: &[MessageKind],
        enabled: bool,
        version: u64,
        secrets: Vec<SigningSecret>,
    ) {
        self.write_endpoint(account, &endpoint_record(id, url, types, enabled, version), secrets).await;
    }

    async fn write_endpoint(&self, account: &str, record: &EndpointRecord, secrets: Vec<SigningSecret>) {
        let (id, ts) = (record.id.as_str(), record.version as i64);
        self.driver()
            .write(vec![
                Mutation {
                    table: &WEBHOOK_ENDPOINTS,
                    partition: vec![Val::text(account)],
                    clustering: vec![Val::text(id)],
                    op: Op::Put { body: serde_json::to_string(record).unwrap(), expires_at: None },
                    ts,
                },
                Mutation {
                    table: &WEBHOOK_SECRETS,
                    partition: vec![Val::text(account), Val::text(id)],
                    clustering: vec![],
                    op: Op::Put { body: serde_json::to_string(&SecretsRecord { secrets }).unwrap(), expires_at: None },
                    ts,
                },
            ])
            .await
            .unwrap();
    }

    /// Deletes an endpoint as the projection does.
    pub async fn delete_endpoint(&self, account: &str, id: &str, version: u64) {
        let ts = version as i64;
        self.driver()
            .write(vec![
                Mutation { table: &WEBHOOK_ENDPOINTS, partition: vec![Val::text(account)], clustering: vec![Val::text(id)], op: Op::Delete, ts },
                Mutation { table: &WEBHOOK_SECRETS, partition: vec![Val::text(account), Val::text(id)], clustering: vec![], op: Op::Delete, ts },
            ])
            .await
            .unwrap();
    }

    /// Appends messages to the outbox at `seq`s, as the projector does: in one write
    /// where writes land all at once (the embedded store, the outbox's own), else one
    /// row a write in `seq` order, so that a reader running meanwhile never sees a seq
    /// before an earlier one has landed (it would read past the earlier one).
    pub async fn outbox(&self, messages: &[(i64, AccountMessage)]) {
        let mut rows: Vec<Mutation> = messages
            .iter()
            .map(|(seq, message)| Mutation {
                table: &MESSAGE_OUTBOX,
                partition: vec![Val::text("log")],
                clustering: vec![Val::Int(*seq)],
                op: Op::Put { body: serde_json::to_string(message).unwrap(), expires_at: None },
                ts: *seq,
            })
            .collect();
        if self.webhooks.writes_atomically() {
            self.driver().write(rows).await.unwrap();
            return;
        }
        rows.sort_by_key(|row| row.ts);
        for row in rows {
            self.driver().write(vec![row]).await.unwrap();
        }
    }
}

/// An endpoint at `version`, created by its first upsert at version 1.
fn endpoint_record(id: &str, url: &str, types: &[MessageKind], enabled: bool, version: u64) -> EndpointRecord {
    EndpointRecord {
        id: id.into(),
        url: url.into(),
        description: None,
        types: types.to_vec(),
        enabled,
        version,
        created_version: 1,
        created_at: Timestamp(START),
        updated_at: Timestamp(START),
    }
}

/// A message of `kind` for `account`, caused by event `event`.
pub fn message(account: &str, kind: MessageKind, event: &str, meeting: &str) -> AccountMessage {
    AccountMessage {
        account_id: account.into(),
        message: Message {
            id: message_id(event, account, kind, meeting, Timestamp(START - 1_000_000)),
            kind,
            created_at: Timestamp(START - 1_000_000),
            data: recap_readmodel::messages::raw_json(&serde_json::json!({ "meeting_id": meeting })),
        },
    }
}

/// A runtime over the setup's store on a manual clock at [`START`], allowed to reach
/// loopback, polling often, with exact (unjittered) retry delays.
pub fn runtime(setup: &Setup, clock: &ManualClock, timeout: Duration) -> Runtime {
    let mut runtime =
        Runtime::new(setup.driver(), recap_readmodel::webhooks::DEFAULT_RETENTION, ClientConfig { allow_insecure: true, timeout, ..ClientConfig::default() });
    runtime.clock = Arc::new(clock.clone());
    runtime.deliverer =
        DelivererConfig { poll: Duration::from_millis(10), schedule: RetrySchedule { jitter: 0.0, ..RetrySchedule::default() }, ..DelivererConfig::default() };
    runtime.outbox.poll = Duration::from_millis(10);
    runtime
}

/// Starts the embedded runtime; stops it when the returned sender is dropped or sent true.
pub fn start(runtime: Runtime) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = watch::channel(false);
    (stop, tokio::spawn(runtime.run_embedded(stopped)))
}

/// One request a receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned()
    }
}

/// What a receiver answers: the scripted statuses in order, then `then`; paths
/// starting with `/hang` never answer.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<u16>>>,
}

impl Receiver {
    pub async fn start(script: &[u16]) -> Receiver {
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.iter().copied().collect::<VecDeque<u16>>()));
        let (log, answers) = (received.clone(), script.clone());
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
            let (log, answers) = (log.clone(), answers.clone());
            async move {
                let path = uri.path().to_owned();
                if path.starts_with("/hang") {
                    log.lock().unwrap().push(Received { path, headers, body });
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return StatusCode::OK;
                }
                log.lock().unwrap().push(Received { path, headers, body });
                let status = answers.lock().unwrap().pop_front().unwrap_or(200);
                StatusCode::from_u16(status).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, received, script }
    }

    /// From now on, answer 200 to everything.
    pub fn recover(&self) {
        self.script.lock().unwrap().clear();
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn count(&self, path: &str) -> usize {
        self.received.lock().unwrap().iter().filter(|received| received.path == path).count()
    }

    /// Waits until `condition` holds for what was received (at most 10 s).
    pub async fn wait_for(&self, condition: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        for _ in 0..1_000 {
            let received = self.received();
            if condition(&received) {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the receiver did not get what was expected; it got {:?}", self.received().iter().map(|r| r.path.clone()).collect::<Vec<_>>());
    }
}

/// The deliveries of shard `"0"` scheduled in `webhook_retries` from an hour before the
/// clock to a day and an hour after it (past the longest retry delay).
pub async fn pending(setup: &Setup, clock: &ManualClock) -> Vec<recap_readmodel::webhooks::DueDelivery> {
    use recap_webhooks::Clock;
    let now = clock.now_micros();
    setup.webhooks.scheduled("0", now - 3_600_000_000, now + 25 * 3_600_000_000).await.unwrap()
}

/// The webhooks position committed in the embedded store (the outbox seq every earlier
/// message's first attempts are settled up to).
pub async fn committed_position(setup: &Setup) -> i64 {
    let row = setup.driver().get(&recap_readmodel::tables::POSITIONS, &[Val::text("webhooks")], &[]).await.unwrap();
    row.map_or(0, |row| serde_json::from_str::<serde_json::Value>(&row.body).unwrap()["seq"].as_i64().unwrap())
}

/// Waits until `condition` holds (at most 10 s).
pub async fn eventually<F, Fut>(what: &str, condition: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..1_000 {
        if condition().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}
