//! A seeded world for router tests: a store filled through the real projection (a
//! temporary embedded store, or with `RECAP_TEST_STORE=scylla` a keyspace of its own on
//! the real cluster), the REST router over it, and a manual clock driving the limiter.
//!
//! The same suite also runs against the distributed edition (`tests/rest_router.rs` at
//! the workspace root): there `crate::edition::start` gives each world a cluster of its
//! own (one projector, two query-api processes over Kafka, Cassandra and Redis); its
//! events are produced to Kafka and its requests go over HTTP to the two processes in
//! turn. Tests that drive the clock, inject store faults or supply their own limiter
//! build their world with `World::in_process` and run in this process in both runs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::BodyExt;
use recap_access::{InProcessLimiter, Limiter, ManualClock, Plans};
use recap_query_api::{router, RestConfig, RestState};
use recap_readmodel::table::Table;
use recap_readmodel::{Batch, Driver, Mutation, ReadModel, Row, ScanRange, StoreError, Val};
use recap_schemas::build::{Draft, Epoch, Events};
use recap_schemas::{AccountUpserted, ActionItem, ActionItemStatus, MeetingUpserted, Timestamp};
use serde_json::Value;
use tower::ServiceExt;

#[path = "../../../tests/common/remote.rs"]
mod remote;
pub use remote::{over_http, Edition};

pub const ALICE: &str = "svc_pat_alice_0123456789";
pub const BOB: &str = "svc_pat_bob_0123456789";
pub const CAROL: &str = "svc_pat_carol_0123456789";
pub const NO_PLAN: &str = "svc_pat_noplan_0123456789";
pub const BASIC: &str = "svc_pat_basic_0123456789";
pub const ENTERPRISE: &str = "svc_pat_enterprise_0123456789";
pub const REVOKED: &str = "svc_pat_revoked_0123456789";
pub const SMALL_QUOTA: &str = "svc_pat_small_0123456789";

/// The instant the tests' clock starts at.
pub const NOW: &str = "2026-11-20T10:00:00Z";

/// The suite's events: times count from 2026-11-01T00:00:00Z, envelope ids from a counter.
pub const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_793_491_200));

pub fn ts(minute: i64) -> String {
    EVENTS.minute(minute).to_rfc3339()
}

/// An account on `tier` (none: no plan), its billing cycle anchored on January 15th.
pub fn account_draft(account_id: &str, tier: Option<&str>, quota: Option<u64>) -> Draft<AccountUpserted> {
    let account = EVENTS.account(account_id);
    match tier {
        Some(tier) => account.plan(tier, quota, Timestamp::parse("2026-01-15T00:00:00Z").unwrap()),
        None => account,
    }
}

pub fn account(account_id: &str, tier: Option<&str>, quota: Option<u64>) -> String {
    account_draft(account_id, tier, quota).to_line()
}

pub fn token(account_id: &str, token_id: &str, token: &str) -> String {
    EVENTS.token_created(account_id, token_id, recap_access::token_sha256(token)).name("script").to_line()
}

pub fn revoke(account_id: &str, token_id: &str) -> String {
    EVENTS.token_revoked(account_id, token_id).revoked_at(EVENTS.minute(1)).version(2).to_line()
}

/// An action item `do {item_id}`.
pub fn item(item_id: &str, status: &str, assignee: Option<&str>, created_minute: i64) -> ActionItem {
    let status = ActionItemStatus::parse(status).unwrap();
    EVENTS.item(item_id).status(status).assignee(assignee).created_at(EVENTS.minute(created_minute)).into()
}

/// A 30-minute call in Berlin (of the series `ser_1` when created at minute 10, 30, …)
/// with its note, a template summary "summary of {title}" and Ada as participant.
pub fn meeting_draft(account_id: &str, meeting_id: &str, title: &str, created_minute: i64, items: Vec<ActionItem>) -> Draft<MeetingUpserted> {
    let created = EVENTS.minute(created_minute);
    EVENTS
        .meeting(account_id, meeting_id)
        .title(title)
        .times(created)
        .ended_at(EVENTS.minute(created_minute + 30))
        .updated_at(EVENTS.minute(created_minute + 31))
        .series_id((created_minute % 20 == 10).then_some("ser_1"))
        .timezone("Europe/Berlin")
        .note(EVENTS.note(format!("{meeting_id}_note")).title(title).text(format!("{title}\nAgenda")).times(created))
        .summaries([EVENTS
            .summary(format!("{meeting_id}_sum"))
            .kind("template_output")
            .template_id(Some("tpl_1"))
            .text(format!("summary of {title}"))
            .times(created)])
        .participants([EVENTS.participant("hum_1")])
        .action_items(items)
}

pub fn meeting(account_id: &str, meeting_id: &str, title: &str, created_minute: i64, items: Vec<ActionItem>) -> String {
    meeting_draft(account_id, meeting_id, title, created_minute, items).to_line()
}

pub fn transcript(account_id: &str, meeting_id: &str) -> String {
    EVENTS
        .transcript(account_id, meeting_id, "Hello there")
        .segment("seg_1", "mic", 0, 4200, "Hello")
        .segment("seg_2", "speaker", 4200, 5000, "there")
        .words(Some(vec![EVENTS.word("Hello", 0, 350, "mic")]))
        .version(2)
        .to_line()
}

pub fn delete_meeting(account_id: &str, meeting_id: &str) -> String {
    EVENTS.meeting_deleted(account_id, meeting_id).version(9).to_line()
}

pub fn standalone_item(account_id: &str, item: ActionItem) -> String {
    EVENTS.action_item(account_id, item).to_line()
}

/// A collaborating team; one that includes team action items is on the business plan.
pub fn team(team_id: &str, name: &str, includes_items: bool) -> String {
    let plan = includes_items.then_some("business");
    EVENTS.team(team_id, name).plan(plan).can_collaborate(true).includes_team_action_items(includes_items).to_line()
}

pub fn member(team_id: &str, account_id: &str) -> String {
    EVENTS.member(team_id, account_id).to_line()
}

pub fn remove_member(team_id: &str, account_id: &str) -> String {
    EVENTS.member_removed(team_id, account_id).version(2).to_line()
}

/// A share for viewers by "owner {owner}", its text the title and "shared text".
pub fn share(share_id: &str, owner: &str, team: Option<(&str, &str)>, recipients: &[&str], title: &str, published_minute: i64) -> String {
    EVENTS
        .share(share_id, owner)
        .title(title)
        .owner_name(format!("owner {owner}"))
        .published_at(EVENTS.minute(published_minute))
        .team(team)
        .recipients(recipients)
        .text(format!("{title}\nshared text"))
        .to_line()
}

/// A team action item `team {item_id}` for Grace, from the shared note `shr_team`.
pub fn team_item(team_id: &str, item_id: &str, status: &str, created_minute: i64) -> String {
    EVENTS
        .team_item(team_id, item_id)
        .text(format!("team {item_id}"))
        .status(ActionItemStatus::parse(status).unwrap())
        .created_at(EVENTS.minute(created_minute))
        .shared_note("shr_team", "Team plan")
        .to_line()
}

/// The standard world: accounts in every plan situation, two accounts with meetings,
/// teams with and without team action items, shares of every kind.
pub fn standard_events() -> Vec<String> {
    let mut events = vec![
        account("acc_a", Some("flow"), None),
        account("acc_b", Some("enterprise"), None),
        account("acc_c", Some("flow"), None),
        account("acc_none", None, None),
        account("acc_basic", Some("basic"), None),
        account("acc_ent", Some("enterprise"), Some(7)),
        account("acc_small", Some("flow"), Some(3)),
        token("acc_a", "tok_a", ALICE),
        token("acc_b", "tok_b", BOB),
        token("acc_c", "tok_c", CAROL),
        token("acc_none", "tok_none", NO_PLAN),
        token("acc_basic", "tok_basic", BASIC),
        token("acc_ent", "tok_ent", ENTERPRISE),
        token("acc_small", "tok_small", SMALL_QUOTA),
        token("acc_a", "tok_revoked", REVOKED),
        revoke("acc_a", "tok_revoked"),
    ];
    // Alice: five meetings (minutes 10..50), the newest with a transcript, one deleted.
    events.push(meeting("acc_a", "mtg_a1", "Budget review", 10, vec![item("ai_1", "todo", Some("hum_1"), 10), item("ai_2", "done", None, 11)]));
    events.push(meeting("acc_a", "mtg_a2", "Design sync", 20, vec![item("ai_3", "in_progress", Some("hum_2"), 20)]));
    events.push(meeting("acc_a", "mtg_a3", "Hiring", 30, vec![item("ai_4", "todo", Some("hum_2"), 30)]));
    events.push(meeting("acc_a", "mtg_a4", "Roadmap", 40, vec![]));
    events.push(meeting("acc_a", "mtg_a5", "Retro", 50, vec![item("ai_5", "todo", Some("hum_1"), 50)]));
    events.push(transcript("acc_a", "mtg_a5"));
    events.push(meeting("acc_a", "mtg_gone", "Deleted one", 45, vec![item("ai_gone", "todo", None, 45)]));
    events.push(delete_meeting("acc_a", "mtg_gone"));
    events.push(standalone_item("acc_a", item("ai_9", "in_progress", None, 60)));
    // Bob's own meeting, never visible to Alice.
    events.push(meeting("acc_b", "mtg_b1", "Bob private", 15, vec![item("ai_b1", "todo", None, 15)]));
    // Teams: design (Alice, Bob; includes team items), free (Alice; no team items),
    // secret (Bob only).
    events.push(team("team_design", "Design", true));
    events.push(team("team_free", "Free team", false));
    events.push(team("team_secret", "Secret", true));
    events.push(member("team_design", "acc_a"));
    events.push(member("team_design", "acc_b"));
    events.push(member("team_free", "acc_a"));
    events.push(member("team_secret", "acc_b"));
    events.push(share("shr_team", "acc_b", Some(("team_design", "Design")), &[], "Team plan budget", 100));
    events.push(share("shr_direct", "acc_b", None, &["acc_a"], "Direct notes", 110));
    events.push(share("shr_own", "acc_a", Some(("team_design", "Design")), &[], "Alice own share budget", 120));
    events.push(share("shr_secret", "acc_b", Some(("team_secret", "Secret")), &[], "Secret budget", 130));
    events.push(team_item("team_design", "tai_1", "todo", 100));
    events.push(team_item("team_design", "tai_2", "done", 101));
    events.push(team_item("team_design", "tai_3", "todo", 102));
    events.push(team_item("team_secret", "tai_s", "todo", 103));
    events
}

pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    pub json: Value,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    pub fn remaining(&self) -> u64 {
        self.header("x-quota-remaining").and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("no X-Quota-Remaining: {:?}", self.headers))
    }

    pub fn ids(&self) -> Vec<String> {
        self.json["data"]
            .as_array()
            .unwrap_or_else(|| panic!("no data array: {}", self.text))
            .iter()
            .map(|entry| entry["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// Asserts the error envelope: status, code, and exactly these extra fields.
    pub fn assert_error(&self, status: u16, code: &str, extra: &[&str]) {
        assert_eq!(self.status.as_u16(), status, "{}", self.text);
        assert_eq!(self.code(), code, "{}", self.text);
        let fields = self.json["error"].as_object().unwrap();
        assert!(fields["message"].is_string());
        let mut names: Vec<&str> = fields.keys().map(String::as_str).filter(|name| *name != "code" && *name != "message").collect();
        names.sort();
        let mut expected = extra.to_vec();
        expected.sort();
        assert_eq!(names, expected, "extra fields of {code}: {}", self.text);
        assert_eq!(self.json.as_object().unwrap().len(), 1, "only the error key: {}", self.text);
    }
}

/// How the store behind the router misbehaves (for the 5xx rules).
pub const FAULT_NONE: u8 = 0;
pub const FAULT_UNAVAILABLE: u8 = 1;
pub const FAULT_HANG: u8 = 2;
pub const FAULT_CORRUPT: u8 = 3;

/// The embedded driver, with faults switched on and off by tests. It reports no change
/// counts (`Driver::change_count`), like a store other processes write, so the token
/// cache keeps lookups by age here, as in the distributed edition.
pub struct FaultyDriver {
    inner: Arc<dyn Driver>,
    fault: Arc<std::sync::atomic::AtomicU8>,
    /// Scans started (every endpoint's read is one or more; token lookups are gets).
    scans: Arc<AtomicU64>,
}

impl FaultyDriver {
    /// Corruption is reported by scans only, so a request gets past the token lookup
    /// (a `get`) and fails where the endpoint reads.
    async fn fault(&self, scanning: bool) -> Result<(), StoreError> {
        match self.fault.load(Ordering::SeqCst) {
            FAULT_UNAVAILABLE => Err(StoreError::Unavailable("connection refused".into())),
            FAULT_HANG => {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                Ok(())
            }
            FAULT_CORRUPT if scanning => Err(StoreError::Corrupt("row does not decode".into())),
            _ => Ok(()),
        }
    }
}

#[async_trait::async_trait]
impl Driver for FaultyDriver {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.fault(false).await?;
        self.inner.get(table, partition, clustering).await
    }
    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.scans.fetch_add(1, Ordering::SeqCst);
        self.fault(true).await?;
        self.inner.scan(table, partition, range, limit).await
    }
    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        self.inner.write(mutations).await
    }
    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.inner.insert_if_absent(table, partition, clustering, body, expires_at).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.fault(false).await?;
        self.inner.ping().await
    }
}

enum Backend {
    Router { _dir: tempfile::TempDir, _store: recap_testkit::store::TestStore, driver: Arc<dyn Driver>, router: axum::Router },
    Remote { edition: Edition, next: AtomicU64, sticky: bool },
}

pub struct World {
    backend: Backend,
    /// The store fault the in-process router's reads meet (`set_fault`).
    pub fault: Arc<std::sync::atomic::AtomicU8>,
    /// Scans the in-process router's reads have started.
    pub scans: Arc<AtomicU64>,
    /// The in-process limiter's clock.
    pub clock: ManualClock,
    position: i64,
}

impl World {
    pub async fn new(events: &[String]) -> World {
        World::with_config(events, RestConfig { rate_limit_per_minute: 120, ..RestConfig::default() }).await
    }

    pub async fn standard() -> World {
        World::new(&standard_events()).await
    }

    /// The router with `config` over the seeded store, in this process or, in the
    /// distributed run, served by a cluster started with the same settings.
    pub async fn with_config(events: &[String], config: RestConfig) -> World {
        match crate::edition::start(&config) {
            Some(edition) => {
                // A token cache is per process: such a world asks one process only.
                let sticky = config.token_cache_ms > 0;
                let mut world = World {
                    backend: Backend::Remote { edition, next: AtomicU64::new(0), sticky },
                    fault: Arc::default(),
                    scans: Arc::default(),
                    clock: ManualClock::at(Timestamp::parse(NOW).unwrap()),
                    position: 0,
                };
                world.apply(events).await;
                world
            }
            None => World::in_process(events, config).await,
        }
    }

    /// The standard world, in this process in every run.
    pub async fn standard_in_process() -> World {
        World::in_process(&standard_events(), RestConfig::default()).await
    }

    /// The router in this process in every run: for tests that drive its clock, make its
    /// store fail, or time a per-process cache.
    pub async fn in_process(events: &[String], config: RestConfig) -> World {
        World::with_limiter(events, config, |clock, _| Arc::new(InProcessLimiter::new(Arc::new(clock)))).await
    }

    /// A world whose router asks the limiter `limiter` makes from the world's clock and
    /// its count of started scans (in this process in every run).
    pub async fn with_limiter(events: &[String], config: RestConfig, limiter: impl FnOnce(ManualClock, Arc<AtomicU64>) -> Arc<dyn Limiter>) -> World {
        let dir = tempfile::tempdir().unwrap();
        let store = recap_testkit::store::test_store("rest", &dir.path().join("store.lmdb")).await.unwrap();
        let driver = store.driver.clone();
        let fault = Arc::new(std::sync::atomic::AtomicU8::new(FAULT_NONE));
        let scans = Arc::new(AtomicU64::new(0));
        let readmodel = ReadModel::new(Arc::new(FaultyDriver { inner: driver.clone(), fault: fault.clone(), scans: scans.clone() }));
        let clock = ManualClock::at(Timestamp::parse(NOW).unwrap());
        let limiter = limiter(clock.clone(), scans.clone());
        let state = RestState::new(readmodel, Plans::default(), limiter, b"test cursor secret, 32 bytes long!".to_vec(), &config);
        let backend = Backend::Router { _dir: dir, _store: store, driver, router: router(state) };
        let mut world = World { backend, fault, scans, clock, position: 0 };
        world.apply(events).await;
        world
    }

    pub async fn apply(&mut self, events: &[String]) {
        match &self.backend {
            Backend::Router { driver, .. } => {
                let mut batch = Batch::new(driver.clone());
                for line in events {
                    self.position += 1;
                    let envelope = recap_schemas::Envelope::decode(line.as_bytes()).unwrap_or_else(|error| panic!("{error}: {line}"));
                    batch.apply(&envelope, self.position).await.unwrap();
                }
                driver.write(batch.into_mutations()).await.unwrap();
            }
            Backend::Remote { edition: (apply, _), .. } => apply(events),
        }
    }

    /// The router's answer: from the router in this process, or over HTTP from the next
    /// query-api process.
    async fn answer(&self, request: Request<Body>) -> (StatusCode, HeaderMap, Vec<u8>) {
        match &self.backend {
            Backend::Router { router, .. } => {
                let response = router.clone().oneshot(request).await.unwrap();
                let (parts, body) = response.into_parts();
                (parts.status, parts.headers, body.collect().await.unwrap().to_bytes().to_vec())
            }
            Backend::Remote { edition: (_, origins), next, sticky } => {
                let turn = if *sticky { 0 } else { next.fetch_add(1, Ordering::Relaxed) as usize };
                over_http(&origins[turn % origins.len()], request).await
            }
        }
    }

    pub async fn send(&self, request: Request<Body>) -> Response {
        let path = request.uri().path().to_string();
        let method = request.method().to_string();
        let (status, headers, bytes) = self.answer(request).await;
        let text = String::from_utf8(bytes).unwrap();
        // A response to HEAD has no body (HTTP semantics; the server strips it).
        if method == "HEAD" {
            assert!(text.is_empty());
            assert!(headers.contains_key("x-request-id"));
            return Response { status, headers, text, json: Value::Null };
        }
        let json: Value = serde_json::from_str(&text).unwrap_or_else(|error| panic!("not JSON ({error}): {text}"));
        crate::openapi::check_response(&method, &path, status.as_u16(), &headers, &json);
        for (name, _) in headers.iter() {
            assert!(!name.as_str().starts_with("access-control-"), "no CORS header is ever sent: {name}");
        }
        Response { status, headers, text, json }
    }

    pub async fn request(&self, method: Method, uri: &str, token: Option<&str>) -> Response {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        self.send(builder.body(Body::empty()).unwrap()).await
    }

    pub fn set_fault(&self, fault: u8) {
        assert!(matches!(self.backend, Backend::Router { .. }), "store faults are injected in process only: build the world with World::in_process");
        self.fault.store(fault, Ordering::SeqCst);
    }

    pub async fn get(&self, uri: &str, token: &str) -> Response {
        self.request(Method::GET, uri, Some(token)).await
    }
}
