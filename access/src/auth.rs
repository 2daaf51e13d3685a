//! Bearer tokens. Only the SHA-256 of a token is ever looked up or stored; the token
//! itself never reaches a log, a span or an error message (errors carry no token text).

use recap_readmodel::{AccountRecord, ReadModel, StoreError};
use sha2::{Digest, Sha256};

/// The prefix of personal access tokens.
pub const PAT_PREFIX: &str = "svc_pat_";

/// Lowercase hex SHA-256 of the whole token string, prefix included (as `token.created`
/// carries it).
pub fn token_sha256(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(b"0123456789abcdef"[(byte >> 4) as usize]));
        hex.push(char::from(b"0123456789abcdef"[(byte & 0xF) as usize]));
    }
    hex
}

/// Why a request is not authenticated. Carries no token text by construction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Missing header, not a Bearer token, wrong prefix, or an unknown token.
    #[error("missing, malformed or unknown token")]
    Unauthorized,
    #[error("the token was revoked")]
    TokenRevoked,
    /// The token or the account could not be read: each front door answers it as it
    /// answers any store failure (and logs it there, once).
    #[error("the token could not be checked: {0}")]
    Store(#[from] StoreError),
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    pub account_id: String,
    pub token_id: String,
    /// The account's record; `plan` None when it has no active plan (or no record).
    pub account: AccountRecord,
}

/// The token of an `Authorization` header value, when it is `Bearer <token>`.
pub fn bearer(header_value: &str) -> Option<&str> {
    let (scheme, token) = header_value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty() && !token.contains(' ')).then_some(token)
}

/// Whether `token` has the form of a personal access token (prefix and a body).
fn is_pat(token: &str) -> bool {
    token.starts_with(PAT_PREFIX) && token.len() > PAT_PREFIX.len()
}

/// Resolves a personal access token: prefix, hash, token row, account row. Revocation
/// is seen on the first request after it is projected (no cache).
pub async fn authenticate_pat(readmodel: &ReadModel, token: &str) -> Result<Caller, AuthError> {
    if !is_pat(token) {
        return Err(AuthError::Unauthorized);
    }
    authenticate_hash(readmodel, &token_sha256(token)).await
}

/// [`authenticate_pat`] past the prefix check, from the token's hash.
async fn authenticate_hash(readmodel: &ReadModel, hash: &str) -> Result<Caller, AuthError> {
    let Some(record) = readmodel.token_by_hash(hash).await? else {
        return Err(AuthError::Unauthorized);
    };
    if record.revoked {
        return Err(AuthError::TokenRevoked);
    }
    let account = readmodel.account(&record.account_id).await?.unwrap_or(AccountRecord { plan: None });
    Ok(Caller { account_id: record.account_id, token_id: record.token_id, account })
}

/// Successful token lookups kept so that a hot token costs no store read, and never
/// kept past a change that could alter them:
///
/// - where the store is this process's own (the embedded edition), a lookup is kept
///   until a token or account row is written ([`ReadModel::token_lookup_version`]), so
///   a revocation or a plan change still takes effect on the next request;
/// - where other processes write the store (the distributed edition), a lookup is kept
///   for at most `max_age`, so such a change takes effect within `max_age` of being
///   projected; a zero `max_age` keeps nothing there.
///
/// Refusals (unknown, revoked) are never kept, so a new token works at once. Keys are
/// token hashes, never tokens; the map is bounded (emptied when full).
///
/// Requests for a token whose lookup is under way wait for that lookup rather than
/// each reading the rows: when a kept lookup ages out under load, every request in
/// flight for the token would otherwise read the token and the account at once (with
/// 32 connections, 64 reads where 2 answer). A lookup is joined only while it is under
/// way, so what a request gets was read after it arrived or at most the lookup's round
/// trip before; where the store reports changes, only a lookup made at the same version
/// is joined.
pub struct TokenCache {
    max_age: std::time::Duration,
    entries: std::sync::Mutex<std::collections::HashMap<String, Kept>>,
    pending: std::sync::Mutex<std::collections::HashMap<String, Pending>>,
}

/// A lookup under way: the version it was made at, and where its result lands (any of
/// its waiters makes it, should the one making it be dropped).
#[derive(Clone)]
struct Pending {
    version: Option<u64>,
    lookup: std::sync::Arc<tokio::sync::OnceCell<Result<Caller, AuthError>>>,
}

/// A kept lookup: when it was read, the version of the token and account rows read
/// before it (None for a shared store), and its result.
struct Kept {
    fetched_at: std::time::Instant,
    version: Option<u64>,
    caller: Caller,
}

/// Tokens remembered at most (one per active integration is the expected shape).
const TOKEN_CACHE_CAPACITY: usize = 10_000;

impl TokenCache {
    pub fn new(max_age: std::time::Duration) -> TokenCache {
        TokenCache {
            max_age,
            entries: std::sync::Mutex::new(std::collections::HashMap::new()),
            pending: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// [`authenticate_pat`], answered from a kept lookup of this token while it is
    /// current (see [`TokenCache`]).
    pub async fn authenticate(&self, readmodel: &ReadModel, token: &str) -> Result<Caller, AuthError> {
        // Taken before the rows are read: a write after this point changes it.
        let version = readmodel.token_lookup_version();
        if version.is_none() && self.max_age.is_zero() {
            return authenticate_pat(readmodel, token).await;
        }
        if !is_pat(token) {
            return Err(AuthError::Unauthorized);
        }
        let hash = token_sha256(token);
        if let Ok(entries) = self.entries.lock() {
            if let Some(kept) = entries.get(&hash) {
                let current = match version {
                    Some(version) => kept.version == Some(version),
                    None => kept.fetched_at.elapsed() < self.max_age,
                };
                if current {
                    return Ok(kept.caller.clone());
                }
            }
        }
        let lookup = match self.pending.lock() {
            Ok(mut pending) => match pending.get(&hash) {
                Some(under_way) if under_way.version == version => under_way.lookup.clone(),
                _ => {
                    if pending.len() >= TOKEN_CACHE_CAPACITY {
                        pending.clear();
                    }
                    let lookup = std::sync::Arc::new(tokio::sync::OnceCell::new());
                    pending.insert(hash.clone(), Pending { version, lookup: lookup.clone() });
                    lookup
                }
            },
            Err(_) => std::sync::Arc::new(tokio::sync::OnceCell::new()),
        };
        let result = lookup
            .get_or_init(|| async {
                let fetched_at = std::time::Instant::now();
                let result = authenticate_hash(readmodel, &hash).await;
                if let (Ok(caller), Ok(mut entries)) = (&result, self.entries.lock()) {
                    if entries.len() >= TOKEN_CACHE_CAPACITY {
                        entries.clear();
                    }
                    entries.insert(hash.clone(), Kept { fetched_at, version, caller: caller.clone() });
                }
                result
            })
            .await
            .clone();
        // Done: later requests find the kept lookup, or (after a refusal) look again.
        if let Ok(mut pending) = self.pending.lock() {
            if pending.get(&hash).is_some_and(|under_way| std::sync::Arc::ptr_eq(&under_way.lookup, &lookup)) {
                pending.remove(&hash);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_like_the_contract() {
        // docs/events.md, token.created: token_sha256 is the lowercase hex SHA-256 of the token.
        assert_eq!(token_sha256("test"), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    }

    #[test]
    fn parses_bearer_headers() {
        assert_eq!(bearer("Bearer svc_pat_x"), Some("svc_pat_x"));
        assert_eq!(bearer("bearer svc_pat_x"), Some("svc_pat_x"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
