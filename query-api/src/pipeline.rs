//! One request, start to finish, in the order docs/rest.md fixes: request id → method
//! (405) → route (404 not_found) → token (401) → plan (402 no_plan /
//! feature_not_included) → parameters (400) → limiter (429 rate_limited, then 402
//! quota_exhausted) → the endpoint.
//!
//! Counting (docs/rest.md, Limits 2–3): the limiter is asked only once a request has passed
//! authentication, the plan and parameter validation, so 400, 401, 404 not_found, 405
//! and plan-uncovered requests never count. A request the limiter refuses (429 or 402
//! quota_exhausted) counts nowhere. Every admitted request counts once, whatever the
//! endpoint then answers: 200, 404 meeting_not_found / shared_note_not_found /
//! team_not_found / event_not_found / webhook_endpoint_not_found for a well-formed
//! identifier, 402 team_plan_required (the caller's own plan covers the request; the
//! team's plan only gates what it returns), and a 5xx.
//!
//! Reads before the decision: when the limiter says the account's request is very
//! likely to be admitted ([`recap_access::Limiter::admits_likely`]: Redis's last
//! decision here left it room to spare), the endpoint's reads start alongside the
//! limiter's round trip instead of after it. What the client gets is unchanged: a
//! refusal answers 429 or 402 and the read is dropped. An account at its limit reads
//! nothing for its refused requests.
//!
//! Two `Authorization` headers are 400 `invalid_request` with `param: Authorization` at
//! the token step: a proxy that reads the other one would disagree on who is calling.
//!
//! Headers: `X-Request-Id` on every response (an incoming well-formed one is echoed,
//! else a UUID is made). Every response that reached the limiter (admitted or refused)
//! carries `X-Quota-Limit`, `X-Quota-Remaining`, `X-Quota-Reset` (end of the current
//! billing period, UTC) and the IETF `RateLimit-Policy: "minute";q=<limit>;w=60` and
//! `RateLimit: "minute";r=<left>;t=<seconds until the oldest counted request leaves the
//! window>`; 429 adds `Retry-After`. No CORS header is ever sent, and OPTIONS is just
//! another method that is not GET (405).

use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{ALLOW, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use recap_access::{check_plan, request_id, Caller, Decision, Feature, Limits, Usage, Verdict};

use crate::endpoints::{self, Endpoint, Route};
use crate::error::ApiError;
use crate::RestState;

use recap_access::request_id::X_REQUEST_ID;
static X_QUOTA_LIMIT: HeaderName = HeaderName::from_static("x-quota-limit");
static X_QUOTA_REMAINING: HeaderName = HeaderName::from_static("x-quota-remaining");
static X_QUOTA_RESET: HeaderName = HeaderName::from_static("x-quota-reset");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// What the log line and the headers need to know about how far a request got.
struct Trace {
    route: &'static str,
    /// The step the request is at (`route`, `auth`, `plan`, `params`, `limiter`,
    /// `read`): where a failure happened, for its log line.
    stage: &'static str,
    usage: Option<Usage>,
}

/// Runs a backend call under the request's time bound: past it, 503 unavailable.
pub(crate) async fn bounded<T, E: Into<ApiError>>(timeout: Duration, what: &'static str, call: impl Future<Output = Result<T, E>>) -> Result<T, ApiError> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(ApiError::Unavailable(format!("{what} did not answer within {} ms", timeout.as_millis()))),
    }
}

/// The `param` of a request with more than one `Authorization` header.
pub const AUTHORIZATION_PARAM: &str = "Authorization";

async fn authenticate(state: &RestState, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let first = values.next();
    // Two credentials: which one a proxy in front read is unknowable, so neither is used.
    if values.next().is_some() {
        return Err(ApiError::invalid(AUTHORIZATION_PARAM, "Authorization is sent more than once; send one"));
    }
    let header = first.and_then(|value| value.to_str().ok()).ok_or(ApiError::Unauthorized)?;
    let token = recap_access::auth::bearer(header).ok_or(ApiError::Unauthorized)?;
    bounded(state.inner.store_timeout, "token lookup", state.inner.tokens.authenticate(&state.inner.readmodel, token)).await
}

async fn run(state: &RestState, request: &Parts, trace: &mut Trace) -> Result<Vec<u8>, ApiError> {
    if request.method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let route = Route::parse(request.uri.path()).ok_or(ApiError::NotFound)?;
    trace.route = route.template();
    trace.stage = "auth";
    let caller = authenticate(state, &request.headers).await?;
    trace.stage = "plan";
    let plan = check_plan(&state.inner.plans, &caller.account, Feature::PublicApi)?;
    let limits = Limits { per_minute: state.inner.per_minute, period_quota: state.inner.plans.quota(plan), billing_cycle_anchor: plan.billing_cycle_anchor };
    let query = request.uri.query().unwrap_or("");
    trace.stage = "params";
    let endpoint = Endpoint::parse(route, query, &caller.account_id, &state.inner.cursors)?;
    trace.stage = "limiter";
    // Not under the store's bound: a limiter bounds itself and, past its bound, decides
    // locally (fails open), so Redis in trouble never turns a request into a 5xx.
    let admit = async { state.inner.limiter.admit(&caller.account_id, &limits).await.map_err(ApiError::from) };
    if !state.inner.limiter.admits_likely(&caller.account_id) {
        admitted(admit.await?, trace)?;
        trace.stage = "read";
        return endpoints::execute(state, &caller.account_id, endpoint).await;
    }
    // The limiter's round trip and the reads overlap; the decision still rules, and a
    // refusal drops the read wherever it has got to.
    let read = endpoints::execute(state, &caller.account_id, endpoint);
    tokio::pin!(admit, read);
    let mut read_first = None;
    let decision = loop {
        tokio::select! {
            decision = &mut admit => break decision?,
            body = &mut read, if read_first.is_none() => read_first = Some(body),
        }
    };
    admitted(decision, trace)?;
    trace.stage = "read";
    match read_first {
        Some(body) => body,
        None => read.await,
    }
}

/// The limiter's verdict as the request's outcome: on with the request, or its refusal.
fn admitted(decision: Decision, trace: &mut Trace) -> Result<(), ApiError> {
    trace.usage = Some(decision.usage);
    match decision.verdict {
        Verdict::Admitted => Ok(()),
        Verdict::RateLimited { retry_after_seconds } => Err(ApiError::RateLimited { retry_after_seconds }),
        Verdict::QuotaExhausted => {
            let usage = decision.usage;
            Err(ApiError::QuotaExhausted { used: usage.quota_used, limit: usage.quota_limit, resets_at: usage.period.end })
        }
    }
}

/// The one handler of the router: every path and method goes through here.
pub(crate) async fn serve(State(state): State<RestState>, request: Request) -> Response {
    // The body is never read (every endpoint is GET), and a request body is not
    // `Sync`, so only the head is carried through the awaits.
    let (parts, _body) = request.into_parts();
    let request_id = request_id::of(&parts.headers);
    let mut trace = Trace { route: "unmatched", stage: "route", usage: None };
    let result = run(&state, &parts, &mut trace).await;
    let (status, body, error) = match result {
        Ok(body) => (StatusCode::OK, body, None),
        Err(error) => (error.status(), error.body(request_id.to_str().unwrap_or_default()).into_bytes(), Some(error)),
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(usage) = &trace.usage {
        headers.insert(X_QUOTA_LIMIT.clone(), HeaderValue::from(usage.quota_limit));
        headers.insert(X_QUOTA_REMAINING.clone(), HeaderValue::from(usage.quota_remaining()));
        if let Ok(reset) = HeaderValue::from_str(&usage.period.end.to_rfc3339()) {
            headers.insert(X_QUOTA_RESET.clone(), reset);
        }
        headers.insert(RATELIMIT_POLICY.clone(), state.inner.rate_limit_policy.clone());
        if let Ok(ratelimit) = HeaderValue::from_str(&format!("\"minute\";r={};t={}", usage.minute_remaining, usage.minute_reset_seconds)) {
            headers.insert(RATELIMIT.clone(), ratelimit);
        }
    }
    match &error {
        Some(ApiError::RateLimited { retry_after_seconds }) => {
            headers.insert(RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
        }
        Some(ApiError::MethodNotAllowed) => {
            headers.insert(ALLOW, HeaderValue::from_static("GET"));
        }
        Some(ApiError::Unauthorized) => {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        Some(ApiError::InvalidRequest { param: AUTHORIZATION_PARAM, .. }) => {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer error=\"invalid_request\""));
        }
        Some(ApiError::TokenRevoked) => {
            headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer error=\"invalid_token\""));
        }
        _ => {}
    }
    let request_id_text = request_id.to_str().unwrap_or_default();
    match &error {
        None => tracing::debug!(route = trace.route, status = status.as_u16(), request_id = request_id_text, "rest request"),
        // The one line a failure gets: conversions on the way here log nothing.
        Some(error) if status.is_server_error() => tracing::warn!(
            route = trace.route,
            status = status.as_u16(),
            code = error.code(),
            request_id = request_id_text,
            error = error.detail().unwrap_or_default(),
            stage = trace.stage,
            "rest request failed"
        ),
        Some(error) => {
            tracing::debug!(route = trace.route, status = status.as_u16(), code = error.code(), request_id = request_id_text, "rest request refused")
        }
    }
    headers.insert(X_REQUEST_ID.clone(), request_id);
    // For the HTTP telemetry layer: the route template and the wire error code.
    if trace.route != "unmatched" {
        response.extensions_mut().insert(recap_access::telemetry::Route(trace.route));
    }
    if let Some(error) = &error {
        response.extensions_mut().insert(recap_access::telemetry::ErrorCode(error.code()));
    }
    response
}
