//! Conventions 1–7 and the order of the checks.

use axum::body::Body;
use axum::http::{Method, Request};

use crate::common::*;

#[tokio::test]
async fn convention_1_every_method_but_get_is_405_method_not_allowed() {
    // "Every endpoint is GET. Any other method returns 405 method_not_allowed."
    let world = World::standard().await;
    for method in ["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "PROPFIND"] {
        for path in ["/v1/meetings", "/v1/meetings/mtg_a1", "/v1/teams", "/v1/nope", "/"] {
            for token in [Some(ALICE), None] {
                let response = world.request(Method::from_bytes(method.as_bytes()).unwrap(), path, token).await;
                if method == "HEAD" {
                    assert_eq!(response.status, 405, "HEAD is not GET");
                } else {
                    response.assert_error(405, "method_not_allowed", &[]);
                }
                assert_eq!(response.header("allow"), Some("GET"));
            }
        }
    }
}

#[tokio::test]
async fn convention_2_the_payload_is_under_data() {
    // "Every successful response is a JSON object with the payload under data."
    let world = World::standard().await;
    for path in [
        "/v1/meetings",
        "/v1/meetings/mtg_a1",
        "/v1/action-items",
        "/v1/shared-notes",
        "/v1/shared-notes/shr_team",
        "/v1/teams",
        "/v1/teams/team_design/action-items",
    ] {
        let response = world.get(path, ALICE).await;
        assert_eq!(response.status, 200, "{path}: {}", response.text);
        assert!(response.json.get("data").is_some(), "{path}");
        assert_eq!(response.header("content-type"), Some("application/json"));
    }
}

#[tokio::test]
async fn convention_3_only_the_paginated_lists_carry_has_more_and_next_cursor() {
    // "List responses also carry has_more (boolean) and next_cursor (string or null)."
    // /teams: "It has no parameters and no pagination fields"; team action items:
    // "The response carries no has_more and no next_cursor".
    let world = World::standard().await;
    for path in ["/v1/meetings", "/v1/action-items", "/v1/shared-notes"] {
        let keys: Vec<String> = world.get(path, ALICE).await.json.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["data", "has_more", "next_cursor"], "{path}");
    }
    for path in ["/v1/teams", "/v1/teams/team_design/action-items", "/v1/meetings/mtg_a1", "/v1/shared-notes/shr_team"] {
        let keys: Vec<String> = world.get(path, ALICE).await.json.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, ["data"], "{path}");
    }
}

#[tokio::test]
async fn convention_4_every_response_carries_x_request_id() {
    // "Every response carries the header X-Request-Id." Checked for every response in
    // `openapi::check_response`; here: generated ids are UUIDs and differ.
    let world = World::standard().await;
    let first = world.get("/v1/teams", ALICE).await;
    let second = world.get("/v1/nope", ALICE).await;
    let (first, second) = (first.header("x-request-id").unwrap().to_string(), second.header("x-request-id").unwrap().to_string());
    assert_ne!(first, second);
    assert_eq!(first.len(), 36, "a UUID: {first}");
}

#[tokio::test]
async fn convention_4_a_well_formed_incoming_request_id_is_echoed_and_others_are_replaced() {
    let world = World::standard().await;
    let send = |id: &'static str, path: &'static str| {
        let request = Request::get(path).header("authorization", format!("Bearer {ALICE}")).header("x-request-id", id).body(Body::empty()).unwrap();
        world.send(request)
    };
    for path in ["/v1/teams", "/v1/meetings/nope", "/v1/nope", "/v1/meetings?limit=0"] {
        assert_eq!(send("trace-01:abc.DEF_9", path).await.header("x-request-id"), Some("trace-01:abc.DEF_9"));
    }
    let long: &'static str = Box::leak("a".repeat(129).into_boxed_str());
    for bad in ["has space", "semi;colon", long, "quote\"d"] {
        let echoed = send(bad, "/v1/teams").await.header("x-request-id").unwrap().to_string();
        assert_ne!(echoed, bad);
        assert_eq!(echoed.len(), 36);
    }
}

#[tokio::test]
async fn convention_5_successes_carry_the_quota_headers() {
    // "Successful responses carry the quota headers X-Quota-Limit, X-Quota-Remaining and X-Quota-Reset."
    let world = World::standard().await;
    let response = world.get("/v1/teams", ALICE).await;
    assert_eq!(response.header("x-quota-limit"), Some("50000"));
    assert_eq!(response.header("x-quota-remaining"), Some("49999"));
    assert_eq!(response.header("x-quota-reset"), Some("2026-12-15T00:00:00Z"), "anchor Jan 15: the period ends Dec 15");
    assert_eq!(response.header("ratelimit-policy"), Some("\"minute\";q=120;w=60"));
    assert_eq!(response.header("ratelimit"), Some("\"minute\";r=119;t=60"));
}

#[tokio::test]
async fn convention_6_no_cors_headers_whatever_the_request_sends() {
    // "No CORS headers are sent, so browsers cannot read responses from a web page."
    // (Every response of the suite is checked in `World::send`; here with CORS requests.)
    let world = World::standard().await;
    let preflight = Request::builder()
        .method("OPTIONS")
        .uri("/v1/meetings")
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "authorization")
        .body(Body::empty())
        .unwrap();
    world.send(preflight).await.assert_error(405, "method_not_allowed", &[]);
    for path in ["/v1/meetings", "/v1/nope", "/v1/meetings?limit=x", "/v1/meetings/nope"] {
        let request =
            Request::get(path).header("origin", "https://evil.example").header("authorization", format!("Bearer {ALICE}")).body(Body::empty()).unwrap();
        let response = world.send(request).await;
        assert!(response.headers.keys().all(|name| !name.as_str().starts_with("access-control")), "{path}");
        assert!(response.header("vary").is_none_or(|vary| !vary.to_lowercase().contains("origin")));
    }
}

#[tokio::test]
async fn convention_7_an_unknown_path_is_404_not_found() {
    // "An unknown path returns 404 not_found."
    let world = World::standard().await;
    for path in [
        "/",
        "/v1",
        "/v1/",
        "/v2/meetings",
        "/v1/meetings/",
        "/v1/meetings/mtg_a1/extra",
        "/v1/teams/team_design",
        "/v1/Meetings",
        "/meetings",
        "/v1/teams//action-items",
    ] {
        world.get(path, ALICE).await.assert_error(404, "not_found", &[]);
    }
}

#[tokio::test]
async fn check_order_method_before_route_before_token_before_plan_before_params() {
    // docs/rest.md, "Order of the checks": method (405) → route (404 not_found) → token (401) → plan (402) →
    // parameters (400) → per-minute limit (429) → period quota (402) → handler.
    let world = World::standard().await;
    world.request(Method::POST, "/v1/nope", None).await.assert_error(405, "method_not_allowed", &[]);
    world.request(Method::GET, "/v1/nope", None).await.assert_error(404, "not_found", &[]);
    world.request(Method::GET, "/v1/meetings?limit=0", None).await.assert_error(401, "unauthorized", &[]);
    world.get("/v1/meetings?limit=0", REVOKED).await.assert_error(401, "token_revoked", &[]);
    world.get("/v1/meetings?limit=0", NO_PLAN).await.assert_error(402, "no_plan", &[]);
    world.get("/v1/meetings?limit=0", BASIC).await.assert_error(402, "feature_not_included", &["feature"]);
    world.get("/v1/meetings/%FF?include=x", ALICE).await.assert_error(400, "invalid_request", &["param"]);
}

#[tokio::test]
async fn check_order_parameters_before_the_minute_limit_and_the_limit_before_the_quota() {
    let world = World::in_process(&standard_events(), recap_query_api::RestConfig { rate_limit_per_minute: 3, ..Default::default() }).await;
    for _ in 0..3 {
        assert_eq!(world.get("/v1/teams", SMALL_QUOTA).await.status, 200);
    }
    // Quota (3) and minute (3) are both used up: a bad parameter is still 400, and a
    // good request is 429 before it is 402 quota_exhausted.
    let bad = world.get("/v1/meetings?limit=0", SMALL_QUOTA).await;
    bad.assert_error(400, "invalid_request", &["param"]);
    assert_eq!(bad.json["error"]["param"], "limit");
    world.get("/v1/teams", SMALL_QUOTA).await.assert_error(429, "rate_limited", &[]);
    world.clock().advance_micros(61_000_000);
    world.get("/v1/teams", SMALL_QUOTA).await.assert_error(402, "quota_exhausted", &["used", "limit", "resets_at"]);
}
