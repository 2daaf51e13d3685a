//! Limits 1–6: what counts, the per-minute limit, the billing-period quota.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::http::Method;

use crate::common::*;

#[tokio::test]
async fn limits_2_3_quota_remaining_moves_by_one_per_counted_request_and_not_otherwise() {
    // "A request counts as one API request when it passes authentication and parameter
    // validation. This includes requests ending in 404 meeting_not_found, 404
    // shared_note_not_found or 404 team_not_found for a well-formed identifier."
    // "Requests rejected with 400, 401, 404 not_found, 405 or 429 do not count. Requests
    // that the plan does not cover do not count."
    let world = World::standard().await;
    let mut expected = world.get("/v1/teams", ALICE).await.remaining();
    assert_eq!(expected, 49_999);
    // Counted, and each carries the quota headers.
    for path in ["/v1/meetings", "/v1/meetings/nope", "/v1/shared-notes/nope", "/v1/teams/nope/action-items", "/v1/teams/team_free/action-items", "/v1/teams"] {
        let response = world.get(path, ALICE).await;
        expected -= 1;
        assert_eq!(response.remaining(), expected, "{path} counts once");
    }
    // Not counted.
    world.get("/v1/meetings?limit=0", ALICE).await.assert_error(400, "invalid_request", &["param"]);
    world.get("/v1/meetings", "svc_pat_unknown").await.assert_error(401, "unauthorized", &[]);
    world.get("/v1/meetings", REVOKED).await.assert_error(401, "token_revoked", &[]);
    world.get("/v1/nope", ALICE).await.assert_error(404, "not_found", &[]);
    world.request(Method::POST, "/v1/meetings", Some(ALICE)).await.assert_error(405, "method_not_allowed", &[]);
    let not_counted = world.get("/v1/meetings/%FF", ALICE).await;
    assert_eq!(not_counted.status, 400, "a malformed identifier is a 400, not a counted 404");
    assert!(not_counted.header("x-quota-remaining").is_none(), "only requests that reached the limiter carry quota headers");
    expected -= 1;
    assert_eq!(world.get("/v1/teams", ALICE).await.remaining(), expected, "none of those counted");
}

#[tokio::test]
async fn limits_3_plan_uncovered_requests_do_not_count() {
    // "Requests that the plan does not cover do not count."
    let world = World::standard().await;
    assert_eq!(world.get("/v1/teams", ALICE).await.remaining(), 49_999);
    world.apply(&[account_draft("acc_a", None, None).version(2).envelope()]).await;
    for _ in 0..3 {
        world.get("/v1/teams", ALICE).await.assert_error(402, "no_plan", &[]);
    }
    world.apply(&[account_v("acc_a", 3)]).await;
    assert_eq!(world.get("/v1/teams", ALICE).await.remaining(), 49_998);
}

fn account_v(account_id: &str, version: u64) -> recap_schemas::Envelope {
    account_draft(account_id, Some("flow"), None).version(version).envelope()
}

#[tokio::test]
async fn limits_5_the_121st_request_in_a_minute_is_429_rate_limited_with_retry_after() {
    // "Requests per minute: 120". "Exceeding the per-minute limit returns 429
    // rate_limited with a Retry-After header in seconds."
    let world = World::standard_in_process().await;
    for index in 0..120u64 {
        let response = world.get("/v1/teams", ALICE).await;
        assert_eq!(response.status, 200, "request {}", index + 1);
        // t: whole seconds until the first request leaves the window.
        let t = (60_000_000u64 - index * 100_000).div_ceil(1_000_000);
        assert_eq!(response.header("ratelimit"), Some(format!("\"minute\";r={};t={t}", 119 - index).as_str()));
        world.clock().advance_micros(100_000);
    }
    // 12 s after the first request: it leaves the window in 48 s.
    let refused = world.get("/v1/teams", ALICE).await;
    refused.assert_error(429, "rate_limited", &[]);
    assert_eq!(refused.header("retry-after"), Some("48"));
    assert_eq!(refused.header("ratelimit"), Some("\"minute\";r=0;t=48"));
    assert_eq!(refused.remaining(), 50_000 - 120, "a 429 is not counted");
    // Other accounts have their own minute.
    assert_eq!(world.get("/v1/teams", BOB).await.status, 200);
    world.clock().advance_micros(47_000_000);
    world.get("/v1/teams", ALICE).await.assert_error(429, "rate_limited", &[]);
    world.clock().advance_micros(1_000_000);
    let admitted = world.get("/v1/teams", ALICE).await;
    assert_eq!(admitted.status, 200, "the window slid past the first request");
    assert_eq!(admitted.remaining(), 50_000 - 121);
}

#[tokio::test]
async fn limits_5_the_per_minute_limit_is_configurable() {
    let config = recap_query_api::RestConfig { rate_limit_per_minute: 2, ..Default::default() };
    let world = World::with_config(&standard_events(), config).await;
    assert_eq!(world.get("/v1/teams", ALICE).await.header("ratelimit-policy"), Some("\"minute\";q=2;w=60"));
    assert_eq!(world.get("/v1/teams", ALICE).await.status, 200);
    let refused = world.get("/v1/teams", ALICE).await;
    refused.assert_error(429, "rate_limited", &[]);
    assert_eq!(refused.header("retry-after"), Some("60"));
}

#[tokio::test]
async fn limits_6_used_up_period_requests_are_402_quota_exhausted_until_the_period_ends() {
    // "When the billing-period requests are used up, the response is 402 quota_exhausted."
    // quota_exhausted carries used, limit and resets_at ("when the quota renews").
    let world = World::standard_in_process().await;
    for left in [2, 1, 0] {
        let response = world.get("/v1/teams", SMALL_QUOTA).await;
        assert_eq!(response.header("x-quota-limit"), Some("3"), "api_quota of the plan");
        assert_eq!(response.remaining(), left);
    }
    for _ in 0..2 {
        let exhausted = world.get("/v1/teams", SMALL_QUOTA).await;
        exhausted.assert_error(402, "quota_exhausted", &["used", "limit", "resets_at"]);
        assert_eq!(exhausted.json["error"]["used"], 3, "a quota_exhausted request is not counted");
        assert_eq!(exhausted.json["error"]["limit"], 3);
        assert_eq!(exhausted.json["error"]["resets_at"], "2026-12-15T00:00:00Z");
        assert_eq!(exhausted.header("x-quota-reset"), Some("2026-12-15T00:00:00Z"));
    }
    world.clock().set(recap_schemas::Timestamp::parse("2026-12-14T23:59:59Z").unwrap());
    world.get("/v1/teams", SMALL_QUOTA).await.assert_error(402, "quota_exhausted", &["used", "limit", "resets_at"]);
    world.clock().set(recap_schemas::Timestamp::parse("2026-12-15T00:00:00Z").unwrap());
    let renewed = world.get("/v1/teams", SMALL_QUOTA).await;
    assert_eq!(renewed.status, 200, "a new billing period");
    assert_eq!(renewed.remaining(), 2);
    assert_eq!(renewed.header("x-quota-reset"), Some("2027-01-15T00:00:00Z"));
}

#[tokio::test]
async fn limits_4_the_quota_follows_the_plan_or_the_tier_default() {
    // "Requests per billing period: 50,000 (flow), 50,000, or as the contract says (enterprise)."
    let world = World::standard().await;
    assert_eq!(world.get("/v1/teams", BOB).await.header("x-quota-limit"), Some("50000"));
    let enterprise = world.get("/v1/teams", ENTERPRISE).await;
    assert_eq!(enterprise.header("x-quota-limit"), Some("7"));
    assert_eq!(enterprise.header("x-quota-remaining"), Some("6"));
}

#[tokio::test]
async fn limits_the_minute_and_the_quota_are_per_account_not_per_token() {
    let world = World::standard().await;
    const SECOND: &str = "svc_pat_alice_second_token";
    world.apply(&[token("acc_a", "tok_a2", SECOND)]).await;
    assert_eq!(world.get("/v1/teams", ALICE).await.remaining(), 49_999);
    assert_eq!(world.get("/v1/teams", SECOND).await.remaining(), 49_998);
}

/// A limiter that, when it says an account's requests are likely admitted, decides only
/// once the endpoint's read has started: a router that waited for the decision before
/// reading would get no decision (503 after 5 s).
struct DecidesAfterTheRead {
    inner: recap_access::InProcessLimiter,
    likely: bool,
    store: recap_testkit::FaultyDriver,
    /// The count of scans when it last decided.
    decided_at: AtomicU64,
}

#[async_trait::async_trait]
impl recap_access::Limiter for DecidesAfterTheRead {
    async fn admit(&self, account_id: &str, limits: &recap_access::Limits) -> Result<recap_access::Decision, recap_access::LimiterError> {
        if self.likely {
            // (The read may have started before this is first polled, or after.)
            let before = self.decided_at.load(Ordering::SeqCst);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while self.store.scans() == before {
                if std::time::Instant::now() > deadline {
                    return Err(recap_access::LimiterError::Unavailable("the read did not start before the decision".into()));
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
        self.decided_at.store(self.store.scans(), Ordering::SeqCst);
        self.inner.admit(account_id, limits).await
    }

    fn admits_likely(&self, _account_id: &str) -> bool {
        self.likely
    }
}

async fn world_deciding_after_the_read(per_minute: u32, likely: bool) -> World<recap_testkit::InProcess> {
    let config = recap_query_api::RestConfig { rate_limit_per_minute: per_minute, ..Default::default() };
    World::with_limiter(&standard_events(), config, move |clock, store| {
        Arc::new(DecidesAfterTheRead { inner: recap_access::InProcessLimiter::new(Arc::new(clock)), likely, store, decided_at: AtomicU64::new(0) })
    })
    .await
}

#[tokio::test]
async fn limits_2_5_reads_overlapping_the_limiter_change_no_answer_and_no_count() {
    // The reads of an account the limiter expects to admit start during its decision
    // (see pipeline.rs); the decision still rules: "Exceeding the per-minute limit returns
    // 429 rate_limited", and a refused request counts nowhere.
    let world = world_deciding_after_the_read(1, true).await;
    let first = world.get("/v1/meetings", ALICE).await;
    assert_eq!(first.status, 200, "the read started before the decision: {}", first.text);
    assert_eq!(first.ids(), ["mtg_a5", "mtg_a4", "mtg_a3", "mtg_a2", "mtg_a1"]);
    assert_eq!(first.remaining(), 49_999);
    let reads = world.scans();
    let refused = world.get("/v1/meetings", ALICE).await;
    refused.assert_error(429, "rate_limited", &[]);
    assert!(refused.header("retry-after").is_some());
    assert_eq!(refused.remaining(), 49_999, "not counted");
    assert!(world.scans() > reads, "its read had started, and was dropped");
}

#[tokio::test]
async fn limits_5_a_request_of_an_account_at_its_limit_reads_nothing_before_its_refusal() {
    let world = world_deciding_after_the_read(1, false).await;
    assert_eq!(world.get("/v1/meetings", ALICE).await.status, 200);
    let reads = world.scans();
    world.get("/v1/meetings", ALICE).await.assert_error(429, "rate_limited", &[]);
    assert_eq!(world.scans(), reads, "refused before any read");
}
