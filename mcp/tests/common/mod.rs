//! The MCP suites' world: the kit's world (`recap_testkit::world`) on the edition
//! `RECAP_TEST_WORLD` chooses, seeded with the suites' standard world
//! (`recap_testkit::fixtures::mcp`), and helpers for JSON-RPC calls and OAuth flows.
//! Tests that move the clock, make tables fail or stall, or read the store build their
//! world with `World::in_process` and run in this process on every edition.

// Each test target of the package uses some of these helpers.
#![allow(dead_code)]

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use recap_mcp::McpConfig;
use recap_readmodel::ReadModel;
use recap_schemas::Envelope;
use recap_testkit::world::{self, Door, InProcess, Settings};
use serde_json::{json, Value};

pub use recap_testkit::fixtures::mcp::*;

/// The eight tools of docs/mcp.md, in its order, then the account's feed.
pub const TOOLS: [&str; 9] = [
    "list_meetings",
    "get_meeting",
    "get_meeting_transcript",
    "get_recurring_meeting_history",
    "search_meetings",
    "list_pending_action_items",
    "search_shared_notes",
    "get_shared_note",
    "list_recent_changes",
];

/// One successful call of each tool on the standard world, in [`TOOLS`]' order.
pub fn a_call_of_every_tool() -> [(&'static str, Value); 9] {
    [
        ("list_meetings", json!({})),
        ("get_meeting", json!({"meeting_id": "mtg_budget"})),
        ("get_meeting_transcript", json!({"meeting_id": "mtg_weekly_1"})),
        ("get_recurring_meeting_history", json!({"meeting_id": "mtg_weekly_1"})),
        ("search_meetings", json!({"query": "budget"})),
        ("list_pending_action_items", json!({})),
        ("search_shared_notes", json!({"query": "budget"})),
        ("get_shared_note", json!({"share_id": "shr_team"})),
        ("list_recent_changes", json!({})),
    ]
}

/// The suites' world on some edition; `World<InProcess>` has the in-process controls.
pub struct World<W: ?Sized = dyn world::World> {
    world: Box<W>,
}

impl World {
    pub async fn new() -> World {
        World::with_config(McpConfig::default()).await
    }

    /// The router with `config` over the seeded store, on the edition `RECAP_TEST_WORLD`
    /// chooses.
    pub async fn with_config(config: McpConfig) -> World {
        World::seeded(world::world(Settings::mcp(config)).await).await
    }
}

impl World<InProcess> {
    /// The router in this process on every edition: for tests that move its clock, make
    /// its store fail or stall, read the store, or time a per-process cache.
    pub async fn in_process(config: McpConfig) -> World<InProcess> {
        World::seeded(Box::new(InProcess::start(Settings::mcp(config)).await)).await
    }

    pub fn advance_clock(&self, by: Duration) {
        self.world.advance_mcp_clock(by);
    }

    pub fn fail_table(&self, name: &'static str) {
        self.world.store().fail_table(name);
    }

    pub fn stall_table(&self, name: &'static str) {
        self.world.store().stall_table(name);
    }

    pub fn misuse_table(&self, name: &'static str) {
        self.world.store().misuse_table(name);
    }

    /// From now on, keeps every batch the router writes ([`World::recorded_writes`]).
    pub fn record_writes(&self) {
        self.world.store().record_writes();
    }

    /// The batches written since [`World::record_writes`] (or the last call).
    pub fn recorded_writes(&self) -> Vec<Vec<recap_readmodel::Mutation>> {
        self.world.store().take_recorded()
    }

    /// The read model the router reads.
    pub fn readmodel(&self) -> &ReadModel {
        self.world.readmodel(Door::Mcp)
    }

    /// Writes feed records into the router's store.
    pub fn seeder(&self) -> recap_testkit::webhooks::Seeder {
        recap_testkit::webhooks::Seeder::new(self.readmodel())
    }
}

impl<W: world::World + ?Sized> World<W> {
    async fn seeded(world: Box<W>) -> World<W> {
        let world = World { world };
        world.feed(&seed_events()).await;
        world
    }

    /// Projects events into the store, as the projector would.
    pub async fn feed(&self, events: &[Envelope]) {
        self.world.feed(events).await;
    }

    pub async fn send(&self, request: Request<Body>) -> Reply {
        let answer = self.world.answer(Door::Mcp, request).await;
        Reply { status: answer.status, headers: answer.headers, body: String::from_utf8(answer.body).unwrap() }
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
        self.post_form_at("mcp.test:8080", path, pairs).await
    }

    /// [`World::post_form`] to the server as `host` names it.
    pub async fn post_form_at(&self, host: &str, path: &str, pairs: &[(&str, &str)]) -> Reply {
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
        self.send(Request::post(path).header("host", host).header("content-type", "application/x-www-form-urlencoded").body(Body::from(body)).unwrap()).await
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

/// A 401's `WWW-Authenticate`: a Bearer challenge naming the protected-resource
/// metadata of the test's `mcp_url` exactly.
pub fn assert_challenge(reply: &Reply) {
    let challenge = reply.header("www-authenticate").expect("WWW-Authenticate");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(r#"resource_metadata="http://mcp.test:8080/mcp/.well-known/oauth-protected-resource""#), "{challenge}");
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
pub async fn register<W: world::World + ?Sized>(world: &World<W>, redirect_uris: &[&str]) -> String {
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

/// The query pairs of the link back to the client on an authorization error page.
pub fn return_link(reply: &Reply) -> (String, Vec<(String, String)>) {
    let start = reply.body.find("<a id=\"return\" href=\"").expect("a link back to the client") + "<a id=\"return\" href=\"".len();
    let end = start + reply.body[start..].find('"').expect("the end of the link");
    let location = reply.body[start..end].replace("&amp;", "&");
    let url = url::Url::parse(&location).unwrap();
    let base = format!("{}://{}{}", url.scheme(), url.host_str().unwrap(), url.port().map(|port| format!(":{port}")).unwrap_or_default()) + url.path();
    (base, url.query_pairs().into_owned().collect())
}

pub fn query_value(pairs: &[(String, String)], name: &str) -> Option<String> {
    pairs.iter().find(|(key, _)| key == name).map(|(_, value)| value.clone())
}

/// Approves an authorization with a PAT; the code.
pub async fn authorize<W: world::World + ?Sized>(world: &World<W>, client_id: &str, pat: &str) -> String {
    authorize_with(world, client_id, pat, &[]).await
}

/// [`authorize`] with `extra` parameters in the form.
pub async fn authorize_with<W: world::World + ?Sized>(world: &World<W>, client_id: &str, pat: &str, extra: &[(&str, &str)]) -> String {
    let challenge = challenge(VERIFIER);
    let form = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", REDIRECT_URI),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
        ("state", "xyz"),
        ("scope", "svc:read"),
        ("pat", pat),
        ("decision", "approve"),
    ];
    let reply = world.post_form("/mcp/authorize", &[&form[..], extra].concat()).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER, "{}", reply.body);
    let (_, pairs) = location_query(&reply);
    query_value(&pairs, "code").expect("code")
}

/// Exchanges a code; the token response.
pub async fn exchange<W: world::World + ?Sized>(world: &World<W>, client_id: &str, code: &str) -> Reply {
    exchange_with_verifier(world, client_id, code, VERIFIER).await
}

/// Exchanges a code with `extra` parameters in the form.
pub async fn exchange_with<W: world::World + ?Sized>(world: &World<W>, client_id: &str, code: &str, extra: &[(&str, &str)]) -> Reply {
    let form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", REDIRECT_URI), ("client_id", client_id), ("code_verifier", VERIFIER)];
    world.post_form("/mcp/token", &[&form[..], extra].concat()).await
}

/// Exchanges a code presenting `verifier` as the PKCE code verifier.
pub async fn exchange_with_verifier<W: world::World + ?Sized>(world: &World<W>, client_id: &str, code: &str, verifier: &str) -> Reply {
    world
        .post_form(
            "/mcp/token",
            &[("grant_type", "authorization_code"), ("code", code), ("redirect_uri", REDIRECT_URI), ("client_id", client_id), ("code_verifier", verifier)],
        )
        .await
}

pub async fn refresh<W: world::World + ?Sized>(world: &World<W>, client_id: &str, refresh_token: &str) -> Reply {
    world.post_form("/mcp/token", &[("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("client_id", client_id)]).await
}

/// Registration, approval and exchange: (client_id, access token, refresh token).
pub async fn connect<W: world::World + ?Sized>(world: &World<W>, pat: &str) -> (String, String, String) {
    let client_id = register(world, &[REDIRECT_URI]).await;
    let code = authorize(world, &client_id, pat).await;
    let reply = exchange(world, &client_id, &code).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let tokens = reply.json();
    (client_id, tokens["access_token"].as_str().unwrap().to_string(), tokens["refresh_token"].as_str().unwrap().to_string())
}

// ---- 2026-07-28 helpers ------------------------------------------------------------

pub const MODERN: &str = "2026-07-28";
pub const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The `_meta` every modern request carries.
pub fn meta() -> Value {
    json!({VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}})
}

/// `params` with the request `_meta` added.
pub fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta();
    params
}

/// The body of request id 1.
pub fn body(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
}

/// The headers a modern client sends with `method` (and `Mcp-Name` when given).
pub fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    headers
}

impl<W: recap_testkit::world::World + ?Sized> World<W> {
    /// A well-formed modern request: `_meta`, `MCP-Protocol-Version`, `Mcp-Method` and,
    /// for tools/call, `Mcp-Name`.
    pub async fn modern(&self, method: &str, params: Value) -> Reply {
        let name = params.get("name").and_then(Value::as_str).map(str::to_string);
        let name = if method == "tools/call" { name } else { None };
        self.post_raw(Some(FLOW_PAT), &body(method, with_meta(params)), &headers(method, name.as_deref())).await
    }

    /// A modern tools/call; the result, checked to be a 200 success.
    pub async fn modern_call(&self, tool: &str, arguments: Value) -> Value {
        let reply = self.modern("tools/call", json!({"name": tool, "arguments": arguments})).await;
        assert_eq!(reply.status, StatusCode::OK, "{tool}: {}", reply.body);
        reply.json()["result"].clone()
    }
}
