//! Settings of the REST role, from flags and `RECAP_*` environment variables. Defaults
//! give the limits docs/rest.md states; the cursor secret is never printed (Debug redacts it). The
//! feed's retention ([`FeedConfig`]) is its own flattened group, so that the role that
//! writes the feed can take the same flag without the rest of these.

use std::fmt;
use std::time::Duration;

/// REST API v1 settings.
#[derive(clap::Args, Clone)]
pub struct RestConfig {
    /// Key that seals pagination cursors. Every replica behind one base_url must share
    /// it, or a cursor issued by one is refused by another. Unset: `recap serve` keeps a
    /// random one in its data dir; `recap query-api` refuses to start.
    #[arg(long = "cursor-secret", env = "RECAP_CURSOR_SECRET", hide_env_values = true)]
    pub cursor_secret: Option<String>,
    /// Counted requests per account in any sliding minute (120 by default, as docs/rest.md
    /// states).
    #[arg(long = "rest-rate-limit-per-minute", env = "RECAP_REST_RATE_LIMIT_PER_MINUTE", default_value_t = 120)]
    pub rate_limit_per_minute: u32,
    /// Bound of each store call of a request, in milliseconds; past it the request is
    /// answered 503 unavailable. Unset: the store driver's own timeout. The limiter is
    /// bounded by its own timeout (the distributed edition's `--redis-timeout-ms`).
    #[arg(id = "rest_store_timeout_ms", long = "rest-store-timeout-ms", value_name = "REST_STORE_TIMEOUT_MS", env = "RECAP_REST_STORE_TIMEOUT_MS")]
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
    #[command(flatten)]
    pub feed: FeedConfig,
}

/// How long an account's messages stay in its feed (`GET /v1/events`).
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct FeedConfig {
    /// How long a message stays in the account's feed (`GET /v1/events`, `GET
    /// /v1/events/{event_id}`) and a delivery attempt in an endpoint's history, as a
    /// number and a unit: `s`, `m`, `h` or `d` (`30d`, `12h`). The writer of the feed
    /// stamps each row with it; a row past it is never served.
    #[arg(long = "feed-retention", env = "RECAP_FEED_RETENTION", default_value = "30d", value_parser = parse_retention)]
    pub feed_retention: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig { feed_retention: recap_readmodel::webhooks::DEFAULT_RETENTION }
    }
}

/// A retention as `--feed-retention` takes it: a positive whole number and one unit
/// (`s`, `m`, `h`, `d`), e.g. `30d`.
pub fn parse_retention(text: &str) -> Result<Duration, String> {
    let refusal = || format!("{text:?} is not a retention: expected a positive whole number and a unit s, m, h or d, e.g. 30d");
    let unit_at = text.len().checked_sub(1).filter(|&at| text.is_char_boundary(at)).ok_or_else(refusal)?;
    let (digits, unit) = text.split_at(unit_at);
    let seconds_per_unit: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(refusal()),
    };
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(refusal());
    }
    let count: u64 = digits.parse().map_err(|_| refusal())?;
    match count.checked_mul(seconds_per_unit) {
        Some(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
        _ => Err(refusal()),
    }
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
        RestConfig { cursor_secret: None, rate_limit_per_minute: 120, store_timeout_ms: None, token_cache_ms: 0, feed: FeedConfig::default() }
    }
}

impl fmt::Debug for RestConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("RestConfig")
            .field("cursor_secret", &self.cursor_secret.as_ref().map(|_| "<redacted>"))
            .field("rate_limit_per_minute", &self.rate_limit_per_minute)
            .field("store_timeout_ms", &self.store_timeout_ms)
            .field("token_cache_ms", &self.token_cache_ms)
            .field("feed", &self.feed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retention_is_a_positive_number_and_one_unit() {
        assert_eq!(parse_retention("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_retention("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_retention("90m"), Ok(Duration::from_secs(90 * 60)));
        assert_eq!(parse_retention("45s"), Ok(Duration::from_secs(45)));
        for refused in ["", "d", "0d", "30", "30 d", "-1d", "1.5d", "30w", "3é", "99999999999999999999d"] {
            assert!(parse_retention(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_default_retention_is_thirty_days() {
        assert_eq!(RestConfig::default().feed.feed_retention, Duration::from_secs(30 * 86_400));
    }
}
