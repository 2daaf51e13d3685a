//! The discovery documents: RFC 9728 protected-resource metadata and RFC 8414
//! authorization-server metadata. Both are served under {mcp_url} (as the spec places
//! them), at the RFC's path-inserted forms (`/.well-known/<name>/mcp`) and at the root,
//! so that every client's discovery order finds them. The issuer is {mcp_url} as the
//! request reached it (see `urls.rs`).

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::oauth::secrets::SCOPE;
use crate::state::McpState;
use crate::urls::PublicUrls;

fn document(body: serde_json::Value) -> Response {
    // Public, identical for every caller: cacheable and readable from browsers.
    ([(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "public, max-age=300"), (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")], body.to_string())
        .into_response()
}

pub async fn protected_resource(State(state): State<McpState>, headers: HeaderMap) -> Response {
    let urls = PublicUrls::of(&state.inner.config, &headers);
    document(json!({
        "resource": urls.mcp_url,
        "authorization_servers": [urls.issuer()],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "recap MCP server",
    }))
}

pub async fn authorization_server(State(state): State<McpState>, headers: HeaderMap) -> Response {
    let urls = PublicUrls::of(&state.inner.config, &headers);
    document(json!({
        "issuer": urls.issuer(),
        "authorization_endpoint": urls.endpoint("authorize"),
        "token_endpoint": urls.endpoint("token"),
        "registration_endpoint": urls.endpoint("register"),
        "revocation_endpoint": urls.endpoint("revoke"),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    }))
}
