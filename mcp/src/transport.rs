//! The Streamable HTTP endpoint, stateless and JSON-only: POST of one JSON-RPC message
//! answered with `application/json` (never an SSE stream, never a session id), 202 for
//! notifications, 405 for every other method.
//!
//! Checks run in this order, each answering instead of a JSON-RPC response: method
//! (405) → Origin (403) → token (401) → plan (402) → `MCP-Protocol-Version` header
//! (400) → body size (413 `payload_too_large` above 256 KiB) → the message. So nothing
//! about the body is revealed to an unauthenticated caller, as REST does with
//! parameters.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::{CallToolRequestParams, EmptyObject, Implementation, InitializeResult, ProtocolVersion, RequestId, ServerCapabilities, ToolsCapability};
use serde_json::Value;
use tracing::{info_span, Instrument};

use crate::auth;
use crate::error::{HttpError, StoreFailure};
use crate::rpc::{self, Incoming, RpcError};
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

pub async fn post(State(state): State<McpState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    // The public URLs matter only to a request with an Origin and to a refusal: they
    // are derived then, not on every call.
    let urls = || PublicUrls::of(&state.inner.config, &headers);
    if headers.contains_key(header::ORIGIN) && !origin_allowed(&state, &headers, &urls().origin) {
        return HttpError::ForbiddenOrigin.into_response();
    }
    let caller = match auth::authorize(&state, &headers, || urls().resource_metadata()).await {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    // No header: the client speaks 2025-03-26 (as the transport spec says to assume).
    let version = match headers.get("mcp-protocol-version") {
        None => rpc::DEFAULT_VERSION,
        Some(value) => match value.to_str().ok().and_then(rpc::supported) {
            Some(version) => version,
            None => return HttpError::UnsupportedProtocolVersion(String::from_utf8_lossy(value.as_bytes()).into_owned()).into_response(),
        },
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return HttpError::PayloadTooLarge { limit: crate::MAX_BODY_BYTES }.into_response()
        }
        Err(_) => return HttpError::UnreadableBody.into_response(),
    };
    let (id, method, params) = match rpc::parse(&body) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        Ok(Incoming::Notification | Incoming::Response) => return StatusCode::ACCEPTED.into_response(),
        Err((id, error)) => return json_response(StatusCode::OK, rpc::error(id, &error)),
    };
    let body = match method.as_str() {
        "initialize" => info_span!("initialize", mcp.method.name = "initialize").in_scope(|| initialize(id, params.as_ref())).into_bytes(),
        "ping" => info_span!("ping", mcp.method.name = "ping").in_scope(|| rpc::respond(id, EmptyObject {})).into_bytes(),
        "tools/list" => info_span!("tools/list", mcp.method.name = "tools/list").in_scope(|| {
            let catalog = &state.inner.catalog;
            let list = if rpc::structured(version) { &catalog.list_with_output_schema } else { &catalog.list_without_output_schema };
            rpc::respond_raw(&id, list).into_bytes()
        }),
        "tools/call" => call_tool(&state, &caller.account_id, version, id, params).await,
        other => info_span!("unknown method", otel.name = "unknown method", mcp.method.name = other)
            .in_scope(|| rpc::error(Some(id), &RpcError::MethodNotFound(other.to_string())).into_bytes()),
    };
    json_response(StatusCode::OK, body)
}

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
        .with_server_info(Implementation::new("recap", env!("CARGO_PKG_VERSION")).with_title("recap meeting notes"))
        .with_instructions(INSTRUCTIONS);
    rpc::respond(id, result)
}

/// tools/call, in a span named after the tool (OpenTelemetry's MCP and GenAI
/// conventions): `error.type` is `tool_error` for an isError result, the JSON-RPC code
/// for a refused call. Arguments are not recorded: they are the caller's data.
async fn call_tool(state: &McpState, account_id: &str, version: &str, id: RequestId, params: Option<Value>) -> Vec<u8> {
    let refused = |message: String| {
        let span = info_span!("tools/call", mcp.method.name = "tools/call", error.type = tracing::field::Empty);
        span.record("error.type", "-32602");
        span.in_scope(|| rpc::error(Some(id.clone()), &RpcError::InvalidParams(message)).into_bytes())
    };
    let params: CallToolRequestParams = match params.map(serde_json::from_value) {
        Some(Ok(params)) => params,
        _ => return refused("tools/call needs params {name, arguments}".into()),
    };
    if !state.inner.catalog.contains(&params.name) {
        return refused(format!("unknown tool: {}", params.name));
    }
    let tool = params.name.as_ref();
    let span = info_span!(
        "tools/call",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        gen_ai.operation.name = "execute_tool",
        error.type = tracing::field::Empty,
    );
    // The name is formatted only for a span that is recorded (tracing on).
    if !span.is_disabled() {
        span.record("otel.name", format!("tools/call {tool}"));
    }
    let arguments = params.arguments.unwrap_or_default();
    let outcome = tools::call(state, account_id, tool, &arguments).instrument(span.clone()).await;
    match outcome {
        Ok(text) => {
            // Results copy stored JSON; should a stored body be corrupt, the text item
            // still carries it (escaped) but it is not pasted raw into the response.
            let structured = rpc::structured(version) && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
            rpc::tool_result(&id, &text, false, structured)
        }
        Err(error) => {
            if let tools::ToolError::Store(store_error) = &error {
                span.in_scope(|| StoreFailure::logged(store_error, "mcp_tool"));
            }
            span.record("error.type", "tool_error");
            rpc::tool_result(&id, &error.to_json(), true, false)
        }
    }
}

fn version_of(version: &'static str) -> ProtocolVersion {
    match version {
        "2025-06-18" => ProtocolVersion::V_2025_06_18,
        "2025-11-25" => ProtocolVersion::V_2025_11_25,
        _ => ProtocolVersion::V_2025_03_26,
    }
}
