//! OAuth state in the store: clients, codes, grants and tokens, each a JSON row with a
//! TTL in the tables the read model declares for them. Codes and tokens are keyed by
//! their SHA-256 only; the values themselves are never stored. Writes carry wall-clock
//! timestamps, so a later write (a used code, a rotated refresh token, a revoked
//! grant's tombstone) shadows an earlier one.
//!
//! The driver offers no compare-and-set, so single use is decided by
//! [`Inner::claim_once`], a protocol over plain reads and last-write-wins writes that
//! lets at most one of any number of racing requests (on any pods) through. Revoking a
//! grant writes its tombstone [`REVOCATION_MARGIN_MICROS`] ahead of the clock, so a
//! grant write from a request that read the grant (or won a claim) before the
//! revocation cannot bring it back.

use base64::Engine;
use rand::RngCore;
use recap_readmodel::driver::now_micros;
use recap_readmodel::table::Table;
use recap_readmodel::tables::{OAUTH_CLIENTS, OAUTH_CODES, OAUTH_GRANTS, OAUTH_GRANTS_BY_TOKEN, OAUTH_TOKENS};
use recap_readmodel::{Mutation, Op, StoreError, Val};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::state::Inner;

pub const ACCESS_TOKEN_PREFIX: &str = "svc_oat_";
pub const REFRESH_TOKEN_PREFIX: &str = "svc_ort_";
pub const SCOPE: &str = "svc:read";

/// A registered public client (RFC 7591).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientRecord {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    /// Seconds since the epoch.
    pub client_id_issued_at: i64,
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

/// A row that the store drops `ttl_micros` after now (wall clock: the store's own TTL;
/// the records' `expires_at` follow the injectable clock and are checked on read).
pub fn put<T: Serialize>(table: &'static Table, key: &str, record: &T, ttl_micros: i64) -> Mutation {
    // Records hold strings, numbers and booleans only: serialisation cannot fail.
    let body = serde_json::to_string(record).unwrap_or_default();
    let now = now_micros();
    Mutation { table, partition: vec![Val::text(key)], clustering: Vec::new(), op: Op::Put { body, expires_at: Some(now.saturating_add(ttl_micros)) }, ts: now }
}

/// How far ahead of the clock a grant's revocation tombstone is written: longer than
/// any request that read the grant before the revocation can take to write it back,
/// clock skew between pods included. Nothing writes a revoked grant on purpose.
pub const REVOCATION_MARGIN_MICROS: i64 = 24 * 3600 * 1_000_000;

/// Every racer writes its claim at this same timestamp, so the store's tie rule picks
/// the claim, not the arrival order: the greater body on the embedded driver; on CQL the
/// later expiry (one-second resolution), then the greater body. Either way every reader
/// sees the same claim, which is all the splitter needs.
const CLAIM_TS: i64 = 1;

/// Whether a request won the single use of a code or token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    Won,
    Lost,
}

pub fn delete(table: &'static Table, key: &str) -> Mutation {
    Mutation { table, partition: vec![Val::text(key)], clustering: Vec::new(), op: Op::Delete, ts: now_micros() }
}

/// The PAT → grants index row, so the connections a token approved can be listed.
pub fn index_grant(grant: &GrantRecord, created_at: i64, ttl_micros: i64) -> Mutation {
    let body = serde_json::json!({"client_id": grant.client_id, "created_at": created_at}).to_string();
    let now = now_micros();
    Mutation {
        table: &OAUTH_GRANTS_BY_TOKEN,
        partition: vec![Val::text(&grant.pat_token_id)],
        clustering: vec![Val::text(&grant.grant_id)],
        op: Op::Put { body, expires_at: Some(now.saturating_add(ttl_micros)) },
        ts: now,
    }
}

impl Inner {
    async fn get_record<T: DeserializeOwned>(&self, table: &'static Table, key: &str) -> Result<Option<T>, StoreError> {
        let row = self.bounded(self.readmodel.driver().get(table, &[Val::text(key)], &[])).await?;
        match row {
            Some(row) => serde_json::from_str(&row.body).map(Some).map_err(|error| StoreError::Corrupt(format!("{}: {error}", table.name))),
            None => Ok(None),
        }
    }

    pub async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        self.bounded(self.readmodel.driver().write(mutations)).await
    }

    pub async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        self.get_record(&OAUTH_CLIENTS, client_id).await
    }

    pub async fn code(&self, code_sha256: &str) -> Result<Option<CodeRecord>, StoreError> {
        self.get_record(&OAUTH_CODES, code_sha256).await
    }

    pub async fn grant(&self, grant_id: &str) -> Result<Option<GrantRecord>, StoreError> {
        self.get_record(&OAUTH_GRANTS, grant_id).await
    }

    pub async fn token(&self, token_sha256: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.get_record(&OAUTH_TOKENS, token_sha256).await
    }

    /// Revokes a grant and so every token it issued (each use reads the grant). The
    /// tombstone is dated ahead (see [`REVOCATION_MARGIN_MICROS`]) so it stays revoked.
    pub async fn revoke_grant(&self, grant_id: &str) -> Result<(), StoreError> {
        let mut tombstone = delete(&OAUTH_GRANTS, grant_id);
        tombstone.ts = tombstone.ts.saturating_add(REVOCATION_MARGIN_MICROS);
        self.write(vec![tombstone]).await
    }

    /// Claims the single use of the secret keyed `key` in `table` (a code's or a
    /// refresh token's SHA-256) for this request, among any number of requests racing
    /// on any pods, with the driver's reads and last-write-wins writes only. This is
    /// Moir and Anderson's splitter over two cells, `<key>:claim` and `<key>:door`:
    ///
    /// 1. write `claim` := my ticket (all racers write the same cell at [`CLAIM_TS`];
    ///    the tie rule keeps one ticket, on the embedded driver the greatest, and tickets
    ///    start with the inverted clock so that the earliest racer's is the greatest);
    /// 2. read `door`: already set → lost (someone is past it);
    /// 3. write `door` := set;
    /// 4. read `claim`: my ticket → won, anything else → lost.
    ///
    /// At most one racer wins, whatever the interleaving, timestamps or clock skew: were
    /// there two, each read `door` unset before the other's `door` write completed, so
    /// both `claim` writes had completed before either final read, and both final
    /// reads return the same ticket, the tie's winner. A racer alone wins. Under contention
    /// all may lose (the winning ticket's owner found the door set); the secret is then
    /// spent, which for two uses of one single-use secret is the reuse rule's outcome.
    pub async fn claim_once(&self, table: &'static Table, key: &str, ttl_micros: i64) -> Result<Claim, StoreError> {
        let now = now_micros();
        let ticket = format!("{:020}.{}", i64::MAX - now, random_secret());
        let expires_at = Some(now.saturating_add(ttl_micros));
        let claim_key = format!("{key}:claim");
        let door_key = format!("{key}:door");
        let claim =
            Mutation { table, partition: vec![Val::text(&claim_key)], clustering: Vec::new(), op: Op::Put { body: ticket.clone(), expires_at }, ts: CLAIM_TS };
        self.write(vec![claim]).await?;
        if self.bounded(self.readmodel.driver().get(table, &[Val::text(&door_key)], &[])).await?.is_some() {
            return Ok(Claim::Lost);
        }
        let door = Mutation { table, partition: vec![Val::text(&door_key)], clustering: Vec::new(), op: Op::Put { body: ticket.clone(), expires_at }, ts: now };
        self.write(vec![door]).await?;
        let stored = self.bounded(self.readmodel.driver().get(table, &[Val::text(&claim_key)], &[])).await?;
        Ok(if stored.is_some_and(|row| row.body == ticket) { Claim::Won } else { Claim::Lost })
    }
}

pub use recap_readmodel::tables::{OAUTH_CLIENTS as CLIENTS, OAUTH_CODES as CODES, OAUTH_GRANTS as GRANTS, OAUTH_TOKENS as TOKENS};
