//! CORS for browser-based MCP clients (an MCP inspector page, a web app acting as an
//! OAuth public client). Two policies:
//!
//! - **Discovery documents** are public and identical for every caller:
//!   `Access-Control-Allow-Origin: *` on the documents and on their preflight, whatever
//!   the origin (discovery requests carry `MCP-Protocol-Version`, which is not a
//!   CORS-safelisted header, so browsers preflight them).
//! - **`/register`, `/token`, `/revoke`** follow the Origin rule of `/mcp`: an absent
//!   Origin (native clients) passes; a present one must be a configured one
//!   (`--mcp-allowed-origins`), loopback (when allowed), or the server's own when
//!   `--mcp-public-url` pins it. An allowed
//!   origin is echoed in `Access-Control-Allow-Origin` (with `Vary: Origin`) on the
//!   preflight (204) and on the response itself; any other origin gets 403 on both, so
//!   a page the configuration does not trust can neither read these endpoints nor act
//!   on them. No `Access-Control-Allow-Credentials`: nothing here rides on cookies.
//!
//! `/mcp` itself answers OPTIONS with 405, as the spec requires of every non-POST
//! request, and `/authorize` is a top-level navigation (a page and its own form), which
//! needs no CORS.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::oauth::error::OAuthError;
use crate::state::McpState;
use crate::transport::origin_allowed;
use crate::urls::PublicUrls;

/// The request headers browsers may send: what MCP clients send to these endpoints.
pub const ALLOWED_HEADERS: &str = "authorization, content-type, accept, mcp-protocol-version";
/// How long a browser may cache a preflight (Chromium caps it at two hours).
pub const MAX_AGE_SECS: &str = "7200";

fn preflight_headers(headers: &mut HeaderMap, allow_origin: HeaderValue, methods: &'static str) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow_origin);
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(methods));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOWED_HEADERS));
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE_SECS));
    headers.insert(header::ALLOW, HeaderValue::from_static(methods));
}

/// OPTIONS on a discovery document: 204, open to every origin.
pub async fn document_preflight() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    preflight_headers(response.headers_mut(), HeaderValue::from_static("*"), "GET, OPTIONS");
    response
}

/// The Origin of a request to `/register`, `/token` or `/revoke`, when it may call:
/// `Ok(None)` without an Origin header, `Ok(Some(origin))` for an allowed one.
fn checked_origin(state: &McpState, headers: &HeaderMap) -> Result<Option<HeaderValue>, ()> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(None) };
    let urls = PublicUrls::of(&state.inner.config, headers);
    if origin_allowed(state, headers, &urls.origin) {
        Ok(Some(origin.clone()))
    } else {
        Err(())
    }
}

/// Applies the endpoint policy around the OAuth endpoints that answer JSON: answers
/// their preflight, refuses origins not allowed, and marks responses readable by the
/// allowed origin that asked.
pub async fn oauth_endpoints(State(state): State<McpState>, request: Request, next: Next) -> Response {
    let origin = match checked_origin(&state, request.headers()) {
        Ok(origin) => origin,
        Err(()) => return OAuthError::ForbiddenOrigin.into_response(),
    };
    if request.method() == Method::OPTIONS {
        let mut response = StatusCode::NO_CONTENT.into_response();
        match origin {
            Some(origin) => preflight_headers(response.headers_mut(), origin, "POST, OPTIONS"),
            None => {
                response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST, OPTIONS"));
            }
        }
        response.headers_mut().insert(header::VARY, HeaderValue::from_static("Origin"));
        return response;
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("www-authenticate, retry-after"));
    }
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
    response
}
