//! The MCP role's settings: which browser origins may call the endpoint, the public URL
//! the server is reached under (when a proxy hides it), the OAuth lifetimes, the store
//! timeout and how client metadata documents are fetched. Every field is a flag and a `RECAP_*` variable; the defaults give the
//! embedded edition on loopback and the lifetimes docs/mcp.md states.

use std::time::Duration;

/// Settings of the MCP server (flattened into `recap serve` and `recap mcp`).
#[derive(clap::Args, Clone, Debug)]
pub struct McpConfig {
    /// Browser origins allowed to call the MCP endpoint, comma-separated and exact
    /// (`https://app.example.com`). A request whose `Origin` header is neither listed, nor
    /// the origin of `--mcp-public-url` (when set; never one taken from the Host
    /// header), nor a loopback origin (when allowed below) gets 403:
    /// this is the DNS-rebinding protection the MCP transport asks for. Requests without
    /// an `Origin` header (native clients) are not affected.
    #[arg(long = "mcp-allowed-origins", env = "RECAP_MCP_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// Whether loopback origins (`http://localhost`, `http://127.0.0.1`, `http://[::1]`,
    /// any port and scheme) may call the endpoint: pages served from the user's own
    /// machine, such as a local MCP inspector.
    #[arg(long = "mcp-allow-loopback-origins", env = "RECAP_MCP_ALLOW_LOOPBACK_ORIGINS", default_value_t = true, action = clap::ArgAction::Set)]
    pub allow_loopback_origins: bool,

    /// The MCP endpoint's public URL (`https://mcp.example.com/mcp`). When unset, the
    /// OAuth issuer and every advertised URL derive from the request: scheme from
    /// `X-Forwarded-Proto` (else http), host from `Host`. Set it in production, so
    /// that what the metadata advertises never depends on a request header.
    #[arg(long = "mcp-public-url", env = "RECAP_MCP_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Lifetime of OAuth access tokens (`svc_oat_`), in seconds: one hour by default, as
    /// docs/mcp.md (OAuth) states.
    #[arg(long = "mcp-access-token-ttl-secs", env = "RECAP_MCP_ACCESS_TOKEN_TTL_SECS", default_value_t = 3600)]
    pub access_token_ttl_secs: u64,

    /// Lifetime of each OAuth refresh token, in seconds, counted from its issue (every
    /// refresh issues a new one): 30 days by default, as docs/mcp.md (OAuth) states.
    #[arg(long = "mcp-refresh-token-ttl-secs", env = "RECAP_MCP_REFRESH_TOKEN_TTL_SECS", default_value_t = 30 * 86_400)]
    pub refresh_token_ttl_secs: u64,

    /// Lifetime of authorization codes, in seconds (RFC 6749 recommends at most 10 minutes).
    #[arg(long = "mcp-code-ttl-secs", env = "RECAP_MCP_CODE_TTL_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub code_ttl_secs: u64,

    /// How long a dynamically registered client stays registered once one of its
    /// authorization codes was redeemed (every redemption starts it again), in seconds.
    #[arg(long = "mcp-client-ttl-secs", env = "RECAP_MCP_CLIENT_TTL_SECS", default_value_t = 365 * 86_400)]
    pub client_ttl_secs: u64,

    /// How long a dynamically registered client stays registered before any of its
    /// authorization codes is redeemed, in seconds: registrations nobody completes
    /// leave the store within this bound.
    #[arg(long = "mcp-unconfirmed-client-ttl-secs", env = "RECAP_MCP_UNCONFIRMED_CLIENT_TTL_SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(60..=86_400))]
    pub unconfirmed_client_ttl_secs: u64,

    /// Dynamic client registrations admitted from one client address in any sliding
    /// minute; past it `/register` answers 429 with `Retry-After`. Counted in Redis in
    /// the distributed edition (shared by every MCP pod), in process otherwise.
    #[arg(long = "mcp-registrations-per-minute", env = "RECAP_MCP_REGISTRATIONS_PER_MINUTE", default_value_t = 10)]
    pub registrations_per_minute: u32,

    /// Dynamic client registrations admitted from one client address in a calendar
    /// month (UTC); past it `/register` answers 429 until the month ends.
    #[arg(long = "mcp-registrations-per-month", env = "RECAP_MCP_REGISTRATIONS_PER_MONTH", default_value_t = 3000)]
    pub registrations_per_month: u64,

    /// Tool calls admitted for one account in any sliding minute, over every client and
    /// token of the account; past it a call answers a tool error `rate_limited` (with
    /// `isError: true` and the seconds to wait), which a model reads and can act on.
    /// Counted in Redis in the distributed edition (shared by every MCP pod), in
    /// process otherwise. Calls refused before they reach a tool (an unknown tool,
    /// `tools/call` params that are not `{name, arguments}`) are not counted; a call
    /// with an invalid argument is.
    #[arg(long = "mcp-tool-calls-per-minute", env = "RECAP_MCP_TOOL_CALLS_PER_MINUTE", default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..))]
    pub tool_calls_per_minute: u32,

    /// How many proxies in front of the MCP server append the address they saw to
    /// `X-Forwarded-For`. 0 (the default): registrations are counted under the TCP
    /// peer's address and `X-Forwarded-For` is ignored, since a client can write any
    /// value into it. n > 0: under the n-th address from the right of
    /// `X-Forwarded-For` (behind one ingress, 1). Set it only when every request
    /// reaches the server through those proxies.
    #[arg(long = "mcp-trusted-proxy-hops", env = "RECAP_MCP_TRUSTED_PROXY_HOPS", default_value_t = 0)]
    pub trusted_proxy_hops: u8,

    /// Bound of every store call on the request path, in milliseconds; unset: the
    /// driver's own bound. A call that takes longer answers 503 (auth) or an isError
    /// result (tools).
    #[arg(id = "mcp_store_timeout_ms", value_name = "MCP_STORE_TIMEOUT_MS", long = "mcp-store-timeout-ms", env = "RECAP_MCP_STORE_TIMEOUT_MS")]
    pub store_timeout_ms: Option<u64>,

    /// How long a successful lookup of a personal access token (`svc_pat_`) is reused,
    /// in milliseconds, where other processes write the store (the distributed
    /// edition): a hot token then costs no store read, and a revocation or a plan change
    /// takes effect within this bound instead of on the next request. Refusals are never
    /// reused. 0 (the default) turns the cache off there. The embedded edition keeps a
    /// lookup until a token or account row changes, whatever this says. OAuth access
    /// tokens (`svc_oat_`) are always looked up, so that their expiry is exact.
    #[arg(id = "mcp_token_cache_ms", value_name = "MCP_TOKEN_CACHE_MS", long = "mcp-token-cache-ms", env = "RECAP_MCP_TOKEN_CACHE_MS", default_value_t = 0)]
    pub token_cache_ms: u64,

    /// Development and tests only: let a Client ID Metadata Document (a `client_id` that
    /// is a URL) be fetched over `http`, and from loopback or private addresses. Off,
    /// only `https` to public addresses is fetched, by the rule webhooks follow.
    #[arg(long = "mcp-cimd-allow-insecure", env = "RECAP_MCP_CIMD_ALLOW_INSECURE", default_value_t = false, action = clap::ArgAction::Set)]
    pub cimd_allow_insecure: bool,

    /// Bound of one fetch of a Client ID Metadata Document, in milliseconds: resolving,
    /// connecting, TLS and the whole answer. Past it the authorization is refused
    /// with `invalid_client`.
    #[arg(id = "mcp_cimd_timeout_ms", value_name = "MCP_CIMD_TIMEOUT_MS", long = "mcp-cimd-timeout-ms", env = "RECAP_MCP_CIMD_TIMEOUT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub cimd_timeout_ms: u64,

    /// Development and tests only: a PEM file of one or more CA certificates trusted,
    /// besides the Mozilla roots, for fetching Client ID Metadata Documents, so that a
    /// document served with a certificate of a local test CA can be fetched. Warned
    /// about at startup; a file that cannot be read, holds no certificate or one that
    /// is not usable stops the start. It changes nothing else: only `https` to public
    /// addresses is fetched unless `--mcp-cimd-allow-insecure` also says otherwise.
    #[arg(long = "mcp-cimd-extra-ca-file", env = "RECAP_MCP_CIMD_EXTRA_CA_FILE", value_name = "PATH")]
    pub cimd_extra_ca_file: Option<std::path::PathBuf>,

    /// Root certificates (DER) trusted for metadata documents besides the Mozilla
    /// roots: the certificates of `--mcp-cimd-extra-ca-file` once
    /// [`McpConfig::load_development_settings`] has read it, or a test's own CA. Not a
    /// flag; empty in production.
    #[arg(skip)]
    pub cimd_extra_roots: Vec<Vec<u8>>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            allowed_origins: Vec::new(),
            allow_loopback_origins: true,
            public_url: None,
            access_token_ttl_secs: 3600,
            refresh_token_ttl_secs: 30 * 86_400,
            code_ttl_secs: 600,
            client_ttl_secs: 365 * 86_400,
            unconfirmed_client_ttl_secs: 86_400,
            registrations_per_minute: 10,
            registrations_per_month: 3000,
            tool_calls_per_minute: 600,
            trusted_proxy_hops: 0,
            store_timeout_ms: None,
            token_cache_ms: 0,
            cimd_allow_insecure: false,
            cimd_timeout_ms: 5000,
            cimd_extra_ca_file: None,
            cimd_extra_roots: Vec::new(),
        }
    }
}

impl McpConfig {
    /// Reads the files the development flags name and warns, once at startup, about
    /// every development setting in force: a server started with them by mistake says
    /// so in its log. An extra CA file that cannot be used is an error, never skipped:
    /// a start that silently ignores it would fail only at the first authorization.
    pub fn load_development_settings(&mut self) -> Result<(), String> {
        if self.cimd_allow_insecure {
            tracing::warn!(
                "client metadata documents may be fetched over http and from loopback and private addresses (--mcp-cimd-allow-insecure): development and tests only"
            );
        }
        let Some(path) = &self.cimd_extra_ca_file else { return Ok(()) };
        let roots = extra_roots(path)?;
        tracing::warn!(
            file = %path.display(),
            certificates = roots.len(),
            "client metadata documents are fetched trusting extra CA certificates besides the Mozilla roots (--mcp-cimd-extra-ca-file): development and tests only"
        );
        self.cimd_extra_roots.extend(roots);
        Ok(())
    }

    pub(crate) fn store_timeout(&self) -> Option<Duration> {
        self.store_timeout_ms.map(Duration::from_millis)
    }
}

/// The DER certificates of a PEM file, each one checked to be usable as a trust anchor.
fn extra_roots(path: &std::path::Path) -> Result<Vec<Vec<u8>>, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;
    let named = |what: String| format!("--mcp-cimd-extra-ca-file {}: {what}", path.display());
    let pem = std::fs::read(path).map_err(|error| named(format!("cannot be read ({error})")))?;
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem).collect::<Result<_, _>>().map_err(|error| named(format!("is not PEM ({error})")))?;
    if certificates.is_empty() {
        return Err(named("holds no CERTIFICATE block".into()));
    }
    let mut store = rustls::RootCertStore::empty();
    for (index, certificate) in certificates.iter().enumerate() {
        store.add(certificate.clone()).map_err(|error| named(format!("certificate {} is not usable ({error})", index + 1)))?;
    }
    Ok(certificates.into_iter().map(|certificate| certificate.to_vec()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("recap-mcp-config-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write a temporary file");
        path
    }

    #[test]
    fn an_extra_ca_file_that_cannot_be_used_stops_the_start() {
        let missing = McpConfig { cimd_extra_ca_file: Some("/nonexistent/recap-ca.pem".into()), ..McpConfig::default() };
        let error = missing.clone().load_development_settings().unwrap_err();
        assert!(error.starts_with("--mcp-cimd-extra-ca-file /nonexistent/recap-ca.pem: cannot be read"), "{error}");

        let empty = written("empty.pem", "no certificate here\n");
        let mut config = McpConfig { cimd_extra_ca_file: Some(empty.clone()), ..McpConfig::default() };
        assert!(config.load_development_settings().unwrap_err().ends_with("holds no CERTIFICATE block"));

        let garbage = written("garbage.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let mut config = McpConfig { cimd_extra_ca_file: Some(garbage.clone()), ..McpConfig::default() };
        assert!(config.load_development_settings().unwrap_err().contains("certificate 1 is not usable"));
        assert!(config.cimd_extra_roots.is_empty());
        for path in [empty, garbage] {
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn every_certificate_of_an_extra_ca_file_becomes_a_root() {
        let authority = |name: &str| {
            let key = rcgen::KeyPair::generate().expect("a key");
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.distinguished_name.push(rcgen::DnType::CommonName, name);
            params.self_signed(&key).expect("a certificate")
        };
        let (first, second) = (authority("recap test CA 1"), authority("recap test CA 2"));
        let pem = |der: &[u8]| {
            use base64::Engine as _;
            let text = base64::engine::general_purpose::STANDARD.encode(der);
            let lines: Vec<&str> = text.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap_or_default()).collect();
            format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", lines.join("\n"))
        };
        // A comment line between the blocks, as bundles have.
        let path = written("two.pem", &format!("{}# the second\n{}", pem(first.der()), pem(second.der())));
        let mut config = McpConfig { cimd_extra_ca_file: Some(path.clone()), ..McpConfig::default() };
        config.load_development_settings().expect("two usable certificates");
        assert_eq!(config.cimd_extra_roots, vec![first.der().to_vec(), second.der().to_vec()]);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn without_the_flag_nothing_is_trusted_besides_the_mozilla_roots() {
        let mut config = McpConfig::default();
        config.load_development_settings().expect("nothing to load");
        assert!(config.cimd_extra_roots.is_empty());
    }
}
