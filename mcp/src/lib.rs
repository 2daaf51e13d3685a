//! The remote MCP server of recap (`docs/mcp.md`): a stateless Streamable HTTP
//! endpoint with nine read-only tools over the read model, and the OAuth 2.1
//! authorization server that lets MCP clients connect without copying a token.
//!
//! # Public API
//!
//! ```
//! # fn wire(readmodel: recap_readmodel::ReadModel, plans: recap_access::Plans, mcp_config: recap_mcp::McpConfig) {
//! let state = recap_mcp::McpState::new(readmodel, plans, &mcp_config);
//! let app: axum::Router = recap_mcp::router(state);
//! # }
//! ```
//!
//! - [`McpConfig`]: `clap::Args` (flags and `RECAP_MCP_*` variables) to flatten into a
//!   role's command line; `McpConfig::default()` for tests.
//! - [`McpState::new`]`(ReadModel, Plans, &McpConfig)`; [`McpState::with_clock`] adds an
//!   injectable clock (token and code expiry);
//!   [`McpState::with_limiter`] counts dynamic registrations per client address and
//!   tool calls per account with a shared limiter (Redis in the distributed edition)
//!   instead of in process. The client address is the peer's, read from axum's
//!   `ConnectInfo<SocketAddr>` request extension (the binary's server loop sets it, as
//!   `into_make_service_with_connect_info` would), or `X-Forwarded-For` trusted with
//!   `--mcp-trusted-proxy-hops`.
//! - [`router`]`(McpState) -> axum::Router`, to serve at the root of the MCP listener:
//!
//! | path | what |
//! |---|---|
//! | `POST /mcp` | JSON-RPC: initialize, ping, tools/list, tools/call (2025-03-26 to 2025-11-25); server/discover, tools/list, tools/call, subscriptions/listen (2026-07-28, `modern.rs`); other methods 405 |
//! | `/mcp/.well-known/oauth-protected-resource`, `/.well-known/oauth-protected-resource/mcp`, `/.well-known/oauth-protected-resource` | RFC 9728 metadata |
//! | `/mcp/.well-known/oauth-authorization-server`, `/.well-known/oauth-authorization-server/mcp`, `/.well-known/oauth-authorization-server` | RFC 8414 metadata |
//! | `POST /mcp/register`, `GET+POST /mcp/authorize`, `POST /mcp/token`, `POST /mcp/revoke` | OAuth endpoints (advertised); the same at the root (`/register`, …) for clients that fall back to root paths when discovery fails |
//! | `OPTIONS` on the metadata documents, `/register`, `/token`, `/revoke` | CORS preflights (see `cors.rs`) |
//!
//! # Decisions
//!
//! They are written down once, for users, in `docs/mcp.md` (protocol versions, the order
//! of checks, origins, arguments, pagination, search, tool errors, the authorization
//! server's choices); the code that makes each one says why where it makes it
//! (`transport.rs`, `tools/`, `oauth/`, `cors.rs`).
//!
//! # Where rmcp is used, and where not
//!
//! rmcp (the official SDK) is used without default features, for its model types:
//! `InitializeResult`, `ServerCapabilities`, `Implementation`, `ProtocolVersion`,
//! `Tool`, `ToolAnnotations`, `ListToolsResult`, `CallToolRequestParams`,
//! `CallToolResult`, `ContentBlock`, `JsonRpcResponse`, `JsonRpcError`, `ErrorData`,
//! `ErrorCode`. Its server runtime and Streamable HTTP transport are not: the spec's
//! rules sit in the HTTP layer that transport owns (401 with `WWW-Authenticate` and
//! 402/503 per request before any JSON-RPC, 405 for GET rather than an SSE stream,
//! exact -32700/-32600 handling of batches and bodies, JSON rather than SSE
//! responses, Origin policy), and its per-connection service runtime adds a task and
//! channels per request that a stateless server does not need. The hand-written part
//! is `rpc.rs` (message classification), `transport.rs` (dispatch) and `modern.rs` (the
//! 2026-07-28 checks). rmcp's
//! `JsonRpcError` omits a null `id`, so errors without a readable id are written by
//! hand with `"id": null` as JSON-RPC 2.0 requires.

mod auth;
mod config;
mod cors;
mod error;
mod json_string;
mod modern;
pub mod oauth;
mod rpc;
mod state;
pub mod tools;
mod transport;
mod urls;

pub use config::McpConfig;
pub use error::HttpError;
pub use state::{Clock, McpState};

use axum::extract::DefaultBodyLimit;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;

/// Bodies above this are refused (413): tool arguments and OAuth forms are small.
pub(crate) const MAX_BODY_BYTES: usize = 256 * 1024;

/// The MCP router: endpoint, discovery documents and OAuth endpoints (see the crate docs).
pub fn router(state: McpState) -> Router {
    use oauth::{authorize, metadata, register, token};
    let not_allowed = transport::method_not_allowed;
    let mut app = Router::new().route("/mcp", post(transport::post).fallback(not_allowed));
    for path in ["/mcp/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"] {
        app = app.route(path, get(metadata::protected_resource).options(cors::document_preflight).fallback(document_not_allowed));
    }
    for path in ["/mcp/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp", "/.well-known/oauth-authorization-server"] {
        app = app.route(path, get(metadata::authorization_server).options(cors::document_preflight).fallback(document_not_allowed));
    }
    // The endpoints browser-based clients call with fetch: CORS per `cors.rs`.
    let mut oauth_endpoints = Router::new();
    for prefix in ["/mcp", ""] {
        app = app.route(&format!("{prefix}/authorize"), get(authorize::show).post(authorize::approve).fallback(authorize_not_allowed));
        oauth_endpoints = oauth_endpoints
            .route(&format!("{prefix}/register"), post(register::register).fallback(oauth_not_allowed))
            .route(&format!("{prefix}/token"), post(token::token).fallback(oauth_not_allowed))
            .route(&format!("{prefix}/revoke"), post(token::revoke).fallback(oauth_not_allowed));
    }
    let oauth_endpoints = oauth_endpoints.route_layer(axum::middleware::from_fn_with_state(state.clone(), cors::oauth_endpoints));
    app.merge(oauth_endpoints).fallback(not_found).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

/// The OAuth JSON endpoints answer every method but POST in their own error shape.
async fn oauth_not_allowed() -> axum::response::Response {
    oauth::error::OAuthError::MethodNotAllowed.into_response()
}

async fn authorize_not_allowed() -> axum::response::Response {
    not_allowed_but("GET, HEAD, POST", "only GET, HEAD and POST are served on this endpoint")
}

async fn document_not_allowed() -> axum::response::Response {
    not_allowed_but("GET, HEAD, OPTIONS", "only GET, HEAD and OPTIONS are served on this endpoint")
}

/// 405 `method_not_allowed` in the REST API's envelope, naming the methods served.
fn not_allowed_but(allow: &'static str, message: &str) -> axum::response::Response {
    use axum::http::header::{ALLOW, CONTENT_TYPE};
    let code = HttpError::MethodNotAllowed.code();
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    let mut response = (axum::http::StatusCode::METHOD_NOT_ALLOWED, [(CONTENT_TYPE, "application/json"), (ALLOW, allow)], body).into_response();
    response.extensions_mut().insert(recap_access::telemetry::ErrorCode(code));
    response
}

async fn not_found() -> axum::response::Response {
    let mut response = (
        axum::http::StatusCode::NOT_FOUND,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        r#"{"error":{"code":"not_found","message":"no such endpoint"}}"#,
    )
        .into_response();
    response.extensions_mut().insert(recap_access::telemetry::ErrorCode("not_found"));
    response
}
