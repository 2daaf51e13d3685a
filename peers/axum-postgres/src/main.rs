//! `GET /v1/meetings` and `GET /v1/meetings/{id}` over PostgreSQL, written as a Rust team
//! would write a read API it wants to be fast, answering recap's JSON (docs/rest.md) for
//! the same data:
//!
//! - axum on a tokio runtime with one worker per core the process may use;
//! - tokio-postgres: a fixed set of connections (`PG_CONNECTIONS`, default 2 per core),
//!   each statement prepared once per connection, requests spread round-robin over the
//!   connections and pipelined on each (a tokio-postgres client sends a query while
//!   earlier ones are still answered);
//! - the list-entry fields in plain columns, the detail's nested parts (note, summaries,
//!   participants, action items) in JSONB columns, passed to the response as raw JSON
//!   (no parse into a tree and back); a keyset index on
//!   `(account_id, created_at DESC, id DESC)` and a row comparison for the page;
//! - per request, recap's checks in recap's order: bearer token (`svc_pat_`, its SHA-256
//!   looked up in `tokens` joined to `accounts`), plan (402 `no_plan` /
//!   `feature_not_included`), parameters (400), per-minute limit (429), period quota
//!   (402 `quota_exhausted`), and the quota headers. A token lookup is kept for
//!   `TOKEN_CACHE_MS` (default 1000, as recap's distributed edition runs in production):
//!   over a database other processes write, the service cannot see a revocation, so it
//!   keeps a lookup for a bounded time; `0` reads the token and account every request;
//! - cursors sealed like recap's (AES-256-GCM-SIV under a key derived from
//!   `CURSOR_SECRET_FILE`'s, bound to the endpoint, account and filters): with recap's key
//!   the two issue byte-identical cursors.
//!
//! Only the parameters the comparison uses are served (`limit`, `cursor`; no `since`,
//! `until` or `include`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aes_gcm_siv::aead::{Aead, KeyInit, Payload};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Datelike, Months, SecondsFormat, TimeZone, Utc};
use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};
use tokio_postgres::types::Json;
use tokio_postgres::{Client, NoTls, Statement};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type HmacSha256 = Hmac<Sha256>;

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static X_QUOTA_LIMIT: HeaderName = HeaderName::from_static("x-quota-limit");
static X_QUOTA_REMAINING: HeaderName = HeaderName::from_static("x-quota-remaining");
static X_QUOTA_RESET: HeaderName = HeaderName::from_static("x-quota-reset");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

const LIST_COLUMNS: &str = "id, title, kind, status, started_at, ended_at, created_at, updated_at, series_id";

/// One connection and its prepared statements.
struct Connection {
    client: Client,
    first_page: Statement,
    next_page: Statement,
    detail: Statement,
    token: Statement,
}

#[derive(Clone)]
struct Caller {
    account_id: Arc<str>,
    revoked: bool,
    tier: Option<String>,
    api_quota: Option<i64>,
    anchor: Option<DateTime<Utc>>,
}

/// An account's counts: requests in the last minute (one slot per second) and in the
/// current billing period.
struct Counts {
    seconds: [(i64, u32); 60],
    period_end: DateTime<Utc>,
    period_used: i64,
}

struct Inner {
    connections: Vec<Connection>,
    next: AtomicUsize,
    token_cache_for: Duration,
    tokens: Mutex<HashMap<String, (Instant, Caller)>>,
    counts: Mutex<HashMap<Arc<str>, Counts>>,
    per_minute: u32,
    default_quota: i64,
    cursor_key: Aes256GcmSiv,
    rate_limit_policy: HeaderValue,
}

#[derive(Clone)]
struct App(Arc<Inner>);

enum ApiError {
    Unauthorized,
    TokenRevoked,
    NoPlan,
    FeatureNotIncluded,
    Invalid(&'static str, &'static str),
    RateLimited(u64),
    QuotaExhausted { used: i64, limit: i64, resets_at: String },
    MeetingNotFound,
    Internal(String),
}

impl ApiError {
    fn status_and_body(&self, request_id: &str) -> (StatusCode, String) {
        let error = |status, code: &str, message: &str| (status, serde_json::json!({"error": {"code": code, "message": message}}).to_string());
        match self {
            ApiError::Unauthorized => error(StatusCode::UNAUTHORIZED, "unauthorized", "missing, malformed or unknown token"),
            ApiError::TokenRevoked => error(StatusCode::UNAUTHORIZED, "token_revoked", "the token was revoked"),
            ApiError::NoPlan => error(StatusCode::PAYMENT_REQUIRED, "no_plan", "the account has no active plan"),
            ApiError::FeatureNotIncluded => (
                StatusCode::PAYMENT_REQUIRED,
                serde_json::json!({"error": {"code": "feature_not_included", "message": "the account's plan does not include the REST API", "feature": "public_api"}})
                    .to_string(),
            ),
            ApiError::Invalid(param, message) => (
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": {"code": "invalid_request", "message": message, "param": param}}).to_string(),
            ),
            ApiError::RateLimited(_) => error(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "too many requests in the last minute"),
            ApiError::QuotaExhausted { used, limit, resets_at } => (
                StatusCode::PAYMENT_REQUIRED,
                serde_json::json!({"error": {"code": "quota_exhausted", "message": "the billing period's requests are used up", "used": used, "limit": limit, "resets_at": resets_at}})
                    .to_string(),
            ),
            ApiError::MeetingNotFound => error(StatusCode::NOT_FOUND, "meeting_not_found", "no such meeting"),
            ApiError::Internal(detail) => {
                eprintln!("request {request_id} failed: {detail}");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    serde_json::json!({"error": {"code": "internal_error", "message": "internal error", "request_id": request_id}}).to_string(),
                )
            }
        }
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(error: tokio_postgres::Error) -> ApiError {
        ApiError::Internal(error.to_string())
    }
}

/// What the limiter said about an admitted request, for the headers.
struct Usage {
    quota_limit: i64,
    quota_used: i64,
    period_end: DateTime<Utc>,
    minute_remaining: u32,
    minute_reset_seconds: i64,
}

fn rfc3339(instant: &DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn token_sha256(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(b"0123456789abcdef"[(byte >> 4) as usize]));
        hex.push(char::from(b"0123456789abcdef"[(byte & 0xF) as usize]));
    }
    hex
}

/// The billing period holding `now`: whole calendar months from the anchor.
fn period_end(anchor: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
    let months_since = (now.year() - anchor.year()) * 12 + now.month() as i32 - anchor.month() as i32;
    let mut months = months_since.max(0) as u32;
    loop {
        let start = anchor.checked_add_months(Months::new(months)).unwrap_or(anchor);
        if start > now && months > 0 {
            months -= 1;
            continue;
        }
        let end = anchor.checked_add_months(Months::new(months + 1)).unwrap_or(anchor);
        if end <= now {
            months += 1;
            continue;
        }
        return end;
    }
}

impl App {
    fn connection(&self) -> &Connection {
        let index = self.0.next.fetch_add(1, Ordering::Relaxed) % self.0.connections.len();
        &self.0.connections[index]
    }

    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, ApiError> {
        let header = headers.get(AUTHORIZATION).and_then(|value| value.to_str().ok()).ok_or(ApiError::Unauthorized)?;
        let (scheme, token) = header.split_once(' ').ok_or(ApiError::Unauthorized)?;
        let token = token.trim();
        if !scheme.eq_ignore_ascii_case("bearer") || token.contains(' ') || !token.starts_with("svc_pat_") || token.len() <= "svc_pat_".len() {
            return Err(ApiError::Unauthorized);
        }
        let hash = token_sha256(token);
        if !self.0.token_cache_for.is_zero() {
            if let Some((fetched_at, caller)) = self.0.tokens.lock().expect("token cache").get(&hash) {
                if fetched_at.elapsed() < self.0.token_cache_for {
                    return check_revoked(caller.clone());
                }
            }
        }
        let fetched_at = Instant::now();
        let connection = self.connection();
        let row = connection.client.query_opt(&connection.token, &[&hash]).await?.ok_or(ApiError::Unauthorized)?;
        let caller = Caller {
            account_id: Arc::from(row.get::<_, &str>(0)),
            revoked: row.get(1),
            tier: row.get(2),
            api_quota: row.get(3),
            anchor: row.get(4),
        };
        if !self.0.token_cache_for.is_zero() {
            let mut tokens = self.0.tokens.lock().expect("token cache");
            if tokens.len() >= 10_000 {
                tokens.clear();
            }
            tokens.insert(hash, (fetched_at, caller.clone()));
        }
        check_revoked(caller)
    }

    /// The per-minute limit, then the period quota; an admitted request counts once.
    fn admit(&self, caller: &Caller) -> Result<Usage, ApiError> {
        let now = Utc::now();
        let second = now.timestamp();
        let quota_limit = caller.api_quota.unwrap_or(self.0.default_quota);
        let anchor = caller.anchor.unwrap_or_else(|| Utc.timestamp_opt(0, 0).single().expect("epoch"));
        let mut counts = self.0.counts.lock().expect("limiter");
        let counts = counts
            .entry(caller.account_id.clone())
            .or_insert_with(|| Counts { seconds: [(0, 0); 60], period_end: period_end(anchor, now), period_used: 0 });
        if now >= counts.period_end {
            counts.period_end = period_end(anchor, now);
            counts.period_used = 0;
        }
        let in_minute: u32 = counts.seconds.iter().filter(|(at, _)| second - at < 60).map(|(_, count)| count).sum();
        let oldest = counts.seconds.iter().filter(|(at, count)| second - at < 60 && *count > 0).map(|(at, _)| *at).min().unwrap_or(second);
        if in_minute >= self.0.per_minute {
            return Err(ApiError::RateLimited((oldest + 60 - second).max(1) as u64));
        }
        if counts.period_used >= quota_limit {
            return Err(ApiError::QuotaExhausted { used: counts.period_used, limit: quota_limit, resets_at: rfc3339(&counts.period_end) });
        }
        let slot = &mut counts.seconds[(second.rem_euclid(60)) as usize];
        if slot.0 != second {
            *slot = (second, 0);
        }
        slot.1 += 1;
        counts.period_used += 1;
        Ok(Usage {
            quota_limit,
            quota_used: counts.period_used,
            period_end: counts.period_end,
            minute_remaining: self.0.per_minute - in_minute - 1,
            minute_reset_seconds: oldest + 60 - second,
        })
    }

    fn issue_cursor(&self, binding: &str, created_micros: i64, id: &str) -> String {
        let mut payload = serde_json::to_vec(&(created_micros, id)).unwrap_or_default();
        payload.resize(payload.len().div_ceil(32).max(1) * 32, b' ');
        let sealed = self.0.cursor_key.encrypt(Nonce::from_slice(&[0; 12]), Payload { msg: &payload, aad: binding.as_bytes() }).unwrap_or_default();
        let mut bytes = Vec::with_capacity(1 + sealed.len());
        bytes.push(1);
        bytes.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn open_cursor(&self, binding: &str, cursor: &str) -> Option<(i64, String)> {
        if cursor.is_empty() || cursor.len() > 1024 {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let (1, sealed) = bytes.split_first()? else { return None };
        let payload = self.0.cursor_key.decrypt(Nonce::from_slice(&[0; 12]), Payload { msg: sealed, aad: binding.as_bytes() }).ok()?;
        serde_json::from_slice(&payload).ok()
    }
}

fn check_revoked(caller: Caller) -> Result<Caller, ApiError> {
    if caller.revoked {
        Err(ApiError::TokenRevoked)
    } else {
        Ok(caller)
    }
}

/// Which tiers include the REST API (recap's default `--plan-features`).
fn check_plan(caller: &Caller) -> Result<(), ApiError> {
    match caller.tier.as_deref() {
        None => Err(ApiError::NoPlan),
        Some("flow" | "enterprise") => Ok(()),
        Some(_) => Err(ApiError::FeatureNotIncluded),
    }
}

/// A query parameter's raw value: None when absent, an error when given twice.
fn param<'q>(query: &'q str, name: &'static str) -> Result<Option<&'q str>, ApiError> {
    let mut found = None;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if key == name {
            if found.is_some() {
                return Err(ApiError::Invalid(name, "given more than once"));
            }
            found = Some(value);
        }
    }
    Ok(found)
}

fn limit(query: &str) -> Result<i64, ApiError> {
    match param(query, "limit")? {
        None => Ok(50),
        Some(text) => {
            if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
                return Err(ApiError::Invalid("limit", "limit is an integer from 1 to 200"));
            }
            match text.trim_start_matches('0').parse::<i64>() {
                Ok(value) if (1..=200).contains(&value) => Ok(value),
                _ => Err(ApiError::Invalid("limit", "limit is an integer from 1 to 200")),
            }
        }
    }
}

/// A `timestamptz` as microseconds since the Unix epoch, read straight from the wire
/// (binary format: microseconds since 2000-01-01): the list renders four a row, and going
/// through chrono's calendar types for each was a sixth of the service's time.
struct Micros(i64);

impl<'a> tokio_postgres::types::FromSql<'a> for Micros {
    fn from_sql(_: &tokio_postgres::types::Type, raw: &'a [u8]) -> Result<Micros, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Micros(i64::from_be_bytes(raw.try_into()?) + 946_684_800_000_000))
    }

    fn accepts(kind: &tokio_postgres::types::Type) -> bool {
        *kind == tokio_postgres::types::Type::TIMESTAMPTZ
    }
}

/// RFC 3339 in UTC with `Z`, fractional seconds only when present (milliseconds when they
/// suffice): how recap writes instants (chrono's `SecondsFormat::AutoSi`).
fn render_micros(micros: i64) -> String {
    let (days, in_day) = (micros.div_euclid(86_400_000_000), micros.rem_euclid(86_400_000_000));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let seconds = in_day / 1_000_000;
    let fraction = in_day % 1_000_000;
    let mut out = String::with_capacity(27);
    use std::fmt::Write;
    let _ = write!(out, "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction != 0 && fraction % 1000 == 0 {
        let _ = write!(out, ".{:03}", fraction / 1000);
    } else if fraction != 0 {
        let _ = write!(out, ".{fraction:06}");
    }
    out.push('Z');
    out
}

#[derive(Serialize)]
struct ListEntry<'r> {
    id: &'r str,
    title: &'r str,
    kind: &'r str,
    status: &'r str,
    started_at: Option<String>,
    ended_at: Option<String>,
    created_at: String,
    updated_at: String,
    series_id: Option<&'r str>,
}

fn list_entry(row: &tokio_postgres::Row) -> ListEntry<'_> {
    ListEntry {
        id: row.get(0),
        title: row.get(1),
        kind: row.get(2),
        status: row.get(3),
        started_at: row.get::<_, Option<Micros>>(4).map(|at| render_micros(at.0)),
        ended_at: row.get::<_, Option<Micros>>(5).map(|at| render_micros(at.0)),
        created_at: render_micros(row.get::<_, Micros>(6).0),
        updated_at: render_micros(row.get::<_, Micros>(7).0),
        series_id: row.get(8),
    }
}

#[derive(Serialize)]
struct Detail<'r> {
    #[serde(flatten)]
    entry: ListEntry<'r>,
    timezone: Option<&'r str>,
    language: Option<&'r str>,
    note: &'r RawValue,
    summaries: &'r RawValue,
    participants: &'r RawValue,
    action_items: &'r RawValue,
}

/// Token, plan, then the endpoint's parameters (`parse`), then the limiter: recap's order.
async fn admitted<T>(app: &App, headers: &HeaderMap, parse: impl FnOnce(&Caller) -> Result<T, ApiError>) -> Result<(Caller, T, Usage), ApiError> {
    let caller = app.authenticate(headers).await?;
    check_plan(&caller)?;
    let parsed = parse(&caller)?;
    let usage = app.admit(&caller)?;
    Ok((caller, parsed, usage))
}

async fn meetings(State(app): State<App>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let query = query.unwrap_or_default();
    let mut usage = None;
    let result = async {
        let (caller, (limit, after, binding), admitted_usage) = admitted(&app, &headers, |caller| {
            let limit = limit(&query)?;
            let binding = serde_json::to_string(&[Some("meetings"), Some(&*caller.account_id), None, None]).unwrap_or_default();
            let after = match param(&query, "cursor")? {
                None => None,
                Some(cursor) => Some(app.open_cursor(&binding, cursor).ok_or(ApiError::Invalid("cursor", "cursor is not a next_cursor this endpoint issued"))?),
            };
            Ok((limit, after, binding))
        })
        .await?;
        usage = Some(admitted_usage);
        let connection = app.connection();
        let rows = match &after {
            None => connection.client.query(&connection.first_page, &[&&*caller.account_id, &(limit + 1)]).await?,
            Some((created_micros, id)) => {
                let created = DateTime::<Utc>::from_timestamp_micros(*created_micros).ok_or(ApiError::Invalid("cursor", "cursor is not a next_cursor this endpoint issued"))?;
                connection.client.query(&connection.next_page, &[&&*caller.account_id, &created, id, &(limit + 1)]).await?
            }
        };
        let has_more = rows.len() as i64 > limit;
        let page = &rows[..rows.len().min(limit as usize)];
        let mut out = Vec::with_capacity(page.len() * 384 + 160);
        out.extend_from_slice(b"{\"data\":[");
        for (index, row) in page.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, &list_entry(row)).map_err(|error| ApiError::Internal(error.to_string()))?;
        }
        out.extend_from_slice(b"],\"has_more\":");
        match page.last().filter(|_| has_more) {
            Some(last) => {
                let cursor = app.issue_cursor(&binding, last.get::<_, Micros>(6).0, last.get(0));
                out.extend_from_slice(b"true,\"next_cursor\":\"");
                out.extend_from_slice(cursor.as_bytes());
                out.extend_from_slice(b"\"}");
            }
            None => out.extend_from_slice(b"false,\"next_cursor\":null}"),
        }
        Ok(out)
    }
    .await;
    respond(&app, &headers, result, usage)
}

async fn meeting(State(app): State<App>, headers: HeaderMap, Path(segment): Path<String>) -> Response {
    let mut usage = None;
    let result = async {
        let (caller, meeting_id, admitted_usage) = admitted(&app, &headers, |_| {
            // axum has percent-decoded the segment.
            Some(segment.clone()).filter(|id| (1..=256).contains(&id.len())).ok_or(ApiError::Invalid("meeting_id", "meeting_id is 1 to 256 bytes of UTF-8"))
        })
        .await?;
        usage = Some(admitted_usage);
        let connection = app.connection();
        let row = connection.client.query_opt(&connection.detail, &[&&*caller.account_id, &meeting_id]).await?.ok_or(ApiError::MeetingNotFound)?;
        let raw = |index: usize| row.get::<_, Json<&RawValue>>(index).0;
        let detail = Detail {
            entry: list_entry(&row),
            timezone: row.get(9),
            language: row.get(10),
            note: raw(11),
            summaries: raw(12),
            participants: raw(13),
            action_items: raw(14),
        };
        let mut out = Vec::with_capacity(2048);
        out.extend_from_slice(b"{\"data\":");
        serde_json::to_writer(&mut out, &detail).map_err(|error| ApiError::Internal(error.to_string()))?;
        out.push(b'}');
        Ok(out)
    }
    .await;
    respond(&app, &headers, result, usage)
}

fn respond(app: &App, headers: &HeaderMap, result: Result<Vec<u8>, ApiError>, usage: Option<Usage>) -> Response {
    let request_id = match headers.get(&X_REQUEST_ID) {
        Some(incoming)
            if (1..=128).contains(&incoming.len())
                && incoming.as_bytes().iter().all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'-')) =>
        {
            incoming.clone()
        }
        _ => {
            let mut buffer = uuid::Uuid::encode_buffer();
            HeaderValue::from_str(uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer)).unwrap_or(HeaderValue::from_static("unknown"))
        }
    };
    let (status, body, error) = match result {
        Ok(body) => (StatusCode::OK, body, None),
        Err(error) => {
            let (status, body) = error.status_and_body(request_id.to_str().unwrap_or_default());
            (status, body.into_bytes(), Some(error))
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let out = response.headers_mut();
    out.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(usage) = usage {
        out.insert(X_QUOTA_LIMIT.clone(), HeaderValue::from(usage.quota_limit));
        out.insert(X_QUOTA_REMAINING.clone(), HeaderValue::from((usage.quota_limit - usage.quota_used).max(0)));
        if let Ok(reset) = HeaderValue::from_str(&rfc3339(&usage.period_end)) {
            out.insert(X_QUOTA_RESET.clone(), reset);
        }
        out.insert(RATELIMIT_POLICY.clone(), app.0.rate_limit_policy.clone());
        if let Ok(value) = HeaderValue::from_str(&format!("\"minute\";r={};t={}", usage.minute_remaining, usage.minute_reset_seconds)) {
            out.insert(RATELIMIT.clone(), value);
        }
    }
    match error {
        Some(ApiError::Unauthorized) => {
            out.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        Some(ApiError::TokenRevoked) => {
            out.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer error=\"invalid_token\""));
        }
        Some(ApiError::RateLimited(seconds)) => {
            out.insert(axum::http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        _ => {}
    }
    out.insert(X_REQUEST_ID.clone(), request_id);
    response
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

async fn connect(database_url: &str) -> Connection {
    let (client, connection) = tokio_postgres::connect(database_url, NoTls).await.expect("connect to PostgreSQL (DATABASE_URL)");
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("PostgreSQL connection ended: {error}");
        }
    });
    let first_page = client
        .prepare(&format!("SELECT {LIST_COLUMNS} FROM meetings WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"))
        .await
        .expect("prepare");
    let next_page = client
        .prepare(&format!(
            "SELECT {LIST_COLUMNS} FROM meetings WHERE account_id = $1 AND (created_at, id) < ($2, $3) ORDER BY created_at DESC, id DESC LIMIT $4"
        ))
        .await
        .expect("prepare");
    let detail = client
        .prepare(&format!("SELECT {LIST_COLUMNS}, timezone, language, note, summaries, participants, action_items FROM meetings WHERE account_id = $1 AND id = $2"))
        .await
        .expect("prepare");
    let token = client
        .prepare(
            "SELECT t.account_id, t.revoked, a.plan_tier, a.api_quota, a.billing_cycle_anchor \
             FROM tokens t LEFT JOIN accounts a ON a.account_id = t.account_id WHERE t.token_sha256 = $1",
        )
        .await
        .expect("prepare");
    Connection { client, first_page, next_page, detail, token }
}

fn main() {
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cores).enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let database_url = std::env::var("DATABASE_URL").unwrap_or_else(|_| "host=127.0.0.1 user=recap dbname=recap".into());
        let mut connections = Vec::new();
        for _ in 0..env("PG_CONNECTIONS", 2 * cores) {
            connections.push(connect(&database_url).await);
        }
        let secret = std::env::var("CURSOR_SECRET_FILE").ok().and_then(|path| std::fs::read(path).ok()).unwrap_or_else(|| b"peer-cursor-secret".to_vec());
        let per_minute: u32 = env("RATE_LIMIT_PER_MINUTE", 120);
        let app = App(Arc::new(Inner {
            connections,
            next: AtomicUsize::new(0),
            token_cache_for: Duration::from_millis(env("TOKEN_CACHE_MS", 1000)),
            tokens: Mutex::new(HashMap::new()),
            counts: Mutex::new(HashMap::new()),
            per_minute,
            default_quota: env("DEFAULT_API_QUOTA", 50_000),
            cursor_key: {
                let mut derive = <HmacSha256 as Mac>::new_from_slice(&secret).expect("HMAC takes keys of any length");
                derive.update(b"recap cursor sealing key v1");
                Aes256GcmSiv::new(&derive.finalize().into_bytes())
            },
            rate_limit_policy: HeaderValue::from_str(&format!("\"minute\";q={per_minute};w=60")).expect("header"),
        }));
        let router = axum::Router::new()
            .route("/v1/meetings", axum::routing::get(meetings))
            .route("/v1/meetings/{meeting_id}", axum::routing::get(meeting))
            .fallback(|| async {
                let mut response = Response::new(Body::from(r#"{"error":{"code":"not_found","message":"no such endpoint"}}"#));
                *response.status_mut() = StatusCode::NOT_FOUND;
                response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            })
            .with_state(app);
        let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8090".into());
        let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind LISTEN");
        eprintln!("peer-axum-postgres listening on {listen} ({cores} worker(s))");
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
            let _ = stream.set_nodelay(true);
        });
        axum::serve(listener, router).await.expect("serve");
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn instants_render_as_recap_renders_them() {
        for micros in [0, 1_700_000_000_000_000, 1_700_000_000_250_000, 1_700_000_000_000_001, -86_400_000_001, 951_782_400_000_000, 4_102_444_800_123_456] {
            let expected = chrono::DateTime::from_timestamp_micros(micros).expect("in range").to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            assert_eq!(super::render_micros(micros), expected, "{micros}");
        }
    }
}
