//! The token endpoint (RFC 6749 §4.1.3 and §6, PKCE per RFC 7636) and revocation
//! (RFC 7009). Codes are single-use and short-lived; redeeming one twice revokes the
//! grant it created (and so every token issued from it). Refresh tokens rotate on every
//! use; presenting a rotated one revokes the whole grant (OAuth 2.1 §4.3.1 reuse
//! detection). The approving PAT is checked on every exchange. Every client is public,
//! so its `client_id` is what binds a refresh token to it: a refresh and a revocation
//! must name the client the token was issued to (`invalid_request` without it,
//! `invalid_grant` with another), as a code exchange must. Redeeming a code also keeps
//! a registered client for `--mcp-client-ttl-secs` (until then it lives a day). A
//! `resource` (RFC 8707) must name the endpoint the grant is for (`invalid_target`).

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use recap_access::token_sha256;
use recap_readmodel::oauth::{ClientRecord, GrantRecord, Issue, Spend, Spent, TokenKind, TokenRecord};
use sha2::{Digest, Sha256};

use crate::oauth::authorize::Params;
use crate::oauth::cimd;
use crate::oauth::error::OAuthError;
use crate::oauth::secrets::{random_secret, ACCESS_TOKEN_PREFIX, REFRESH_TOKEN_PREFIX, SCOPE};
use crate::state::McpState;
use crate::urls::{names_resource, PublicUrls};

fn param<'a>(params: &'a Params, name: &str) -> Result<Option<&'a str>, OAuthError> {
    params.get(name).map_err(OAuthError::InvalidRequest)
}

/// The request's form, or the OAuth error for a body that could not be read: over the
/// router's bound (413), or cut short.
fn read(body: Result<Bytes, BytesRejection>) -> Result<Bytes, OAuthError> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => OAuthError::RequestTooLarge(format!("the request body may be {} bytes at most", crate::MAX_BODY_BYTES)),
        _ => OAuthError::InvalidRequest("the request body could not be read".into()),
    })
}

fn required<'a>(params: &'a Params, name: &str) -> Result<&'a str, OAuthError> {
    param(params, name)?.ok_or_else(|| OAuthError::InvalidRequest(format!("{name} is missing")))
}

pub async fn token(State(state): State<McpState>, headers: axum::http::HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let urls = PublicUrls::of(&state.inner.config, &headers);
    let body = match read(body) {
        Ok(body) => body,
        Err(error) => return error.into_response(),
    };
    let params = Params::parse(&body);
    // The id a refresh grant's debug line names, which the response then carries (the
    // HTTP layer in front sets one only on a response without it).
    let mut request_id = None;
    let result = match param(&params, "grant_type") {
        Ok(Some("authorization_code")) => redeem_code(&state, &params, &urls.mcp_url).await,
        Ok(Some("refresh_token")) => {
            let started = Instant::now();
            let result = refresh(&state, &params, &urls.mcp_url).await;
            // One debug line per refresh grant: the request's id, the client as it named
            // itself, how the grant ended and how long it took. Never a token, presented
            // or issued.
            if tracing::event_enabled!(tracing::Level::DEBUG) {
                let id = request_id.insert(recap_access::request_id::of(&headers));
                tracing::debug!(
                    request_id = id.to_str().unwrap_or("-"),
                    client_id = param(&params, "client_id").ok().flatten().unwrap_or("-"),
                    outcome = %result.as_ref().map_or_else(OAuthError::code, |_| "ok"),
                    latency_us = started.elapsed().as_micros() as u64,
                    "refresh token grant"
                );
            }
            result
        }
        Ok(Some(_)) => Err(OAuthError::UnsupportedGrantType),
        Ok(None) => Err(OAuthError::InvalidRequest("grant_type is missing".into())),
        Err(error) => Err(error),
    };
    let mut response = match result {
        Ok(issued) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store"), (header::PRAGMA, "no-cache")], issued)
            .into_response(),
        Err(error) => error.into_response(),
    };
    if let Some(request_id) = request_id {
        response.headers_mut().insert(recap_access::request_id::X_REQUEST_ID.clone(), request_id);
    }
    response
}

/// RFC 7636 §4.1: 43 to 128 unreserved characters.
fn verifier_well_formed(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len()) && verifier.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte))
}

pub fn s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A token request's `resource`, when it names one, must be the grant's (RFC 8707 §2.2:
/// the tokens are for that resource only). And the grant must be for this endpoint as
/// the token request reaches it (`mcp_url`): tokens issued otherwise would be refused
/// at `/mcp`, so the client is sent back to authorize (`invalid_grant`) rather than
/// refreshing tokens it cannot use. A grant from before resources were kept takes any
/// resource that parses.
fn check_resource(params: &Params, granted: Option<&str>, mcp_url: &str) -> Result<(), OAuthError> {
    if let Some(granted) = granted.filter(|granted| !names_resource(granted, mcp_url)) {
        return Err(OAuthError::InvalidGrant(format!("the grant is for {granted}, not {mcp_url}: authorize again")));
    }
    let Some(resource) = param(params, "resource")? else { return Ok(()) };
    match granted {
        Some(granted) if !names_resource(resource, granted) => Err(OAuthError::InvalidTarget(format!("the grant is for {granted} only"))),
        _ if url::Url::parse(resource).is_err() => Err(OAuthError::InvalidTarget("resource is not an absolute URI".into())),
        _ => Ok(()),
    }
}

/// Whether the PAT that approved a grant still works.
async fn pat_alive(state: &McpState, pat_sha256: &str) -> Result<bool, OAuthError> {
    let inner = &state.inner;
    Ok(inner.bounded(inner.readmodel.token_by_hash(pat_sha256)).await?.is_some_and(|pat| !pat.revoked))
}

/// How long a spent code or refresh token is kept marked spent, and its single use
/// claimed: as long as it could still be presented (by the record's clock), at least a
/// second.
fn remaining(expires_at: i64, now: i64) -> Duration {
    Duration::from_micros((expires_at - now).max(1_000_000).unsigned_abs())
}

/// Mints an access and a refresh token for a grant, stores them with the grant (and
/// what the exchange spent, marked spent), and returns the response body.
async fn issue(state: &McpState, mut grant: GrantRecord, spent: Spent<'_>, keep_client: Option<(&ClientRecord, Duration)>) -> Result<String, OAuthError> {
    let inner = &state.inner;
    let config = &inner.config;
    let now = state.now_micros();
    let (access_lifetime, refresh_lifetime) = (Duration::from_secs(config.access_token_ttl_secs), Duration::from_secs(config.refresh_token_ttl_secs));
    let access = format!("{ACCESS_TOKEN_PREFIX}{}", random_secret());
    let refresh = format!("{REFRESH_TOKEN_PREFIX}{}", random_secret());
    let refresh_sha256 = token_sha256(&refresh);
    grant.refresh_sha256 = refresh_sha256.clone();
    grant.expires_at = now + config.refresh_token_ttl_secs as i64 * 1_000_000;
    let access_record = TokenRecord {
        kind: TokenKind::Access,
        grant_id: grant.grant_id.clone(),
        client_id: grant.client_id.clone(),
        expires_at: now + config.access_token_ttl_secs as i64 * 1_000_000,
        rotated: false,
    };
    let refresh_record = TokenRecord { kind: TokenKind::Refresh, expires_at: grant.expires_at, ..access_record.clone() };
    let issue = Issue {
        grant: &grant,
        issued_at: now,
        access_sha256: &token_sha256(&access),
        access: &access_record,
        access_lifetime,
        refresh_sha256: &refresh_sha256,
        refresh: &refresh_record,
        refresh_lifetime,
        spent,
        keep_client,
    };
    inner.bounded(inner.readmodel.oauth().issue_tokens(&issue)).await?;
    Ok(serde_json::json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": config.access_token_ttl_secs,
        "refresh_token": refresh,
        "scope": grant.scope,
    })
    .to_string())
}

async fn redeem_code(state: &McpState, params: &Params, mcp_url: &str) -> Result<String, OAuthError> {
    let code = required(params, "code")?;
    let verifier = required(params, "code_verifier")?;
    let client_id = required(params, "client_id")?;
    let redirect_uri = param(params, "redirect_uri")?;
    let inner = &state.inner;
    let oauth = inner.readmodel.oauth();
    let registered = if cimd::is_metadata_url(client_id) {
        // Checked again (usually from the cache): a document gone bad stops new tokens.
        inner.cimd.client(client_id).await.map_err(OAuthError::InvalidClient)?;
        None
    } else {
        match inner.bounded(oauth.client(client_id)).await? {
            Some(client) => Some(client),
            None => return Err(OAuthError::InvalidClient("unknown client_id".into())),
        }
    };
    let code_sha256 = token_sha256(code);
    let Some(record) = inner.bounded(oauth.code(&code_sha256)).await? else {
        return Err(OAuthError::InvalidGrant("unknown or expired authorization code".into()));
    };
    if record.used {
        // RFC 6749 §4.1.2: a replayed code revokes what it issued.
        inner.bounded(oauth.revoke_grant(&record.grant_id)).await?;
        tracing::warn!(client_id = %record.client_id, grant_id = %record.grant_id, "authorization code replayed; grant revoked");
        return Err(OAuthError::InvalidGrant("authorization code already used; the tokens it issued are revoked".into()));
    }
    let now = state.now_micros();
    if record.expires_at <= now {
        return Err(OAuthError::InvalidGrant("authorization code expired".into()));
    }
    if record.client_id != client_id {
        return Err(OAuthError::InvalidGrant("the code was issued to another client".into()));
    }
    match redirect_uri {
        Some(uri) if uri == record.redirect_uri => {}
        None if !record.redirect_uri_given => {}
        _ => return Err(OAuthError::InvalidGrant("redirect_uri does not match the authorization request".into())),
    }
    if !verifier_well_formed(verifier) || s256(verifier) != record.code_challenge {
        return Err(OAuthError::InvalidGrant("code_verifier does not match the code_challenge".into()));
    }
    check_resource(params, record.resource.as_deref(), mcp_url)?;
    if !pat_alive(state, &record.pat_sha256).await? {
        return Err(OAuthError::InvalidGrant("the personal access token that approved this request was revoked".into()));
    }
    let grant = GrantRecord {
        grant_id: record.grant_id.clone(),
        client_id: record.client_id.clone(),
        account_id: record.account_id.clone(),
        pat_sha256: record.pat_sha256.clone(),
        pat_token_id: record.pat_token_id.clone(),
        scope: record.scope.clone(),
        refresh_sha256: String::new(),
        expires_at: 0,
        resource: record.resource.clone(),
    };
    // Only a request that passed every check may spend the code: a wrong verifier or
    // client must not burn (and so revoke) someone else's authorization.
    let lifetime = remaining(record.expires_at, now);
    if inner.bounded(oauth.spend_code(&code_sha256, lifetime)).await? == Spend::AlreadySpent {
        // A concurrent redemption of the same code: a reuse, which revokes the grant.
        inner.bounded(oauth.revoke_grant(&record.grant_id)).await?;
        tracing::warn!(client_id = %record.client_id, grant_id = %record.grant_id, "authorization code redeemed concurrently; grant revoked");
        return Err(OAuthError::InvalidGrant("authorization code already used; the tokens it issued are revoked".into()));
    }
    let (client_id, grant_id) = (grant.client_id.clone(), grant.grant_id.clone());
    // A registered client completed an authorization: it is kept from now on for the
    // long lifetime, in the same write as its tokens.
    let keep = registered.as_ref().map(|client| (client, Duration::from_secs(inner.config.client_ttl_secs)));
    let body = issue(state, grant, Spent::Code { code_sha256: &code_sha256, code: &record, lifetime }, keep).await?;
    tracing::info!(client_id = %client_id, grant_id = %grant_id, "oauth tokens issued");
    Ok(body)
}

async fn refresh(state: &McpState, params: &Params, mcp_url: &str) -> Result<String, OAuthError> {
    let refresh_token = required(params, "refresh_token")?;
    // Public clients identify themselves with client_id alone (OAuth 2.1 §4.3.1): without
    // it, whoever holds the token could use it.
    let client_id = required(params, "client_id")?;
    if let Some(scope) = param(params, "scope")? {
        if scope.split_whitespace().any(|scope| scope != SCOPE) {
            return Err(OAuthError::InvalidScope);
        }
    }
    let inner = &state.inner;
    let oauth = inner.readmodel.oauth();
    let refresh_sha256 = token_sha256(refresh_token);
    let record = match inner.bounded(oauth.token(&refresh_sha256)).await? {
        Some(record) if record.kind == TokenKind::Refresh => record,
        _ => return Err(OAuthError::InvalidGrant("unknown or expired refresh token".into())),
    };
    if client_id != record.client_id {
        return Err(OAuthError::InvalidGrant("the refresh token was issued to another client".into()));
    }
    let grant = inner.bounded(oauth.grant(&record.grant_id)).await?;
    let reused = record.rotated || grant.as_ref().is_some_and(|grant| grant.refresh_sha256 != refresh_sha256);
    if reused {
        inner.bounded(oauth.revoke_grant(&record.grant_id)).await?;
        tracing::warn!(client_id = %record.client_id, grant_id = %record.grant_id, "rotated refresh token presented; grant revoked");
        return Err(OAuthError::InvalidGrant("refresh token already used; the grant is revoked".into()));
    }
    let now = state.now_micros();
    if record.expires_at <= now {
        return Err(OAuthError::InvalidGrant("refresh token expired".into()));
    }
    let Some(grant) = grant else {
        return Err(OAuthError::InvalidGrant("the grant was revoked".into()));
    };
    check_resource(params, grant.resource.as_deref(), mcp_url)?;
    if !pat_alive(state, &grant.pat_sha256).await? {
        inner.bounded(oauth.revoke_grant(&grant.grant_id)).await?;
        return Err(OAuthError::InvalidGrant("the personal access token that approved this grant was revoked".into()));
    }
    // As a code: only a request that passed every check spends the refresh token, and
    // of concurrent uses of it at most one rotates it; the others are reuses.
    let lifetime = remaining(record.expires_at, now);
    if inner.bounded(oauth.spend_refresh_token(&refresh_sha256, lifetime)).await? == Spend::AlreadySpent {
        inner.bounded(oauth.revoke_grant(&grant.grant_id)).await?;
        tracing::warn!(client_id = %record.client_id, grant_id = %record.grant_id, "refresh token used concurrently; grant revoked");
        return Err(OAuthError::InvalidGrant("refresh token already used; the grant is revoked".into()));
    }
    issue(state, grant, Spent::RefreshToken { refresh_sha256: &refresh_sha256, token: &record, lifetime }, None).await
}

/// RFC 7009: 200 whether or not the token was known (§2.2: an invalid token is no
/// error). The client must name itself (`client_id`, `invalid_request` without it), and
/// a token issued to another client is refused (§2.1: `invalid_grant`, RFC 6749 §5.2)
/// and stays valid. A refresh token revokes its whole grant; an access token only itself.
pub async fn revoke(State(state): State<McpState>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match read(body) {
        Ok(body) => body,
        Err(error) => return error.into_response(),
    };
    let params = Params::parse(&body);
    let result: Result<(), OAuthError> = async {
        let token = required(&params, "token")?;
        let client_id = required(&params, "client_id")?;
        let inner = &state.inner;
        let oauth = inner.readmodel.oauth();
        let sha256 = token_sha256(token);
        let Some(record) = inner.bounded(oauth.token(&sha256)).await? else { return Ok(()) };
        if client_id != record.client_id {
            tracing::info!(client_id, "revocation of another client's token refused");
            return Err(OAuthError::InvalidGrant("the token was issued to another client".into()));
        }
        match record.kind {
            TokenKind::Refresh => inner.bounded(oauth.revoke_grant(&record.grant_id)).await?,
            TokenKind::Access => inner.bounded(oauth.revoke_access_token(&sha256)).await?,
        }
        tracing::info!(client_id = %record.client_id, grant_id = %record.grant_id, "oauth token revoked");
        Ok(())
    }
    .await;
    match result {
        Ok(()) => (StatusCode::OK, [(header::CACHE_CONTROL, "no-store")]).into_response(),
        Err(error) => error.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s256_is_base64url_of_the_sha256() {
        // Computed independently: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip("=")
        assert_eq!(s256("dBjftJeZ4CVP-mJ0kz23zMBNS9qgTlXkBJT3ZZbcoYh3yX8I4jqGGyDd"), "a064dqRsGufq6jEUNG7dO0chDTFt4KQD9PuATnU2N-c");
        assert!(verifier_well_formed("dBjftJeZ4CVP-mJ0kz23zMBNS9qgTlXkBJT3ZZbcoYh3yX8I4jqGGyDd"));
        assert!(!verifier_well_formed("short"));
    }
}
