//! Settings of the REST role, from flags and `RECAP_*` environment variables. Defaults
//! give the spec's limits; the cursor secret is never printed (Debug redacts it).

use std::fmt;
use std::time::Duration;

/// REST API v1 settings.
#[derive(clap::Args, Clone)]
pub struct RestConfig {
    /// Key that signs pagination cursors. Every replica behind one base_url must share
    /// it, or a cursor issued by one is refused by another. Unset: the serving role
    /// supplies one (`recap serve` keeps a random one in its data dir).
    #[arg(long = "cursor-secret", env = "RECAP_CURSOR_SECRET", hide_env_values = true)]
    pub cursor_secret: Option<String>,
    /// Counted requests per account in any sliding minute (the spec's limit is 120).
    #[arg(long = "rest-rate-limit-per-minute", env = "RECAP_REST_RATE_LIMIT_PER_MINUTE", default_value_t = 120)]
    pub rate_limit_per_minute: u32,
    /// Bound of each store and limiter call of a request, in milliseconds; past it the
    /// request is answered 503 unavailable. Unset: the store driver's own timeout.
    #[arg(id = "rest_store_timeout_ms", long = "rest-store-timeout-ms", env = "RECAP_REST_STORE_TIMEOUT_MS")]
    pub store_timeout_ms: Option<u64>,
    /// How long a successful token lookup (token, account, plan) is reused, in
    /// milliseconds, where other processes write the store (the distributed edition).
    /// 0 (the default): every request reads them, and a revocation takes effect on the
    /// first request after it is projected. N: a revocation or plan change takes effect
    /// within N ms, and a hot token costs no store read. The embedded edition, which
    /// sees every write, keeps a lookup until a token or account row changes, whatever
    /// this says: no store read for a hot token, and revocations still seen at once.
    #[arg(long = "token-cache-ms", env = "RECAP_TOKEN_CACHE_MS", default_value_t = 0)]
    pub token_cache_ms: u64,
}

impl RestConfig {
    /// The configured cursor secret as key bytes.
    pub fn cursor_secret_bytes(&self) -> Option<Vec<u8>> {
        self.cursor_secret.as_ref().filter(|secret| !secret.is_empty()).map(|secret| secret.as_bytes().to_vec())
    }

    pub fn store_timeout(&self) -> Option<Duration> {
        self.store_timeout_ms.map(Duration::from_millis)
    }
}

impl Default for RestConfig {
    fn default() -> Self {
        RestConfig { cursor_secret: None, rate_limit_per_minute: 120, store_timeout_ms: None, token_cache_ms: 0 }
    }
}

impl fmt::Debug for RestConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RestConfig")
            .field("cursor_secret", &self.cursor_secret.as_ref().map(|_| "<redacted>"))
            .field("rate_limit_per_minute", &self.rate_limit_per_minute)
            .field("store_timeout_ms", &self.store_timeout_ms)
            .finish()
    }
}
