//! Errors of the OAuth endpoints that answer JSON (`/token`, `/register`, `/revoke`):
//! RFC 6749 §5.2, RFC 7591 §3.2.2 and RFC 7009 §2.2.1 codes, each with one status, and
//! `rate_limited` (429) for registrations past their limit.
//! Descriptions never contain a token, code or verifier. A store failure travels as
//! [`OAuthError::Store`] and is classified (`StoreFailure`) and logged once, as the
//! response is made.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use recap_access::telemetry::{BodyTimeoutAnswer, ErrorCode};
use recap_readmodel::StoreError;

use crate::error::StoreFailure;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    InvalidRequest(String),
    /// Unknown client_id (public clients have nothing else to authenticate with).
    #[error("{0}")]
    InvalidClient(String),
    /// Unknown, expired, used or mismatched code or refresh token, or a wrong verifier.
    #[error("{0}")]
    InvalidGrant(String),
    #[error("grant_type must be authorization_code or refresh_token")]
    UnsupportedGrantType,
    #[error("the only scope is svc:read")]
    InvalidScope,
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("{0}")]
    InvalidClientMetadata(String),
    /// RFC 8707 §2: a `resource` that is not this server's MCP endpoint, or not the one
    /// the grant was for.
    #[error("{0}")]
    InvalidTarget(String),
    /// 503 `temporarily_unavailable`, or 500 `server_error` for a store call refused as
    /// a misuse (see `StoreFailure`).
    #[error("{}", store_description(.0))]
    Store(#[from] StoreError),
    /// 413 `invalid_client_metadata`: a registration document over the size bound.
    #[error("{0}")]
    TooLarge(String),
    /// 413 `invalid_request`: a token or revocation request over the router's body bound.
    #[error("{0}")]
    RequestTooLarge(String),
    /// 429 `rate_limited` with `Retry-After`: too many registrations from one address.
    #[error("{description}")]
    RateLimited { retry_after_seconds: u64, description: String },
    /// 403: a browser origin the configuration does not allow (the Origin rule of `/mcp`).
    #[error("origin not allowed")]
    ForbiddenOrigin,
    /// 405 `invalid_request` with `Allow: POST, OPTIONS`: these endpoints serve POST
    /// (and the CORS preflight).
    #[error("only POST is served on this endpoint")]
    MethodNotAllowed,
}

impl OAuthError {
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::InvalidRequest(_) => "invalid_request",
            OAuthError::InvalidClient(_) => "invalid_client",
            OAuthError::InvalidGrant(_) => "invalid_grant",
            OAuthError::UnsupportedGrantType => "unsupported_grant_type",
            OAuthError::InvalidScope => "invalid_scope",
            OAuthError::InvalidRedirectUri(_) => "invalid_redirect_uri",
            OAuthError::InvalidTarget(_) => "invalid_target",
            OAuthError::InvalidClientMetadata(_) | OAuthError::TooLarge(_) => "invalid_client_metadata",
            OAuthError::RequestTooLarge(_) | OAuthError::MethodNotAllowed => "invalid_request",
            OAuthError::RateLimited { .. } => "rate_limited",
            OAuthError::Store(error) => match StoreFailure::of(error) {
                StoreFailure::Defect => "server_error",
                StoreFailure::Unavailable | StoreFailure::Unreadable => "temporarily_unavailable",
            },
            OAuthError::ForbiddenOrigin => "forbidden_origin",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            OAuthError::InvalidClient(_) => StatusCode::UNAUTHORIZED,
            OAuthError::Store(error) => match StoreFailure::of(error) {
                StoreFailure::Defect => StatusCode::INTERNAL_SERVER_ERROR,
                StoreFailure::Unavailable | StoreFailure::Unreadable => StatusCode::SERVICE_UNAVAILABLE,
            },
            OAuthError::ForbiddenOrigin => StatusCode::FORBIDDEN,
            OAuthError::TooLarge(_) | OAuthError::RequestTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            OAuthError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            OAuthError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// The answer of a request whose form did not arrive in time, in these endpoints' shape
/// (the HTTP layer in front answers it with 408).
const BODY_TIMEOUT: BodyTimeoutAnswer = BodyTimeoutAnswer(r#"{"error":"invalid_request","error_description":"the request body did not arrive in time"}"#);

fn store_description(error: &StoreError) -> &'static str {
    match StoreFailure::of(error) {
        StoreFailure::Defect => "the authorization server failed to complete the request",
        StoreFailure::Unavailable | StoreFailure::Unreadable => "the authorization server could not reach its store; retry shortly",
    }
}

impl IntoResponse for OAuthError {
    /// The JSON answer; a store failure is logged here, once, as its answer is made.
    fn into_response(self) -> Response {
        if let OAuthError::Store(error) = &self {
            StoreFailure::logged(error, "mcp_oauth");
        }
        let body = serde_json::json!({"error": self.code(), "error_description": self.to_string()}).to_string();
        let mut response = (self.status(), [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], body).into_response();
        response.extensions_mut().insert(ErrorCode(self.code()));
        response.extensions_mut().insert(BODY_TIMEOUT);
        if self.status() == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        if self == OAuthError::MethodNotAllowed {
            response.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static("POST, OPTIONS"));
        }
        if let OAuthError::RateLimited { retry_after_seconds, .. } = &self {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from(*retry_after_seconds));
        }
        response
    }
}
