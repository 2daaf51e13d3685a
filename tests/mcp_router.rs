//! The MCP router suites (`mcp/tests`: oauth, tools, transport, generated), unchanged,
//! against the distributed edition: each world is a cluster of its own
//! (`common/cluster.rs`: one projector, two query-api processes and one mcp process over
//! the engines `make up` started), seeded by producing its events to Kafka and asked
//! over HTTP by the mcp process, with the world's settings. The clock is the real clock;
//! the tests that move it, make the store fail or read the store build their world with
//! `World::in_process` and run as in the mcp crate's own run.
//!
//! Not part of a plain `cargo test` (it needs the engines): `make test` runs it.

// Each of the four suites is a test crate of its own in the mcp package and declares its
// `common` module; here they share one crate, so that module is loaded four times.
#![allow(clippy::duplicate_mod)]

#[path = "common/mod.rs"]
mod harness;

#[path = "../mcp/tests/generated.rs"]
mod generated;
#[path = "../mcp/tests/oauth.rs"]
mod oauth;
#[path = "../mcp/tests/tools.rs"]
mod tools;
#[path = "../mcp/tests/transport.rs"]
mod transport;

/// The hook the suites' worlds ask (`crate::edition::start`).
mod edition {
    use recap_mcp::McpConfig;

    use crate::harness::cluster::{self, Edition};

    pub fn start(config: &McpConfig) -> Option<Edition> {
        let mut envs = vec![
            ("RECAP_MCP_ALLOWED_ORIGINS".to_string(), config.allowed_origins.join(",")),
            ("RECAP_MCP_ALLOW_LOOPBACK_ORIGINS".to_string(), config.allow_loopback_origins.to_string()),
            ("RECAP_MCP_ACCESS_TOKEN_TTL_SECS".to_string(), config.access_token_ttl_secs.to_string()),
            ("RECAP_MCP_REFRESH_TOKEN_TTL_SECS".to_string(), config.refresh_token_ttl_secs.to_string()),
            ("RECAP_MCP_CODE_TTL_SECS".to_string(), config.code_ttl_secs.to_string()),
            ("RECAP_MCP_CLIENT_TTL_SECS".to_string(), config.client_ttl_secs.to_string()),
            ("RECAP_MCP_TOKEN_CACHE_MS".to_string(), config.token_cache_ms.to_string()),
        ];
        if let Some(url) = &config.public_url {
            envs.push(("RECAP_MCP_PUBLIC_URL".to_string(), url.clone()));
        }
        if let Some(timeout) = config.store_timeout_ms {
            envs.push(("RECAP_MCP_STORE_TIMEOUT_MS".to_string(), timeout.to_string()));
        }
        Some(cluster::edition(envs, |cluster| vec![cluster.mcp.url.trim_end_matches('/').trim_end_matches("/mcp").to_string()]))
    }
}
