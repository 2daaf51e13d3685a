//! Router tests' world: a temporary embedded store seeded through the real projection,
//! the MCP router over it, an adjustable clock, a driver wrapper that fails or stalls
//! chosen tables, and helpers for JSON-RPC calls and OAuth flows.
//!
//! The same tests also run against the distributed edition (`tests/mcp_router.rs` at the
//! workspace root): there `crate::edition::start` gives each world a cluster of its own
//! (one projector and one mcp process over Kafka, Cassandra and Redis, beside two
//! query-api processes); its events are produced to Kafka and its requests go over HTTP
//! to the mcp process. Tests that move the clock, make tables fail or stall, or read the
//! store build their world with `World::in_process` and run in this process in both runs.

#![allow(dead_code)]

#[path = "../../../tests/common/events.rs"]
pub mod events;
#[path = "../../../tests/common/remote.rs"]
mod remote;
pub use remote::{over_http, Edition};

/// The hook of the mcp crate's own runs (each test file takes it as `crate::edition`):
/// every world in process. `tests/mcp_router.rs` supplies one that starts a cluster.
pub mod in_process_edition {
    pub fn start(_config: &recap_mcp::McpConfig) -> Option<super::Edition> {
        None
    }
}

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use axum::Router;
use recap_access::Plans;
use recap_mcp::{router, McpConfig, McpState};
use recap_readmodel::table::Table;
use recap_readmodel::{Batch, Driver, Mutation, ReadModel, Row, ScanRange, StoreError, Val};
use serde_json::{json, Value};
use tower::ServiceExt;

use events::*;

/// The spec's eight tools, in its order.
pub const TOOLS: [&str; 8] = [
    "list_meetings",
    "get_meeting",
    "get_meeting_transcript",
    "get_recurring_meeting_history",
    "search_meetings",
    "list_pending_action_items",
    "search_shared_notes",
    "get_shared_note",
];

pub const FLOW_PAT: &str = "svc_pat_flow0000000000000000000000000001";
pub const FLOW2_PAT: &str = "svc_pat_flow0000000000000000000000000002";
pub const ENTERPRISE_PAT: &str = "svc_pat_ent00000000000000000000000000001";
pub const NO_PLAN_PAT: &str = "svc_pat_none0000000000000000000000000001";
pub const OTHER_PAT: &str = "svc_pat_other000000000000000000000000001";
pub const REVOKED_PAT: &str = "svc_pat_revoked0000000000000000000000001";

/// Which store calls fail: none, everything, or the tables named.
#[derive(Default)]
pub struct Faults {
    pub fail_tables: BTreeSet<&'static str>,
    pub stall_tables: BTreeSet<&'static str>,
}

/// A driver that answers like its inner one, except for the tables it is told to fail
/// (Unavailable) or stall (never answers in time). It reports no change counts
/// (`Driver::change_count`), like a store other processes write, so the token cache
/// keeps lookups by age here, as in the distributed edition.
pub struct FaultyDriver {
    pub inner: Arc<dyn Driver>,
    pub faults: Mutex<Faults>,
}

impl FaultyDriver {
    async fn check(&self, table: &'static Table) -> Result<(), StoreError> {
        let (fail, stall) = {
            let faults = self.faults.lock().unwrap();
            (faults.fail_tables.contains(table.name), faults.stall_tables.contains(table.name))
        };
        if stall {
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
        if fail {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl Driver for FaultyDriver {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.check(table).await?;
        self.inner.get(table, partition, clustering).await
    }
    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.check(table).await?;
        self.inner.scan(table, partition, range, limit).await
    }
    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        for mutation in &mutations {
            self.check(mutation.table).await?;
        }
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
        self.check(table).await?;
        self.inner.insert_if_absent(table, partition, clustering, body, expires_at).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
    fn timeout(&self) -> Duration {
        Duration::from_millis(200)
    }
}

pub struct World {
    _dir: tempfile::TempDir,
    _store: recap_testkit::store::TestStore,
    pub driver: Arc<FaultyDriver>,
    pub readmodel: ReadModel,
    pub app: Router,
    /// Added to the wall clock the router sees, in microseconds.
    pub clock_offset: Arc<AtomicI64>,
    position: AtomicI64,
    /// The distributed edition the world's events and requests go to instead of the
    /// router and store above (which then stay empty).
    remote: Option<Edition>,
}

/// The standard world: accounts on each plan, meetings, a series, transcripts, action
/// items, a team and shares.
pub fn seed_events() -> Vec<String> {
    let mut lines = vec![
        account("acc_flow", Some("flow"), None, 1),
        account("acc_ent", Some("enterprise"), None, 1),
        account("acc_none", None, None, 1),
        account("acc_other", Some("flow"), None, 1),
        token_created("acc_flow", "tok_flow", FLOW_PAT, 1),
        token_created("acc_flow", "tok_flow2", FLOW2_PAT, 1),
        token_created("acc_ent", "tok_ent", ENTERPRISE_PAT, 1),
        token_created("acc_none", "tok_none", NO_PLAN_PAT, 1),
        token_created("acc_other", "tok_other", OTHER_PAT, 1),
        token_created("acc_flow", "tok_revoked", REVOKED_PAT, 1),
        token_revoked("acc_flow", "tok_revoked", 2),
    ];
    let weekly_1_items = [item("ai_todo", "todo", Some("hum_1"), 10), item("ai_done", "done", None, 11)];
    lines.push(meeting_draft("acc_flow", "mtg_weekly_1", "Weekly sync", 10).series_id(Some("ser_weekly")).action_items(weekly_1_items).to_line());
    let weekly_2_items = [item("ai_doing", "in_progress", None, 20)];
    lines.push(meeting_draft("acc_flow", "mtg_weekly_2", "Weekly sync", 20).series_id(Some("ser_weekly")).action_items(weekly_2_items).to_line());
    let budget = meeting_draft("acc_flow", "mtg_budget", "Budget planning", 30);
    lines.push(budget.with(|event| event.meeting.summaries[0].text = "Quarterly budget numbers agreed".into()).to_line());
    for index in 0..25 {
        let id = format!("mtg_standup_{index:02}");
        lines.push(meeting("acc_flow", &id, &format!("Standup {index}"), 100 + index, 1));
    }
    lines.push(meeting("acc_other", "mtg_foreign", "Other account's budget", 40, 1));
    lines.push(transcript("acc_flow", "mtg_weekly_1", "Hello team budget", Some(vec![word("Hello", 0), word("team", 300), word("budget", 600)]), 2));
    lines.push(transcript("acc_flow", "mtg_weekly_2", "Only text here", None, 2));
    lines.push(action_item("acc_flow", item("ai_loose", "in_progress", None, 50), 1));
    lines.push(team("team_design", "Design", Some("business"), true, 1));
    lines.push(member("team_design", "acc_flow", 1));
    lines.push(
        share("shr_team", "acc_other", 60)
            .title("Q3 planning")
            .team(Some(("team_design", "Design")))
            .text("Q3 planning\nDecisions\nThe budget for Q3 is approved.")
            .version(1)
            .to_line(),
    );
    let long_text = "é".repeat(13_000);
    lines.push(share("shr_long", "acc_other", 61).title("Long notes").recipients(["acc_flow"]).text(&long_text).version(1).to_line());
    lines.push(share("shr_private", "acc_other", 62).title("Not for you").recipients(["acc_ent"]).text("budget secret").version(1).to_line());
    lines
}

impl World {
    pub async fn new() -> World {
        World::with_config(McpConfig::default()).await
    }

    /// The router with `config` over the seeded store, in this process or, in the
    /// distributed run, served by a cluster started with the same settings.
    pub async fn with_config(config: McpConfig) -> World {
        let remote = crate::edition::start(&config);
        World::build(config, remote).await
    }

    /// The router in this process in every run: for tests that move its clock, make its
    /// store fail or stall, read the store, or time a per-process cache.
    pub async fn in_process(config: McpConfig) -> World {
        World::build(config, None).await
    }

    async fn build(config: McpConfig, remote: Option<Edition>) -> World {
        let dir = tempfile::tempdir().unwrap();
        // With `RECAP_TEST_STORE=scylla`, a keyspace of its own on the real cluster.
        let store = recap_testkit::store::test_store("mcp", &dir.path().join("store.lmdb")).await.unwrap();
        let driver = Arc::new(FaultyDriver { inner: store.driver.clone(), faults: Mutex::new(Faults::default()) });
        let readmodel = ReadModel::new(driver.clone());
        let clock_offset = Arc::new(AtomicI64::new(0));
        let offset = clock_offset.clone();
        let clock: recap_mcp::Clock = Arc::new(move || recap_readmodel::driver::now_micros() + offset.load(Ordering::SeqCst));
        let state = McpState::with_clock(readmodel.clone(), Plans::default(), &config, clock);
        let world = World { _dir: dir, _store: store, driver, readmodel, app: router(state), clock_offset, position: AtomicI64::new(0), remote };
        world.feed(&seed_events()).await;
        world
    }

    /// Projects events into the store, one batch each, as the projector would.
    pub async fn feed(&self, lines: &[String]) {
        if let Some((apply, _)) = &self.remote {
            apply(lines);
            return;
        }
        for line in lines {
            let envelope = recap_schemas::Envelope::decode(line.as_bytes()).unwrap();
            let driver: Arc<dyn Driver> = self.driver.inner.clone();
            let mut batch = Batch::new(driver.clone());
            batch.apply(&envelope, self.position.fetch_add(1, Ordering::SeqCst) + 1).await.unwrap();
            driver.write(batch.into_mutations()).await.unwrap();
        }
    }

    pub fn advance_clock(&self, by: Duration) {
        self.in_process_only();
        self.clock_offset.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
    }

    pub fn fail_table(&self, name: &'static str) {
        self.in_process_only();
        self.driver.faults.lock().unwrap().fail_tables.insert(name);
    }

    /// The clock and the store's faults are this process's: a world served by a cluster
    /// has neither.
    fn in_process_only(&self) {
        assert!(self.remote.is_none(), "clock moves and store faults are in process only: build the world with World::in_process");
    }

    pub fn stall_table(&self, name: &'static str) {
        self.in_process_only();
        self.driver.faults.lock().unwrap().stall_tables.insert(name);
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        if let Some((_, origins)) = &self.remote {
            let (status, headers, bytes) = over_http(&origins[0], request).await;
            return Reply { status, headers, body: String::from_utf8(bytes).unwrap() };
        }
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        Reply { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
    }

    /// POST /mcp with a raw body and extra headers.
    pub async fn post_raw(&self, token: Option<&str>, body: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = Request::post("/mcp")
            .header("host", "mcp.test:8080")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request.body(Body::from(body.to_string())).unwrap()).await
    }

    /// One JSON-RPC request (id 1) with a PAT; the whole response object.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.rpc_as(FLOW_PAT, method, params, &[]).await
    }

    pub async fn rpc_as(&self, token: &str, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let reply = self.post_raw(Some(token), &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string(), headers).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.json()
    }

    /// tools/call; the result object.
    pub async fn call(&self, tool: &str, arguments: Value) -> Value {
        let response = self.rpc("tools/call", json!({"name": tool, "arguments": arguments})).await;
        response["result"].clone()
    }

    /// tools/call expecting success; the parsed JSON of its one text item.
    pub async fn call_ok(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_eq!(result["isError"], json!(false), "{result}");
        text_json(&result)
    }

    /// tools/call expecting isError; the parsed JSON of its text item.
    pub async fn call_err(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).await;
        assert_eq!(result["isError"], json!(true), "{result}");
        text_json(&result)
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Request::get(path).header("host", "mcp.test:8080").body(Body::empty()).unwrap()).await
    }

    pub async fn post_form(&self, path: &str, pairs: &[(&str, &str)]) -> Reply {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
        self.send(
            Request::post(path).header("host", "mcp.test:8080").header("content-type", "application/x-www-form-urlencoded").body(Body::from(body)).unwrap(),
        )
        .await
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Reply {
        self.send(Request::post(path).header("host", "mcp.test:8080").header("content-type", "application/json").body(Body::from(body.to_string())).unwrap())
            .await
    }
}

/// The one text content item of a tool result, parsed.
pub fn text_json(result: &Value) -> Value {
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1, "one content item: {result}");
    assert_eq!(content[0]["type"], "text");
    serde_json::from_str(content[0]["text"].as_str().expect("text")).expect("the text is JSON")
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

// ---- OAuth helpers ---------------------------------------------------------------

pub const REDIRECT_URI: &str = "http://127.0.0.1:47123/callback";
pub const VERIFIER: &str = "verifier-0123456789-0123456789-0123456789-abcdef";

pub fn challenge(verifier: &str) -> String {
    recap_mcp::oauth::token::s256(verifier)
}

/// Registers a client; its client_id.
pub async fn register(world: &World, redirect_uris: &[&str]) -> String {
    let reply =
        world.post_json("/mcp/register", &json!({"client_name": "Test <Client>", "redirect_uris": redirect_uris, "token_endpoint_auth_method": "none"})).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.json()["client_id"].as_str().unwrap().to_string()
}

/// The query pairs of a redirect's Location.
pub fn location_query(reply: &Reply) -> (String, Vec<(String, String)>) {
    let location = reply.header("location").expect("a Location header");
    let url = url::Url::parse(location).unwrap();
    let base = format!("{}://{}{}", url.scheme(), url.host_str().unwrap(), url.port().map(|port| format!(":{port}")).unwrap_or_default()) + url.path();
    (base, url.query_pairs().into_owned().collect())
}

pub fn query_value(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
}

/// Approves an authorization with a PAT; the code.
pub async fn authorize(world: &World, client_id: &str, pat: &str) -> String {
    let challenge = challenge(VERIFIER);
    let reply = world
        .post_form(
            "/mcp/authorize",
            &[
                ("response_type", "code"),
                ("client_id", client_id),
                ("redirect_uri", REDIRECT_URI),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "xyz"),
                ("scope", "svc:read"),
                ("pat", pat),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let (_, pairs) = location_query(&reply);
    query_value(&pairs, "code").expect("code")
}

/// Exchanges a code; the token response.
pub async fn exchange(world: &World, client_id: &str, code: &str) -> Reply {
    exchange_with_verifier(world, client_id, code, VERIFIER).await
}

/// Exchanges a code presenting `verifier` as the PKCE code verifier.
pub async fn exchange_with_verifier(world: &World, client_id: &str, code: &str, verifier: &str) -> Reply {
    world
        .post_form(
            "/mcp/token",
            &[("grant_type", "authorization_code"), ("code", code), ("redirect_uri", REDIRECT_URI), ("client_id", client_id), ("code_verifier", verifier)],
        )
        .await
}

pub async fn refresh(world: &World, client_id: &str, refresh_token: &str) -> Reply {
    world.post_form("/mcp/token", &[("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("client_id", client_id)]).await
}

/// Registration, approval and exchange: (client_id, access token, refresh token).
pub async fn connect(world: &World, pat: &str) -> (String, String, String) {
    let client_id = register(world, &[REDIRECT_URI]).await;
    let code = authorize(world, &client_id, pat).await;
    let reply = exchange(world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let tokens = reply.json();
    (client_id, tokens["access_token"].as_str().unwrap().to_string(), tokens["refresh_token"].as_str().unwrap().to_string())
}
