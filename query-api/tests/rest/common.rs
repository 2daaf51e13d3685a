//! The REST suite's world: the kit's world (`recap_testkit::world`) on the edition
//! `RECAP_TEST_WORLD` chooses, seeded with the suite's standard world
//! (`recap_testkit::fixtures::rest`), and the suite's own check of every response it
//! receives (the OpenAPI document, no CORS header). Tests that drive the limiter's clock,
//! make the store fail or plug their own limiter build their world with
//! `World::in_process` (or `World::with_limiter`) and run in this process on every
//! edition.

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use recap_access::{Limiter, ManualClock};
use recap_query_api::RestConfig;
use recap_schemas::Envelope;
use recap_testkit::webhooks::Seeder;
use recap_testkit::world::{self, Door, InProcess, Settings};
use recap_testkit::FaultyDriver;
use serde_json::Value;
use std::sync::Arc;

pub use recap_testkit::fixtures::rest::*;

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

/// How the store behind an in-process router misbehaves (for the 5xx rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// Every call fails as an unreachable store does.
    Unavailable,
    /// Every call waits longer than any test.
    Hang,
    /// Scans report stored data that does not decode (a token lookup, a get, still
    /// answers).
    Corrupt,
}

/// The suite's world on some edition; `World<InProcess>` has the in-process controls.
pub struct World<W: ?Sized = dyn world::World> {
    world: Box<W>,
}

impl World {
    pub async fn new(events: &[Envelope]) -> World {
        World::with_config(events, RestConfig { rate_limit_per_minute: 120, ..RestConfig::default() }).await
    }

    pub async fn standard() -> World {
        World::new(&standard_events()).await
    }

    /// The router with `config` over the seeded store, on the edition `RECAP_TEST_WORLD`
    /// chooses.
    pub async fn with_config(events: &[Envelope], config: RestConfig) -> World {
        let world = World { world: world::world(Settings::rest(config)).await };
        world.apply(events).await;
        world
    }
}

impl World<InProcess> {
    /// The standard world, in this process on every edition.
    pub async fn standard_in_process() -> World<InProcess> {
        World::in_process(&standard_events(), RestConfig::default()).await
    }

    /// The router in this process on every edition: for tests that drive its clock, make
    /// its store fail, or time a per-process cache.
    pub async fn in_process(events: &[Envelope], config: RestConfig) -> World<InProcess> {
        World::seeded(InProcess::start(Settings::rest(config)).await, events).await
    }

    /// A world whose router asks the limiter `limiter` makes from the world's clock and
    /// its store (in this process on every edition).
    pub async fn with_limiter(
        events: &[Envelope],
        config: RestConfig,
        limiter: impl FnOnce(ManualClock, FaultyDriver) -> Arc<dyn Limiter> + Send + 'static,
    ) -> World<InProcess> {
        World::seeded(InProcess::builder(Settings::rest(config)).limiter(limiter).start().await, events).await
    }

    async fn seeded(world: InProcess, events: &[Envelope]) -> World<InProcess> {
        let world = World { world: Box::new(world) };
        world.apply(events).await;
        world
    }

    /// Writes feed and webhook records into the router's store.
    pub fn seeder(&self) -> Seeder {
        Seeder::new(self.world.readmodel(Door::Rest))
    }

    /// As [`World::seeder`], rows expiring `retention` after they are written.
    pub fn seeder_with_retention(&self, retention: std::time::Duration) -> Seeder {
        Seeder::with_retention(self.world.readmodel(Door::Rest), retention)
    }

    /// The limiter's clock.
    pub fn clock(&self) -> &ManualClock {
        self.world.limiter_clock()
    }

    /// Scans the router's reads have started so far.
    pub fn scans(&self) -> u64 {
        self.world.store().scans()
    }

    pub fn set_fault(&self, fault: Fault) {
        let store = self.world.store();
        store.heal();
        match fault {
            Fault::None => {}
            Fault::Unavailable => store.fail_everything(),
            Fault::Hang => store.stall_everything(),
            Fault::Corrupt => store.corrupt_scans(),
        }
    }
}

impl<W: world::World + ?Sized> World<W> {
    pub async fn apply(&self, events: &[Envelope]) {
        self.world.feed(events).await;
    }

    pub async fn send(&self, request: Request<Body>) -> Response {
        let path = request.uri().path().to_string();
        let method = request.method().to_string();
        let answer = self.world.answer(Door::Rest, request).await;
        let (status, headers) = (answer.status, answer.headers);
        let text = String::from_utf8(answer.body).unwrap();
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

    pub async fn get(&self, uri: &str, token: &str) -> Response {
        self.request(Method::GET, uri, Some(token)).await
    }
}
