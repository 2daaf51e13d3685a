//! Authentication, plans, and the error envelope of every code.

use axum::body::Body;
use axum::http::{Method, Request};

use crate::common::*;

async fn with_header(world: &World, value: &str) -> Response {
    world.send(Request::get("/v1/meetings").header("authorization", value).body(Body::empty()).unwrap()).await
}

#[tokio::test]
async fn auth_7_missing_malformed_or_unknown_tokens_are_401_unauthorized() {
    // "Missing token, a token without the svc_pat_ prefix, or an unknown token: 401 unauthorized."
    let world = World::standard().await;
    world.request(Method::GET, "/v1/meetings", None).await.assert_error(401, "unauthorized", &[]);
    for header in [
        "Bearer",
        "Bearer ",
        "Basic c3ZjOnBhdA==",
        "svc_pat_alice_0123456789",
        "Bearer pat_alice",
        "Bearer svc_pat_",
        "Bearer svc_pat_unknown",
        "Bearer sk_live_x",
    ] {
        let response = with_header(&world, header).await;
        response.assert_error(401, "unauthorized", &[]);
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    }
    assert_eq!(with_header(&world, &format!("bearer {ALICE}")).await.status, 200, "the scheme is case-insensitive");
}

#[tokio::test]
async fn auth_duplicate_authorization_headers_are_400_invalid_request_whichever_comes_first() {
    // Decision: two Authorization headers are 400 invalid_request (param Authorization):
    // a proxy reading the last one and the service reading the first would disagree on
    // who is calling, so neither is used.
    let world = World::standard().await;
    for (first, second) in
        [(format!("Bearer {ALICE}"), "Bearer svc_pat_unknown".to_string()), ("Bearer svc_pat_unknown".to_string(), format!("Bearer {ALICE}"))]
    {
        let request =
            Request::get("/v1/meetings").header("authorization", first.as_str()).header("authorization", second.as_str()).body(Body::empty()).unwrap();
        let response = world.send(request).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "Authorization");
        assert_eq!(response.header("www-authenticate"), Some(r#"Bearer error="invalid_request""#));
        assert!(response.header("x-request-id").is_some());
        assert!(response.header("x-quota-remaining").is_none(), "refused before the limiter: not counted");
    }
    assert_eq!(with_header(&world, &format!("Bearer {ALICE}")).await.status, 200, "one header is served");
}

#[tokio::test]
async fn auth_7_a_token_without_the_prefix_is_401_even_when_its_hash_is_known() {
    // "a token without the svc_pat_ prefix ... 401 unauthorized": the prefix is checked
    // itself, not only through an unknown hash.
    let world = World::standard().await;
    let (prefixless, known) = ("sk_live_alice_0123456789", "svc_pat_alice_known_0123456789");
    world.apply(&[token("acc_a", "tok_prefixless", prefixless), token("acc_a", "tok_known", known)]).await;
    let response = world.get("/v1/meetings", prefixless).await;
    response.assert_error(401, "unauthorized", &[]);
    assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    assert_eq!(world.get("/v1/meetings", known).await.status, 200, "the same event with the prefix authenticates");
}

#[tokio::test]
async fn auth_7_a_revoked_token_is_401_token_revoked() {
    // "A revoked token: 401 token_revoked."
    let world = World::standard().await;
    world.get("/v1/meetings", REVOKED).await.assert_error(401, "token_revoked", &[]);
}

#[tokio::test]
async fn auth_5_revocation_takes_effect_on_the_next_request() {
    // "It is revoked on the same settings page, and stops working on the next request."
    let world = World::standard().await;
    assert_eq!(world.get("/v1/meetings", ALICE).await.status, 200);
    world.apply(&[revoke("acc_a", "tok_a")]).await;
    world.get("/v1/meetings", ALICE).await.assert_error(401, "token_revoked", &[]);
}

#[tokio::test]
async fn auth_5_a_configured_token_cache_bounds_how_long_a_revoked_token_keeps_working() {
    // "If you cache token lookups, bound the cache's age and document it": with
    // --token-cache-ms N a revocation takes effect within N ms, never later.
    // In this process: the cache is per process, and the check is timed.
    let config = recap_query_api::RestConfig { token_cache_ms: 1_500, ..Default::default() };
    let world = World::in_process(&standard_events(), config).await;
    assert_eq!(world.get("/v1/meetings", ALICE).await.status, 200);
    world.apply(&[revoke("acc_a", "tok_a")]).await;
    assert_eq!(world.get("/v1/meetings", ALICE).await.status, 200, "answered from the cache within its age");
    tokio::time::sleep(std::time::Duration::from_millis(1_600)).await;
    world.get("/v1/meetings", ALICE).await.assert_error(401, "token_revoked", &[]);
}

#[tokio::test]
async fn auth_5_a_configured_token_cache_never_keeps_a_refusal() {
    // A token created after a refused attempt works at once: only successes are cached.
    let config = recap_query_api::RestConfig { token_cache_ms: 60_000, ..Default::default() };
    let world = World::with_config(&standard_events(), config).await;
    let fresh = "svc_pat_freshly_created_token_000000000000";
    world.get("/v1/meetings", fresh).await.assert_error(401, "unauthorized", &[]);
    world.apply(&[token("acc_a", "tok_fresh", fresh)]).await;
    assert_eq!(world.get("/v1/meetings", fresh).await.status, 200);
}

#[tokio::test]
async fn auth_8_no_active_plan_is_402_no_plan() {
    // "402 no_plan: the account has no active plan."
    let world = World::standard().await;
    world.get("/v1/teams", NO_PLAN).await.assert_error(402, "no_plan", &[]);
}

#[tokio::test]
async fn auth_8_a_plan_without_the_api_is_402_feature_not_included_public_api() {
    // "feature: for feature_not_included the value is public_api".
    let world = World::standard().await;
    let response = world.get("/v1/teams", BASIC).await;
    response.assert_error(402, "feature_not_included", &["feature"]);
    assert_eq!(response.json["error"]["feature"], "public_api");
    assert_eq!(world.get("/v1/teams", ENTERPRISE).await.status, 200, "enterprise includes the API");
}

#[tokio::test]
async fn auth_8_the_plan_is_checked_on_every_request() {
    // "The plan is checked on every request."
    let world = World::standard().await;
    assert_eq!(world.get("/v1/teams", ALICE).await.status, 200);
    world.apply(&[account_draft("acc_a", None, None).version(2).envelope()]).await;
    world.get("/v1/teams", ALICE).await.assert_error(402, "no_plan", &[]);
    world.apply(&[account_draft("acc_a", Some("free"), None).version(3).envelope()]).await;
    world.get("/v1/teams", ALICE).await.assert_error(402, "feature_not_included", &["feature"]);
}

#[tokio::test]
async fn errors_a_store_that_cannot_be_reached_is_503_unavailable() {
    // "503 unavailable: the service could not check the token or the plan; retry shortly."
    let world = World::standard_in_process().await;
    world.set_fault(Fault::Unavailable);
    world.get("/v1/meetings", ALICE).await.assert_error(503, "unavailable", &[]);
    world.set_fault(Fault::None);
    assert_eq!(world.get("/v1/meetings", ALICE).await.status, 200);
}

#[tokio::test]
async fn errors_a_store_that_hangs_is_503_unavailable_within_the_bound() {
    let config = recap_query_api::RestConfig { store_timeout_ms: Some(100), ..Default::default() };
    let world = World::in_process(&standard_events(), config).await;
    world.set_fault(Fault::Hang);
    let started = std::time::Instant::now();
    world.get("/v1/meetings", ALICE).await.assert_error(503, "unavailable", &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "bounded: {:?}", started.elapsed());
}

#[tokio::test]
async fn errors_internal_error_carries_the_request_id() {
    // "request_id: for internal_error, identifies the request".
    let world = World::standard_in_process().await;
    world.set_fault(Fault::Corrupt);
    let response = world.get("/v1/meetings", ALICE).await;
    response.assert_error(500, "internal_error", &["request_id"]);
    assert_eq!(response.json["error"]["request_id"].as_str(), response.header("x-request-id"));
    assert!(!response.text.contains("decode"), "details stay in the log");
}

#[tokio::test]
async fn errors_invalid_request_names_the_parameter() {
    // "param: for invalid_request, names the invalid parameter".
    let world = World::standard().await;
    let response = world.get("/v1/meetings?limit=abc", ALICE).await;
    response.assert_error(400, "invalid_request", &["param"]);
    assert_eq!(response.json["error"]["param"], "limit");
}

#[tokio::test]
async fn errors_input_never_makes_the_service_fail() {
    // Odd input is a 4xx, never a 5xx or a panic.
    let world = World::standard().await;
    for path in [
        "/v1/meetings?limit=%",
        "/v1/meetings?%%%=1&limit=%zz",
        "/v1/meetings?since=%FF",
        "/v1/meetings?cursor=%00",
        "/v1/meetings/%F0%9F%98%80",
        "/v1/meetings/..",
        "/v1/shared-notes?q=%E2%80%AE%00",
        "/v1/action-items?status=%2C%2C",
        "/v1/teams/%2F/action-items",
        "/v1/meetings?limit=18446744073709551617",
        "/v1/meetings?since=9999-12-31T23:59:59Z",
        "/v1/meetings?until=0001-01-01T00:00:00Z",
    ] {
        let response = world.get(path, ALICE).await;
        assert!(response.status.is_client_error() || response.status == 200, "{path}: {}", response.text);
    }
}
