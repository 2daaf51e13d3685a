//! The operations listener of every role: `/livez` (the process works), `/readyz` (its
//! store answers), `/metrics` (Prometheus text) and, where a projector runs, `/progress`
//! (its committed progress as JSON, what tests and scripts wait on; 404 elsewhere, rather
//! than the progress of a projector that is not there). It is separate from the
//! REST and MCP listeners so that their paths stay exactly those docs/rest.md and
//! docs/mcp.md list.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use recap_projector::{EventLog, Stats};
use recap_readmodel::ReadModel;

#[derive(Clone)]
pub struct AdminState {
    pub readmodel: ReadModel,
    /// The projector's counters; None in a role that runs none.
    pub stats: Option<Arc<Stats>>,
    /// The embedded log, whose length tells how far behind the projector is; None in
    /// the distributed edition (Kafka lag is per partition, in `Stats`).
    pub log: Option<EventLog>,
    /// The process's meter provider, which `/metrics` renders.
    pub telemetry: crate::telemetry::Telemetry,
}

pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/progress", get(progress))
        .with_state(state)
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let timeout = state.readmodel.driver().timeout();
    match tokio::time::timeout(timeout, state.readmodel.ping()).await {
        Ok(Ok(())) => (StatusCode::OK, "ok\n").into_response(),
        Ok(Err(error)) => (StatusCode::SERVICE_UNAVAILABLE, format!("store: {error}\n")).into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "store: timed out\n").into_response(),
    }
}

async fn progress(State(state): State<AdminState>) -> Response {
    let Some(stats) = &state.stats else {
        return (StatusCode::NOT_FOUND, "no projector runs in this process\n").into_response();
    };
    let snapshot = stats.snapshot();
    let log_length = state.log.as_ref().map(|log| log.len().unwrap_or_default()).unwrap_or(snapshot.position);
    let partition_lag = stats.partition_lag.lock().map(|lag| lag.clone()).unwrap_or_default();
    let body = serde_json::json!({
        "partition_lag": partition_lag,
        "position": snapshot.position,
        "log_length": log_length,
        "caught_up": snapshot.position >= log_length,
        "applied": snapshot.applied,
        "stale": snapshot.stale,
        "skipped_unknown": snapshot.skipped_unknown,
        "dead_lettered": snapshot.dead_lettered,
        "fenced": stats.fenced.load(std::sync::atomic::Ordering::Relaxed),
    });
    ([(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

async fn metrics(State(state): State<AdminState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.telemetry.prometheus_text()).into_response()
}
