//! The HTTP client deliveries go out with, safe to point at a URL an account chose:
//!
//! - `https` only, unless development mode ([`ClientConfig::allow_insecure`]) also
//!   allows `http` and every address (loopback, private networks);
//! - the host is resolved once and every address it resolves to is checked
//!   ([`crate::target::forbidden`]); the connection goes to a checked address, never
//!   to a second resolution (no DNS rebinding between check and connect);
//! - redirects are never followed (a 3xx is a failed attempt, the caller decides);
//! - one deadline bounds connecting, TLS, sending and the answer
//!   ([`ClientConfig::timeout`], 10 s by default), and at most
//!   [`ClientConfig::body_cap`] bytes of the answer's body are read, then dropped;
//! - TLS by rustls with the Mozilla roots (`webpki-roots`): no system TLS library;
//! - connections are kept for the next attempt to the same place (an endpoint's
//!   deliveries then pay no new handshake each), keyed by scheme, host name and the
//!   checked address they were opened to: a kept connection is only ever used for a
//!   URL whose host resolves, at that attempt, to that very address. A kept connection
//!   the receiver closed meanwhile costs one retry on a new one (the receiver may then
//!   see the `webhook-id` twice, which at-least-once delivery allows). The pool is
//!   ours, not a general HTTP client's, because its key must be the checked address,
//!   not the URL's authority.
//!
//! What a URL parses into (scheme, host, port, the `Host` header and the request's
//! path) is kept per URL, so an endpoint's deliveries parse it once; its host is still
//! resolved and checked at every attempt.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Settings of the delivery client.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Development and tests only: also `http`, and loopback or private addresses.
    pub allow_insecure: bool,
    /// Bound of one attempt from resolving to the end of the answer.
    pub timeout: Duration,
    /// Most bytes of an answer's body read (the rest is dropped unread).
    pub body_cap: usize,
    /// Idle connections kept per host name and address: as many as the attempts that may
    /// be in flight to one host serving many endpoints (a webhook platform's), each past
    /// the bound paying a handshake.
    pub idle_per_target: usize,
    /// How long an idle connection is kept.
    pub idle_for: Duration,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig { allow_insecure: false, timeout: Duration::from_secs(10), body_cap: 64 * 1024, idle_per_target: 64, idle_for: Duration::from_secs(15) }
    }
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    /// The URL or an address it resolves to is not allowed; nothing was sent.
    #[error("refused: {0}")]
    Refused(String),
    /// Resolving, connecting, TLS or HTTP failed.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// No complete answer within the deadline.
    #[error("timed out")]
    TimedOut,
}

/// A resolver: the addresses of a host name (tests map names to chosen addresses).
pub type Resolver = Arc<dyn Fn(String, u16) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>> + Send + Sync>;

/// The system resolver (`getaddrinfo` through tokio).
pub fn system_resolver() -> Resolver {
    Arc::new(|host: String, port: u16| Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), port)).await?.collect()) }))
}

/// The delivery client. Cheap to clone (clones share their kept connections).
#[derive(Clone)]
pub struct SafeClient {
    config: ClientConfig,
    tls: tokio_rustls::TlsConnector,
    resolver: Resolver,
    pool: Arc<Mutex<HashMap<PoolKey, Vec<Kept>>>>,
    parsed: Arc<Mutex<HashMap<String, Arc<ParsedUrl>>>>,
}

/// URLs whose parse is kept, at most: past it the memory starts over.
const PARSED_KEPT: usize = 4_096;

/// Where a kept connection goes: `https`, the host name, the checked address.
type PoolKey = (bool, Arc<str>, SocketAddr);

/// An open connection: its request half and the task driving it, ended when this is
/// dropped (on a deadline too, so no connection outlives its attempt unless kept).
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::AbortHandle,
    key: PoolKey,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

struct Kept {
    connection: Connection,
    since: Instant,
}

/// What a URL allowed by the scheme rule parses into.
struct ParsedUrl {
    https: bool,
    host: Arc<str>,
    /// The address a literal host names (none is resolved).
    literal: Option<IpAddr>,
    port: u16,
    /// The `Host` header.
    authority: HeaderValue,
    /// Path and query.
    path: hyper::Uri,
}

/// Where a URL sends a request, once checked.
struct Target {
    url: Arc<ParsedUrl>,
    addresses: Vec<SocketAddr>,
}

impl SafeClient {
    pub fn new(config: ClientConfig) -> SafeClient {
        SafeClient::with_resolver(config, system_resolver())
    }

    pub fn with_resolver(config: ClientConfig, resolver: Resolver) -> SafeClient {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // The safe default protocol versions of a built-in provider are always accepted.
        let tls = match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
            Ok(builder) => builder.with_root_certificates(roots).with_no_client_auth(),
            Err(_) => rustls::ClientConfig::builder().with_root_certificates(rustls::RootCertStore::empty()).with_no_client_auth(),
        };
        SafeClient { config, tls: tokio_rustls::TlsConnector::from(Arc::new(tls)), resolver, pool: Arc::default(), parsed: Arc::default() }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// POSTs `body` (JSON) with `headers` to `url`; the answer's status, or why there is
    /// none.
    pub async fn post(&self, url: &str, headers: &[(&'static str, String)], body: impl Into<Bytes>) -> Result<u16, SendError> {
        let body = body.into();
        match tokio::time::timeout(self.config.timeout, self.post_unbounded(url, headers, body)).await {
            Ok(result) => result,
            Err(_) => Err(SendError::TimedOut),
        }
    }

    /// What `url` parses into, refused when its scheme is not allowed; kept per URL.
    fn parse(&self, url: &str) -> Result<Arc<ParsedUrl>, SendError> {
        if let Some(parsed) = self.parsed.lock().ok().and_then(|parsed| parsed.get(url).cloned()) {
            return Ok(parsed);
        }
        let parsed = url::Url::parse(url).map_err(|error| SendError::Refused(format!("not a URL ({error})")))?;
        let https = match parsed.scheme() {
            "https" => true,
            "http" if self.config.allow_insecure => false,
            scheme => return Err(SendError::Refused(format!("scheme {scheme} (only https)"))),
        };
        let port = parsed.port_or_known_default().ok_or_else(|| SendError::Refused("no port".into()))?;
        let (host, literal) = match parsed.host() {
            Some(url::Host::Domain(name)) => (name.to_owned(), None),
            Some(url::Host::Ipv4(address)) => (address.to_string(), Some(IpAddr::V4(address))),
            Some(url::Host::Ipv6(address)) => (address.to_string(), Some(IpAddr::V6(address))),
            None => return Err(SendError::Refused("no host".into())),
        };
        let authority = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
            None => parsed.host_str().unwrap_or_default().to_owned(),
        };
        let path = parsed[url::Position::BeforePath..url::Position::AfterQuery].to_owned();
        let request_error = |error: &dyn std::fmt::Display| SendError::Refused(format!("request: {error}"));
        let authority = HeaderValue::from_str(&authority).map_err(|error| request_error(&error))?;
        let path = hyper::Uri::try_from(path).map_err(|error| request_error(&error))?;
        let parsed = Arc::new(ParsedUrl { https, host: host.into(), literal, port, authority, path });
        if let Ok(mut kept) = self.parsed.lock() {
            if kept.len() >= PARSED_KEPT {
                kept.clear();
            }
            kept.insert(url.to_owned(), parsed.clone());
        }
        Ok(parsed)
    }

    /// The checked target of `url`: refused when its scheme, or any address it resolves
    /// to, is not allowed.
    async fn target(&self, url: &str) -> Result<Target, SendError> {
        let url = self.parse(url)?;
        let addresses = match url.literal {
            Some(address) => vec![SocketAddr::new(address, url.port)],
            None => (self.resolver)(url.host.to_string(), url.port).await.map_err(|error| SendError::Unreachable(format!("resolving the host: {error}")))?,
        };
        if addresses.is_empty() {
            return Err(SendError::Unreachable("the host resolves to no address".into()));
        }
        if !self.config.allow_insecure {
            for address in &addresses {
                if let Some(reason) = crate::target::forbidden(address.ip()) {
                    return Err(SendError::Refused(format!("the host resolves to a {reason}")));
                }
            }
        }
        Ok(Target { url, addresses })
    }

    async fn post_unbounded(&self, url: &str, headers: &[(&'static str, String)], body: Bytes) -> Result<u16, SendError> {
        let target = self.target(url).await?;
        if let Some(kept) = self.take_kept(&target) {
            if let Ok(answer) = exchange(kept, request(&target, headers, body.clone())?, self.config.body_cap).await {
                return Ok(self.keep(answer));
            }
            // Closed by the receiver while kept: once more on a new connection.
        }
        let connection = self.open(&target).await?;
        let answer = exchange(connection, request(&target, headers, body)?, self.config.body_cap).await?;
        Ok(self.keep(answer))
    }

    /// A kept connection to one of the target's checked addresses, if one is open.
    fn take_kept(&self, target: &Target) -> Option<Connection> {
        let mut pool = self.pool.lock().ok()?;
        for address in &target.addresses {
            let key = (target.url.https, target.url.host.clone(), *address);
            let Some(kept) = pool.get_mut(&key) else { continue };
            while let Some(entry) = kept.pop() {
                if entry.since.elapsed() < self.config.idle_for && !entry.connection.sender.is_closed() {
                    return Some(entry.connection);
                }
            }
            pool.remove(&key);
        }
        None
    }

    /// Keeps the connection of an answer that left it reusable; the answer's status.
    fn keep(&self, (status, reusable): (u16, Option<Connection>)) -> u16 {
        let Some(connection) = reusable else { return status };
        if let Ok(mut pool) = self.pool.lock() {
            // Expired connections of every target go first: the pool holds only live ones.
            pool.retain(|_, kept| {
                kept.retain(|entry| entry.since.elapsed() < self.config.idle_for && !entry.connection.sender.is_closed());
                !kept.is_empty()
            });
            let kept = pool.entry(connection.key.clone()).or_default();
            if kept.len() < self.config.idle_per_target {
                kept.push(Kept { connection, since: Instant::now() });
            }
        }
        status
    }

    /// A new connection to the first checked address that accepts one, through TLS for
    /// `https`.
    async fn open(&self, target: &Target) -> Result<Connection, SendError> {
        let (stream, address) = connect(&target.addresses).await?;
        let key = (target.url.https, target.url.host.clone(), address);
        if !target.url.https {
            return handshake(stream, key).await;
        }
        let name = rustls::pki_types::ServerName::try_from(target.url.host.to_string()).map_err(|_| SendError::Refused("not a TLS server name".into()))?;
        let stream = self.tls.connect(name, stream).await.map_err(|error| SendError::Unreachable(format!("TLS with port {}: {error}", target.url.port)))?;
        handshake(stream, key).await
    }
}

/// A connection to the first checked address that accepts one, and that address.
async fn connect(addresses: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), SendError> {
    let mut last = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok((stream, *address));
            }
            Err(error) => last = Some(error),
        }
    }
    Err(SendError::Unreachable(format!("connecting: {}", last.map(|error| error.to_string()).unwrap_or_default())))
}

/// HTTP/1.1 over `stream`, driven by a task of its own.
async fn handshake<S>(stream: S, key: PoolKey) -> Result<Connection, SendError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| SendError::Unreachable(format!("HTTP: {error}")))?;
    let driver = tokio::spawn(connection).abort_handle();
    Ok(Connection { sender, driver, key })
}

/// The POST of `body` with `headers`: built field by field from the URL's parse (the
/// builder would parse the path and every header name again).
fn request(target: &Target, headers: &[(&'static str, String)], body: Bytes) -> Result<hyper::Request<Full<Bytes>>, SendError> {
    const USER_AGENT: HeaderValue = HeaderValue::from_static(concat!("recap-webhooks/", env!("CARGO_PKG_VERSION")));
    let mut request = hyper::Request::new(Full::new(body));
    *request.method_mut() = hyper::Method::POST;
    *request.uri_mut() = target.url.path.clone();
    let fields = request.headers_mut();
    fields.reserve(3 + headers.len());
    fields.insert(hyper::header::HOST, target.url.authority.clone());
    fields.insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    fields.insert(hyper::header::USER_AGENT, USER_AGENT);
    for (name, value) in headers {
        // The names are the signing module's constants, lowercase as `from_static` wants.
        let name = HeaderName::from_static(name);
        let value = HeaderValue::from_str(value).map_err(|error| SendError::Refused(format!("request: {name}: {error}")))?;
        fields.append(name, value);
    }
    Ok(request)
}

/// Sends the request over `connection` and reads the answer's status and at most `cap`
/// bytes of its body; gives the connection back when the whole body was read and it
/// stays open (the next request may use it).
async fn exchange(mut connection: Connection, request: hyper::Request<Full<Bytes>>, cap: usize) -> Result<(u16, Option<Connection>), SendError> {
    connection.sender.ready().await.map_err(|error| SendError::Unreachable(format!("HTTP: {error}")))?;
    let response = connection.sender.send_request(request).await.map_err(|error| SendError::Unreachable(format!("HTTP: {error}")))?;
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut read = 0usize;
    let mut ended = false;
    while read <= cap {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |data| data.len()),
            // A body cut short still carried the status the receiver chose.
            Some(Err(_)) => break,
            None => {
                ended = true;
                break;
            }
        }
    }
    // A body over the cap, or cut short, ends its connection (dropped with the rest).
    Ok((status, (ended && !connection.sender.is_closed()).then_some(connection)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver_to(address: &'static str) -> Resolver {
        Arc::new(move |_host: String, port: u16| Box::pin(async move { Ok(vec![SocketAddr::new(address.parse().unwrap(), port)]) }))
    }

    fn client(allow_insecure: bool, resolves_to: &'static str) -> SafeClient {
        SafeClient::with_resolver(ClientConfig { allow_insecure, ..ClientConfig::default() }, resolver_to(resolves_to))
    }

    async fn refusal(client: &SafeClient, url: &str) -> Option<String> {
        match client.target(url).await {
            Err(SendError::Refused(reason)) => Some(reason),
            _ => None,
        }
    }

    #[tokio::test]
    async fn hosts_resolving_to_loopback_private_or_metadata_addresses_are_refused_without_the_flag() {
        for (resolves_to, reason) in [
            ("127.0.0.1", "the host resolves to a loopback"),
            ("10.1.2.3", "the host resolves to a private network"),
            ("169.254.169.254", "the host resolves to a link-local (metadata) address"),
            ("::1", "the host resolves to a loopback"),
        ] {
            assert_eq!(refusal(&client(false, resolves_to), "https://receiver.example/hook").await.as_deref(), Some(reason), "{resolves_to}");
        }
    }

    #[tokio::test]
    async fn address_literals_are_checked_like_resolved_names() {
        let client = client(false, "93.184.216.34");
        assert!(refusal(&client, "https://127.0.0.1/hook").await.is_some());
        assert!(refusal(&client, "https://[::1]/hook").await.is_some());
        assert!(refusal(&client, "https://169.254.169.254/latest/meta-data").await.is_some());
        assert!(refusal(&client, "https://[::ffff:10.0.0.1]/hook").await.is_some());
        assert!(refusal(&client, "https://receiver.example/hook").await.is_none());
    }

    #[tokio::test]
    async fn only_https_is_allowed_without_the_flag() {
        let client = client(false, "93.184.216.34");
        assert_eq!(refusal(&client, "http://receiver.example/hook").await.as_deref(), Some("scheme http (only https)"));
        assert_eq!(refusal(&client, "ftp://receiver.example/hook").await.as_deref(), Some("scheme ftp (only https)"));
    }

    #[tokio::test]
    async fn a_host_with_one_forbidden_address_among_public_ones_is_refused() {
        let resolver: Resolver = Arc::new(|_host: String, port: u16| {
            Box::pin(async move { Ok(vec![SocketAddr::new("93.184.216.34".parse().unwrap(), port), SocketAddr::new("10.0.0.7".parse().unwrap(), port)]) })
        });
        let client = SafeClient::with_resolver(ClientConfig::default(), resolver);
        assert_eq!(refusal(&client, "https://rebinding.example/").await.as_deref(), Some("the host resolves to a private network"));
    }

    #[tokio::test]
    async fn the_development_flag_allows_http_and_loopback() {
        let client = client(true, "127.0.0.1");
        let target = client.target("http://receiver.test:8443/hook?x=1").await.unwrap();
        assert_eq!(target.addresses, vec!["127.0.0.1:8443".parse().unwrap()]);
        assert_eq!(
            (target.url.https, target.url.authority.to_str().unwrap(), target.url.path.to_string().as_str()),
            (false, "receiver.test:8443", "/hook?x=1")
        );
        assert!(refusal(&client, "http://[::1]:9/").await.is_none());
    }

    /// A receiver on 127.0.0.1 that serves each connection it accepts with `serve`, and
    /// counts them.
    async fn receiver<F, Fut>(serve: F) -> (String, Arc<std::sync::atomic::AtomicUsize>)
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(serve(stream));
            }
        });
        (url, accepted)
    }

    /// Reads into `buffer` until it holds a request's head; where the head ends, or
    /// `None` once the client has gone.
    async fn read_head(stream: &mut tokio::net::TcpStream, buffer: &mut Vec<u8>) -> Option<usize> {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                return Some(at + 4);
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(read) => buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }

    /// A receiver speaking just enough HTTP/1.1 to answer 200 to each request; counts
    /// the connections it accepted, and closes each after `requests_per_connection`.
    async fn counting_receiver(requests_per_connection: usize) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        receiver(move |mut stream| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut buffer = Vec::new();
            for served in 1..=requests_per_connection {
                // Headers, then a body of the length they announce.
                let Some(end) = read_head(&mut stream, &mut buffer).await else { return };
                let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                let length: usize = head.lines().find_map(|line| line.strip_prefix("content-length:")).and_then(|value| value.trim().parse().ok()).unwrap_or(0);
                while buffer.len() < end + length {
                    let mut chunk = [0u8; 4096];
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => buffer.extend_from_slice(&chunk[..read]),
                    }
                }
                buffer.drain(..end + length);
                let close = if served == requests_per_connection { "connection: close\r\n" } else { "" };
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{close}\r\nok");
                if stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        })
        .await
    }

    #[tokio::test]
    async fn attempts_to_one_receiver_reuse_its_connection() {
        let (url, accepted) = counting_receiver(usize::MAX).await;
        let client = client(true, "127.0.0.1");
        for _ in 0..5 {
            assert_eq!(client.post(&url, &[("webhook-id", "msg_1".into())], b"{}".to_vec()).await, Ok(200));
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_the_receiver_closed_is_replaced_without_a_failed_attempt() {
        let (url, accepted) = counting_receiver(2).await;
        let client = client(true, "127.0.0.1");
        for _ in 0..6 {
            assert_eq!(client.post(&url, &[], b"{}".to_vec()).await, Ok(200));
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn concurrent_attempts_open_their_own_connections_and_keep_them() {
        let (url, accepted) = counting_receiver(usize::MAX).await;
        let client = client(true, "127.0.0.1");
        let round = || futures::future::join_all((0..4).map(|_| client.post(&url, &[], b"{}".to_vec())));
        assert!(round().await.iter().all(|answer| *answer == Ok(200)));
        let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=4).contains(&opened), "{opened} connections for 4 concurrent attempts");
        assert!(round().await.iter().all(|answer| *answer == Ok(200)));
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), opened, "the second round reuses the first's connections");
    }

    // "Resolve once, connect to the checked address": a name no system resolver knows
    // (`.invalid` never resolves) reaches the receiver only through the address the
    // client's resolver gave, and the resolver is asked once an attempt, connection
    // kept or not.
    #[tokio::test]
    async fn a_host_name_is_resolved_once_an_attempt_and_the_connection_goes_to_the_address_it_resolved_to() {
        let (url, accepted) = counting_receiver(usize::MAX).await;
        let port = url.trim_start_matches("http://127.0.0.1:").trim_end_matches("/hook").parse::<u16>().unwrap();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = asked.clone();
        let resolver: Resolver = Arc::new(move |host: String, port: u16| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                match host.as_str() {
                    "receiver.invalid" => Ok(vec![SocketAddr::new("127.0.0.1".parse().unwrap(), port)]),
                    other => Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("{other} is not known"))),
                }
            })
        });
        let client = SafeClient::with_resolver(ClientConfig { allow_insecure: true, ..ClientConfig::default() }, resolver);
        for attempt in 1..=3 {
            assert_eq!(client.post(&format!("http://receiver.invalid:{port}/hook"), &[], b"{}".to_vec()).await, Ok(200), "attempt {attempt}");
            assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), attempt, "resolved once an attempt");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1, "one connection to the resolved address, kept");
    }

    /// A receiver that reads each request's head and answers `answer` as it is (then
    /// `endless` chunks of 16 KiB for ever, when set); counts the connections it accepted.
    async fn scripted_receiver(answer: String, endless: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        receiver(move |mut stream| {
            let answer = answer.clone();
            async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                if read_head(&mut stream, &mut Vec::new()).await.is_none() || stream.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
                while endless && stream.write_all(chunk.as_bytes()).await.is_ok() {}
                // Held open until the client goes.
                let _ = stream.read(&mut [0u8; 1]).await;
            }
        })
        .await
    }

    // "No redirects followed": a 3xx is the receiver's answer, its Location never asked.
    #[tokio::test]
    async fn a_redirect_is_answered_as_it_is_and_never_followed() {
        let (target, target_accepted) = counting_receiver(usize::MAX).await;
        let answer = format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: {target}\r\ncontent-length: 0\r\n\r\n");
        let (url, _) = scripted_receiver(answer, false).await;
        let client = client(true, "127.0.0.1");
        assert_eq!(client.post(&url, &[], b"{}".to_vec()).await, Ok(307));
        assert_eq!(target_accepted.load(std::sync::atomic::Ordering::SeqCst), 0, "the Location was not followed");
    }

    // "Response body read capped": an endless body is read up to the cap (64 KiB), the
    // status kept, and its connection dropped rather than kept for the next attempt.
    #[tokio::test]
    async fn an_answer_body_past_the_cap_is_not_read_and_its_connection_is_not_kept() {
        let (url, accepted) = scripted_receiver("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".into(), true).await;
        let client = client(true, "127.0.0.1");
        for round in 1..=2 {
            let started = std::time::Instant::now();
            assert_eq!(client.post(&url, &[], b"{}".to_vec()).await, Ok(200));
            assert!(started.elapsed() < Duration::from_secs(5), "answered after {:?}, not at the timeout", started.elapsed());
            assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), round, "a new connection each time");
        }
    }

    // "Timeouts: 10 s connect+response": a receiver that never answers ends the attempt
    // at the bound (shortened here), as timed out.
    #[tokio::test]
    async fn a_receiver_that_never_answers_times_out_at_the_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                open.push(stream);
            }
        });
        let bound = Duration::from_millis(300);
        let client = SafeClient::with_resolver(ClientConfig { allow_insecure: true, timeout: bound, ..ClientConfig::default() }, resolver_to("127.0.0.1"));
        let started = std::time::Instant::now();
        assert_eq!(client.post(&url, &[], b"{}".to_vec()).await, Err(SendError::TimedOut));
        let took = started.elapsed();
        assert!(took >= bound && took < bound * 10, "timed out after {took:?}");
        assert_eq!(ClientConfig::default().timeout, Duration::from_secs(10));
        held.abort();
    }
}
