//! The errors of the HTTP layer of `/mcp`: each is answered instead of a JSON-RPC
//! response, with exactly one status and the REST API's error envelope
//! (`{"error": {"code", "message", ...}}`). JSON-RPC errors live in `rpc.rs`, tool
//! failures in `tools/`; OAuth endpoint errors in `oauth/`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use recap_access::telemetry::ErrorCode;
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// 405: the spec serves only POST on the endpoint (no SSE stream, no DELETE).
    #[error("only POST is served on this endpoint")]
    MethodNotAllowed,
    /// 403: a browser origin the configuration does not allow (DNS rebinding).
    #[error("origin not allowed")]
    ForbiddenOrigin,
    /// 400: an `MCP-Protocol-Version` header naming a version this server does not speak.
    #[error("unsupported MCP-Protocol-Version {0:?}; supported: {supported}", supported = crate::rpc::SUPPORTED_VERSIONS.join(", "))]
    UnsupportedProtocolVersion(String),
    /// 401: missing, malformed, unknown or expired token. Carries the metadata URL for
    /// `WWW-Authenticate`, never the token.
    #[error("missing, unknown or expired token")]
    Unauthorized { resource_metadata: String, token_present: bool },
    /// 401: the token, or the personal access token that authorized it, was revoked.
    #[error("the token was revoked")]
    TokenRevoked { resource_metadata: String },
    /// 402 no_plan
    #[error("the account has no active plan")]
    NoPlan,
    /// 402 feature_not_included, feature "mcp"
    #[error("the plan does not include MCP")]
    FeatureNotIncluded,
    /// 503: the token or plan could not be verified.
    #[error("the token or plan could not be verified; retry shortly")]
    Unavailable,
    /// 413: a body above the limit (after the token and plan checks, so a caller
    /// without a token still learns that first).
    #[error("the request body is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// 400: the body could not be read (the client broke it off).
    #[error("the request body could not be read")]
    UnreadableBody,
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            HttpError::ForbiddenOrigin => StatusCode::FORBIDDEN,
            HttpError::UnsupportedProtocolVersion(_) => StatusCode::BAD_REQUEST,
            HttpError::Unauthorized { .. } | HttpError::TokenRevoked { .. } => StatusCode::UNAUTHORIZED,
            HttpError::NoPlan | HttpError::FeatureNotIncluded => StatusCode::PAYMENT_REQUIRED,
            HttpError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnreadableBody => StatusCode::BAD_REQUEST,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            HttpError::MethodNotAllowed => "method_not_allowed",
            HttpError::ForbiddenOrigin => "forbidden_origin",
            HttpError::UnsupportedProtocolVersion(_) => "invalid_request",
            HttpError::Unauthorized { .. } => "unauthorized",
            HttpError::TokenRevoked { .. } => "token_revoked",
            HttpError::NoPlan => "no_plan",
            HttpError::FeatureNotIncluded => "feature_not_included",
            HttpError::Unavailable => "unavailable",
            HttpError::PayloadTooLarge { .. } => "payload_too_large",
            HttpError::UnreadableBody => "invalid_request",
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut body = json!({"code": self.code(), "message": self.to_string()});
        match &self {
            HttpError::FeatureNotIncluded => body["feature"] = json!("mcp"),
            HttpError::UnsupportedProtocolVersion(_) => body["param"] = json!("MCP-Protocol-Version"),
            _ => {}
        }
        let mut response = (self.status(), [(header::CONTENT_TYPE, "application/json")], json!({"error": body}).to_string()).into_response();
        response.extensions_mut().insert(ErrorCode(self.code()));
        let headers = response.headers_mut();
        match &self {
            HttpError::MethodNotAllowed => {
                headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
            }
            HttpError::Unavailable => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            HttpError::Unauthorized { resource_metadata, token_present } => {
                // RFC 6750 §3.1: no error attribute when the request carried no token.
                let challenge = if *token_present {
                    format!("Bearer resource_metadata=\"{resource_metadata}\", scope=\"svc:read\", error=\"invalid_token\", error_description=\"unknown or expired token\"")
                } else {
                    format!("Bearer resource_metadata=\"{resource_metadata}\", scope=\"svc:read\"")
                };
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    headers.insert(header::WWW_AUTHENTICATE, value);
                }
            }
            HttpError::TokenRevoked { resource_metadata } => {
                let challenge = format!(
                    "Bearer resource_metadata=\"{resource_metadata}\", scope=\"svc:read\", error=\"invalid_token\", error_description=\"revoked token\""
                );
                if let Ok(value) = HeaderValue::from_str(&challenge) {
                    headers.insert(header::WWW_AUTHENTICATE, value);
                }
            }
            _ => {}
        }
        response
    }
}
