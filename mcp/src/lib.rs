//! The remote MCP server of recap (`docs/mcp.md`): a stateless Streamable HTTP
//! endpoint with eight read-only tools over the read model, and the OAuth 2.1
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
//!   injectable clock (token and code expiry).
//! - [`router`]`(McpState) -> axum::Router`, to serve at the root of the MCP listener:
//!
//! | path | what |
//! |---|---|
//! | `POST /mcp` | JSON-RPC (initialize, ping, tools/list, tools/call); other methods 405 |
//! | `/mcp/.well-known/oauth-protected-resource`, `/.well-known/oauth-protected-resource/mcp`, `/.well-known/oauth-protected-resource` | RFC 9728 metadata |
//! | `/mcp/.well-known/oauth-authorization-server`, `/.well-known/oauth-authorization-server/mcp`, `/.well-known/oauth-authorization-server` | RFC 8414 metadata |
//! | `POST /mcp/register`, `GET+POST /mcp/authorize`, `POST /mcp/token`, `POST /mcp/revoke` | OAuth endpoints (advertised); the same at the root (`/register`, …) for clients that fall back to root paths when discovery fails |
//! | `OPTIONS` on the metadata documents, `/register`, `/token`, `/revoke` | CORS preflights (see `cors.rs`) |
//!
//! # Decisions where the spec is open
//!
//! - **Protocol versions**: 2025-03-26 by default; an initialize asking 2025-06-18 or
//!   2025-11-25 gets it, anything else gets 2025-03-26. Later requests name their
//!   version in `MCP-Protocol-Version` (absent: 2025-03-26; unsupported: 400). From
//!   2025-06-18 on, tools/list carries `outputSchema` and results `structuredContent`
//!   (the same JSON as the text item).
//! - **Order of checks** on `/mcp`: method 405 → Origin 403 → token 401 → plan 402 →
//!   protocol header 400 → JSON-RPC. JSON-RPC errors are HTTP 200 with an error object
//!   (`id: null` when the id could not be read); HTTP errors use the REST envelope.
//! - **Origin**: absent is fine (native clients); otherwise it must be a configured one
//!   (`--mcp-allowed-origins`), loopback (on by default), or the server's own when
//!   `--mcp-public-url` pins it. An origin derived from the Host header is not trusted:
//!   under DNS rebinding the attacker's page sends its own name as both.
//! - **Arguments**: see `tools/mod.rs` (numbers and numeric strings are clamped, other
//!   types are an isError invalid_argument; blank required strings are missing). So the
//!   advertised `inputSchema` gives limits and offsets no `minimum`/`maximum`: every
//!   integer is a valid argument, and the clamping range is in the description.
//! - **Pagination**: list_meetings and list_pending_action_items have `total: null`
//!   (counting would read everything); search_meetings counts matches; the history
//!   counts the series; the transcript counts words. `next_offset` is null on the last
//!   page. get_meeting_transcript returns the text on the first page (offset 0) only,
//!   `null` on later pages, and `""` when the meeting has no transcript.
//!   search_shared_notes is not paginated (it has no offset) and returns `results`.
//!   Offsets of the list and search tools are clamped to 0..=100,000 (their paging
//!   reads the skipped rows), and a page whose next offset would pass that bound is the
//!   last (`next_offset` null), so a walk always ends. Transcript offsets are not capped
//!   (words are read from their index), so any transcript is walked to its end.
//! - **search_meetings** ("text to find in meeting titles and summaries,
//!   case-insensitive") finds words: the query's runs of letters and digits must each
//!   be a whole word of the title or of a summary, case-insensitively, so it is answered
//!   from the word index rather than by scanning an account's history. A fragment of a
//!   word ("budg") does not find "budget"; list_meetings' `query` is the substring
//!   filter the spec asks for there.
//! - **Numbers** outside the range of a 64-bit float (`1e400`) cannot be read and the
//!   body is answered -32700, as serde_json refuses them; every number in range is
//!   read, and limits and offsets are then clamped.
//! - **Tool errors** are `{"error": {"code", "message"}}` with isError true; codes:
//!   invalid_argument, meeting_not_found (`meeting <id> not found`),
//!   shared_note_not_found, unavailable, read_failed (and internal_error, should the
//!   store refuse one of the server's own calls as a misuse: a defect, never the
//!   caller's doing).
//! - **Issuer** = {mcp_url} as the request reached it (`--mcp-public-url` overrides);
//!   every advertised endpoint lives under it.
//! - **Revoking the approving PAT**: every grant stores the PAT's SHA-256, and every use
//!   of an access token and every refresh checks that PAT's row: revocation takes effect
//!   on the next request, without a sweep. Grants are also indexed by PAT token id
//!   (`oauth_grants_by_pat`) so connections can be listed.
//! - **Redirect URIs** are compared as exact strings at /authorize; loopback http on
//!   any port may be registered.
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
//! is `rpc.rs` (message classification) and `transport.rs` (dispatch). rmcp's
//! `JsonRpcError` omits a null `id`, so errors without a readable id are written by
//! hand with `"id": null` as JSON-RPC 2.0 requires.

mod auth;
mod config;
mod cors;
mod error;
mod json_string;
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
        app = app.route(path, get(metadata::protected_resource).options(cors::document_preflight));
    }
    for path in ["/mcp/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp", "/.well-known/oauth-authorization-server"] {
        app = app.route(path, get(metadata::authorization_server).options(cors::document_preflight));
    }
    // The endpoints browser-based clients call with fetch: CORS per `cors.rs`.
    let mut oauth_endpoints = Router::new();
    for prefix in ["/mcp", ""] {
        app = app.route(&format!("{prefix}/authorize"), get(authorize::show).post(authorize::approve).fallback(authorize_not_allowed));
        oauth_endpoints = oauth_endpoints
            .route(&format!("{prefix}/register"), post(register::register).fallback(not_allowed))
            .route(&format!("{prefix}/token"), post(token::token).fallback(not_allowed))
            .route(&format!("{prefix}/revoke"), post(token::revoke).fallback(not_allowed));
    }
    let oauth_endpoints = oauth_endpoints.route_layer(axum::middleware::from_fn_with_state(state.clone(), cors::oauth_endpoints));
    app.merge(oauth_endpoints).fallback(not_found).layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

async fn authorize_not_allowed() -> axum::response::Response {
    let mut response = HttpError::MethodNotAllowed.into_response();
    response.headers_mut().insert(axum::http::header::ALLOW, axum::http::HeaderValue::from_static("GET, POST"));
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
