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

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use std::time::Duration;

use recap_readmodel::oauth::ClientRecord;

use crate::oauth::error::OAuthError;
use crate::oauth::page;
use crate::oauth::secrets::{random_id, SCOPE};
use crate::state::McpState;

const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_CHARS: usize = 2000;
const MAX_NAME_CHARS: usize = 200;

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
    if uri.len() > MAX_URI_CHARS {
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

pub async fn register(State(state): State<McpState>, body: Bytes) -> Response {
    match register_client(&state, &body).await {
        Ok(document) => {
            (StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], document.to_string()).into_response()
        }
        Err(error) => error.into_response(),
    }
}

async fn register_client(state: &McpState, body: &[u8]) -> Result<Value, OAuthError> {
    let metadata: Metadata = serde_json::from_slice(body)
        .map_err(|error| OAuthError::InvalidClientMetadata(format!("the body must be a JSON object of client metadata: {error}")))?;
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
    let issued_at = state.now_micros() / 1_000_000;
    let client = ClientRecord {
        client_id: random_id("mcpc_"),
        client_name,
        redirect_uris,
        client_id_issued_at: issued_at,
        application_type: Some(application_type.to_string()),
    };
    let inner = &state.inner;
    inner.bounded(inner.readmodel.oauth().register_client(&client, Duration::from_secs(inner.config.client_ttl_secs))).await?;
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

/// Whether a (valid) redirect URI points at this machine.
fn on_loopback(uri: &str) -> bool {
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
}
