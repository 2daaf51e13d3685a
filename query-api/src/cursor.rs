//! Pagination cursors: the clustering key of a page's last row, signed with
//! HMAC-SHA256 under a server secret and bound to what it was issued for (endpoint,
//! account and the canonical form of the filters). A cursor that was edited, forged,
//! issued by another secret, for another endpoint or account, or sent with other
//! filters fails verification and the request is answered 400 (`param: cursor`).
//!
//! Wire form: base64url (no padding) of `payload ‖ tag`, where payload is the key as
//! JSON and tag the 32-byte HMAC over `len(binding) ‖ binding ‖ payload`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use recap_readmodel::Val;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const TAG_BYTES: usize = 32;
/// Longer strings are refused before any decoding: no cursor we issue comes close.
const MAX_CURSOR_CHARS: usize = 1024;

#[derive(Clone)]
pub struct CursorSigner {
    keyed: HmacSha256,
}

impl CursorSigner {
    pub fn new(secret: &[u8]) -> CursorSigner {
        // HMAC accepts keys of any length, so this cannot fail.
        let keyed = <HmacSha256 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        CursorSigner { keyed }
    }

    fn tag(&self, binding: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = self.keyed.clone();
        mac.update(&(binding.len() as u64).to_be_bytes());
        mac.update(binding.as_bytes());
        mac.update(payload);
        mac
    }

    /// The cursor that resumes after `key` under `binding`.
    pub fn issue(&self, binding: &str, key: &[Val]) -> String {
        let mut bytes = serde_json::to_vec(key).unwrap_or_default();
        let tag = self.tag(binding, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The key a cursor carries, when it was issued by this secret under `binding`.
    pub fn open(&self, binding: &str, cursor: &str) -> Option<Vec<Val>> {
        if cursor.is_empty() || cursor.len() > MAX_CURSOR_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let split = bytes.len().checked_sub(TAG_BYTES)?;
        let (payload, tag) = bytes.split_at(split);
        self.tag(binding, payload).verify_slice(tag).ok()?;
        serde_json::from_slice(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_opens_only_under_its_secret_and_binding() {
        let signer = CursorSigner::new(b"secret one");
        let key = vec![Val::Int(1_790_000_000_000_000), Val::text("mtg_01")];
        let cursor = signer.issue("meetings|acc_a|-|-", &key);
        assert_eq!(signer.open("meetings|acc_a|-|-", &cursor), Some(key));
        assert_eq!(signer.open("meetings|acc_b|-|-", &cursor), None, "foreign account");
        assert_eq!(signer.open("meetings|acc_a|1|-", &cursor), None, "other filters");
        assert_eq!(CursorSigner::new(b"secret two").open("meetings|acc_a|-|-", &cursor), None, "other secret");
        let mut edited = cursor.clone().into_bytes();
        edited[3] = if edited[3] == b'A' { b'B' } else { b'A' };
        assert_eq!(signer.open("meetings|acc_a|-|-", &String::from_utf8(edited).expect("the edited cursor is still text")), None, "edited");
        for garbage in ["", "x", "!!!!", &"A".repeat(2000)] {
            assert_eq!(signer.open("meetings|acc_a|-|-", garbage), None);
        }
    }
}
