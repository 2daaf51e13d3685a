//! The cluster world: the distributed edition as processes ([`crate::cluster::Cluster`]:
//! one projector, two query-api and one mcp over Kafka, Cassandra and Redis), started
//! with the world's settings as the roles' `RECAP_*` variables, fed by producing its
//! events to Kafka, asked over HTTP. REST requests alternate between the two query-api
//! processes, except in a world with a token cache, which is per process: those ask one.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use recap_schemas::Envelope;

use super::{over_http, Answer, Door, Edition, Settings, World};
use crate::cluster::Cluster;

/// The roles' variables for `settings`, as `recap query-api` and `recap mcp` read them.
fn role_envs(settings: &Settings) -> Vec<(String, String)> {
    let (rest, mcp) = (&settings.rest, &settings.mcp);
    let mut envs = vec![
        ("RECAP_REST_RATE_LIMIT_PER_MINUTE".to_string(), rest.rate_limit_per_minute.to_string()),
        ("RECAP_TOKEN_CACHE_MS".to_string(), rest.token_cache_ms.to_string()),
        ("RECAP_MCP_ALLOWED_ORIGINS".to_string(), mcp.allowed_origins.join(",")),
        ("RECAP_MCP_ALLOW_LOOPBACK_ORIGINS".to_string(), mcp.allow_loopback_origins.to_string()),
        ("RECAP_MCP_ACCESS_TOKEN_TTL_SECS".to_string(), mcp.access_token_ttl_secs.to_string()),
        ("RECAP_MCP_REFRESH_TOKEN_TTL_SECS".to_string(), mcp.refresh_token_ttl_secs.to_string()),
        ("RECAP_MCP_CODE_TTL_SECS".to_string(), mcp.code_ttl_secs.to_string()),
        ("RECAP_MCP_CLIENT_TTL_SECS".to_string(), mcp.client_ttl_secs.to_string()),
        ("RECAP_MCP_UNCONFIRMED_CLIENT_TTL_SECS".to_string(), mcp.unconfirmed_client_ttl_secs.to_string()),
        ("RECAP_MCP_REGISTRATIONS_PER_MINUTE".to_string(), mcp.registrations_per_minute.to_string()),
        ("RECAP_MCP_REGISTRATIONS_PER_MONTH".to_string(), mcp.registrations_per_month.to_string()),
        ("RECAP_MCP_TOOL_CALLS_PER_MINUTE".to_string(), mcp.tool_calls_per_minute.to_string()),
        ("RECAP_MCP_TRUSTED_PROXY_HOPS".to_string(), mcp.trusted_proxy_hops.to_string()),
        ("RECAP_MCP_TOKEN_CACHE_MS".to_string(), mcp.token_cache_ms.to_string()),
    ];
    if let Some(timeout) = rest.store_timeout_ms {
        envs.push(("RECAP_REST_STORE_TIMEOUT_MS".to_string(), timeout.to_string()));
    }
    if let Some(url) = &mcp.public_url {
        envs.push(("RECAP_MCP_PUBLIC_URL".to_string(), url.clone()));
    }
    if let Some(timeout) = mcp.store_timeout_ms {
        envs.push(("RECAP_MCP_STORE_TIMEOUT_MS".to_string(), timeout.to_string()));
    }
    envs
}

/// The origin (`http://127.0.0.1:<port>`) of a role's URL ending in `suffix`.
fn origin(url: &str, suffix: &str) -> String {
    url.trim_end_matches('/').trim_end_matches(suffix).to_string()
}

/// A cluster of its own (see the module doc).
pub struct ClusterWorld {
    /// Taken by `drop`, which stops the cluster on a thread of its own.
    cluster: Option<Arc<Cluster>>,
    rest_origins: Vec<String>,
    mcp_origin: String,
    /// Whether REST requests all go to the first query-api process.
    sticky: bool,
    next: std::sync::atomic::AtomicUsize,
}

impl ClusterWorld {
    /// Starts the cluster. It starts (and later stops) on a thread of its own: both
    /// run a runtime of their own (creating topics, dropping the keyspace), never
    /// inside the test's.
    pub async fn start(settings: Settings) -> ClusterWorld {
        let envs = role_envs(&settings);
        let cluster = tokio::task::spawn_blocking(move || Cluster::start(&envs)).await.unwrap_or_else(|error| match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => panic!("starting the cluster: {error}"),
        });
        ClusterWorld {
            rest_origins: cluster.query_apis.iter().map(|role| origin(&role.url, "/v1")).collect(),
            mcp_origin: origin(&cluster.mcp.url, "/mcp"),
            sticky: settings.rest.token_cache_ms > 0,
            next: Default::default(),
            cluster: Some(Arc::new(cluster)),
        }
    }

    /// The cluster, for what only processes have (their URLs, settings, progress).
    pub fn cluster(&self) -> &Cluster {
        self.cluster.as_ref().expect("running")
    }
}

#[async_trait]
impl World for ClusterWorld {
    fn edition(&self) -> Edition {
        Edition::Cluster
    }

    /// Produces the events to Kafka and waits until the projector accounted for them.
    async fn feed(&self, events: &[Envelope]) {
        let cluster = self.cluster.clone().expect("running");
        let events = events.to_vec();
        let fed = tokio::task::spawn_blocking(move || {
            cluster.produce(&events);
            cluster.wait_projected();
        });
        if let Err(error) = fed.await {
            match error.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(error) => panic!("feeding the cluster: {error}"),
            }
        }
    }

    async fn answer(&self, door: Door, request: Request<Body>) -> Answer {
        match door {
            Door::Rest => {
                let turn = if self.sticky { 0 } else { self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) };
                over_http(&self.rest_origins[turn % self.rest_origins.len()], request).await
            }
            Door::Mcp => over_http(&self.mcp_origin, request).await,
        }
    }
}

impl Drop for ClusterWorld {
    fn drop(&mut self) {
        let cluster = self.cluster.take();
        let _ = std::thread::spawn(move || drop(cluster)).join();
    }
}
