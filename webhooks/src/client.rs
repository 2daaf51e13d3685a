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
//! - TLS by rustls with the Mozilla roots (`webpki-roots`): no system TLS library.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
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
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig { allow_insecure: false, timeout: Duration::from_secs(10), body_cap: 64 * 1024 }
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

/// The delivery client. Cheap to clone.
#[derive(Clone)]
pub struct SafeClient {
    config: ClientConfig,
    tls: tokio_rustls::TlsConnector,
    resolver: Resolver,
}

/// Where a URL sends a request, once checked.
struct Target {
    https: bool,
    host: String,
    port: u16,
    /// The `Host` header.
    authority: String,
    /// Path and query.
    path: String,
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
        SafeClient { config, tls: tokio_rustls::TlsConnector::from(Arc::new(tls)), resolver }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// POSTs `body` (JSON) with `headers` to `url`; the answer's status, or why there is
    /// none.
    pub async fn post(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Result<u16, SendError> {
        match tokio::time::timeout(self.config.timeout, self.post_unbounded(url, headers, body)).await {
            Ok(result) => result,
            Err(_) => Err(SendError::TimedOut),
        }
    }

    /// The checked target of `url`: refused when its scheme, or any address it resolves
    /// to, is not allowed.
    async fn target(&self, url: &str) -> Result<Target, SendError> {
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
        let addresses = match literal {
            Some(address) => vec![SocketAddr::new(address, port)],
            None => (self.resolver)(host.clone(), port).await.map_err(|error| SendError::Unreachable(format!("resolving the host: {error}")))?,
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
        let authority = match parsed.port() {
            Some(port) => format!("{}:{port}", parsed.host_str().unwrap_or_default()),
            None => parsed.host_str().unwrap_or_default().to_owned(),
        };
        let path = parsed[url::Position::BeforePath..url::Position::AfterQuery].to_owned();
        Ok(Target { https, host, port, authority, path, addresses })
    }

    async fn post_unbounded(&self, url: &str, headers: &[(&str, String)], body: Vec<u8>) -> Result<u16, SendError> {
        let target = self.target(url).await?;
        let stream = connect(&target.addresses).await?;
        let request = request(&target, headers, body)?;
        if !target.https {
            return exchange(stream, request, self.config.body_cap).await;
        }
        let name = rustls::pki_types::ServerName::try_from(target.host.clone()).map_err(|_| SendError::Refused("not a TLS server name".into()))?;
        let stream = self.tls.connect(name, stream).await.map_err(|error| SendError::Unreachable(format!("TLS with port {}: {error}", target.port)))?;
        exchange(stream, request, self.config.body_cap).await
    }
}

/// A connection to the first checked address that accepts one.
async fn connect(addresses: &[SocketAddr]) -> Result<TcpStream, SendError> {
    let mut last = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(error) => last = Some(error),
        }
    }
    Err(SendError::Unreachable(format!("connecting: {}", last.map(|error| error.to_string()).unwrap_or_default())))
}

fn request(target: &Target, headers: &[(&str, String)], body: Vec<u8>) -> Result<hyper::Request<Full<Bytes>>, SendError> {
    let mut builder = hyper::Request::post(target.path.as_str())
        .header(hyper::header::HOST, target.authority.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::USER_AGENT, concat!("recap-webhooks/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    builder.body(Full::new(Bytes::from(body))).map_err(|error| SendError::Refused(format!("request: {error}")))
}

/// Sends the request over `stream` and reads the answer's status and at most `cap`
/// bytes of its body.
async fn exchange<S>(stream: S, request: hyper::Request<Full<Bytes>>, cap: usize) -> Result<u16, SendError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|error| SendError::Unreachable(format!("HTTP: {error}")))?;
    let connection = tokio::spawn(connection);
    let outcome = async {
        let response = sender.send_request(request).await.map_err(|error| SendError::Unreachable(format!("HTTP: {error}")))?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut read = 0usize;
        while read < cap {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, |data| data.len()),
                // A body cut short still carried the status the receiver chose.
                Some(Err(_)) | None => break,
            }
        }
        Ok(status)
    }
    .await;
    // The connection is not reused: one request per attempt, dropped with what is left.
    connection.abort();
    outcome
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
        assert_eq!((target.https, target.authority.as_str(), target.path.as_str()), (false, "receiver.test:8443", "/hook?x=1"));
        assert!(refusal(&client, "http://[::1]:9/").await.is_none());
    }
}
