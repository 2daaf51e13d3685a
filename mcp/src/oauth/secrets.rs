//! The secrets and identifiers the authorization server hands out: access and refresh
//! tokens (`svc_oat_`, `svc_ort_`), codes, client and grant identifiers, all random;
//! and the one scope they carry. Only their SHA-256 is ever stored (`recap_readmodel::oauth`).

use base64::Engine;
use rand::RngCore;

pub const ACCESS_TOKEN_PREFIX: &str = "svc_oat_";
pub const REFRESH_TOKEN_PREFIX: &str = "svc_ort_";
pub const SCOPE: &str = "svc:read";

/// A fresh random secret: 256 bits, base64url without padding.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A fresh random identifier with a prefix: 128 bits.
pub fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}
