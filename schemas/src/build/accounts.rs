//! Builders of the account events: `account.upserted`, `token.created`, `token.revoked`.

use super::{id, Draft, Events};
use crate::{AccountUpserted, Plan, Timestamp, TokenCreated, TokenRevoked};

impl Events {
    /// `account.upserted` of an account without a plan.
    #[track_caller]
    pub fn account(self, account_id: impl AsRef<str>) -> Draft<AccountUpserted> {
        self.draft(AccountUpserted { account_id: id(account_id), plan: None })
    }

    /// `token.created` of the token whose SHA-256 (lowercase hex) is `token_sha256`,
    /// named "token", created at the epoch.
    #[track_caller]
    pub fn token_created(self, account_id: impl AsRef<str>, token_id: impl AsRef<str>, token_sha256: impl Into<String>) -> Draft<TokenCreated> {
        self.draft(TokenCreated {
            account_id: id(account_id),
            token_id: id(token_id),
            name: "token".into(),
            token_sha256: token_sha256.into(),
            created_at: self.at(),
        })
    }

    /// `token.revoked`, revoked at the epoch.
    #[track_caller]
    pub fn token_revoked(self, account_id: impl AsRef<str>, token_id: impl AsRef<str>) -> Draft<TokenRevoked> {
        self.draft(TokenRevoked { account_id: id(account_id), token_id: id(token_id), revoked_at: self.at() })
    }
}

impl Draft<AccountUpserted> {
    /// The account's plan; `api_quota` None is the tier's default quota.
    pub fn plan(mut self, tier: impl Into<String>, api_quota: Option<u64>, billing_cycle_anchor: Timestamp) -> Self {
        self.data.plan = Some(Plan { tier: tier.into(), api_quota, billing_cycle_anchor });
        self
    }
}

impl Draft<TokenCreated> {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.data.name = name.into();
        self
    }

    pub fn created_at(mut self, created_at: Timestamp) -> Self {
        self.data.created_at = created_at;
        self
    }
}

impl Draft<TokenRevoked> {
    pub fn revoked_at(mut self, revoked_at: Timestamp) -> Self {
        self.data.revoked_at = revoked_at;
        self
    }
}
