//! What REST, MCP and the limiters tell OpenTelemetry, in one place so the names agree:
//! the wire error code a response carries (read by the HTTP layer that records the
//! span and the `http.server.request.duration` histogram) and the limiter's decisions.
//! Instruments come from the global meter provider, a no-op until the binary installs
//! one, so libraries and their tests need no setup.

use std::sync::OnceLock;

use opentelemetry::metrics::Counter;
use opentelemetry::KeyValue;

use crate::Verdict;

/// The instrumentation scope every recap crate reports under.
pub const SCOPE: &str = "recap";

/// A response extension naming the wire error code of an error response (e.g.
/// `rate_limited`), so the HTTP layer can set `error.type` without parsing the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCode(pub &'static str);

/// A response extension holding the JSON body the HTTP layer answers with, instead of
/// its own `request_timeout` envelope, when the request's body ran out of time: an
/// endpoint whose errors have another shape (OAuth's `{"error", "error_description"}`)
/// names its own, so that every answer it gives keeps that shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyTimeoutAnswer(pub &'static str);

/// A response extension naming the route template a request matched (e.g.
/// `/v1/meetings/{meeting_id}`), for routers that route by hand rather than through
/// axum's `MatchedPath`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route(pub &'static str);

fn decisions() -> &'static Counter<u64> {
    static COUNTER: OnceLock<Counter<u64>> = OnceLock::new();
    COUNTER.get_or_init(|| {
        opentelemetry::global::meter(SCOPE)
            .u64_counter("recap.limiter.decisions")
            .with_unit("{decision}")
            .with_description("Counted-request decisions of the minute limit and period quota, by outcome")
            .build()
    })
}

/// The `outcome` label of a verdict.
pub fn outcome(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Admitted => "allowed",
        Verdict::RateLimited { .. } => "rate_limited",
        Verdict::QuotaExhausted => "quota_exhausted",
    }
}

/// Counts one limiter decision in `recap.limiter.decisions{outcome}`.
pub fn record_decision(verdict: &Verdict) {
    decisions().add(1, &[KeyValue::new("outcome", outcome(verdict))]);
}
