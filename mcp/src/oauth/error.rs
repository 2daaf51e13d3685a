//! Errors of the OAuth endpoints that answer JSON (`/token`, `/register`, `/revoke`):
//! RFC 6749 §5.2, RFC 7591 §3.2.2 and RFC 7009 §2.2.1 codes, each with one status.
//! Descriptions never contain a token, code or verifier.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use recap_access::telemetry::ErrorCode;

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
    #[error("the authorization server could not reach its store; retry shortly")]
    TemporarilyUnavailable,
    /// 403: a browser origin the configuration does not allow (the Origin rule of `/mcp`).
    #[error("origin not allowed")]
    ForbiddenOrigin,
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
            OAuthError::InvalidClientMetadata(_) => "invalid_client_metadata",
            OAuthError::TemporarilyUnavailable => "temporarily_unavailable",
            OAuthError::ForbiddenOrigin => "forbidden_origin",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            OAuthError::InvalidClient(_) => StatusCode::UNAUTHORIZED,
            OAuthError::TemporarilyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            OAuthError::ForbiddenOrigin => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

impl From<recap_readmodel::StoreError> for OAuthError {
    fn from(error: recap_readmodel::StoreError) -> OAuthError {
        tracing::warn!(error = %error, stage = "mcp_oauth", "store call failed");
        OAuthError::TemporarilyUnavailable
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": self.code(), "error_description": self.to_string()}).to_string();
        let mut response = (self.status(), [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], body).into_response();
        response.extensions_mut().insert(ErrorCode(self.code()));
        if matches!(self, OAuthError::TemporarilyUnavailable) {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}
