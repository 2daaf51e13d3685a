//! The Streamable HTTP endpoint, stateless: POST of one JSON-RPC message answered with
//! `application/json` (never a session id; the one SSE stream is a 2026-07-28
//! `subscriptions/listen`'s, which ends at once, `modern::listen`), 202 for
//! notifications, 405 for every other method. It serves both eras of MCP: the
//! handshake-era versions (2025-03-26, 2025-06-18, 2025-11-25, after `initialize`) and
//! 2026-07-28 (`modern.rs`), chosen per request by the `MCP-Protocol-Version` header.
//!
//! Checks run in this order, each answering instead of a JSON-RPC response: method
//! (405) → Origin (403) → token (401) → plan (402) → body size (413
//! `payload_too_large` above 256 KiB) → the message, then the protocol checks of its
//! era (an unknown `MCP-Protocol-Version` among them: -32022, which needs the request's
//! id). So nothing about the body is revealed to an unauthenticated caller, as REST does
//! with parameters.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest as _, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;
use std::time::Instant;

use opentelemetry::propagation::Extractor;
use opentelemetry::trace::TraceContextExt as _;
use rmcp::model::{CallToolRequestParams, EmptyObject, InitializeResult, ProtocolVersion, RequestId, ServerCapabilities, ToolsCapability};
use serde::Deserialize as _;
use serde_json::Value;
use tracing::{info_span, Instrument, Level, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::auth;
use crate::error::{HttpError, StoreFailure};
use crate::modern;
use crate::rpc::{self, Incoming, Meta, MetaValue, Params, RpcError};
use crate::state::McpState;
use crate::tools;
use crate::urls::PublicUrls;

const INSTRUCTIONS: &str = "Read-only access to the meetings this account syncs (metadata, notes, summaries, transcripts, action items) and to the notes others share with it. Use list_meetings or search_meetings to find meetings, then get_meeting or get_meeting_transcript.";

pub async fn method_not_allowed() -> Response {
    HttpError::MethodNotAllowed.into_response()
}

fn json_response(status: StatusCode, body: impl Into<Vec<u8>>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], axum::body::Body::from(body.into())).into_response()
}

/// Whether a browser origin may call: the configured list, the server's own origin
/// when `--mcp-public-url` pins it, or a loopback origin when allowed. An origin derived
/// from the request's Host header is never trusted: under DNS rebinding the attacker's
/// page and its Host name are the same, so it would always match.
pub(crate) fn origin_allowed(state: &McpState, headers: &HeaderMap, own_origin: &str) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let Ok(origin) = origin.to_str() else { return false };
    let config = &state.inner.config;
    let own = config.public_url.is_some() && origin.eq_ignore_ascii_case(own_origin);
    if own || config.allowed_origins.iter().any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin)) {
        return true;
    }
    config.allow_loopback_origins && is_loopback_origin(origin)
}

pub fn is_loopback_origin(origin: &str) -> bool {
    match url::Url::parse(origin) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => match url.host() {
            Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(address)) => address.is_loopback(),
            Some(url::Host::Ipv6(address)) => address.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// Which revision a request speaks, from its `MCP-Protocol-Version` header: absent or a
/// handshake-era version, the legacy path exactly as it was before 2026-07-28; any
/// other value, the modern path (`modern.rs`), which answers a version it does not
/// know with -32022 and the list of those it does, so that a client on either era
/// recognises a dual-era server.
enum Era<'a> {
    Legacy(&'static str),
    /// The header's value, spaces and tabs around it trimmed.
    Modern(Cow<'a, str>),
}

/// Takes the request whole: axum's `HeaderMap` extractor clones the map (every name and
/// value), and a 2026-07-28 request carries more headers than a handshake-era one. The
/// headers are moved out instead, and the body read as the `Bytes` extractor reads it
/// (the same limit, the same rejections).
pub async fn post(State(state): State<McpState>, request: Request) -> Response {
    let started = Instant::now();
    let mut log = RequestLog::new();
    let (mut parts, body) = request.into_parts();
    let headers = std::mem::take(&mut parts.headers);
    log.request_id_of(&headers);
    let body = Bytes::from_request(Request::from_parts(parts, body), &()).await;
    let mut response = answer(&state, &headers, body, &mut log).await;
    log.write(response.status(), started);
    // The id the line names is the one the response carries (the HTTP layer in front
    // sets one only on a response without it).
    if let Some(request_id) = log.request_id.take() {
        response.headers_mut().entry(X_REQUEST_ID.clone()).or_insert(request_id);
    }
    response
}

use recap_access::request_id::X_REQUEST_ID;

async fn answer(state: &McpState, headers: &HeaderMap, body: Result<Bytes, BytesRejection>, log: &mut RequestLog) -> Response {
    // The public URLs matter only to a request with an Origin and to a refusal: they
    // are derived then, not on every call.
    let urls = || PublicUrls::of(&state.inner.config, headers);
    if headers.contains_key(header::ORIGIN) && !origin_allowed(state, headers, &urls().origin) {
        return log.refused(HttpError::ForbiddenOrigin, headers);
    }
    let caller = match auth::authorize(state, headers, urls).await {
        Ok(caller) => caller,
        Err(error) => return log.refused(error, headers),
    };
    // No header: the client speaks 2025-03-26 (as the transport spec says to assume).
    // A version header given twice is no handshake-era request whatever its first copy
    // says: the modern path refuses it (-32020), as a proxy reading the last copy would
    // route it on a version whose header rules were never checked against the body.
    let version_repeated = headers.len() != headers.keys_len() && headers.get_all(&modern::PROTOCOL_VERSION_HEADER).iter().nth(1).is_some();
    let era = match headers.get(&modern::PROTOCOL_VERSION_HEADER) {
        None => Era::Legacy(rpc::DEFAULT_VERSION),
        Some(value) => match value.to_str().ok().and_then(rpc::supported).filter(|_| !version_repeated) {
            Some(version) => Era::Legacy(version),
            None => Era::Modern(match String::from_utf8_lossy(value.as_bytes()) {
                Cow::Borrowed(text) => Cow::Borrowed(text.trim_matches([' ', '\t'])),
                Cow::Owned(text) => Cow::Owned(text.trim_matches([' ', '\t']).to_string()),
            }),
        },
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return log.refused(HttpError::PayloadTooLarge { limit: crate::MAX_BODY_BYTES }, headers)
        }
        Err(_) => return log.refused(HttpError::UnreadableBody, headers),
    };
    match era {
        Era::Legacy(version) => legacy(state, &caller.account_id, headers, version, &body, log).await,
        Era::Modern(requested) => modern(state, &caller.account_id, headers, &requested, &body, log).await,
    }
}

/// The handshake-era path: JSON-RPC errors with HTTP 200, as before 2026-07-28.
async fn legacy(state: &McpState, account_id: &str, headers: &HeaderMap, version: &'static str, body: &[u8], log: &mut RequestLog) -> Response {
    log.era = version;
    let (id, method, params) = match rpc::parse(body) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Notification | Incoming::Response) => return log.accepted(),
        Err((id, error)) => return log.error_response(StatusCode::OK, id, &error),
    };
    log.request(&id, &method);
    // "A request carrying modern per-request _meta is served statelessly according to"
    // 2026-07-28, whose version header must match the one `_meta` names: a request
    // naming a version there that is not a handshake-era one (2026-07-28, or one this
    // server does not know) under a handshake-era (or absent, 2025-03-26) header is
    // refused as that revision refuses a mismatch. A handshake-era version in `_meta`
    // is not that revision's envelope, and the header rules; initialize selects the
    // handshake era whatever its `_meta` says.
    if let MetaValue::Text(carried) = &params.meta.protocol_version {
        if rpc::supported(carried).is_none() && method != "initialize" {
            log.era = rpc::MODERN_VERSION;
            let header = if headers.contains_key(&modern::PROTOCOL_VERSION_HEADER) {
                format!("MCP-Protocol-Version header value '{version}'")
            } else {
                format!("no MCP-Protocol-Version header (version {version})")
            };
            let error = RpcError::HeaderMismatch(format!("{header} does not match body value '{carried}'"));
            return log.error_response(error.modern_status(), Some(id), &error);
        }
    }
    let body = match method.as_str() {
        "initialize" => {
            traced(info_span!("initialize", mcp.method.name = "initialize"), &params.meta).in_scope(|| initialize(id, params.object.as_ref())).into_bytes()
        }
        "ping" => traced(info_span!("ping", mcp.method.name = "ping"), &params.meta).in_scope(|| rpc::respond(id, EmptyObject {})).into_bytes(),
        "tools/list" => traced(info_span!("tools/list", mcp.method.name = "tools/list"), &params.meta).in_scope(|| {
            let catalog = &state.inner.catalog;
            let list = if rpc::structured(version) { &catalog.list_with_output_schema } else { &catalog.list_without_output_schema };
            rpc::respond_raw(&id, list).into_bytes()
        }),
        "tools/call" => match call_tool(state, account_id, rpc::structured(version), "", &id, params, log).await {
            Ok(body) => body,
            Err(error) => return log.error_response(StatusCode::OK, Some(id), &error),
        },
        other => {
            let error = RpcError::MethodNotFound(other.to_string());
            return traced(info_span!("unknown method", otel.name = "unknown method", mcp.method.name = other), &params.meta)
                .in_scope(|| log.error_response(StatusCode::OK, Some(id), &error));
        }
    };
    json_response(StatusCode::OK, body)
}

/// The 2026-07-28 path (`modern.rs`): each refusal is a JSON-RPC error with its HTTP
/// status (400, or 404 for an unknown method), and initialize, ping and logging/setLevel,
/// which this revision removed, are unknown methods.
async fn modern(state: &McpState, account_id: &str, headers: &HeaderMap, requested: &str, body: &[u8], log: &mut RequestLog) -> Response {
    log.era = rpc::MODERN_VERSION;
    let (id, method, params) = match rpc::parse(body) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Notification) => return log.accepted(),
        // Clients send no responses under this revision: the server sends no requests.
        Ok(Incoming::Response) => return log.error_response(StatusCode::BAD_REQUEST, None, &RpcError::InvalidRequest("a client sends no JSON-RPC responses")),
        Err((id, error)) => return log.error_response(error.modern_status(), id, &error),
    };
    log.request(&id, &method);
    if let Err(error) = modern::check(headers, requested, &method, &params) {
        return log.error_response(error.modern_status(), Some(id), &error);
    }
    let body = match method.as_str() {
        "server/discover" => traced(info_span!("server/discover", mcp.method.name = "server/discover"), &params.meta)
            .in_scope(|| rpc::respond_raw(&id, modern::discover_result(INSTRUCTIONS)).into_bytes()),
        "tools/list" => {
            let span = traced(info_span!("tools/list", mcp.method.name = "tools/list"), &params.meta);
            // The list is one page, so no cursor is one this server gave.
            if params.object.as_ref().and_then(|object| object.get("cursor")).is_some_and(|cursor| !cursor.is_null()) {
                let error = RpcError::InvalidParams("invalid cursor: tools/list has a single page".into());
                return span.in_scope(|| log.error_response(error.modern_status(), Some(id), &error));
            }
            span.in_scope(|| rpc::respond_raw(&id, &state.inner.catalog.list_modern).into_bytes())
        }
        "tools/call" => match call_tool(state, account_id, true, modern::result_members(), &id, params, log).await {
            Ok(body) => body,
            Err(error) => return log.error_response(error.modern_status(), Some(id), &error),
        },
        "subscriptions/listen" => {
            let span = traced(info_span!("subscriptions/listen", mcp.method.name = "subscriptions/listen"), &params.meta);
            return span.in_scope(|| match modern::listen(&id, &params) {
                Ok(stream) => (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache"), (X_ACCEL_BUFFERING.clone(), "no")],
                    stream,
                )
                    .into_response(),
                Err(error) => log.error_response(error.modern_status(), Some(id), &error),
            });
        }
        other => {
            let error = RpcError::MethodNotFound(other.to_string());
            return traced(info_span!("unknown method", otel.name = "unknown method", mcp.method.name = other), &params.meta)
                .in_scope(|| log.error_response(error.modern_status(), Some(id), &error));
        }
    };
    json_response(StatusCode::OK, body)
}

/// Tells a proxy in front not to buffer an SSE stream (the transport's SHOULD).
static X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

fn initialize(id: RequestId, params: Option<&Value>) -> String {
    let requested = params.and_then(|params| params.get("protocolVersion")).and_then(Value::as_str);
    let negotiated = rpc::negotiate(requested);
    // Only tools: no resources, no prompts, no logging. The tool list never changes.
    let mut capabilities = ServerCapabilities::default();
    let mut tools_capability = ToolsCapability::default();
    tools_capability.list_changed = Some(false);
    capabilities.tools = Some(tools_capability);
    let result = InitializeResult::new(capabilities)
        .with_protocol_version(version_of(negotiated))
        .with_server_info(modern::server_info())
        .with_instructions(INSTRUCTIONS);
    rpc::respond(id, result)
}

/// tools/call, in a span named after the tool (OpenTelemetry's MCP and GenAI
/// conventions): `error.type` is `tool_error` for an isError result, the JSON-RPC code
/// for a refused call. Arguments are not recorded: they are the caller's data.
/// `structured` adds `structuredContent`; `extra` is appended to the result object.
async fn call_tool(
    state: &McpState,
    account_id: &str,
    structured: bool,
    extra: &str,
    id: &RequestId,
    params: Params<'_>,
    log: &mut RequestLog,
) -> Result<Vec<u8>, RpcError> {
    // `_meta` was read apart from the params (`rpc::Meta`), so the rest moves into
    // rmcp's type rather than being copied; rmcp's own rule for `_meta`, an object or
    // null, is kept.
    let meta = &params.meta;
    let call = match (params.object, &meta.value) {
        (Some(Value::Object(members)), MetaValue::Absent | MetaValue::Null | MetaValue::Object) => {
            CallToolRequestParams::deserialize(Value::Object(members)).ok()
        }
        _ => None,
    };
    let refused = |message: String| {
        let span = traced(info_span!("tools/call", mcp.method.name = "tools/call", error.type = tracing::field::Empty), meta);
        span.record("error.type", "-32602");
        RpcError::InvalidParams(message)
    };
    let Some(call) = call else {
        return Err(refused("tools/call needs params {name, arguments}".into()));
    };
    log.tool(&call.name);
    if !state.inner.catalog.contains(&call.name) {
        return Err(refused(format!("unknown tool: {}", call.name)));
    }
    let tool = call.name.as_ref();
    let span = traced(
        info_span!(
            "tools/call",
            otel.name = tracing::field::Empty,
            otel.kind = "internal",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = tool,
            gen_ai.operation.name = "execute_tool",
            error.type = tracing::field::Empty,
        ),
        meta,
    );
    // The name is formatted only for a span that is recorded (tracing on).
    if !span.is_disabled() {
        span.record("otel.name", format!("tools/call {tool}"));
    }
    let arguments = call.arguments.unwrap_or_default();
    let outcome = tools::call_counted(state, account_id, tool, &arguments).instrument(span.clone()).await;
    // Results copy stored JSON. A stored body that does not read back makes a result
    // that is not JSON: where the tool's output schema is declared, a success must carry
    // structuredContent that conforms, so it is the store's failure, as any unreadable
    // row is (without one, the text item carries it, escaped, as before).
    let outcome = match outcome {
        Ok(text) if structured && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() => {
            Err(tools::ToolError::Store(recap_readmodel::StoreError::Corrupt(format!("a stored body of {tool} does not read back as JSON"))))
        }
        outcome => outcome,
    };
    Ok(match outcome {
        Ok(text) => rpc::tool_result_with(id, &text, false, structured, extra),
        Err(error) => {
            if let tools::ToolError::Store(store_error) = &error {
                span.in_scope(|| StoreFailure::logged(store_error, "mcp_tool"));
            }
            span.record("error.type", "tool_error");
            log.outcome = Cow::Borrowed(if matches!(error, tools::ToolError::RateLimited { .. }) { "rate_limited" } else { "tool_error" });
            rpc::tool_result_with(id, &error.to_json(), true, false, extra)
        }
    })
}

/// Continues the trace a request names in `params._meta` (`traceparent`, `tracestate`:
/// MCP's carrier for W3C trace context, which the OpenTelemetry conventions for MCP
/// read). It wins over the HTTP `traceparent` header for the MCP span: it is the
/// client's context for this message, where the header's is the HTTP hop's (a proxy's
/// or an HTTP library's). The HTTP span stays in the header's trace and is linked. Read
/// only when spans are recorded; a malformed value is ignored.
fn traced(span: Span, meta: &Meta) -> Span {
    if span.is_disabled() || meta.value != MetaValue::Object || meta.traceparent == MetaValue::Absent {
        return span;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&MetaExtractor(meta)));
    if parent.span().span_context().is_valid() {
        let http = Span::current().context().span().span_context().clone();
        let _ = span.set_parent(parent);
        if http.is_valid() {
            span.add_link(http);
        }
    }
    span
}

/// The trace context of a request's `_meta`: its `traceparent` and `tracestate` when
/// they are strings.
struct MetaExtractor<'a>(&'a Meta<'a>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => self.0.traceparent.text(),
            "tracestate" => self.0.tracestate.text(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        [("traceparent", &self.0.traceparent), ("tracestate", &self.0.tracestate)]
            .into_iter()
            .filter_map(|(key, value)| (*value != MetaValue::Absent).then_some(key))
            .collect()
    }
}

/// The one debug line of a request to `/mcp`: the revision, the JSON-RPC id, method and
/// tool, the outcome (`ok`, `tool_error`, `accepted` for a notification, the JSON-RPC
/// error code, or the HTTP error's code), the status and the latency. Never a header
/// (the token is one), never arguments (the caller's data). Filled only when debug events
/// are on (`event_enabled!`: the binary's log filter passes events only, so a check of
/// another kind of callsite would always read off).
struct RequestLog {
    enabled: bool,
    /// The request's id, as `X-Request-Id` (the client's own when well-formed, else a
    /// new one): decided here only when the line is written, or an `internal_error`
    /// names it.
    request_id: Option<HeaderValue>,
    era: &'static str,
    id: Option<String>,
    method: Option<String>,
    tool: Option<String>,
    outcome: Cow<'static, str>,
}

impl RequestLog {
    fn new() -> RequestLog {
        RequestLog {
            enabled: tracing::event_enabled!(Level::DEBUG),
            request_id: None,
            era: "-",
            id: None,
            method: None,
            tool: None,
            outcome: Cow::Borrowed("ok"),
        }
    }

    fn request_id_of(&mut self, headers: &HeaderMap) {
        if self.enabled {
            self.request_id = Some(recap_access::request_id::of(headers));
        }
    }

    fn request(&mut self, id: &RequestId, method: &str) {
        if self.enabled {
            self.id = Some(id.to_string());
            self.method = Some(method.to_string());
        }
    }

    fn tool(&mut self, tool: &str) {
        if self.enabled {
            self.tool = Some(tool.to_string());
        }
    }

    /// The HTTP error's answer. An `internal_error` names the request's id, which is
    /// then decided here (and set on the response by [`post`]) even when no line is
    /// written.
    fn refused(&mut self, error: HttpError, headers: &HeaderMap) -> Response {
        self.outcome = Cow::Borrowed(error.code());
        if error == HttpError::Internal {
            let request_id = self.request_id.get_or_insert_with(|| recap_access::request_id::of(headers));
            return error.response(Some(request_id));
        }
        error.into_response()
    }

    fn accepted(&mut self) -> Response {
        self.outcome = Cow::Borrowed("accepted");
        StatusCode::ACCEPTED.into_response()
    }

    fn error_response(&mut self, status: StatusCode, id: Option<RequestId>, error: &RpcError) -> Response {
        if self.enabled {
            self.outcome = Cow::Owned(error.code().0.to_string());
        }
        let body = if self.era == rpc::MODERN_VERSION { rpc::modern_error(id, error) } else { rpc::error(id, error) };
        json_response(status, body)
    }

    fn write(&self, status: StatusCode, started: Instant) {
        if !self.enabled {
            return;
        }
        tracing::debug!(
            request_id = self.request_id.as_ref().and_then(|value| value.to_str().ok()).unwrap_or("-"),
            era = self.era,
            id = self.id.as_deref().unwrap_or("-"),
            method = self.method.as_deref().unwrap_or("-"),
            tool = self.tool.as_deref().unwrap_or("-"),
            outcome = %self.outcome,
            status = status.as_u16(),
            latency_us = started.elapsed().as_micros() as u64,
            "mcp request"
        );
    }
}

fn version_of(version: &'static str) -> ProtocolVersion {
    match version {
        "2025-06-18" => ProtocolVersion::V_2025_06_18,
        "2025-11-25" => ProtocolVersion::V_2025_11_25,
        _ => ProtocolVersion::V_2025_03_26,
    }
}
