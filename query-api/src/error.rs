//! The REST error vocabulary: one enum whose every variant maps to exactly one HTTP
//! status and one wire `code`, rendered in the one envelope of docs/rest.md (Errors) with exactly
//! the extra fields its table names for that code (`feature`, `used`/`limit`/`resets_at`,
//! `param`, `request_id`). Details of server-side failures go to the log, never to the
//! client.

use axum::http::StatusCode;
use recap_readmodel::StoreError;
use recap_schemas::Timestamp;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    InvalidRequest {
        param: &'static str,
        message: String,
    },
    Unauthorized,
    TokenRevoked,
    FeatureNotIncluded,
    NoPlan,
    QuotaExhausted {
        used: u64,
        limit: u64,
        resets_at: Timestamp,
    },
    TeamPlanRequired,
    NotFound,
    MeetingNotFound,
    SharedNoteNotFound,
    TeamNotFound,
    /// No message with that id in the caller's feed (never written, another account's,
    /// or past the retention).
    EventNotFound,
    /// No webhook endpoint with that id in the caller's account.
    WebhookEndpointNotFound,
    MethodNotAllowed,
    RateLimited {
        retry_after_seconds: u64,
    },
    /// A failure on the service side; the detail is logged, not sent.
    Internal(String),
    /// A backend (store, limiter) did not answer in time or at all; the detail is logged.
    Unavailable(String),
}

impl ApiError {
    pub fn invalid(param: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::InvalidRequest { param, message: message.into() }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized | ApiError::TokenRevoked => StatusCode::UNAUTHORIZED,
            ApiError::FeatureNotIncluded | ApiError::NoPlan | ApiError::QuotaExhausted { .. } | ApiError::TeamPlanRequired => StatusCode::PAYMENT_REQUIRED,
            ApiError::NotFound
            | ApiError::MeetingNotFound
            | ApiError::SharedNoteNotFound
            | ApiError::TeamNotFound
            | ApiError::EventNotFound
            | ApiError::WebhookEndpointNotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest { .. } => "invalid_request",
            ApiError::Unauthorized => "unauthorized",
            ApiError::TokenRevoked => "token_revoked",
            ApiError::FeatureNotIncluded => "feature_not_included",
            ApiError::NoPlan => "no_plan",
            ApiError::QuotaExhausted { .. } => "quota_exhausted",
            ApiError::TeamPlanRequired => "team_plan_required",
            ApiError::NotFound => "not_found",
            ApiError::MeetingNotFound => "meeting_not_found",
            ApiError::SharedNoteNotFound => "shared_note_not_found",
            ApiError::TeamNotFound => "team_not_found",
            ApiError::EventNotFound => "event_not_found",
            ApiError::WebhookEndpointNotFound => "webhook_endpoint_not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::Internal(_) => "internal_error",
            ApiError::Unavailable(_) => "unavailable",
        }
    }

    fn message(&self) -> String {
        match self {
            ApiError::InvalidRequest { message, .. } => message.clone(),
            ApiError::Unauthorized => "missing, malformed or unknown access token; send Authorization: Bearer svc_pat_...".into(),
            ApiError::TokenRevoked => "the access token was revoked".into(),
            ApiError::FeatureNotIncluded => "the account's plan does not include the API".into(),
            ApiError::NoPlan => "the account has no active plan".into(),
            ApiError::QuotaExhausted { .. } => "the requests of the billing period are used up".into(),
            ApiError::TeamPlanRequired => "the team's plan does not include team action items".into(),
            ApiError::NotFound => "no such endpoint".into(),
            ApiError::MeetingNotFound => "no meeting with that identifier in the caller's account".into(),
            ApiError::SharedNoteNotFound => "no note with that identifier is shared with the caller".into(),
            ApiError::TeamNotFound => "the caller is not a member of that team".into(),
            ApiError::EventNotFound => "no event with that identifier in the caller's feed".into(),
            ApiError::WebhookEndpointNotFound => "no webhook endpoint with that identifier in the caller's account".into(),
            ApiError::MethodNotAllowed => "only GET is supported".into(),
            ApiError::RateLimited { retry_after_seconds } => format!("too many requests in the last minute; retry in {retry_after_seconds} s"),
            ApiError::Internal(_) => "failure on the service side".into(),
            ApiError::Unavailable(_) => "the service could not complete the request; retry shortly".into(),
        }
    }

    /// The envelope, `{"error": {...}}`.
    pub fn body(&self, request_id: &str) -> String {
        #[derive(Serialize)]
        struct Envelope<'a> {
            error: Fields<'a>,
        }
        #[derive(Serialize)]
        struct Fields<'a> {
            code: &'static str,
            message: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            feature: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            used: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            limit: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            resets_at: Option<Timestamp>,
            #[serde(skip_serializing_if = "Option::is_none")]
            param: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            request_id: Option<&'a str>,
        }
        let mut fields =
            Fields { code: self.code(), message: self.message(), feature: None, used: None, limit: None, resets_at: None, param: None, request_id: None };
        match self {
            ApiError::InvalidRequest { param, .. } => fields.param = Some(param),
            ApiError::FeatureNotIncluded => fields.feature = Some(recap_access::Feature::PublicApi.as_str()),
            ApiError::QuotaExhausted { used, limit, resets_at } => {
                fields.used = Some(*used);
                fields.limit = Some(*limit);
                fields.resets_at = Some(*resets_at);
            }
            ApiError::Internal(_) => fields.request_id = Some(request_id),
            _ => {}
        }
        serde_json::to_string(&Envelope { error: fields })
            .unwrap_or_else(|_| format!(r#"{{"error":{{"code":"internal_error","message":"failure on the service side","request_id":"{request_id}"}}}}"#))
    }

    /// What the log shows beside the code (never a token: no variant holds one).
    pub fn detail(&self) -> Option<&str> {
        match self {
            ApiError::Internal(detail) | ApiError::Unavailable(detail) => Some(detail),
            _ => None,
        }
    }
}

/// The REST API's one reading of a store failure, wherever a request meets it (token,
/// plan, or the endpoint's reads): an unanswered store is 503 `unavailable`, anything
/// else (stored data that does not read back, a call the store refused as a misuse) is
/// 500 `internal_error`. The detail is kept for the one log line the request gets.
impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> ApiError {
        match error {
            StoreError::Unavailable(detail) => ApiError::Unavailable(detail),
            StoreError::Corrupt(detail) | StoreError::Misuse(detail) => ApiError::Internal(detail),
        }
    }
}

impl From<recap_access::AuthError> for ApiError {
    fn from(error: recap_access::AuthError) -> ApiError {
        match error {
            recap_access::AuthError::Unauthorized => ApiError::Unauthorized,
            recap_access::AuthError::TokenRevoked => ApiError::TokenRevoked,
            recap_access::AuthError::Store(error) => ApiError::from(error),
        }
    }
}

impl From<recap_access::PlanError> for ApiError {
    fn from(error: recap_access::PlanError) -> ApiError {
        match error {
            recap_access::PlanError::NoPlan => ApiError::NoPlan,
            recap_access::PlanError::FeatureNotIncluded(_) => ApiError::FeatureNotIncluded,
        }
    }
}

impl From<recap_access::LimiterError> for ApiError {
    fn from(error: recap_access::LimiterError) -> ApiError {
        match error {
            recap_access::LimiterError::Unavailable(detail) => ApiError::Unavailable(detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_carries_exactly_its_fields() {
        // The error table of docs/rest.md: every code with its status, and the fields beside code
        // and message that its field table names for it (and no other).
        let resets_at = Timestamp::parse("2026-12-15T00:00:00Z").expect("a valid RFC 3339 timestamp");
        let cases: Vec<(ApiError, u16, serde_json::Value)> = vec![
            (ApiError::invalid("limit", "bad"), 400, serde_json::json!({"code": "invalid_request", "param": "limit"})),
            (ApiError::Unauthorized, 401, serde_json::json!({"code": "unauthorized"})),
            (ApiError::TokenRevoked, 401, serde_json::json!({"code": "token_revoked"})),
            (ApiError::FeatureNotIncluded, 402, serde_json::json!({"code": "feature_not_included", "feature": "public_api"})),
            (ApiError::NoPlan, 402, serde_json::json!({"code": "no_plan"})),
            (
                ApiError::QuotaExhausted { used: 3, limit: 3, resets_at },
                402,
                serde_json::json!({"code": "quota_exhausted", "used": 3, "limit": 3, "resets_at": "2026-12-15T00:00:00Z"}),
            ),
            (ApiError::TeamPlanRequired, 402, serde_json::json!({"code": "team_plan_required"})),
            (ApiError::NotFound, 404, serde_json::json!({"code": "not_found"})),
            (ApiError::MeetingNotFound, 404, serde_json::json!({"code": "meeting_not_found"})),
            (ApiError::SharedNoteNotFound, 404, serde_json::json!({"code": "shared_note_not_found"})),
            (ApiError::TeamNotFound, 404, serde_json::json!({"code": "team_not_found"})),
            (ApiError::EventNotFound, 404, serde_json::json!({"code": "event_not_found"})),
            (ApiError::WebhookEndpointNotFound, 404, serde_json::json!({"code": "webhook_endpoint_not_found"})),
            (ApiError::MethodNotAllowed, 405, serde_json::json!({"code": "method_not_allowed"})),
            (ApiError::RateLimited { retry_after_seconds: 7 }, 429, serde_json::json!({"code": "rate_limited"})),
            (ApiError::Internal("disk".into()), 500, serde_json::json!({"code": "internal_error", "request_id": "r1"})),
            (ApiError::Unavailable("timeout".into()), 503, serde_json::json!({"code": "unavailable"})),
        ];
        for (error, status, expected) in cases {
            assert_eq!(error.status().as_u16(), status, "{error:?}");
            let mut body: serde_json::Value = serde_json::from_str(&error.body("r1")).expect("an error body is JSON");
            let fields = body["error"].as_object_mut().expect("`error` is an object");
            let message = fields.remove("message").unwrap_or_else(|| panic!("{error:?} has a message"));
            assert!(message.as_str().is_some_and(|message| !message.is_empty()), "{error:?}: a message");
            assert_eq!(body["error"], expected, "{error:?}");
            assert_eq!(body.as_object().expect("the body is an object").len(), 1, "only `error` at the top");
            assert!(!body.to_string().contains("disk") && !body.to_string().contains("timeout"), "details stay in the log");
        }
        let invalid: serde_json::Value = serde_json::from_str(&ApiError::invalid("limit", "bad").body("r1")).expect("an error body is JSON");
        assert_eq!(invalid["error"]["message"], "bad", "an invalid_request says what is wrong");
    }

    #[test]
    fn a_store_failure_reads_one_way_wherever_a_request_meets_it() {
        // An unanswered store is worth a retry (503); stored data that does not read back
        // and a call the store refuses as a misuse are the service's failures (500).
        let cases = [
            (StoreError::Unavailable("timeout".into()), "unavailable"),
            (StoreError::Corrupt("bad row".into()), "internal_error"),
            (StoreError::Misuse("plain write to a conditional table".into()), "internal_error"),
        ];
        for (error, code) in cases {
            assert_eq!(ApiError::from(error.clone()).code(), code, "{error:?}");
            assert_eq!(ApiError::from(recap_access::AuthError::Store(error.clone())).code(), code, "a token check's {error:?}");
        }
    }
}
