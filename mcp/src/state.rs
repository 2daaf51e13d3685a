//! The state every handler shares: the read model (also where OAuth state is kept), the
//! plans, the settings, the clock and the prebuilt tool catalog. Cheap to clone; holds
//! nothing a request writes, since pods are stateless and any pod serves any request
//! (the caches it holds, of tokens and client metadata documents, are only caches).

use std::sync::Arc;
use std::time::Duration;

use recap_access::{InProcessLimiter, Limiter, Plans};
use recap_readmodel::ReadModel;

use crate::config::McpConfig;
use crate::tools::Catalog;

/// Wall-clock microseconds. Injectable so tests can age codes and tokens.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// Shared state of the MCP router.
#[derive(Clone)]
pub struct McpState {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub readmodel: ReadModel,
    pub plans: Plans,
    pub config: McpConfig,
    pub clock: Clock,
    pub catalog: Catalog,
    pub store_timeout: Duration,
    /// Successful `svc_pat_` lookups, reused for `config.token_cache_ms` (off at 0).
    pub tokens: recap_access::TokenCache,
    /// Client ID Metadata Documents: the fetcher and the documents it keeps.
    pub cimd: crate::oauth::cimd::Cimd,
    /// Counts dynamic registrations per client address and tool calls per account
    /// (under keys of their own): the one given with [`McpState::with_limiter`], else
    /// one in process on this state's clock.
    pub limiter: std::sync::OnceLock<Arc<dyn Limiter>>,
    /// Seals `list_recent_changes` cursors: under the secret given with
    /// [`McpState::with_cursor_secret`] (every replica's), else under one of this
    /// process's making (its cursors open only here).
    pub cursors: std::sync::OnceLock<recap_access::cursor::Cursors>,
}

/// The MCP clock as the limiter's.
struct LimiterClock(Clock);

impl recap_access::Clock for LimiterClock {
    fn now(&self) -> recap_schemas::Timestamp {
        recap_schemas::Timestamp((self.0)())
    }
}

impl McpState {
    pub fn new(readmodel: ReadModel, plans: Plans, config: &McpConfig) -> McpState {
        McpState::with_clock(readmodel, plans, config, Arc::new(recap_readmodel::driver::now_micros))
    }

    /// As [`McpState::new`], with the clock that decides token and code expiry.
    pub fn with_clock(readmodel: ReadModel, plans: Plans, config: &McpConfig, clock: Clock) -> McpState {
        let store_timeout = config.store_timeout().unwrap_or_else(|| readmodel.driver().timeout());
        let tokens = recap_access::TokenCache::new(Duration::from_millis(config.token_cache_ms));
        McpState {
            inner: Arc::new(Inner {
                readmodel,
                plans,
                config: config.clone(),
                clock,
                catalog: Catalog::build(),
                store_timeout,
                tokens,
                cimd: crate::oauth::cimd::Cimd::new(config),
                limiter: std::sync::OnceLock::new(),
                cursors: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Counts registrations and tool calls with `limiter` (the distributed edition's
    /// Redis limiter, shared by every pod) instead of in process. Call it before the
    /// first request.
    pub fn with_limiter(self, limiter: Arc<dyn Limiter>) -> McpState {
        if self.inner.limiter.set(limiter).is_err() {
            tracing::warn!("the MCP limiter was already in use; keeping it");
        }
        self
    }

    /// Seals cursors under `secret`, which every replica behind one URL shares. Call it
    /// before the first request.
    pub fn with_cursor_secret(self, secret: &[u8]) -> McpState {
        if self.inner.cursors.set(recap_access::cursor::Cursors::new(secret)).is_err() {
            tracing::warn!("the MCP cursor key was already in use; keeping it");
        }
        self
    }

    pub(crate) fn cursors(&self) -> &recap_access::cursor::Cursors {
        self.inner.cursors.get_or_init(|| recap_access::cursor::Cursors::new(crate::oauth::secrets::random_secret().as_bytes()))
    }

    pub(crate) fn limiter(&self) -> &Arc<dyn Limiter> {
        let clock = self.inner.clock.clone();
        self.inner.limiter.get_or_init(|| Arc::new(InProcessLimiter::new(Arc::new(LimiterClock(clock)))))
    }

    pub(crate) fn now_micros(&self) -> i64 {
        (self.inner.clock)()
    }
}

impl Inner {
    /// Runs one store call under the configured bound; a timeout is an unavailable store.
    pub async fn bounded<T>(&self, call: impl std::future::Future<Output = Result<T, recap_readmodel::StoreError>>) -> Result<T, recap_readmodel::StoreError> {
        match tokio::time::timeout(self.store_timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(recap_readmodel::StoreError::Unavailable(format!("no answer within {} ms", self.store_timeout.as_millis()))),
        }
    }
}
