//! Pagination cursors, REST's and MCP's: the position of a page's last row (its
//! clustering key), sealed under a server secret and bound to what it was issued for
//! (endpoint or tool, account and the canonical form of the filters). A cursor says
//! nothing to whoever holds it: a feed's position is the message log's, shared with other
//! accounts, and an account must not learn from two of its cursors how many messages
//! others had between them. A cursor that was edited, forged, issued by another secret,
//! for another endpoint or account, or sent with other filters does not open (REST
//! answers 400 `param: cursor`, MCP an invalid argument).
//!
//! Wire form: base64url (no padding) of `1 ‖ sealed`, where `sealed` is the key as JSON,
//! padded with spaces to a multiple of [`PADDED_TO`] bytes (so that a cursor's length
//! does not tell how many digits its position has), encrypted with AES-256-GCM-SIV
//! (RFC 8452) under a key derived from the secret, with the binding as associated data
//! and a fixed nonce: GCM-SIV is built for that use (deterministic authenticated
//! encryption), so the same position under the same binding gives the same cursor and
//! nothing else is revealed.
//!
//! Cursors issued before positions were sealed (`payload ‖ tag`, the key as JSON in the
//! clear and a 32-byte HMAC-SHA256 over `len(binding) ‖ binding ‖ payload`, which starts
//! with `[`) still open until [`SIGNED_CURSORS_UNTIL`], so a reader that kept one goes on
//! from it; none is issued. After that they are refused like a forged cursor.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aes_gcm_siv::aead::{Aead, KeyInit, Payload};
use aes_gcm_siv::{Aes256GcmSiv, Nonce};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use recap_readmodel::Val;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const TAG_BYTES: usize = 32;
/// Longer strings are refused before any decoding: no cursor we issue comes close.
const MAX_CURSOR_CHARS: usize = 1024;
/// The first byte of a sealed cursor (a signed one starts with the JSON's `[`).
const SEALED: u8 = 1;
/// Sealed keys are padded to a multiple of this many bytes: a feed position's JSON
/// (`[` and up to 19 digits and `]`) always fits in one.
pub const PADDED_TO: usize = 32;
/// What the sealing key is derived for, so that it never equals the signing key.
const SEALING_KEY_LABEL: &[u8] = b"recap cursor sealing key v1";

/// Until when a cursor issued before positions were sealed (2026-11-30) still opens, in
/// unix seconds: 2027-01-01T00:00:00Z, a month past the feed's default retention of 30
/// days, by which time a feed reader's last signed cursor points at messages the feed no
/// longer keeps. A list reader still holding one then starts again without it (its 400
/// says `param: cursor`).
pub const SIGNED_CURSORS_UNTIL: u64 = 1_798_761_600;

/// Whether a cursor issued before positions were sealed still opens at `now`.
pub fn signed_cursors_open_at(now: SystemTime) -> bool {
    now < UNIX_EPOCH + Duration::from_secs(SIGNED_CURSORS_UNTIL)
}

#[derive(Clone)]
pub struct Cursors {
    /// The HMAC of cursors issued before they were sealed.
    signing: HmacSha256,
    sealing: Aes256GcmSiv,
}

impl Cursors {
    pub fn new(secret: &[u8]) -> Cursors {
        // HMAC accepts keys of any length, so this cannot fail.
        let signing = <HmacSha256 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        let mut derive = signing.clone();
        derive.update(SEALING_KEY_LABEL);
        let sealing = Aes256GcmSiv::new(&derive.finalize().into_bytes());
        Cursors { signing, sealing }
    }

    fn tag(&self, binding: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = self.signing.clone();
        mac.update(&(binding.len() as u64).to_be_bytes());
        mac.update(binding.as_bytes());
        mac.update(payload);
        mac
    }

    /// The cursor that resumes after `key` under `binding`.
    pub fn issue(&self, binding: &str, key: &[Val]) -> String {
        let mut payload = serde_json::to_vec(key).unwrap_or_default();
        // JSON reads the spaces after a value as nothing.
        payload.resize(payload.len().div_ceil(PADDED_TO).max(1) * PADDED_TO, b' ');
        let sealed = self.sealing.encrypt(Nonce::from_slice(&[0; 12]), Payload { msg: &payload, aad: binding.as_bytes() }).unwrap_or_default();
        let mut bytes = Vec::with_capacity(1 + sealed.len());
        bytes.push(SEALED);
        bytes.extend_from_slice(&sealed);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The key a cursor carries, when it was issued by this secret under `binding`.
    pub fn open(&self, binding: &str, cursor: &str) -> Option<Vec<Val>> {
        self.open_at(binding, cursor, SystemTime::now())
    }

    /// [`Cursors::open`] at `now`, which decides whether a signed cursor still opens.
    pub fn open_at(&self, binding: &str, cursor: &str, now: SystemTime) -> Option<Vec<Val>> {
        if cursor.is_empty() || cursor.len() > MAX_CURSOR_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let payload = match bytes.split_first() {
            Some((&SEALED, sealed)) => self.sealing.decrypt(Nonce::from_slice(&[0; 12]), Payload { msg: sealed, aad: binding.as_bytes() }).ok()?,
            _ => {
                if !signed_cursors_open_at(now) {
                    return None;
                }
                let split = bytes.len().checked_sub(TAG_BYTES)?;
                let (payload, tag) = bytes.split_at(split);
                self.tag(binding, payload).verify_slice(tag).ok()?;
                payload.to_vec()
            }
        };
        serde_json::from_slice(&payload).ok()
    }

    /// A cursor as issued before positions were sealed (the tests of their acceptance).
    pub fn issue_signed(&self, binding: &str, key: &[Val]) -> String {
        let mut bytes = serde_json::to_vec(key).unwrap_or_default();
        let tag = self.tag(binding, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T00:00:00Z, while signed cursors still open.
    fn before_the_end() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_796_083_200)
    }

    #[test]
    fn a_cursor_opens_only_under_its_secret_and_binding() {
        let cursors = Cursors::new(b"secret one");
        let key = vec![Val::Int(1_790_000_000_000_000), Val::text("mtg_01")];
        let now = before_the_end();
        for cursor in [cursors.issue("meetings|acc_a|-|-", &key), cursors.issue_signed("meetings|acc_a|-|-", &key)] {
            assert_eq!(cursors.open_at("meetings|acc_a|-|-", &cursor, now), Some(key.clone()));
            assert_eq!(cursors.open_at("meetings|acc_b|-|-", &cursor, now), None, "foreign account");
            assert_eq!(cursors.open_at("meetings|acc_a|1|-", &cursor, now), None, "other filters");
            assert_eq!(Cursors::new(b"secret two").open_at("meetings|acc_a|-|-", &cursor, now), None, "other secret");
            for at in [0, 3, cursor.len() - 1] {
                let mut edited = cursor.clone().into_bytes();
                edited[at] = if edited[at] == b'A' { b'B' } else { b'A' };
                let edited = String::from_utf8(edited).expect("the edited cursor is still text");
                assert_eq!(cursors.open_at("meetings|acc_a|-|-", &edited, now), None, "edited at {at}");
            }
        }
        for garbage in ["", "x", "!!!!", "AQ", &"A".repeat(2000)] {
            assert_eq!(cursors.open("meetings|acc_a|-|-", garbage), None);
        }
    }

    #[test]
    fn a_signed_cursor_opens_until_its_end_date_and_a_sealed_one_after_it_too() {
        let cursors = Cursors::new(b"secret one");
        let key = vec![Val::Int(7)];
        let (signed, sealed) = (cursors.issue_signed("events|acc_a|", &key), cursors.issue("events|acc_a|", &key));
        let end = UNIX_EPOCH + Duration::from_secs(SIGNED_CURSORS_UNTIL);
        assert_eq!(SIGNED_CURSORS_UNTIL, 1_798_761_600, "2027-01-01T00:00:00Z");
        assert_eq!(cursors.open_at("events|acc_a|", &signed, end - Duration::from_secs(1)), Some(key.clone()), "the last second");
        assert_eq!(cursors.open_at("events|acc_a|", &signed, end), None, "from the end on, refused like a forged one");
        assert_eq!(cursors.open_at("events|acc_a|", &sealed, end + Duration::from_secs(86_400 * 365)), Some(key), "sealed cursors have no end date");
    }

    // The feed's position is the message log's: a cursor must not show it, nor how far
    // apart two positions are.
    #[test]
    fn a_sealed_cursor_shows_nothing_of_its_position() {
        let cursors = Cursors::new(b"secret one");
        let (first, second) = (cursors.issue("events|acc_a|", &[Val::Int(41)]), cursors.issue("events|acc_a|", &[Val::Int(42)]));
        for cursor in [&first, &second] {
            let bytes = URL_SAFE_NO_PAD.decode(cursor).expect("base64url");
            assert_eq!(bytes[0], SEALED);
            assert!(!bytes.windows(2).any(|pair| pair == b"41" || pair == b"42"), "the position in the clear: {bytes:?}");
        }
        let (a, b) = (URL_SAFE_NO_PAD.decode(&first).unwrap(), URL_SAFE_NO_PAD.decode(&second).unwrap());
        let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(differing > a.len() / 2, "neighbouring positions seal to unrelated bytes ({differing} of {} differ)", a.len());
        assert_eq!(cursors.issue("events|acc_a|", &[Val::Int(41)]), first, "the same position, the same cursor");
        // Every feed position seals to the same length.
        let far = cursors.issue("events|acc_a|", &[Val::Int(i64::MAX)]);
        assert_eq!(far.len(), first.len(), "{far} / {first}");
        // RFC 8452's AES-256-GCM-SIV, as another implementation (Python's cryptography)
        // seals the same padded position under the same secret and binding.
        assert_eq!(first, "AUz0OAGYuvEJVx4-OAD22e5B2bUKqcIu23Mo-PFE_ytWtC1F9Qw8sScfIGMSBg9rwA");
    }
}
