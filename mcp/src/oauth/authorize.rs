//! The authorization endpoint (RFC 6749 §4.1 with PKCE S256 required, RFC 9207 `iss`).
//! GET validates the request and shows the consent page; POST re-validates (the
//! parameters travel in hidden fields: no server-side session), checks the personal
//! access token the user typed, and redirects to the registered redirect URI with a
//! single-use code. Following §4.1.2.1, an unknown client or a redirect URI that is not
//! one the client registered is shown as an error page and never redirected to. A
//! registered redirect URI is not trusted either until the user has acted on the page:
//! anyone may register a client, so redirecting an invalid request at once would make
//! this server an open redirector (RFC 9700 §4.11.2). Every error found before the user
//! approves or denies is therefore an error page too, naming the OAuth error and
//! offering a link back to the client (with `error`, `state` and `iss`) that the user may
//! follow; only the user's own decision (approve, or deny: `access_denied`) redirects.
//! Redirect URIs are compared as exact strings, except that a loopback redirect URI may
//! name any port (RFC 8252 §7.3; `register::redirect_uri_matches`). A `client_id` that
//! is a URL is a Client ID Metadata Document (`cimd.rs`): its redirect URIs are the
//! document's, and a document that cannot be used is an error page (`invalid_client`).
//! A `resource` (RFC 8707) must name this server's MCP endpoint (`invalid_target`
//! otherwise); whether or not it is given, the code, and the grant it creates, are for
//! that endpoint as this request reached it, and its tokens are good there only.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

use recap_access::{authenticate_pat, check_plan, token_sha256, AuthError, Feature};
use recap_readmodel::oauth::{ClientRecord, CodeRecord};
use recap_readmodel::StoreError;

use crate::error::StoreFailure;
use crate::oauth::register::redirect_uri_matches;
use crate::oauth::secrets::{random_id, random_secret, SCOPE};
use crate::oauth::{cimd, page};
use crate::state::McpState;
use crate::urls::{names_resource, PublicUrls};

/// Parameters of a form or query string. A repeated parameter is an error (RFC 6749 §3.1).
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(encoded: &[u8]) -> Params {
        Params(url::form_urlencoded::parse(encoded).into_owned().collect())
    }

    pub fn get(&self, name: &str) -> Result<Option<&str>, String> {
        let mut found = self.0.iter().filter(|(key, _)| key == name).map(|(_, value)| value.as_str());
        let first = found.next();
        if found.next().is_some() {
            return Err(format!("{name} is repeated"));
        }
        Ok(first.filter(|value| !value.is_empty()))
    }
}

/// A valid authorization request.
struct Request {
    client: ClientRecord,
    redirect_uri: String,
    redirect_uri_given: bool,
    state: Option<String>,
    code_challenge: String,
    resource: Option<String>,
}

enum Refusal {
    /// Shown, never redirected.
    Page(StatusCode, String),
    /// An error in a request for a known client and redirect URI, found before the user
    /// acted: shown as a page, with a link the user may follow back to the client.
    Shown { redirect_uri: String, error: &'static str, description: String, state: Option<String> },
    /// Redirected to the (verified) redirect URI: only after the user's decision.
    Redirect { redirect_uri: String, error: &'static str, description: String, state: Option<String> },
}

/// `to` with `pairs` appended to its query.
fn with_query(to: &str, pairs: &[(&str, &str)]) -> Option<String> {
    let mut url = url::Url::parse(to).ok()?;
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in pairs {
            query.append_pair(key, value);
        }
    }
    Some(url.to_string())
}

fn redirect(to: &str, pairs: &[(&str, &str)], status: StatusCode) -> Response {
    let Some(location) = with_query(to, pairs) else {
        // Registered URIs were parsed at registration: this cannot happen.
        return page::error(StatusCode::BAD_REQUEST, "the redirect URI is not valid");
    };
    (status, [(header::LOCATION, location), (header::CACHE_CONTROL, "no-store".to_string())]).into_response()
}

fn refuse(refusal: Refusal, issuer: &str) -> Response {
    let error_pairs = |error: &'static str, description: &str, state: &Option<String>| {
        let mut pairs = vec![("error", error.to_string()), ("error_description", description.to_string())];
        if let Some(state) = state {
            pairs.push(("state", state.clone()));
        }
        pairs.push(("iss", issuer.to_string()));
        pairs
    };
    match refusal {
        Refusal::Page(status, message) => page::error(status, &message),
        Refusal::Shown { redirect_uri, error, description, state } => {
            let pairs = error_pairs(error, &description, &state);
            let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(key, value)| (*key, value.as_str())).collect();
            let back = with_query(&redirect_uri, &borrowed);
            let host = url::Url::parse(&redirect_uri).ok().and_then(|url| url.host_str().map(str::to_string)).unwrap_or_default();
            page::request_error(StatusCode::BAD_REQUEST, error, &description, back.as_deref().map(|link| (link, host.as_str())))
        }
        Refusal::Redirect { redirect_uri, error, description, state } => {
            let pairs = error_pairs(error, &description, &state);
            let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(key, value)| (*key, value.as_str())).collect();
            redirect(&redirect_uri, &borrowed, StatusCode::FOUND)
        }
    }
}

/// The status and message of a page answering a store failure, logged here, once: 503
/// with `unavailable` when the store did not answer or its data did not read back, 500
/// when it refused a call as a misuse (a defect of this server).
fn store_failure_page(error: &StoreError, unavailable: &'static str) -> (StatusCode, &'static str) {
    match StoreFailure::logged(error, "mcp_oauth") {
        StoreFailure::Defect => (StatusCode::INTERNAL_SERVER_ERROR, "The service failed to complete the request."),
        StoreFailure::Unavailable | StoreFailure::Unreadable => (StatusCode::SERVICE_UNAVAILABLE, unavailable),
    }
}

async fn validate(state: &McpState, params: &Params, mcp_url: &str) -> Result<Request, Refusal> {
    // Shown, never redirected, each naming its OAuth error code (RFC 6749 §4.1.2.1: the
    // user is told, the client is not).
    let bad_page = |code: &str, message: String| Refusal::Page(StatusCode::BAD_REQUEST, format!("{code}: {message}"));
    let invalid_request = |message: String| bad_page("invalid_request", message);
    let client_id = params.get("client_id").map_err(invalid_request)?.ok_or_else(|| invalid_request("client_id is missing".into()))?;
    let inner = &state.inner;
    let registered = if cimd::is_metadata_url(client_id) {
        // The document's redirect URIs are not trusted until it is checked: any refusal
        // is shown, never redirected.
        match inner.cimd.client(client_id).await {
            Ok(client) => Ok(Some(client)),
            Err(reason) => return Err(bad_page("invalid_client", reason)),
        }
    } else {
        inner.bounded(inner.readmodel.oauth().client(client_id)).await
    };
    let client = match registered {
        Ok(Some(client)) => client,
        Ok(None) => return Err(bad_page("invalid_client", "unknown client_id: register the client first".into())),
        Err(error) => {
            let (status, message) = store_failure_page(&error, "the service is unavailable; retry shortly");
            return Err(Refusal::Page(status, message.into()));
        }
    };
    let requested = params.get("redirect_uri").map_err(invalid_request)?;
    let (redirect_uri, redirect_uri_given) = match requested {
        // Exact string comparison (no normalisation, no path leeway), but any port on a
        // loopback host.
        Some(uri) if client.redirect_uris.iter().any(|registered| redirect_uri_matches(registered, uri)) => (uri.to_string(), true),
        Some(_) => return Err(invalid_request("redirect_uri is not one the client registered".into())),
        None if client.redirect_uris.len() == 1 => (client.redirect_uris[0].clone(), false),
        None => return Err(invalid_request("redirect_uri is missing".into())),
    };
    // From here on errors name the redirect URI, but are shown, not redirected: the
    // user has not acted yet (RFC 9700 §4.11.2).
    let state_param = params.get("state").ok().flatten().map(str::to_string);
    let back = |error: &'static str, description: &str| Refusal::Shown {
        redirect_uri: redirect_uri.clone(),
        error,
        description: description.to_string(),
        state: state_param.clone(),
    };
    for name in ["response_type", "code_challenge", "code_challenge_method", "scope", "state", "resource"] {
        if let Err(message) = params.get(name) {
            return Err(back("invalid_request", &message));
        }
    }
    match params.get("response_type").ok().flatten() {
        Some("code") => {}
        None => return Err(back("invalid_request", "response_type is missing")),
        Some(_) => return Err(back("unsupported_response_type", "response_type must be code")),
    }
    let Some(code_challenge) = params.get("code_challenge").ok().flatten() else {
        return Err(back("invalid_request", "PKCE is required: code_challenge is missing"));
    };
    if params.get("code_challenge_method").ok().flatten() != Some("S256") {
        return Err(back("invalid_request", "code_challenge_method must be S256"));
    }
    // BASE64URL(SHA256(verifier)) is always 43 characters.
    if code_challenge.len() != 43 || !code_challenge.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_') {
        return Err(back("invalid_request", "code_challenge is not a base64url SHA-256"));
    }
    if let Some(scope) = params.get("scope").ok().flatten() {
        if scope.split_whitespace().any(|scope| scope != SCOPE) {
            return Err(back("invalid_scope", "the only scope is svc:read"));
        }
    }
    if let Some(resource) = params.get("resource").ok().flatten() {
        if !names_resource(resource, mcp_url) {
            return Err(back("invalid_target", &format!("the only resource is {mcp_url}")));
        }
    }
    Ok(Request {
        client,
        redirect_uri,
        redirect_uri_given,
        state: state_param,
        code_challenge: code_challenge.to_string(),
        resource: params.get("resource").ok().flatten().map(str::to_string),
    })
}

fn hidden_fields(request: &Request) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("client_id", request.client.client_id.clone()),
        ("response_type", "code".to_string()),
        ("code_challenge", request.code_challenge.clone()),
        ("code_challenge_method", "S256".to_string()),
        ("scope", SCOPE.to_string()),
    ];
    if request.redirect_uri_given {
        fields.push(("redirect_uri", request.redirect_uri.clone()));
    }
    if let Some(state) = &request.state {
        fields.push(("state", state.clone()));
    }
    if let Some(resource) = &request.resource {
        fields.push(("resource", resource.clone()));
    }
    fields
}

fn consent(status: StatusCode, request: &Request, error: Option<&str>) -> Response {
    let fields = hidden_fields(request);
    let borrowed: Vec<(&str, &str)> = fields.iter().map(|(name, value)| (*name, value.as_str())).collect();
    // Cleaned again here: records registered before names were cleaned, and names of
    // metadata documents, reach the page too.
    let name = request.client.client_name.as_deref().and_then(page::display_name).unwrap_or_else(|| request.client.client_id.clone());
    let redirect_host = url::Url::parse(&request.redirect_uri).ok().and_then(|url| url.host_str().map(str::to_string)).unwrap_or_default();
    let publisher = cimd::is_metadata_url(&request.client.client_id)
        .then(|| url::Url::parse(&request.client.client_id).ok().and_then(|url| url.host_str().map(str::to_string)))
        .flatten();
    let local = super::register::on_loopback(&request.redirect_uri);
    page::consent(status, &name, publisher.as_deref(), &redirect_host, local, &borrowed, error)
}

pub async fn show(State(state): State<McpState>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let urls = PublicUrls::of(&state.inner.config, &headers);
    let params = Params::parse(query.unwrap_or_default().as_bytes());
    match validate(&state, &params, &urls.mcp_url).await {
        Ok(request) => consent(StatusCode::OK, &request, None),
        Err(refusal) => refuse(refusal, urls.issuer()),
    }
}

pub async fn approve(State(state): State<McpState>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    // A form that could not be read names no redirect URI to trust: an error page, as
    // every other refusal before the user's decision is, never axum's plain text.
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let description = format!("the authorization form may be {} bytes at most", crate::MAX_BODY_BYTES);
            return page::request_error(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request", &description, None);
        }
        Err(_) => return page::request_error(StatusCode::BAD_REQUEST, "invalid_request", "the authorization form could not be read", None),
    };
    let urls = PublicUrls::of(&state.inner.config, &headers);
    let params = Params::parse(&body);
    let request = match validate(&state, &params, &urls.mcp_url).await {
        Ok(request) => request,
        Err(refusal) => return refuse(refusal, urls.issuer()),
    };
    let back = |error: &'static str, description: &str| Refusal::Redirect {
        redirect_uri: request.redirect_uri.clone(),
        error,
        description: description.to_string(),
        state: request.state.clone(),
    };
    // Only the page's own buttons decide: a decision given twice is refused as any
    // repeated parameter is, and a form naming neither button (none, or another value)
    // is shown again, never taken as an approval.
    match params.get("decision") {
        Ok(Some("approve")) => {}
        Ok(Some("deny")) => return refuse(back("access_denied", "the user denied the request"), urls.issuer()),
        Ok(_) => return consent(StatusCode::BAD_REQUEST, &request, Some("Choose Approve or Deny.")),
        Err(description) => return page::request_error(StatusCode::BAD_REQUEST, "invalid_request", &description, None),
    }
    let Some(pat) = params.get("pat").ok().flatten().map(str::trim) else {
        return consent(StatusCode::BAD_REQUEST, &request, Some("Enter a personal access token."));
    };
    let inner = &state.inner;
    let caller = match inner.bounded(async { Ok(authenticate_pat(&inner.readmodel, pat).await) }).await {
        Ok(Ok(caller)) => caller,
        Ok(Err(AuthError::Unauthorized)) => return consent(StatusCode::UNAUTHORIZED, &request, Some("That is not a valid personal access token.")),
        Ok(Err(AuthError::TokenRevoked)) => return consent(StatusCode::UNAUTHORIZED, &request, Some("That personal access token was revoked.")),
        Ok(Err(AuthError::Store(error))) | Err(error) => {
            let (status, message) = store_failure_page(&error, "The service could not check the token; retry shortly.");
            return consent(status, &request, Some(message));
        }
    };
    if check_plan(&inner.plans, &caller.account, Feature::Mcp).is_err() {
        return consent(StatusCode::PAYMENT_REQUIRED, &request, Some("Your plan does not include MCP access."));
    }
    let code = random_secret();
    let lifetime = Duration::from_secs(inner.config.code_ttl_secs);
    let record = CodeRecord {
        client_id: request.client.client_id.clone(),
        redirect_uri: request.redirect_uri.clone(),
        redirect_uri_given: request.redirect_uri_given,
        code_challenge: request.code_challenge.clone(),
        scope: SCOPE.to_string(),
        account_id: caller.account_id.clone(),
        pat_sha256: token_sha256(pat),
        pat_token_id: caller.token_id.clone(),
        grant_id: random_id("grt_"),
        expires_at: state.now_micros() + inner.config.code_ttl_secs as i64 * 1_000_000,
        used: false,
        resource: Some(urls.mcp_url.clone()),
    };
    if let Err(error) = inner.bounded(inner.readmodel.oauth().save_code(&token_sha256(&code), &record, lifetime)).await {
        let (status, message) = store_failure_page(&error, "The service is unavailable; retry shortly.");
        return consent(status, &request, Some(message));
    }
    tracing::info!(client_id = %record.client_id, account_id = %record.account_id, pat_token_id = %record.pat_token_id, "oauth authorization approved");
    let mut pairs = vec![("code", code.as_str())];
    if let Some(state) = &request.state {
        pairs.push(("state", state));
    }
    pairs.push(("iss", urls.issuer()));
    // 303: the browser follows a POST's redirect with a GET.
    redirect(&request.redirect_uri, &pairs, StatusCode::SEE_OTHER)
}
