//! The MCP server's OAuth state as typed records and operations: registered clients,
//! authorization codes, grants, access and refresh tokens, and the grants each personal
//! access token approved. Callers see records and operations; the storage rules stay
//! here:
//!
//! - each record is a JSON row of the table declared for it (`tables.rs`), dropped by
//!   the store when its lifetime ends (a TTL on the wall clock; the records'
//!   `expires_at` follow the caller's clock and are the caller's to check);
//! - codes and tokens are keyed by their SHA-256 only, never by the secret;
//! - writes carry wall-clock timestamps, so a later write (a spent code, a rotated
//!   refresh token) replaces an earlier one, and a deletion is a tombstone;
//! - the single use of a code or of a refresh token is decided by a conditional insert
//!   into `oauth_claims` ([`Driver::insert_if_absent`]): of any number of requests
//!   spending one secret at once, on any pods, exactly one is told it spent it, whatever
//!   the driver, its tie rules or the configured consistency;
//! - a revoked grant stays revoked: its tombstone is dated ahead of the clock
//!   ([`REVOCATION_MARGIN`]).

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::driver::{now_micros, Driver, Mutation, Op, StoreError};
use crate::table::{Table, Val};
use crate::tables::{OAUTH_CLAIMS, OAUTH_CLIENTS, OAUTH_CODES, OAUTH_GRANTS, OAUTH_GRANTS_BY_TOKEN, OAUTH_TOKENS};

/// A registered public client (RFC 7591).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientRecord {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    /// Seconds since the epoch.
    pub client_id_issued_at: i64,
    /// `web` or `native` (OIDC Dynamic Client Registration); absent in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application_type: Option<String>,
}

/// An authorization code, keyed by its SHA-256. `used` marks a redeemed code, kept
/// until it expires so that a replay can be recognised and its grant revoked.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CodeRecord {
    pub client_id: String,
    /// The redirect URI the code was sent to.
    pub redirect_uri: String,
    /// Whether the authorization request named it; then the token request must too.
    pub redirect_uri_given: bool,
    pub code_challenge: String,
    pub scope: String,
    pub account_id: String,
    pub pat_sha256: String,
    pub pat_token_id: String,
    /// The grant this code creates when redeemed (fixed up front, so that a replay
    /// knows what to revoke).
    pub grant_id: String,
    /// Microseconds (the injectable clock's).
    pub expires_at: i64,
    pub used: bool,
    /// The protected resource (RFC 8707) its tokens are for: the MCP endpoint's URL as
    /// the authorization request reached it. Absent in a code written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// One authorization: a client acting for an account, approved with a personal access
/// token. Every use of its tokens reads it; deleting it revokes them all at once.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct GrantRecord {
    pub grant_id: String,
    pub client_id: String,
    pub account_id: String,
    /// The approving PAT: checked on every use, so revoking it revokes the grant.
    pub pat_sha256: String,
    pub pat_token_id: String,
    pub scope: String,
    /// The one refresh token currently valid (SHA-256).
    pub refresh_sha256: String,
    pub expires_at: i64,
    /// The audience of its tokens ([`CodeRecord::resource`]): they are good at that
    /// URL only. Absent in a grant written before it was kept: good at any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TokenKind {
    Access,
    Refresh,
}

/// An access or refresh token, keyed by its SHA-256.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TokenRecord {
    pub kind: TokenKind,
    pub grant_id: String,
    pub client_id: String,
    pub expires_at: i64,
    /// A refresh token already exchanged: presenting it again revokes the grant.
    pub rotated: bool,
}

/// Whether a request spent a single-use secret, or found it spent already.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spend {
    /// This request spent it: the one that may issue tokens for it.
    Spent,
    /// Another request spent it first (before, or racing this one): a reuse.
    AlreadySpent,
}

/// What a token exchange spent: kept, marked spent, for as long as it lives, so that a
/// later presentation of it is recognised as a reuse.
#[derive(Clone, Copy, Debug)]
pub enum Spent<'a> {
    Code { code_sha256: &'a str, code: &'a CodeRecord, lifetime: Duration },
    RefreshToken { refresh_sha256: &'a str, token: &'a TokenRecord, lifetime: Duration },
}

/// A grant's new pair of tokens, as the token endpoint issues it.
#[derive(Clone, Copy, Debug)]
pub struct Issue<'a> {
    /// The grant, with its current refresh token and expiry.
    pub grant: &'a GrantRecord,
    /// When the tokens were issued (microseconds of the caller's clock), as the PAT's
    /// index of grants shows it.
    pub issued_at: i64,
    pub access_sha256: &'a str,
    pub access: &'a TokenRecord,
    pub access_lifetime: Duration,
    pub refresh_sha256: &'a str,
    pub refresh: &'a TokenRecord,
    /// How long the refresh token lives, and with it the grant and its index entry.
    pub refresh_lifetime: Duration,
    /// The code or refresh token the exchange spent.
    pub spent: Spent<'a>,
    /// A registered client to keep for the given lifetime from now on (written again
    /// with the tokens: a code exchange is what makes a registration last).
    pub keep_client: Option<(&'a ClientRecord, Duration)>,
}

/// How far ahead of the clock a grant's revocation tombstone is written: longer than
/// any request that read the grant before the revocation can take to write it back
/// (a refresh that passed its checks, then issues tokens), clock skew between pods
/// included. A tombstone outweighs every write with an older timestamp, so the grant
/// stays revoked; nothing writes a revoked grant on purpose.
pub const REVOCATION_MARGIN: Duration = Duration::from_secs(24 * 3600);

/// What the single-use claims are keyed by, besides the secret's SHA-256.
const CLAIM_OF_CODE: &str = "code";
const CLAIM_OF_REFRESH_TOKEN: &str = "refresh_token";

/// The OAuth state in the read model's store ([`crate::ReadModel::oauth`]).
#[derive(Clone)]
pub struct OAuthStore {
    driver: Arc<dyn Driver>,
}

/// Wall-clock microseconds `lifetime` from now: when the store drops a row.
fn expiry(lifetime: Duration) -> i64 {
    now_micros().saturating_add(i64::try_from(lifetime.as_micros()).unwrap_or(i64::MAX))
}

/// A record's row, dropped by the store once `lifetime` has passed.
fn put<T: Serialize>(table: &'static Table, key: &str, record: &T, lifetime: Duration) -> Result<Mutation, StoreError> {
    let body = serde_json::to_string(record).map_err(|error| StoreError::Corrupt(format!("{}: {error}", table.name)))?;
    Ok(Mutation { table, partition: vec![Val::text(key)], clustering: Vec::new(), op: Op::Put { body, expires_at: Some(expiry(lifetime)) }, ts: now_micros() })
}

impl OAuthStore {
    pub fn new(driver: Arc<dyn Driver>) -> OAuthStore {
        OAuthStore { driver }
    }

    async fn get<T: DeserializeOwned>(&self, table: &'static Table, key: &str) -> Result<Option<T>, StoreError> {
        match self.driver.get(table, &[Val::text(key)], &[]).await? {
            Some(row) => serde_json::from_str(&row.body).map(Some).map_err(|error| StoreError::Corrupt(format!("{}: {error}", table.name))),
            None => Ok(None),
        }
    }

    pub async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        self.get(&OAUTH_CLIENTS, client_id).await
    }

    pub async fn code(&self, code_sha256: &str) -> Result<Option<CodeRecord>, StoreError> {
        self.get(&OAUTH_CODES, code_sha256).await
    }

    pub async fn grant(&self, grant_id: &str) -> Result<Option<GrantRecord>, StoreError> {
        self.get(&OAUTH_GRANTS, grant_id).await
    }

    pub async fn token(&self, token_sha256: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.get(&OAUTH_TOKENS, token_sha256).await
    }

    /// Registers a client, kept for `lifetime`.
    pub async fn register_client(&self, client: &ClientRecord, lifetime: Duration) -> Result<(), StoreError> {
        self.driver.write(vec![put(&OAUTH_CLIENTS, &client.client_id, client, lifetime)?]).await
    }

    /// Keeps an authorization code, by its SHA-256, for `lifetime`.
    pub async fn save_code(&self, code_sha256: &str, code: &CodeRecord, lifetime: Duration) -> Result<(), StoreError> {
        self.driver.write(vec![put(&OAUTH_CODES, code_sha256, code, lifetime)?]).await
    }

    /// Spends the single use of an authorization code (keyed by its SHA-256): exactly
    /// one of any number of calls for it is told [`Spend::Spent`] while the claim lives,
    /// for `lifetime` (at least as long as the code can be redeemed).
    pub async fn spend_code(&self, code_sha256: &str, lifetime: Duration) -> Result<Spend, StoreError> {
        self.spend(CLAIM_OF_CODE, code_sha256, lifetime).await
    }

    /// [`OAuthStore::spend_code`] for a refresh token: exactly one use rotates it.
    pub async fn spend_refresh_token(&self, refresh_sha256: &str, lifetime: Duration) -> Result<Spend, StoreError> {
        self.spend(CLAIM_OF_REFRESH_TOKEN, refresh_sha256, lifetime).await
    }

    async fn spend(&self, kind: &str, secret_sha256: &str, lifetime: Duration) -> Result<Spend, StoreError> {
        let body = serde_json::json!({ "spent_at": now_micros() }).to_string();
        let key = [Val::text(kind), Val::text(secret_sha256)];
        let spent = self.driver.insert_if_absent(&OAUTH_CLAIMS, &key, &[], &body, Some(expiry(lifetime))).await?;
        Ok(if spent { Spend::Spent } else { Spend::AlreadySpent })
    }

    /// Writes a grant's new tokens in one write: the grant (its current refresh token
    /// and expiry), its entry in the index of the grants its PAT approved, both tokens,
    /// and what the exchange spent, marked spent (a code `used`, a refresh token
    /// `rotated`). Call it only after winning the spend ([`Spend::Spent`]).
    pub async fn issue_tokens(&self, issue: &Issue<'_>) -> Result<(), StoreError> {
        let grant = issue.grant;
        let index_entry = serde_json::json!({"client_id": grant.client_id, "created_at": issue.issued_at}).to_string();
        let mut mutations = vec![
            put(&OAUTH_GRANTS, &grant.grant_id, grant, issue.refresh_lifetime)?,
            Mutation {
                table: &OAUTH_GRANTS_BY_TOKEN,
                partition: vec![Val::text(&grant.pat_token_id)],
                clustering: vec![Val::text(&grant.grant_id)],
                op: Op::Put { body: index_entry, expires_at: Some(expiry(issue.refresh_lifetime)) },
                ts: now_micros(),
            },
            put(&OAUTH_TOKENS, issue.access_sha256, issue.access, issue.access_lifetime)?,
            put(&OAUTH_TOKENS, issue.refresh_sha256, issue.refresh, issue.refresh_lifetime)?,
        ];
        if let Some((client, lifetime)) = issue.keep_client {
            mutations.push(put(&OAUTH_CLIENTS, &client.client_id, client, lifetime)?);
        }
        mutations.push(match issue.spent {
            Spent::Code { code_sha256, code, lifetime } => put(&OAUTH_CODES, code_sha256, &CodeRecord { used: true, ..code.clone() }, lifetime)?,
            Spent::RefreshToken { refresh_sha256, token, lifetime } => {
                put(&OAUTH_TOKENS, refresh_sha256, &TokenRecord { rotated: true, ..token.clone() }, lifetime)?
            }
        });
        self.driver.write(mutations).await
    }

    /// Revokes a grant, and so every token it issued (each use reads the grant). The
    /// tombstone is dated [`REVOCATION_MARGIN`] ahead, so that a grant write from a
    /// request that read the grant, or spent its code or refresh token, before the
    /// revocation cannot bring it back.
    pub async fn revoke_grant(&self, grant_id: &str) -> Result<(), StoreError> {
        let margin = i64::try_from(REVOCATION_MARGIN.as_micros()).unwrap_or(i64::MAX);
        let tombstone = Mutation {
            table: &OAUTH_GRANTS,
            partition: vec![Val::text(grant_id)],
            clustering: Vec::new(),
            op: Op::Delete,
            ts: now_micros().saturating_add(margin),
        };
        self.driver.write(vec![tombstone]).await
    }

    /// Revokes one access token (its grant and refresh token live on).
    pub async fn revoke_access_token(&self, access_sha256: &str) -> Result<(), StoreError> {
        let tombstone = Mutation { table: &OAUTH_TOKENS, partition: vec![Val::text(access_sha256)], clustering: Vec::new(), op: Op::Delete, ts: now_micros() };
        self.driver.write(vec![tombstone]).await
    }
}
