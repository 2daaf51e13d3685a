//! Standard Webhooks signatures: the `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` headers of a delivery. The signed content is
//! `{id}.{timestamp}.{body}`, signed with HMAC-SHA256 under the key a `whsec_` secret
//! encodes (the base64 after the prefix); the header lists one `v1,<base64>` per secret
//! signing at the time, separated by spaces, so a receiver that knows either the new or
//! the previous secret of a rotation verifies the delivery.
//!
//! Written with `hmac`, `sha2` and `base64` (already in the workspace) rather than the
//! `standardwebhooks` crate: that crate signs with one secret per call, and brings a
//! second `base64` and `time` for three lines of HMAC. Its official Python sibling
//! verifies every delivery in the black-box tests.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";

pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Why a secret cannot sign.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningError {
    #[error("a signing secret is not whsec_ followed by base64")]
    MalformedSecret,
    #[error("the endpoint has no secret signing now")]
    NoSecret,
}

/// The key a `whsec_` secret encodes.
fn key(secret: &str) -> Result<Vec<u8>, SigningError> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).ok_or(SigningError::MalformedSecret)?;
    let key = STANDARD.decode(encoded).map_err(|_| SigningError::MalformedSecret)?;
    if key.is_empty() {
        return Err(SigningError::MalformedSecret);
    }
    Ok(key)
}

/// One `v1,<base64>` signature of `body` sent as message `id` at `timestamp` (unix
/// seconds) under `secret`.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SigningError> {
    let key = key(secret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| SigningError::MalformedSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Ok(format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes())))
}

/// The three headers of a delivery, in order: id, timestamp, signatures (one per secret,
/// space-separated). Refused when no secret signs or one is malformed.
pub fn headers(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> Result<[(&'static str, String); 3], SigningError> {
    if secrets.is_empty() {
        return Err(SigningError::NoSecret);
    }
    let signatures = secrets.iter().map(|secret| signature(secret, id, timestamp, body)).collect::<Result<Vec<_>, _>>()?;
    Ok([(HEADER_ID, id.to_owned()), (HEADER_TIMESTAMP, timestamp.to_string()), (HEADER_SIGNATURE, signatures.join(" "))])
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example of the Standard Webhooks specification and its reference libraries.
    const SPEC_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const SPEC_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const SPEC_TIMESTAMP: i64 = 1_614_265_330;
    const SPEC_BODY: &str = r#"{"test": 2432232314}"#;
    const SPEC_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_signature_matches_the_standard_webhooks_example() {
        assert_eq!(signature(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY.as_bytes()).unwrap(), SPEC_SIGNATURE);
    }

    #[test]
    fn headers_carry_the_id_the_unix_seconds_and_the_signature() {
        let headers = headers(&[SPEC_SECRET], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY.as_bytes()).unwrap();
        assert_eq!(
            headers,
            [("webhook-id", SPEC_ID.to_owned()), ("webhook-timestamp", "1614265330".to_owned()), ("webhook-signature", SPEC_SIGNATURE.to_owned())]
        );
    }

    #[test]
    fn during_a_rotation_both_secrets_sign_separated_by_a_space() {
        let previous = "whsec_cHJldmlvdXMtc2VjcmV0LWtleQ==";
        let [_, _, (_, signatures)] = headers(&[SPEC_SECRET, previous], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY.as_bytes()).unwrap();
        let expected_previous = signature(previous, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY.as_bytes()).unwrap();
        assert_eq!(signatures, format!("{SPEC_SIGNATURE} {expected_previous}"));
        assert_ne!(expected_previous, SPEC_SIGNATURE);
    }

    #[test]
    fn a_secret_without_the_prefix_or_with_bad_base64_does_not_sign() {
        assert_eq!(signature("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "id", 1, b"{}"), Err(SigningError::MalformedSecret));
        assert_eq!(signature("whsec_***", "id", 1, b"{}"), Err(SigningError::MalformedSecret));
        assert_eq!(signature("whsec_", "id", 1, b"{}"), Err(SigningError::MalformedSecret));
    }

    #[test]
    fn no_secret_means_no_delivery() {
        assert_eq!(headers(&[], "id", 1, b"{}").unwrap_err(), SigningError::NoSecret);
    }
}
