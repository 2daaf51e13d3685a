//! Dynamic client registration (RFC 7591) for public clients. Redirect URIs must be
//! https, or http on a loopback host (127.0.0.1, [::1], localhost; any port, RFC 8252),
//! without a fragment. Every client is registered as public (`token_endpoint_auth_method`
//! "none", no secret) whatever it asked for: RFC 7591 §3.2.1 lets the server replace
//! requested values, and the response tells the client what it got.
//!
//! `application_type` (OIDC Dynamic Client Registration §2, which the 2026-07-28
//! revision asks clients to send) is `web` or `native`. A `web` client's redirect URIs
//! must be https on a host other than a loopback one; a `native` client may also use
//! http on a loopback host. Custom URI schemes are refused for both (the redirect rule
//! above). When the client sends none, nothing more is enforced than the redirect rule
//! (clients of earlier revisions never send it), and the type is recorded and returned
//! as `native` when a redirect URI is on a loopback host, `web` otherwise.
//!
//! Registration is the one write anyone may make without a token, so what it stores is
//! bounded: a body of at most [`MAX_BODY_BYTES`] (413 with an OAuth error body past
//! it), 1 to [`MAX_REDIRECT_URIS`] redirect URIs of at most [`MAX_URI_BYTES`] bytes each, a
//! `client_name` of at most [`MAX_NAME_CHARS`] characters (stored without control and
//! bidirectional-formatting characters, `page::display_name`); nothing else of the
//! document is kept. Registrations are counted per client address by the shared
//! [`recap_access::Limiter`] (`--mcp-registrations-per-minute`,
//! `--mcp-registrations-per-month`; 429 past them), and a client is kept for
//! `--mcp-unconfirmed-client-ttl-secs` (a day) until one of its codes is redeemed, which
//! keeps it for `--mcp-client-ttl-secs` (`token.rs`).

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use std::time::Duration;

use recap_access::{Limits, Verdict};
use recap_readmodel::oauth::ClientRecord;
use recap_schemas::Timestamp;

use crate::oauth::error::OAuthError;
use crate::oauth::page;
use crate::oauth::secrets::{random_id, SCOPE};
use crate::state::McpState;

/// The largest registration document read; a larger body is 413.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Redirect URIs one registration may name.
pub const MAX_REDIRECT_URIS: usize = 5;
/// Bytes of one registered redirect URI.
pub const MAX_URI_BYTES: usize = 512;
/// Characters of a `client_name`.
pub const MAX_NAME_CHARS: usize = 200;
/// Bytes of any redirect URI, registered or named by a metadata document.
const MAX_ANY_URI_BYTES: usize = 2000;

#[derive(Deserialize)]
struct Metadata {
    redirect_uris: Option<Value>,
    client_name: Option<Value>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
    scope: Option<String>,
    application_type: Option<Value>,
}

/// Whether a redirect URI may be registered (and so later redirected to).
pub fn redirect_uri_allowed(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_ANY_URI_BYTES {
        return Err("redirect URI too long".into());
    }
    let parsed = url::Url::parse(uri).map_err(|_| format!("redirect URI {uri:?} is not an absolute URL"))?;
    if parsed.fragment().is_some() {
        return Err("a redirect URI must not have a fragment".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("a redirect URI must not carry credentials".into());
    }
    match (parsed.scheme(), parsed.host()) {
        ("https", Some(_)) => Ok(()),
        ("http", Some(url::Host::Ipv4(address))) if address.is_loopback() => Ok(()),
        ("http", Some(url::Host::Ipv6(address))) if address.is_loopback() => Ok(()),
        ("http", Some(url::Host::Domain(domain))) if domain.eq_ignore_ascii_case("localhost") => Ok(()),
        _ => Err(format!("redirect URI {uri:?} must use https, or http on a loopback host")),
    }
}

/// Whether an authorization request's redirect URI is the registered one: the same
/// string, or, for a loopback redirect URI (http on 127.0.0.1, [::1] or localhost), the
/// same but for the port, which a native app picks when it starts listening (RFC 8252
/// §7.3, OAuth 2.1 §8.4.2). Scheme, host, path and query must still be equal.
pub fn redirect_uri_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(mut registered), Ok(mut requested)) = (url::Url::parse(registered), url::Url::parse(requested)) else { return false };
    if registered.scheme() != "http" || !on_loopback(registered.as_str()) || requested.fragment().is_some() {
        return false;
    }
    // Both ports dropped (None is the default port 80 for http); everything else must
    // be the same, in the same spelling.
    if registered.set_port(None).is_err() || requested.set_port(None).is_err() {
        return false;
    }
    registered == requested && registered.host_str() == requested.host_str()
}

/// The client address registrations are counted under: the TCP peer's, or with
/// `--mcp-trusted-proxy-hops` n > 0, the n-th address from the right of
/// `X-Forwarded-For` (the one the outermost trusted proxy saw). An IPv6 address counts
/// as its /64, which one host usually holds whole. `unknown` when no address is known
/// (a router served without connection info, or a header with fewer addresses than the
/// proxies that must have added them): then such requests share one count.
pub fn client_address(request: &Request, trusted_proxy_hops: u8) -> String {
    let address = peer_or_forwarded(request, trusted_proxy_hops);
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let network = std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1));
            format!("{network}/64")
        }
        Ok(std::net::IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(address, |v4| v4.to_string()),
        _ => address,
    }
}

fn peer_or_forwarded(request: &Request, trusted_proxy_hops: u8) -> String {
    if trusted_proxy_hops > 0 {
        let forwarded: Vec<&str> = request
            .headers()
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .filter(|address| !address.is_empty())
            .collect();
        return forwarded.len().checked_sub(usize::from(trusted_proxy_hops)).map_or_else(|| "unknown".to_string(), |index| forwarded[index].to_string());
    }
    request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or_else(|| "unknown".to_string(), |connection| connection.0.ip().to_string())
}

pub async fn register(State(state): State<McpState>, request: Request) -> Response {
    let address = client_address(&request, state.inner.config.trusted_proxy_hops);
    let body = match axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await {
        Ok(body) => body,
        // Over the bound, or cut short (broken off, or not in time: the HTTP layer in
        // front then answers 408 in this shape).
        Err(error) if is_length_limit(&error) => {
            return OAuthError::TooLarge(format!("a registration document may be {MAX_BODY_BYTES} bytes at most")).into_response()
        }
        Err(_) => return OAuthError::InvalidRequest("the registration document could not be read".into()).into_response(),
    };
    match register_client(&state, &body, &address).await {
        Ok(document) => {
            (StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], document.to_string()).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// The registration document, or what is wrong with it, said in the document's terms
/// rather than in those of the type it is read into. A member given twice is refused:
/// which of its values was meant is unknowable.
fn read_metadata(body: &[u8]) -> Result<Metadata, String> {
    let not_json = |error: serde_json::Error| format!("the body is not JSON ({error})");
    if body.trim_ascii_start().first() != Some(&b'{') {
        serde_json::from_slice::<serde::de::IgnoredAny>(body).map_err(not_json)?;
        return Err("the body must be a JSON object of client metadata".into());
    }
    serde_json::from_slice(body).map_err(|error| match error.classify() {
        serde_json::error::Category::Data if error.to_string().starts_with("duplicate field") => {
            format!("a member of the document is given more than once ({error})")
        }
        serde_json::error::Category::Data => "grant_types and response_types must be arrays of strings, and scope a string".into(),
        _ => not_json(error),
    })
}

/// Whether a body error is the bound being passed, found anywhere in its chain.
fn is_length_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Counts one registration from `address`; refused past the configured limits.
async fn admit(state: &McpState, address: &str) -> Result<(), OAuthError> {
    let config = &state.inner.config;
    let limits = Limits { per_minute: config.registrations_per_minute, period_quota: config.registrations_per_month, billing_cycle_anchor: Timestamp(0) };
    let decision = state.limiter().admit(&format!("mcp_register:{address}"), &limits).await.map_err(|error| {
        tracing::warn!(%error, "registration limiter unavailable");
        OAuthError::Store(recap_readmodel::StoreError::Unavailable(error.to_string()))
    })?;
    match decision.verdict {
        Verdict::Admitted => Ok(()),
        Verdict::RateLimited { retry_after_seconds } => {
            tracing::info!(address, "oauth registration rate-limited");
            Err(OAuthError::RateLimited { retry_after_seconds, description: format!("at most {} registrations a minute from one address", limits.per_minute) })
        }
        Verdict::QuotaExhausted => {
            tracing::info!(address, "oauth registration quota used up");
            let retry_after_seconds = (decision.usage.period.end.micros() - state.now_micros()).max(1_000_000).unsigned_abs().div_ceil(1_000_000);
            Err(OAuthError::RateLimited { retry_after_seconds, description: format!("at most {} registrations a month from one address", limits.period_quota) })
        }
    }
}

async fn register_client(state: &McpState, body: &[u8], address: &str) -> Result<Value, OAuthError> {
    let metadata = read_metadata(body).map_err(OAuthError::InvalidClientMetadata)?;
    let redirect_uris: Vec<String> = match metadata.redirect_uris {
        Some(Value::Array(uris)) if !uris.is_empty() && uris.len() <= MAX_REDIRECT_URIS => uris
            .into_iter()
            .map(|uri| match uri {
                Value::String(uri) => Ok(uri),
                _ => Err(OAuthError::InvalidRedirectUri("redirect_uris must be strings".into())),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(OAuthError::InvalidRedirectUri(format!("redirect_uris must be an array of 1 to {MAX_REDIRECT_URIS} URIs"))),
    };
    for uri in &redirect_uris {
        if uri.len() > MAX_URI_BYTES {
            return Err(OAuthError::InvalidRedirectUri(format!("a redirect URI may be {MAX_URI_BYTES} bytes at most")));
        }
        redirect_uri_allowed(uri).map_err(OAuthError::InvalidRedirectUri)?;
    }
    let client_name = match metadata.client_name {
        None | Some(Value::Null) => None,
        // Kept as it may be shown: no control or bidirectional-formatting characters.
        Some(Value::String(name)) if name.chars().count() <= MAX_NAME_CHARS => page::display_name(&name),
        Some(_) => return Err(OAuthError::InvalidClientMetadata(format!("client_name must be a string of at most {MAX_NAME_CHARS} characters"))),
    };
    if let Some(grant_types) = &metadata.grant_types {
        if grant_types.iter().any(|grant| grant != "authorization_code" && grant != "refresh_token") {
            return Err(OAuthError::InvalidClientMetadata("grant_types may contain authorization_code and refresh_token only".into()));
        }
    }
    if let Some(response_types) = &metadata.response_types {
        if response_types.iter().any(|response| response != "code") {
            return Err(OAuthError::InvalidClientMetadata("response_types may contain code only".into()));
        }
    }
    if let Some(scope) = &metadata.scope {
        if scope.split_whitespace().any(|scope| scope != SCOPE) {
            return Err(OAuthError::InvalidClientMetadata("the only scope is svc:read".into()));
        }
    }
    let application_type = match metadata.application_type {
        None | Some(Value::Null) => {
            if redirect_uris.iter().any(|uri| on_loopback(uri)) {
                "native"
            } else {
                "web"
            }
        }
        Some(Value::String(kind)) if kind == "native" => "native",
        Some(Value::String(kind)) if kind == "web" => {
            // Redirect URIs already passed the rule above: only a loopback one may be http.
            if let Some(uri) = redirect_uris.iter().find(|uri| on_loopback(uri)) {
                return Err(OAuthError::InvalidRedirectUri(format!(
                    "a web client's redirect URIs must use https on a host other than a loopback one ({uri:?}); register it with application_type native"
                )));
            }
            "web"
        }
        Some(_) => return Err(OAuthError::InvalidClientMetadata("application_type must be web or native".into())),
    };
    // Counted once the document is known to be valid: a client that fixes a refused
    // document is not held back by its mistakes.
    admit(state, address).await?;
    let issued_at = state.now_micros() / 1_000_000;
    let client = ClientRecord {
        client_id: random_id("mcpc_"),
        client_name,
        redirect_uris,
        client_id_issued_at: issued_at,
        application_type: Some(application_type.to_string()),
    };
    let inner = &state.inner;
    // Kept for a day until a code of it is redeemed (`token.rs` keeps it longer then).
    inner.bounded(inner.readmodel.oauth().register_client(&client, Duration::from_secs(inner.config.unconfirmed_client_ttl_secs))).await?;
    tracing::info!(client_id = %client.client_id, "oauth client registered");
    Ok(json!({
        "client_id": client.client_id,
        "client_id_issued_at": issued_at,
        "client_name": client.client_name,
        "redirect_uris": client.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": SCOPE,
        "application_type": application_type,
    }))
}

/// Whether a (valid) redirect URI points at this machine: `localhost`, any address of
/// 127.0.0.0/8, or `::1`.
pub(crate) fn on_loopback(uri: &str) -> bool {
    match url::Url::parse(uri).ok().as_ref().and_then(url::Url::host) {
        Some(url::Host::Ipv4(address)) => address.is_loopback(),
        Some(url::Host::Ipv6(address)) => address.is_loopback(),
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirect_uris_are_https_or_loopback_http() {
        assert!(redirect_uri_allowed("https://client.example.com/callback").is_ok());
        assert!(redirect_uri_allowed("http://127.0.0.1:43123/callback").is_ok());
        assert!(redirect_uri_allowed("http://[::1]:8080/cb").is_ok());
        assert!(redirect_uri_allowed("http://localhost/cb").is_ok());
        assert!(redirect_uri_allowed("http://client.example.com/cb").is_err());
        assert!(redirect_uri_allowed("https://client.example.com/cb#frag").is_err());
        assert!(redirect_uri_allowed("javascript:alert(1)").is_err());
        assert!(redirect_uri_allowed("/relative").is_err());
    }

    #[test]
    fn loopback_redirect_uris_match_on_any_port_and_nothing_else_does() {
        for (registered, requested) in [
            ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/cb"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:8888/cb"),
            ("http://[::1]:9999/cb?x=1", "http://[::1]:1/cb?x=1"),
            ("http://localhost:9999/cb", "http://localhost:51000/cb"),
            ("https://client.example.com/cb", "https://client.example.com/cb"),
        ] {
            assert!(redirect_uri_matches(registered, requested), "{registered} {requested}");
        }
        for (registered, requested) in [
            ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/cb/"),
            ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/Cb"),
            ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/cb?x=1"),
            ("http://127.0.0.1:9999/cb", "http://127.0.0.1:8888/cb#f"),
            ("http://127.0.0.1:9999/cb", "http://localhost:9999/cb"),
            ("http://127.0.0.1:9999/cb", "http://[::1]:9999/cb"),
            ("http://127.0.0.1:9999/cb", "https://127.0.0.1:9999/cb"),
            ("http://127.0.0.1:9999/cb", "http://127.0.0.2:9999/cb"),
            ("https://client.example.com:443/cb", "https://client.example.com:8443/cb"),
            ("https://127.0.0.1:9999/cb", "https://127.0.0.1:8888/cb"),
        ] {
            assert!(!redirect_uri_matches(registered, requested), "{registered} {requested}");
        }
    }

    fn address_of(peer: Option<&str>, forwarded: Option<&str>, hops: u8) -> String {
        let mut request = axum::http::Request::post("/register");
        if let Some(forwarded) = forwarded {
            request = request.header("x-forwarded-for", forwarded);
        }
        let mut request = request.body(axum::body::Body::empty()).unwrap();
        if let Some(peer) = peer {
            request.extensions_mut().insert(axum::extract::ConnectInfo(peer.parse::<std::net::SocketAddr>().unwrap()));
        }
        client_address(&request, hops)
    }

    #[test]
    fn registrations_count_under_the_peer_or_the_trusted_forwarded_address() {
        assert_eq!(address_of(Some("192.0.2.1:5000"), Some("198.51.100.1"), 0), "192.0.2.1", "X-Forwarded-For ignored without trusted proxies");
        assert_eq!(address_of(None, None, 0), "unknown");
        assert_eq!(address_of(Some("10.0.0.2:5000"), Some("198.51.100.1, 203.0.113.7"), 1), "203.0.113.7");
        assert_eq!(address_of(Some("10.0.0.2:5000"), Some("198.51.100.1, 203.0.113.7, 10.0.0.9"), 2), "203.0.113.7");
        assert_eq!(address_of(Some("10.0.0.2:5000"), Some("203.0.113.7"), 2), "unknown", "fewer addresses than trusted proxies");
        assert_eq!(address_of(Some("10.0.0.2:5000"), None, 1), "unknown");
        assert_eq!(address_of(Some("[2001:db8:1:2:aaaa::1]:5000"), None, 0), "2001:db8:1:2::/64");
        assert_eq!(address_of(Some("[2001:db8:1:2:bbbb::9]:5000"), None, 0), "2001:db8:1:2::/64", "one /64, one count");
        assert_eq!(address_of(Some("[::ffff:192.0.2.1]:5000"), None, 0), "192.0.2.1");
    }
}
