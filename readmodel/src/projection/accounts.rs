//! Accounts and tokens: `account.upserted`, `token.created` and `token.revoked`. Each is
//! its own entity under rule 1 (last version wins); a token keeps what it knows in its
//! state, so that a revocation arriving before the creation still leaves the token
//! revoked once its hash is known ("After it is projected, the token answers 401
//! token_revoked").

use recap_schemas::{AccountUpserted, TokenCreated, TokenRevoked};
use serde::{Deserialize, Serialize};

use crate::driver::StoreError;

use super::batch::{Batch, Stamp};
use super::entities::{EntityKind, EntityState, Revision};
use super::rows::{account_row, token_row};
use super::Applied;

/// What a token's state remembers of it.
#[derive(Serialize, Deserialize)]
struct TokenData {
    account_id: String,
    token_id: String,
    token_sha256: Option<String>,
    revoked: bool,
}

impl TokenData {
    fn of(state: &EntityState) -> Option<TokenData> {
        state.data.as_deref().and_then(|data| serde_json::from_str(data.get()).ok())
    }
}

impl Batch {
    pub(super) async fn account_upserted(&mut self, event: &AccountUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let account_id: &str = &event.account_id;
        self.revise_if_newer(EntityKind::Account, account_id, version, stamp, || Revision::Present(vec![account_row(account_id, &event.plan)])).await
    }

    pub(super) async fn token_created(&mut self, event: &TokenCreated, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let (account_id, token_id): (&str, &str) = (&event.account_id, &event.token_id);
        let Some(state) = self.newer(EntityKind::Token, token_id, version).await? else {
            return self.stale_token_created(token_id, &event.token_sha256, stamp).await;
        };
        let token =
            TokenData { account_id: account_id.to_owned(), token_id: token_id.to_owned(), token_sha256: Some(event.token_sha256.clone()), revoked: false };
        self.write_token(state, token, stamp);
        Ok(Applied::Applied)
    }

    pub(super) async fn token_revoked(&mut self, event: &TokenRevoked, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let (account_id, token_id): (&str, &str) = (&event.account_id, &event.token_id);
        let Some(state) = self.newer(EntityKind::Token, token_id, version).await? else { return Ok(Applied::Stale) };
        let known = TokenData::of(&state);
        let token = TokenData {
            account_id: account_id.to_owned(),
            token_id: token_id.to_owned(),
            token_sha256: known.and_then(|known| known.token_sha256),
            revoked: true,
        };
        self.write_token(state, token, stamp);
        Ok(Applied::Applied)
    }

    /// Saves what is known of the token at `stamp`'s version, and its row once its hash
    /// is known.
    fn write_token(&mut self, mut state: EntityState, token: TokenData, stamp: Stamp) {
        let rows = match &token.token_sha256 {
            Some(sha) => vec![token_row(&token.account_id, &token.token_id, sha, token.revoked)],
            None => Vec::new(),
        };
        state.data = serde_json::value::to_raw_value(&token).ok();
        self.revise(EntityKind::Token, &token.token_id, state, stamp.version as u64, Revision::Present(rows), stamp);
    }

    /// A token.created behind a newer token.revoked is stale, but it is the first to
    /// name the token's hash: the token then reads as revoked ("After it is projected,
    /// the token answers 401 token_revoked"), whichever of the two came first.
    async fn stale_token_created(&mut self, token_id: &str, token_sha256: &str, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(state) = self.entity(EntityKind::Token, token_id).await? else { return Ok(Applied::Stale) };
        let Some(known) = TokenData::of(&state) else { return Ok(Applied::Stale) };
        if !known.revoked || known.token_sha256.is_some() {
            return Ok(Applied::Stale);
        }
        let token = TokenData { token_sha256: Some(token_sha256.to_owned()), ..known };
        let revoked_at = Stamp { version: state.v as i64, position: stamp.position };
        self.write_token(state, token, revoked_at);
        Ok(Applied::Applied)
    }
}
