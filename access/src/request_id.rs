//! Request ids, as every response's `X-Request-Id` carries them and the logs name them:
//! a well-formed id the client sent is kept, else a new UUID is made. REST, MCP and the
//! HTTP layer in front of both decide the same way.

use http::{HeaderMap, HeaderName, HeaderValue};

/// Longest incoming `X-Request-Id` that is kept.
pub const MAX_CHARS: usize = 128;

/// Whether an incoming request id is kept: 1 to 128 characters of `A-Z a-z 0-9 . _ : -`
/// (enough for UUIDs, ULIDs and trace ids; nothing that could split a log line or a
/// header).
pub fn is_well_formed(value: &[u8]) -> bool {
    (1..=MAX_CHARS).contains(&value.len()) && value.iter().all(|&byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b':' | b'-'))
}

/// A new request id: a random UUID, hyphenated, lower case.
pub fn generate() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// The header every response carries the request id in, and a client may send its own in.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request's own `X-Request-Id`, when it is well-formed.
pub fn kept(headers: &HeaderMap) -> Option<HeaderValue> {
    headers.get(&X_REQUEST_ID).filter(|value| is_well_formed(value.as_bytes())).cloned()
}

/// A new request id, as a header value.
pub fn new_value() -> HeaderValue {
    HeaderValue::from_str(&generate()).unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

/// The request's id: its own when well-formed, else a new one.
pub fn of(headers: &HeaderMap) -> HeaderValue {
    kept(headers).unwrap_or_else(new_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_the_allowed_characters_and_length_are_kept_and_no_other() {
        for kept in ["a", "0af7651916cd43dd8448eb211c80319c", "01HZX3Y4.trace_id:span-1", &"x".repeat(MAX_CHARS)] {
            assert!(is_well_formed(kept.as_bytes()), "{kept}");
        }
        for refused in ["", "has space", "line\nbreak", "semi;colon", "caf\u{e9}", &"x".repeat(MAX_CHARS + 1)] {
            assert!(!is_well_formed(refused.as_bytes()), "{refused:?}");
        }
    }

    #[test]
    fn generated_ids_are_distinct_well_formed_uuids() {
        let (first, second) = (generate(), generate());
        assert_ne!(first, second);
        assert!(is_well_formed(first.as_bytes()));
        assert_eq!(uuid::Uuid::parse_str(&first).map(|id| id.hyphenated().to_string()), Ok(first));
    }
}
