//! The MCP role's settings: which browser origins may call the endpoint, the public URL
//! the server is reached under (when a proxy hides it), the OAuth lifetimes, the store
//! timeout and how client metadata documents are fetched. Every field is a flag and a `RECAP_*` variable; the defaults give the
//! embedded edition on loopback and the spec's lifetimes.

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

    /// Lifetime of OAuth access tokens (`svc_oat_`), in seconds. The spec: one hour.
    #[arg(long = "mcp-access-token-ttl-secs", env = "RECAP_MCP_ACCESS_TOKEN_TTL_SECS", default_value_t = 3600)]
    pub access_token_ttl_secs: u64,

    /// Lifetime of each OAuth refresh token, in seconds, counted from its issue (every
    /// refresh issues a new one). The spec: 30 days.
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

    /// Root certificates (DER) trusted for metadata documents besides the Mozilla
    /// roots: for tests with their own CA. Not a flag; empty in production.
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
            trusted_proxy_hops: 0,
            store_timeout_ms: None,
            token_cache_ms: 0,
            cimd_allow_insecure: false,
            cimd_timeout_ms: 5000,
            cimd_extra_roots: Vec::new(),
        }
    }
}

impl McpConfig {
    pub(crate) fn store_timeout(&self) -> Option<Duration> {
        self.store_timeout_ms.map(Duration::from_millis)
    }
}
