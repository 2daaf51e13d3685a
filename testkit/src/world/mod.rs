//! Test worlds: the service, whichever edition serves it, fed typed events and asked at
//! its front doors. A [`World`] takes events and returns once they are readable,
//! answers a request at the REST or the MCP door, and says which [`Edition`] it is.
//!
//! Three editions: [`InProcess`] runs the REST and MCP routers in this process over an
//! embedded store, or (the Cassandra edition) over a keyspace of its own on the real
//! Cassandra of `make up`; [`ClusterWorld`] runs the distributed edition as processes. The
//! environment variable `RECAP_TEST_WORLD` (`in_process`, the default, `cassandra` or
//! `cluster`) chooses the world [`world`] gives, so that one suite runs on each edition
//! unchanged. Tests that drive the clock, make the store fail, read it or plug their own
//! limiter build an [`InProcess`] world, which has those controls, and run in process
//! whatever the variable says (over Cassandra when it says `cassandra`).

mod cluster;
mod in_process;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use recap_mcp::McpConfig;
use recap_query_api::RestConfig;
use recap_schemas::Envelope;

pub use cluster::ClusterWorld;
pub use in_process::{InProcess, InProcessBuilder, LimiterFactory, MCP_STORE_BOUND, REST_STORE_BOUND};

/// Which edition serves a world.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edition {
    /// The routers in this process over an embedded (LMDB) store.
    InProcess,
    /// The routers in this process over a keyspace of the real Cassandra.
    Cassandra,
    /// The distributed edition as processes: a projector, two query-api and one mcp,
    /// over Kafka, Cassandra and Redis.
    Cluster,
}

impl Edition {
    /// The edition `RECAP_TEST_WORLD` names: `in_process` (or unset), `cassandra` or
    /// `cluster`; panics on anything else, so that a typo never runs the wrong edition.
    pub fn from_env() -> Edition {
        match std::env::var("RECAP_TEST_WORLD").as_deref() {
            Err(_) | Ok("") | Ok("in_process") => Edition::InProcess,
            Ok("cassandra") => Edition::Cassandra,
            Ok("cluster") => Edition::Cluster,
            Ok(other) => panic!("RECAP_TEST_WORLD={other}: expected in_process, cassandra or cluster"),
        }
    }
}

/// The service's front doors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// REST API v1 (`/v1`).
    Rest,
    /// The MCP server (`/mcp`, its OAuth endpoints and metadata).
    Mcp,
}

/// A world's settings, given to every edition alike: the routers in process are built
/// with them, and a cluster's roles get them as their `RECAP_*` variables.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub rest: RestConfig,
    pub mcp: McpConfig,
}

impl Settings {
    pub fn rest(rest: RestConfig) -> Settings {
        Settings { rest, ..Settings::default() }
    }

    pub fn mcp(mcp: McpConfig) -> Settings {
        Settings { mcp, ..Settings::default() }
    }
}

/// A response as the client received it.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// The service under test, on some edition.
#[async_trait]
pub trait World: Send + Sync {
    /// Which edition this is.
    fn edition(&self) -> Edition;

    /// Projects `events` (in order, after every event fed before) and returns once
    /// they are readable through both doors.
    async fn feed(&self, events: &[Envelope]);

    /// The answer of `door` to `request`, as a client receives it.
    async fn answer(&self, door: Door, request: Request<Body>) -> Answer;
}

/// A world with `settings` on the edition `RECAP_TEST_WORLD` names (see the module doc).
pub async fn world(settings: Settings) -> Box<dyn World> {
    match Edition::from_env() {
        Edition::Cluster => Box::new(ClusterWorld::start(settings).await),
        Edition::InProcess | Edition::Cassandra => Box::new(InProcess::start(settings).await),
    }
}

/// One request over its own HTTP/1.1 connection to `origin` (`http://127.0.0.1:<port>`),
/// as a client sends it: the request's method, path and query, headers and body. A
/// request without a Host header gets the origin's.
pub async fn over_http(origin: &str, request: Request<Body>) -> Answer {
    let authority = origin.trim_start_matches("http://").trim_end_matches('/').to_string();
    let stream = tokio::net::TcpStream::connect(&authority).await.unwrap_or_else(|error| panic!("connect to {origin}: {error}"));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.expect("HTTP/1.1 handshake");
    tokio::spawn(connection);
    let (mut parts, body) = request.into_parts();
    if !parts.headers.contains_key(header::HOST) {
        parts.headers.insert(header::HOST, authority.parse().expect("an authority"));
    }
    let response = sender.send_request(Request::from_parts(parts, body)).await.unwrap_or_else(|error| panic!("request to {origin}: {error}"));
    let (parts, body) = response.into_parts();
    Answer { status: parts.status, headers: parts.headers, body: body.collect().await.expect("the response body").to_bytes().to_vec() }
}
