//! The REST API v1 (`docs/rest.md`): a read-only JSON API under `/v1`, served by
//! one axum [`router`] over a [`RestState`].
//!
//! Wiring (what a serving role does):
//! ```no_run
//! # use std::sync::Arc;
//! # use recap_access::{InProcessLimiter, Limiter};
//! # use recap_query_api::RestState;
//! # async fn wire(
//! #     readmodel: recap_readmodel::ReadModel,
//! #     plans: recap_access::Plans,
//! #     cursor_secret: Vec<u8>,
//! #     rest_config: recap_query_api::RestConfig,
//! #     listener: tokio::net::TcpListener,
//! # ) -> std::io::Result<()> {
//! let limiter: Arc<dyn Limiter> = Arc::new(InProcessLimiter::with_system_clock());
//! let state = RestState::new(readmodel, plans, limiter, cursor_secret, &rest_config);
//! axum::serve(listener, recap_query_api::router(state)).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Every request runs the checks in one fixed order (`pipeline.rs`): method (405) →
//! route (404 not_found) → token (401) → plan (402) → parameters (400) → limiter
//! (429 rate_limited, then 402 quota_exhausted) → the endpoint. Decisions where the
//! spec is open are documented where they are made: counting and headers in
//! `pipeline.rs`, parameters in `params.rs`, cursors in recap-access (`access/src/cursor.rs`), rendering in
//! `endpoints.rs`.

mod config;
mod endpoints;
mod error;
mod feed;
mod params;
mod pipeline;

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderValue;
use recap_access::{Limiter, Plans};
use recap_readmodel::webhooks::WebhookStore;
use recap_readmodel::ReadModel;

pub use config::{parse_retention, FeedConfig, RestConfig};
pub use error::ApiError;
pub use params::{DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS};
pub use recap_access::cursor::Cursors;

/// What every request handler shares. Cheap to clone.
#[derive(Clone)]
pub struct RestState {
    inner: Arc<Inner>,
}

struct Inner {
    readmodel: ReadModel,
    /// The feed, the endpoints and their attempts.
    webhooks: WebhookStore,
    plans: Plans,
    limiter: Arc<dyn Limiter>,
    cursors: Cursors,
    per_minute: u32,
    store_timeout: Duration,
    rate_limit_policy: HeaderValue,
    tokens: recap_access::TokenCache,
}

impl RestState {
    /// `cursor_secret` seals pagination cursors (use at least 32 random bytes; all
    /// replicas must share it). `config.rate_limit_per_minute` is what the limiter
    /// enforces per account; `config.store_timeout_ms` bounds each backend call
    /// (default: the store driver's own timeout); `config.feed` is the feed's retention.
    pub fn new(readmodel: ReadModel, plans: Plans, limiter: Arc<dyn Limiter>, cursor_secret: Vec<u8>, config: &RestConfig) -> RestState {
        let store_timeout = config.store_timeout().unwrap_or_else(|| readmodel.driver().timeout());
        let policy = format!("\"minute\";q={};w=60", config.rate_limit_per_minute);
        let rate_limit_policy = HeaderValue::from_str(&policy).unwrap_or_else(|_| HeaderValue::from_static("\"minute\";w=60"));
        RestState {
            inner: Arc::new(Inner {
                webhooks: readmodel.webhooks(config.feed.feed_retention),
                readmodel,
                plans,
                limiter,
                cursors: Cursors::new(&cursor_secret),
                per_minute: config.rate_limit_per_minute,
                store_timeout,
                rate_limit_policy,
                tokens: recap_access::TokenCache::new(Duration::from_millis(config.token_cache_ms)),
            }),
        }
    }
}

/// The REST API v1 router: every route under `/v1/`, every other path and method
/// answered by the same pipeline (404 not_found, 405 method_not_allowed).
pub fn router(state: RestState) -> axum::Router {
    axum::Router::new().fallback(pipeline::serve).with_state(state)
}
