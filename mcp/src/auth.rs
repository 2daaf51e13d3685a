//! Who is calling `/mcp`: a personal access token (`svc_pat_`, as REST) or an OAuth
//! access token (`svc_oat_`) issued by this server's authorization server. An OAuth
//! token is good while its row is live and unexpired, its grant is live, and the PAT
//! that approved the grant is not revoked (checked on every request, so revoking that
//! PAT ends every connection it authorized on the next request). An OAuth token is good
//! only at the MCP endpoint its grant is for (RFC 8707 audience: the URL the
//! authorization request reached), so a token issued under one name of the server is
//! refused under another. Then the plan must include MCP. Every store call is bounded;
//! a timeout or an unreachable store is 503.

use axum::http::HeaderMap;
use recap_access::{check_plan, AuthError, Caller, Feature, PlanError, PAT_PREFIX};
use recap_readmodel::oauth::TokenKind;
use recap_readmodel::{AccountRecord, StoreError};

use crate::error::{HttpError, StoreFailure};
use crate::oauth::secrets::ACCESS_TOKEN_PREFIX;
use crate::state::McpState;
use crate::urls::PublicUrls;

/// What a token check found, before it becomes an HTTP error (which needs the URL).
#[derive(Debug)]
pub enum Denied {
    Missing,
    /// More than one `Authorization` header: which one a proxy in front read is
    /// unknowable, so neither is used (RFC 6750 §3.1 `invalid_request`).
    Duplicate,
    Unknown,
    Revoked,
    /// A store call failed: logged and classified once, in [`authorize`].
    Store(StoreError),
}

impl From<AuthError> for Denied {
    fn from(error: AuthError) -> Denied {
        match error {
            AuthError::Unauthorized => Denied::Unknown,
            AuthError::TokenRevoked => Denied::Revoked,
            AuthError::Store(error) => Denied::Store(error),
        }
    }
}

impl From<StoreError> for Denied {
    fn from(error: StoreError) -> Denied {
        Denied::Store(error)
    }
}

/// Authenticates the request's bearer token and checks the plan. `urls` gives the
/// request's public URLs, derived only when needed.
pub async fn authorize(state: &McpState, headers: &HeaderMap, urls: impl Fn() -> PublicUrls) -> Result<Caller, HttpError> {
    let resource_metadata = || urls().resource_metadata();
    let caller = match authenticate(state, headers, &urls).await {
        Ok(caller) => caller,
        Err(Denied::Missing) => return Err(HttpError::Unauthorized { resource_metadata: resource_metadata(), token_present: false }),
        Err(Denied::Duplicate) => return Err(HttpError::DuplicateAuthorization { resource_metadata: resource_metadata() }),
        Err(Denied::Unknown) => return Err(HttpError::Unauthorized { resource_metadata: resource_metadata(), token_present: true }),
        Err(Denied::Revoked) => return Err(HttpError::TokenRevoked { resource_metadata: resource_metadata() }),
        Err(Denied::Store(error)) => {
            return Err(match StoreFailure::logged(&error, "mcp_auth") {
                StoreFailure::Defect => HttpError::Internal,
                StoreFailure::Unavailable | StoreFailure::Unreadable => HttpError::Unavailable,
            })
        }
    };
    match check_plan(&state.inner.plans, &caller.account, Feature::Mcp) {
        Ok(_) => Ok(caller),
        Err(PlanError::NoPlan) => Err(HttpError::NoPlan),
        Err(PlanError::FeatureNotIncluded(_)) => Err(HttpError::FeatureNotIncluded),
    }
}

async fn authenticate(state: &McpState, headers: &HeaderMap, urls: impl Fn() -> PublicUrls) -> Result<Caller, Denied> {
    let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let Some(header) = values.next() else { return Err(Denied::Missing) };
    if values.next().is_some() {
        return Err(Denied::Duplicate);
    }
    let Some(token) = header.to_str().ok().and_then(recap_access::auth::bearer) else {
        // RFC 6750 §3.1: another scheme (Basic, ...) carries no usable credential, so
        // the challenge names no error; a Bearer header without a usable token is an
        // invalid token.
        let scheme = header.as_bytes().split(|&byte| byte == b' ').next().unwrap_or_default();
        return Err(if scheme.eq_ignore_ascii_case(b"bearer") { Denied::Unknown } else { Denied::Missing });
    };
    let inner = &state.inner;
    if token.starts_with(PAT_PREFIX) {
        return match inner.bounded(async { Ok(inner.tokens.authenticate(&inner.readmodel, token).await) }).await {
            Ok(result) => result.map_err(Denied::from),
            Err(error) => Err(Denied::from(error)),
        };
    }
    if !token.starts_with(ACCESS_TOKEN_PREFIX) || token.len() <= ACCESS_TOKEN_PREFIX.len() {
        return Err(Denied::Unknown);
    }
    let oauth = inner.readmodel.oauth();
    let record = inner.bounded(oauth.token(&recap_access::token_sha256(token))).await?.ok_or(Denied::Unknown)?;
    if record.kind != TokenKind::Access || record.expires_at <= state.now_micros() {
        return Err(Denied::Unknown);
    }
    // A deleted grant means it was revoked (replay, refresh reuse, RFC 7009, the PAT).
    let grant = inner.bounded(oauth.grant(&record.grant_id)).await?.ok_or(Denied::Revoked)?;
    // The same string as the grant's (every call of a client that keeps its URL) needs
    // no parsing; another spelling is compared as URLs are.
    let for_another = |audience: &String| {
        let mcp_url = urls().mcp_url;
        *audience != mcp_url && !crate::urls::names_resource(audience, &mcp_url)
    };
    if grant.resource.as_ref().is_some_and(for_another) {
        return Err(Denied::Unknown);
    }
    let pat = inner.bounded(inner.readmodel.token_by_hash(&grant.pat_sha256)).await?;
    match pat {
        Some(pat) if !pat.revoked => {}
        _ => return Err(Denied::Revoked),
    }
    let account = inner.bounded(inner.readmodel.account(&grant.account_id)).await?.unwrap_or(AccountRecord { plan: None });
    Ok(Caller { account_id: grant.account_id, token_id: grant.pat_token_id, account })
}
