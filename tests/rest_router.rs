//! The REST router suite (`query-api/tests/rest`), unchanged, against the distributed
//! edition: each world is a cluster of its own (`common/cluster.rs`: one projector, two
//! query-api processes and one mcp process over the engines `make up` started), seeded
//! by producing its events to Kafka and asked over HTTP, alternating between the two
//! query-api processes. The limiter is the shared Redis one and the clock is the real
//! clock; the few tests that drive the clock or make the store fail build their world
//! with `World::in_process` and run as in the router's own run.
//!
//! Not part of a plain `cargo test` (it needs the engines): `make test` runs it.

#[path = "common/mod.rs"]
mod harness;

#[path = "../query-api/tests/rest/common.rs"]
mod common;
#[path = "../query-api/tests/rest/conventions.rs"]
mod conventions;
#[path = "../query-api/tests/rest/errors.rs"]
mod errors;
#[path = "../query-api/tests/rest/generated.rs"]
mod generated;
#[path = "../query-api/tests/rest/limits.rs"]
mod limits;
#[path = "../query-api/tests/rest/openapi.rs"]
mod openapi;
#[path = "../query-api/tests/rest/pagination.rs"]
mod pagination;
#[path = "../query-api/tests/rest/resources.rs"]
mod resources;

/// The hook the suite's worlds ask (`crate::edition::start`): every world a cluster of
/// its own, started with the world's settings; requests go to both query-api processes.
mod edition {
    use recap_query_api::RestConfig;

    use crate::harness::cluster::{self, Edition};

    pub fn start(config: &RestConfig) -> Option<Edition> {
        let mut envs = vec![
            ("RECAP_REST_RATE_LIMIT_PER_MINUTE".to_string(), config.rate_limit_per_minute.to_string()),
            ("RECAP_TOKEN_CACHE_MS".to_string(), config.token_cache_ms.to_string()),
        ];
        if let Some(timeout) = config.store_timeout_ms {
            envs.push(("RECAP_REST_STORE_TIMEOUT_MS".to_string(), timeout.to_string()));
        }
        Some(cluster::edition(envs, |cluster| {
            cluster.query_apis.iter().map(|role| role.url.trim_end_matches('/').trim_end_matches("/v1").to_string()).collect()
        }))
    }
}
