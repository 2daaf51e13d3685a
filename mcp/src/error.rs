//! The errors of the HTTP layer of `/mcp`: each is answered instead of a JSON-RPC
//! response, with exactly one status and the REST API's error envelope
//! (`{"error": {"code", "message", ...}}`). JSON-RPC errors live in `rpc.rs`, tool
//! failures in `tools/`; OAuth endpoint errors in `oauth/`. All three read a store
//! failure one way, [`StoreFailure`], and log it once, where the answer is made.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use recap_access::telemetry::ErrorCode;
use recap_readmodel::StoreError;
use serde_json::json;

/// How every answer of the MCP server reads a store failure: the HTTP errors of
/// `/mcp`, the OAuth endpoints and pages, and the tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreFailure {
    /// The store did not answer, or not in time: worth a retry. 503 (`unavailable`,
    /// OAuth `temporarily_unavailable`), tool error `unavailable`.
    Unavailable,
    /// Stored data did not read back: tool error `read_failed`; where no answer names
    /// it (a token check, an OAuth step), 503 as [`StoreFailure::Unavailable`].
    Unreadable,
    /// The store refused a call as a misuse: a defect of this server. 500
    /// (`internal_error`, OAuth `server_error`), tool error `internal_error`.
    Defect,
}

impl StoreFailure {
    pub fn of(error: &StoreError) -> StoreFailure {
        match error {
            StoreError::Unavailable(_) => StoreFailure::Unavailable,
            StoreError::Corrupt(_) => StoreFailure::Unreadable,
            StoreError::Misuse(_) => StoreFailure::Defect,
        }
    }

    /// The one log line of a store failure: called where its answer is made (the
    /// token check, an OAuth response or page, a tool result), never in a conversion.
    /// `stage` names that place: `mcp_auth`, `mcp_oauth`, `mcp_tool`.
    pub fn logged(error: &StoreError, stage: &'static str) -> StoreFailure {
        tracing::warn!(error = %error, stage, "store call failed");
        StoreFailure::of(error)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// 405: the spec serves only POST on the endpoint (no SSE stream, no DELETE).
    #[error("only POST is served on this endpoint")]
    MethodNotAllowed,
    /// 403: a browser origin the configuration does not allow (DNS rebinding).
    #[error("origin not allowed")]
    ForbiddenOrigin,
    /// 401: missing, malformed, unknown or expired token. Carries the metadata URL for
    /// `WWW-Authenticate`, never the token.
    #[error("missing, unknown or expired token")]
    Unauthorized { resource_metadata: String, token_present: bool },
    /// 400: more than one `Authorization` header (RFC 6750 §3.1 `invalid_request`).
    #[error("Authorization is sent more than once; send one")]
    DuplicateAuthorization { resource_metadata: String },
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
    /// 500: the token check failed on the service side (a store call refused as a
    /// misuse); the detail is logged.
    #[error("failure on the service side")]
    Internal,
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
            HttpError::Unauthorized { .. } | HttpError::TokenRevoked { .. } => StatusCode::UNAUTHORIZED,
            HttpError::NoPlan | HttpError::FeatureNotIncluded => StatusCode::PAYMENT_REQUIRED,
            HttpError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnreadableBody | HttpError::DuplicateAuthorization { .. } => StatusCode::BAD_REQUEST,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            HttpError::MethodNotAllowed => "method_not_allowed",
            HttpError::ForbiddenOrigin => "forbidden_origin",
            HttpError::Unauthorized { .. } => "unauthorized",
            HttpError::TokenRevoked { .. } => "token_revoked",
            HttpError::NoPlan => "no_plan",
            HttpError::FeatureNotIncluded => "feature_not_included",
            HttpError::Unavailable => "unavailable",
            HttpError::Internal => "internal_error",
            HttpError::PayloadTooLarge { .. } => "payload_too_large",
            HttpError::UnreadableBody | HttpError::DuplicateAuthorization { .. } => "invalid_request",
        }
    }

    /// The answer; an `internal_error` names `request_id` in its envelope, as the REST
    /// API's does (the same id as the response's `X-Request-Id`).
    pub fn response(self, request_id: Option<&HeaderValue>) -> Response {
        let mut body = json!({"code": self.code(), "message": self.to_string()});
        if self == HttpError::FeatureNotIncluded {
            body["feature"] = json!("mcp");
        }
        // As the REST API's `invalid_request` names the parameter at fault.
        match self {
            HttpError::DuplicateAuthorization { .. } => body["param"] = json!("Authorization"),
            HttpError::UnreadableBody => body["param"] = json!("body"),
            _ => {}
        }
        if let (HttpError::Internal, Some(request_id)) = (&self, request_id.and_then(|value| value.to_str().ok())) {
            body["request_id"] = json!(request_id);
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
            HttpError::DuplicateAuthorization { resource_metadata } => {
                let challenge = format!(
                    "Bearer resource_metadata=\"{resource_metadata}\", scope=\"svc:read\", error=\"invalid_request\", error_description=\"more than one Authorization header\""
                );
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

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        self.response(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::error::OAuthError;
    use crate::tools::ToolError;

    #[test]
    fn every_answer_reads_a_store_failure_the_same_way() {
        // (failure, OAuth status and code, tool error code)
        let cases = [
            (StoreError::Unavailable("timeout".into()), 503, "temporarily_unavailable", "unavailable"),
            (StoreError::Corrupt("bad row".into()), 503, "temporarily_unavailable", "read_failed"),
            (StoreError::Misuse("plain write to a conditional table".into()), 500, "server_error", "internal_error"),
        ];
        for (error, status, oauth_code, tool_code) in cases {
            let oauth = OAuthError::from(error.clone());
            assert_eq!((oauth.status().as_u16(), oauth.code()), (status, oauth_code), "{error:?}");
            assert_eq!(ToolError::from(error.clone()).code(), tool_code, "{error:?}");
        }
        assert_eq!((HttpError::Internal.status().as_u16(), HttpError::Internal.code()), (500, "internal_error"));
        assert_eq!(HttpError::Unavailable.status().as_u16(), 503);
    }
}
