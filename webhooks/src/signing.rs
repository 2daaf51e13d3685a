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
use recap_readmodel::webhooks::{SecretsRecord, SigningSecret};
use recap_schemas::Timestamp;
use sha2::Sha256;

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";

pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// Why a secret cannot sign.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningError {
    #[error("a signing secret is not whsec_ followed by base64")]
    MalformedSecret,
    #[error("the endpoint has no secret signing now")]
    NoSecret,
}

/// The key a `whsec_` secret encodes (refused without the prefix, as bad base64, or
/// empty).
pub fn key(secret: &str) -> Result<Vec<u8>, SigningError> {
    let encoded = secret.strip_prefix(SECRET_PREFIX).ok_or(SigningError::MalformedSecret)?;
    let key = STANDARD.decode(encoded).map_err(|_| SigningError::MalformedSecret)?;
    if key.is_empty() {
        return Err(SigningError::MalformedSecret);
    }
    Ok(key)
}

/// An HMAC-SHA256 keyed with a `whsec_` secret's key.
fn keyed(secret: &str) -> Result<Hmac<Sha256>, SigningError> {
    Hmac::<Sha256>::new_from_slice(&key(secret)?).map_err(|_| SigningError::MalformedSecret)
}

/// Appends ` v1,<base64>` (without the space when `out` is empty): `mac` over
/// `{id}.{timestamp}.{body}`.
fn sign_into(out: &mut String, mut mac: Hmac<Sha256>, id: &str, timestamp: &str, body: &[u8]) {
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    if !out.is_empty() {
        out.push(' ');
    }
    out.push_str("v1,");
    STANDARD.encode_string(mac.finalize().into_bytes(), out);
}

/// One `v1,<base64>` signature of `body` sent as message `id` at `timestamp` (unix
/// seconds) under `secret`.
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SigningError> {
    let mut out = String::with_capacity(SIGNATURE_LEN);
    sign_into(&mut out, keyed(secret)?, id, &timestamp.to_string(), body);
    Ok(out)
}

/// The length of one `v1,<base64>` signature: 3 and the 44 characters of 32 bytes.
const SIGNATURE_LEN: usize = 47;

/// The three headers of a delivery, in order: id, timestamp, signatures (one per secret,
/// space-separated). Refused when no secret signs or one is malformed.
pub fn headers(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> Result<[(&'static str, String); 3], SigningError> {
    let keys = secrets.iter().map(|secret| keyed(secret)).collect::<Vec<_>>();
    signed_headers(keys.iter().map(Result::as_ref), id, timestamp, body)
}

fn signed_headers<'k>(
    keys: impl Iterator<Item = Result<&'k Hmac<Sha256>, &'k SigningError>>,
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<[(&'static str, String); 3], SigningError> {
    let timestamp = timestamp.to_string();
    let mut signatures = String::with_capacity(SIGNATURE_LEN);
    for key in keys {
        sign_into(&mut signatures, key.map_err(Clone::clone)?.clone(), id, &timestamp, body);
    }
    if signatures.is_empty() {
        return Err(SigningError::NoSecret);
    }
    Ok([(HEADER_ID, id.to_owned()), (HEADER_TIMESTAMP, timestamp), (HEADER_SIGNATURE, signatures)])
}

/// An endpoint's secrets, each decoded and keyed once (its key's pads absorbed), with
/// when it stops signing: an attempt signs with a copy of each keyed state rather than
/// decoding the secret and keying the HMAC again. Prepared with the endpoint, for every
/// attempt made with it.
#[derive(Clone, Default)]
pub struct Signer {
    keys: Vec<(Keyed, Option<Timestamp>)>,
}

/// A secret's keyed HMAC, or why the secret cannot sign.
type Keyed = Result<Hmac<Sha256>, SigningError>;

impl Signer {
    pub fn new(secrets: &SecretsRecord) -> Signer {
        Signer { keys: secrets.secrets.iter().map(|secret| (keyed(&secret.secret), secret.expires_at)).collect() }
    }

    /// The headers of `body` sent as message `id` at `now`, signed by every secret
    /// signing then ([`SecretsRecord::signing_at`]).
    pub fn headers(&self, now: Timestamp, id: &str, body: &[u8]) -> Result<[(&'static str, String); 3], SigningError> {
        let signing = self.keys.iter().filter(|(_, expires_at)| SigningSecret::signs(*expires_at, now));
        signed_headers(signing.map(|(key, _)| key.as_ref()), id, now.0.div_euclid(1_000_000), body)
    }
}

/// Never the keys.
impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("keys", &self.keys.len()).finish()
    }
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

    fn record(secrets: &[(&str, Option<i64>)]) -> SecretsRecord {
        let secrets = secrets.iter().map(|(secret, expires_at)| SigningSecret { secret: (*secret).to_owned(), expires_at: expires_at.map(Timestamp) });
        SecretsRecord { secrets: secrets.collect() }
    }

    #[test]
    fn a_signer_signs_as_the_secrets_do_with_those_signing_at_the_instant() {
        let previous = "whsec_cHJldmlvdXMtc2VjcmV0LWtleQ==";
        let now = Timestamp(SPEC_TIMESTAMP * 1_000_000 + 500_000);
        let signer = Signer::new(&record(&[(SPEC_SECRET, None), (previous, Some(now.0 + 1))]));
        let both = headers(&[SPEC_SECRET, previous], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY.as_bytes()).unwrap();
        assert_eq!(signer.headers(now, SPEC_ID, SPEC_BODY.as_bytes()).unwrap(), both, "the timestamp is the instant's unix second");
        // The previous secret stops signing at its expiry, as `SecretsRecord::signing_at` says.
        let later = Timestamp(now.0 + 1);
        assert_eq!(record(&[(SPEC_SECRET, None), (previous, Some(now.0 + 1))]).signing_at(later), vec![SPEC_SECRET]);
        let [_, _, (_, signature)] = signer.headers(later, SPEC_ID, SPEC_BODY.as_bytes()).unwrap();
        assert_eq!(signature, SPEC_SIGNATURE);
    }

    #[test]
    fn a_signer_refuses_a_malformed_secret_signing_now_and_signs_without_one_expired() {
        let now = Timestamp(SPEC_TIMESTAMP * 1_000_000);
        let malformed = Signer::new(&record(&[(SPEC_SECRET, None), ("whsec_***", None)]));
        assert_eq!(malformed.headers(now, SPEC_ID, b"{}").unwrap_err(), SigningError::MalformedSecret);
        let expired = Signer::new(&record(&[(SPEC_SECRET, None), ("whsec_***", Some(now.0))]));
        assert!(expired.headers(now, SPEC_ID, b"{}").is_ok());
        let all_expired = Signer::new(&record(&[(SPEC_SECRET, Some(now.0))]));
        assert_eq!(all_expired.headers(now, SPEC_ID, b"{}").unwrap_err(), SigningError::NoSecret);
        assert_eq!(Signer::default().headers(now, SPEC_ID, b"{}").unwrap_err(), SigningError::NoSecret);
    }

    #[test]
    fn a_signer_never_shows_its_keys() {
        let printed = format!("{:?} {:#?}", Signer::new(&record(&[(SPEC_SECRET, None)])), Signer::new(&record(&[(SPEC_SECRET, None)])));
        assert!(!printed.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{printed}");
        assert!(printed.contains("keys: 1"), "{printed}");
    }

    #[test]
    fn no_secret_means_no_delivery() {
        assert_eq!(headers(&[], "id", 1, b"{}").unwrap_err(), SigningError::NoSecret);
    }
}
