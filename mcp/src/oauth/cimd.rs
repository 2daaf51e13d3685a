//! Client ID Metadata Documents (MCP 2026-07-28 client registration,
//! draft-ietf-oauth-client-id-metadata-document): a `client_id` that is an `https` URL
//! names the client's metadata, which this server fetches and checks instead of
//! looking the client up in the store. The fetch points at a URL anyone can choose, so
//! it is bounded the way webhook deliveries are:
//!
//! - the URL must be `https`, have a path, no userinfo, no fragment and be in normal
//!   form (no `.`/`..` segments: what `url` normalises must equal what was sent);
//! - the host is resolved once and every address it resolves to must be public
//!   ([`recap_readmodel::net::forbidden`]); the connection goes to a checked address;
//! - `GET` with `Accept: application/json`; only a 200 counts, a 3xx is not followed;
//! - at most [`MAX_DOCUMENT_BYTES`] of body, and one deadline for resolving,
//!   connecting, TLS and the whole answer (`--mcp-cimd-timeout-ms`, 5 s by default);
//! - TLS by rustls with the Mozilla roots (plus the CA certificates of
//!   `--mcp-cimd-extra-ca-file`, development and tests only, or roots a test adds);
//! - at most 32 fetches at once per process; more wait within their deadline.
//!
//! `--mcp-cimd-allow-insecure` (development and tests only) also allows `http` and
//! loopback or private addresses. A valid document is kept in this process for the
//! `Cache-Control: max-age` it came with (5 minutes when absent, 24 hours at most, not
//! at all with `no-store`, `no-cache` or `max-age=0`); a failure is never kept.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use recap_readmodel::oauth::ClientRecord;
use serde_json::Value;
use tokio::net::TcpStream;

use crate::config::McpConfig;
use crate::oauth::register::redirect_uri_allowed;

/// The draft's recommended maximum size of a metadata document.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// How long a document is kept when its answer says nothing.
pub const DEFAULT_CACHE: Duration = Duration::from_secs(300);
/// The longest a document is kept, whatever its answer says.
pub const MAX_CACHE: Duration = Duration::from_secs(24 * 3600);
/// Documents kept at most; past it, expired ones go, then all.
const MAX_ENTRIES: usize = 10_000;
/// Fetches in flight at once in a process; more wait (within their deadline), so that
/// a burst of authorization requests naming fresh URLs cannot open connections without
/// bound.
const MAX_CONCURRENT_FETCHES: usize = 32;
const MAX_URL_CHARS: usize = 2000;
const MAX_NAME_CHARS: usize = 200;

/// Whether a `client_id` names a metadata document rather than a registered client
/// (registered ids are `mcpc_…`, never a URL).
pub fn is_metadata_url(client_id: &str) -> bool {
    let lower = client_id.get(..8).unwrap_or(client_id).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

struct Cached {
    client: ClientRecord,
    until: Instant,
}

/// Fetches, checks and keeps metadata documents. One per process (in [`crate::McpState`]).
pub struct Cimd {
    allow_insecure: bool,
    timeout: Duration,
    tls: tokio_rustls::TlsConnector,
    cache: Mutex<HashMap<String, Cached>>,
    fetches: tokio::sync::Semaphore,
}

impl Cimd {
    pub fn new(config: &McpConfig) -> Cimd {
        let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        for der in &config.cimd_extra_roots {
            if let Err(error) = roots.add(rustls::pki_types::CertificateDer::from(der.clone())) {
                tracing::warn!(%error, "an extra root certificate for metadata documents was not usable");
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // The safe default protocol versions of a built-in provider are always accepted.
        let tls = match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
            Ok(builder) => builder.with_root_certificates(roots).with_no_client_auth(),
            Err(_) => rustls::ClientConfig::builder().with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth(),
        };
        Cimd {
            allow_insecure: config.cimd_allow_insecure,
            timeout: Duration::from_millis(config.cimd_timeout_ms),
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            cache: Mutex::default(),
            fetches: tokio::sync::Semaphore::new(MAX_CONCURRENT_FETCHES),
        }
    }

    /// The client a metadata URL describes, from the cache or fetched and checked now;
    /// why not, in words the user and the client's developer can act on.
    pub async fn client(&self, url: &str) -> Result<ClientRecord, String> {
        if let Some(client) = self.cached(url) {
            return Ok(client);
        }
        let started = Instant::now();
        let result = self.fetch_checked(url).await;
        // One debug line per fetch (a cached document costs none): the URL, how it
        // ended and for how long the document is kept.
        tracing::debug!(
            client_id = url,
            outcome = result.as_ref().map_or("refused", |_| "ok"),
            reason = result.as_ref().err().map(String::as_str).unwrap_or("-"),
            kept_secs = result.as_ref().ok().and_then(|(_, keep)| *keep).map_or(0, |keep| keep.as_secs()),
            latency_us = started.elapsed().as_micros() as u64,
            "client metadata document"
        );
        let (client, keep) = result?;
        if let Some(keep) = keep {
            self.keep(url, &client, keep);
        }
        Ok(client)
    }

    /// The URL checked, the document fetched and checked: its client and how long it
    /// may be kept.
    async fn fetch_checked(&self, url: &str) -> Result<(ClientRecord, Option<Duration>), String> {
        self.check_url(url)?;
        let bounded = async {
            let _permit = self.fetches.acquire().await.map_err(|_| "the server is shutting down".to_string())?;
            self.fetch(url).await
        };
        let (body, keep) = match tokio::time::timeout(self.timeout, bounded).await {
            Ok(result) => result?,
            Err(_) => return Err(format!("the client metadata document did not arrive within {} ms", self.timeout.as_millis())),
        };
        Ok((document_client(url, &body)?, keep))
    }

    fn cached(&self, url: &str) -> Option<ClientRecord> {
        let cache = self.cache.lock().ok()?;
        cache.get(url).filter(|cached| cached.until > Instant::now()).map(|cached| cached.client.clone())
    }

    fn keep(&self, url: &str, client: &ClientRecord, keep: Duration) {
        let Ok(mut cache) = self.cache.lock() else { return };
        if cache.len() >= MAX_ENTRIES {
            let now = Instant::now();
            cache.retain(|_, cached| cached.until > now);
            if cache.len() >= MAX_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(url.to_string(), Cached { client: client.clone(), until: Instant::now() + keep });
    }

    /// The draft's rules for the URL itself.
    fn check_url(&self, url: &str) -> Result<(), String> {
        if url.len() > MAX_URL_CHARS {
            return Err("the client_id URL is too long".into());
        }
        let parsed = url::Url::parse(url).map_err(|_| "the client_id is not a valid URL".to_string())?;
        match parsed.scheme() {
            "https" => {}
            "http" if self.allow_insecure => {}
            _ => return Err("a client_id URL must use https".into()),
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("a client_id URL must not carry credentials".into());
        }
        if parsed.fragment().is_some() {
            return Err("a client_id URL must not have a fragment".into());
        }
        if parsed.path() == "/" {
            return Err("a client_id URL must have a path".into());
        }
        if parsed.as_str() != url {
            return Err("a client_id URL must be in normal form (no dot segments, lower-case scheme and host)".into());
        }
        Ok(())
    }

    /// The checked addresses of the URL's host.
    async fn addresses(&self, parsed: &url::Url) -> Result<(String, Vec<SocketAddr>), String> {
        let port = parsed.port_or_known_default().ok_or("the client_id URL has no port")?;
        let (host, literal) = match parsed.host() {
            Some(url::Host::Domain(name)) => (name.to_owned(), None),
            Some(url::Host::Ipv4(address)) => (address.to_string(), Some(IpAddr::V4(address))),
            Some(url::Host::Ipv6(address)) => (address.to_string(), Some(IpAddr::V6(address))),
            None => return Err("the client_id URL has no host".into()),
        };
        let addresses: Vec<SocketAddr> = match literal {
            Some(address) => vec![SocketAddr::new(address, port)],
            None => tokio::net::lookup_host((host.as_str(), port)).await.map_err(|error| format!("the client_id host does not resolve ({error})"))?.collect(),
        };
        if addresses.is_empty() {
            return Err("the client_id host resolves to no address".into());
        }
        if !self.allow_insecure {
            check_addresses(&addresses)?;
        }
        Ok((host, addresses))
    }

    /// GETs the document: its body, and how long it may be kept (None: not at all).
    async fn fetch(&self, url: &str) -> Result<(Vec<u8>, Option<Duration>), String> {
        let parsed = url::Url::parse(url).map_err(|_| "the client_id is not a valid URL".to_string())?;
        let (host, addresses) = self.addresses(&parsed).await?;
        let mut last = None;
        let mut stream = None;
        for address in &addresses {
            match TcpStream::connect(address).await {
                Ok(connected) => {
                    stream = Some(connected);
                    break;
                }
                Err(error) => last = Some(error),
            }
        }
        let Some(stream) = stream else {
            return Err(format!("the client metadata document could not be reached ({})", last.map(|error| error.to_string()).unwrap_or_default()));
        };
        let authority = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
            None => parsed.host_str().unwrap_or_default().to_owned(),
        };
        let path = &parsed[url::Position::BeforePath..url::Position::AfterQuery];
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::ACCEPT, "application/json")
            .header(hyper::header::USER_AGENT, concat!("recap-mcp/", env!("CARGO_PKG_VERSION")))
            .body(Empty::<Bytes>::new())
            .map_err(|error| format!("the client_id URL cannot be requested ({error})"))?;
        if parsed.scheme() == "https" {
            let name = rustls::pki_types::ServerName::try_from(host).map_err(|_| "the client_id host is not a TLS server name".to_string())?;
            let stream = self.tls.connect(name, stream).await.map_err(|error| format!("TLS with the client_id host failed ({error})"))?;
            exchange(stream, request).await
        } else {
            exchange(stream, request).await
        }
    }
}

/// Refuses a set of addresses when any of them is not public.
fn check_addresses(addresses: &[SocketAddr]) -> Result<(), String> {
    for address in addresses {
        if let Some(reason) = recap_readmodel::net::forbidden(address.ip()) {
            return Err(format!("the client_id host resolves to a {reason}, which this server does not fetch from"));
        }
    }
    Ok(())
}

async fn exchange<S>(stream: S, request: hyper::Request<Empty<Bytes>>) -> Result<(Vec<u8>, Option<Duration>), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| format!("HTTP with the client_id host failed ({error})"))?;
    // Ended with this function (the answer read or the deadline passed).
    let driver = tokio::spawn(connection).abort_handle();
    let _abort = AbortOnDrop(driver);
    let response = sender.send_request(request).await.map_err(|error| format!("HTTP with the client_id host failed ({error})"))?;
    let status = response.status();
    if status.is_redirection() {
        return Err(format!("the client metadata document answered {status}; redirects are not followed"));
    }
    if status != hyper::StatusCode::OK {
        return Err(format!("the client metadata document answered {status}; only 200 counts"));
    }
    // "All other HTTP status codes and content types" are an error: application/json,
    // whatever its parameters (a charset).
    let content_type = response.headers().get(hyper::header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        return Err(format!("the client metadata document was served with content type {content_type:?}; only application/json counts"));
    }
    let announced = response.headers().get(hyper::header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()).and_then(|value| value.parse::<u64>().ok());
    if announced.is_some_and(|length| length > MAX_DOCUMENT_BYTES as u64) {
        return Err(format!("the client metadata document is larger than {MAX_DOCUMENT_BYTES} bytes"));
    }
    let keep = cache_lifetime(response.headers(), SystemTime::now());
    let mut body = response.into_body();
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| format!("the client metadata document was cut short ({error})"))?;
        if let Some(data) = frame.data_ref() {
            if read.len() + data.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("the client metadata document is larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            read.extend_from_slice(data);
        }
    }
    Ok((read, keep))
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long an answer with these headers may still be kept, as an HTTP cache reckons it
/// (RFC 9111, 4.2): its freshness lifetime (the first `max-age` of `Cache-Control`, a
/// value past 2^31 read as 2^31 (1.2.2); else `Expires` less `Date`, or less the time it
/// arrived; else [`DEFAULT_CACHE`]) less its age when it arrived (the first member of
/// `Age`, none when that is not a number, 5.1), at most [`MAX_CACHE`]. `None`: not kept
/// (`no-store`, `no-cache`, already stale, or a `max-age`, `Expires` or `Date` that
/// cannot be read, which a cache takes as stale).
fn cache_lifetime(headers: &hyper::HeaderMap, now: SystemTime) -> Option<Duration> {
    const DELTA_SECONDS_MAX: u64 = 1 << 31;
    let texts = |name| headers.get_all(name).iter().map(|value| value.to_str().ok());
    let mut max_age = None;
    for directive in texts(hyper::header::CACHE_CONTROL).collect::<Option<Vec<_>>>()?.into_iter().flat_map(|value| value.split(',')).map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return None;
        }
        if let (Some(seconds), None) = (lower.strip_prefix("max-age="), max_age) {
            let digits = seconds.trim_matches('"');
            if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
                return None;
            }
            max_age = Some(Duration::from_secs(digits.parse::<u64>().map_or(DELTA_SECONDS_MAX, |seconds| seconds.min(DELTA_SECONDS_MAX))));
        }
    }
    let date = |name| -> Option<Option<SystemTime>> {
        match texts(name).next() {
            None => Some(None),
            Some(text) => Some(Some(httpdate::parse_http_date(text?.trim()).ok()?)),
        }
    };
    let lifetime = match max_age {
        Some(max_age) => max_age,
        None => match date(hyper::header::EXPIRES)? {
            Some(expires) => expires.duration_since(date(hyper::header::DATE)?.unwrap_or(now)).unwrap_or_default(),
            None => DEFAULT_CACHE,
        },
    };
    let age = texts(hyper::header::AGE)
        .next()
        .flatten()
        .and_then(|text| text.split(',').next())
        .and_then(|first| first.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    let left = lifetime.saturating_sub(age);
    (!left.is_zero()).then_some(left.min(MAX_CACHE))
}

/// The client a fetched document describes, when it is one this server accepts.
fn document_client(url: &str, body: &[u8]) -> Result<ClientRecord, String> {
    let document: Value = serde_json::from_slice(body).map_err(|_| "the client metadata document is not JSON".to_string())?;
    let Value::Object(document) = document else {
        return Err("the client metadata document is not a JSON object".into());
    };
    if document.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err("the client metadata document's client_id is not exactly its URL".into());
    }
    let redirect_uris: Vec<String> = match document.get("redirect_uris") {
        Some(Value::Array(uris)) if !uris.is_empty() => {
            uris.iter().map(|uri| uri.as_str().map(str::to_string)).collect::<Option<_>>().ok_or("redirect_uris must be strings")?
        }
        _ => return Err("the client metadata document needs a non-empty redirect_uris array".into()),
    };
    for uri in &redirect_uris {
        redirect_uri_allowed(uri)?;
    }
    let client_name = match document.get("client_name") {
        Some(Value::String(name)) if !name.trim().is_empty() && name.chars().count() <= MAX_NAME_CHARS => name.clone(),
        _ => return Err(format!("the client metadata document needs a client_name of 1 to {MAX_NAME_CHARS} characters")),
    };
    if document.contains_key("client_secret") || document.contains_key("client_secret_expires_at") {
        return Err("a client metadata document must not carry a client secret".into());
    }
    match document.get("token_endpoint_auth_method") {
        None | Some(Value::Null) => {}
        Some(Value::String(method)) if method == "none" => {}
        Some(Value::String(method)) if method == "private_key_jwt" => {
            return Err("token_endpoint_auth_method private_key_jwt is not supported here; use none".into());
        }
        Some(_) => return Err("token_endpoint_auth_method must be none: a metadata document cannot use a shared secret".into()),
    }
    Ok(ClientRecord { client_id: url.to_string(), client_name: Some(client_name), redirect_uris, client_id_issued_at: 0, application_type: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cimd(allow_insecure: bool) -> Cimd {
        Cimd::new(&McpConfig { cimd_allow_insecure: allow_insecure, ..McpConfig::default() })
    }

    #[test]
    fn metadata_urls_are_told_from_registered_ids() {
        assert!(is_metadata_url("https://app.example.com/client.json"));
        assert!(is_metadata_url("HTTP://app.example.com/client.json"));
        assert!(!is_metadata_url("mcpc_0123"));
        assert!(!is_metadata_url("http"));
    }

    #[test]
    fn the_url_must_be_https_with_a_path_in_normal_form() {
        let strict = cimd(false);
        assert!(strict.check_url("https://app.example.com/client.json").is_ok());
        assert!(strict.check_url("https://app.example.com:8443/oauth/client?v=1").is_ok());
        for refused in [
            "http://app.example.com/client.json",
            "https://app.example.com",
            "https://app.example.com/",
            "https://user:pw@app.example.com/client.json",
            "https://app.example.com/client.json#x",
            "https://app.example.com/a/../client.json",
            "https://app.example.com/./client.json",
            "https://APP.example.com/client.json",
        ] {
            assert!(strict.check_url(refused).is_err(), "{refused}");
        }
        assert!(cimd(true).check_url("http://127.0.0.1:9/client.json").is_ok());
    }

    #[test]
    fn every_resolved_address_must_be_public() {
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        assert!(check_addresses(&[public]).is_ok());
        for forbidden in ["127.0.0.1:443", "10.0.0.7:443", "169.254.169.254:443", "[::1]:443"] {
            assert!(check_addresses(&[public, forbidden.parse().unwrap()]).is_err(), "{forbidden}");
        }
    }

    #[test]
    fn cache_headers_set_the_lifetime_within_bounds() {
        let now = httpdate::parse_http_date("Mon, 30 Nov 2026 10:00:00 GMT").unwrap();
        let lifetime = |headers: &[(&str, &str)]| {
            let mut map = hyper::HeaderMap::new();
            for (name, value) in headers {
                map.append(hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
            }
            cache_lifetime(&map, now)
        };
        let seconds = |seconds| Some(Duration::from_secs(seconds));
        assert_eq!(lifetime(&[]), Some(DEFAULT_CACHE));
        assert_eq!(lifetime(&[("cache-control", "public, max-age=60")]), seconds(60));
        assert_eq!(lifetime(&[("cache-control", "max-age=999999999")]), Some(MAX_CACHE));
        assert_eq!(lifetime(&[("cache-control", "max-age=0")]), None);
        assert_eq!(lifetime(&[("cache-control", "max-age=soon")]), None);
        assert_eq!(lifetime(&[("cache-control", "no-store")]), None);
        assert_eq!(lifetime(&[("cache-control", "private"), ("cache-control", "no-cache")]), None);
        // Its age when it arrived counts against its lifetime.
        assert_eq!(lifetime(&[("cache-control", "max-age=3600"), ("age", "3500")]), seconds(100));
        assert_eq!(lifetime(&[("cache-control", "max-age=3600"), ("age", "3600")]), None);
        assert_eq!(lifetime(&[("age", "100")]), seconds(200));
        assert_eq!(lifetime(&[("cache-control", "max-age=60"), ("age", "-1")]), seconds(60), "an Age that is not a number is ignored");
        assert_eq!(lifetime(&[("cache-control", "max-age=60"), ("age", "10, 50")]), seconds(50), "the first member of a list");
        assert_eq!(lifetime(&[("cache-control", "max-age=60, max-age=10")]), seconds(60), "the first max-age");
        assert_eq!(lifetime(&[("cache-control", "max-age=99999999999999999999999")]), Some(MAX_CACHE), "past 2^31: 2^31");
        // Without max-age, Expires less Date (or the time it arrived); max-age wins over it.
        assert_eq!(lifetime(&[("expires", "Mon, 30 Nov 2026 10:10:00 GMT")]), seconds(600));
        assert_eq!(lifetime(&[("expires", "Mon, 30 Nov 2026 10:10:00 GMT"), ("date", "Mon, 30 Nov 2026 10:05:00 GMT")]), seconds(300));
        assert_eq!(lifetime(&[("expires", "Mon, 30 Nov 2026 10:10:00 GMT"), ("age", "60")]), seconds(540));
        assert_eq!(lifetime(&[("expires", "Mon, 30 Nov 2026 09:00:00 GMT")]), None);
        assert_eq!(lifetime(&[("expires", "0")]), None, "an unreadable Expires is stale");
        assert_eq!(lifetime(&[("cache-control", "max-age=60"), ("expires", "Mon, 30 Nov 2026 09:00:00 GMT")]), seconds(60));
    }

    #[test]
    fn documents_need_their_url_redirect_uris_a_name_and_no_shared_secret() {
        let url = "https://app.example.com/client.json";
        let good =
            serde_json::json!({"client_id": url, "client_name": "App", "redirect_uris": ["http://127.0.0.1:3000/cb"], "token_endpoint_auth_method": "none"});
        let client = document_client(url, good.to_string().as_bytes()).unwrap();
        assert_eq!((client.client_id.as_str(), client.client_name.as_deref()), (url, Some("App")));
        let with = |key: &str, value: Value| {
            let mut document = good.clone();
            document[key] = value;
            document_client(url, document.to_string().as_bytes())
        };
        assert!(with("client_id", "https://app.example.com/client.json/".into()).is_err());
        assert!(with("redirect_uris", serde_json::json!([])).is_err());
        assert!(with("redirect_uris", serde_json::json!([7])).is_err());
        assert!(with("redirect_uris", serde_json::json!(["http://app.example.com/cb"])).is_err());
        assert!(with("client_name", Value::Null).is_err());
        assert!(with("token_endpoint_auth_method", "client_secret_basic".into()).is_err());
        assert!(with("token_endpoint_auth_method", "private_key_jwt".into()).is_err());
        assert!(with("client_secret", "s3cret".into()).is_err());
        assert!(document_client(url, b"[]").is_err());
        assert!(document_client(url, b"not json").is_err());
    }
}
