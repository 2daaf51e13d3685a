//! The REST API v1 through the real binary (`recap serve`, or the distributed edition
//! with `RECAP_TEST_EDITION=distributed`): the main rules of `docs/rest.md`,
//! end to end over HTTP. The router-level suite (`query-api/tests/rest`) checks every
//! rule in detail; this one checks that the served binary keeps them.

use std::collections::BTreeSet;

use recap_testkit::events::*;
use recap_testkit::process::get;
use recap_testkit::server::Server;
use serde_json::Value;

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    json: Value,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    fn ids(&self) -> Vec<String> {
        self.json["data"].as_array().unwrap_or_else(|| panic!("no data: {}", self.json)).iter().map(|entry| entry["id"].as_str().unwrap().to_string()).collect()
    }

    fn remaining(&self) -> u64 {
        self.header("x-quota-remaining").and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("no X-Quota-Remaining: {:?}", self.headers))
    }
}

fn call(url: &str, token: Option<&str>) -> Reply {
    let (status, headers, body) = get(url, token);
    let json = serde_json::from_str(&body).unwrap_or_else(|error| panic!("{url}: not JSON ({error}): {body}"));
    let reply = Reply { status, headers, json };
    assert!(reply.header("x-request-id").is_some_and(|id| !id.is_empty()), "Convention 4: X-Request-Id on every response");
    assert!(reply.headers.iter().all(|(name, _)| !name.to_lowercase().starts_with("access-control-")), "Convention 6: no CORS headers");
    reply
}

/// A server holding Alice (flow) with meetings, items, a team and shares, and Bob
/// (enterprise) sharing with her; and Alice's token.
fn seeded() -> (Server, String) {
    let server = Server::start();
    let alice = new_token();
    let mut lines =
        vec![account("acc_alice", Some("flow"), None, 1), token_created("acc_alice", "tok_alice", &alice, 1), account("acc_bob", Some("enterprise"), None, 1)];
    for index in 0..7 {
        let id = format!("mtg_{index}");
        let items = [item(&format!("ai_{index}"), if index % 2 == 0 { "todo" } else { "done" }, None, 10 * (index + 1))];
        lines.push(meeting_draft("acc_alice", &id, "Weekly sync", 10 * (index + 1)).action_items(items).envelope());
    }
    lines.push(meeting("acc_bob", "mtg_bob", "Bob only", 5, 1));
    lines.push(team("team_1", "Design", Some("business"), true, 1));
    lines.push(member("team_1", "acc_alice", 1));
    lines.push(member("team_1", "acc_bob", 1));
    lines.push(team_item("team_1", "tai_1", "todo", 3, 1));
    lines.push(share("shr_1", "acc_bob", 4).title("Q3").team(Some(("team_1", "Design"))).text("Q3 plan").version(1).envelope());
    lines.push(share("shr_own", "acc_alice", 6).title("Mine").team(Some(("team_1", "Design"))).text("mine").version(1).envelope());
    server.feed(&lines);
    (server, alice)
}

#[test]
fn every_endpoint_answers_under_data_with_the_quota_headers() {
    // Conventions 2, 3, 5: payload under data; has_more/next_cursor on the paginated
    // lists only; X-Quota-Limit, X-Quota-Remaining, X-Quota-Reset on successes.
    let (server, alice) = seeded();
    let base = &server.base_url;
    for (path, paginated) in [
        ("/meetings", true),
        ("/meetings/mtg_0?include=transcript", false),
        ("/action-items", true),
        ("/shared-notes", true),
        ("/shared-notes/shr_1", false),
        ("/teams", false),
        ("/teams/team_1/action-items", false),
    ] {
        let reply = call(&format!("{base}{path}"), Some(&alice));
        assert_eq!(reply.status, 200, "{path}: {}", reply.json);
        let keys: BTreeSet<&str> = reply.json.as_object().unwrap().keys().map(String::as_str).collect();
        let expected: BTreeSet<&str> = if paginated { ["data", "has_more", "next_cursor"].into() } else { ["data"].into() };
        assert_eq!(keys, expected, "{path}");
        assert_eq!(reply.header("x-quota-limit"), Some("50000"), "{path}");
        assert!(reply.header("x-quota-reset").is_some_and(|reset| recap_schemas::Timestamp::parse(reset).is_ok() && reset.ends_with('Z')));
        assert_eq!(reply.header("ratelimit-policy"), Some("\"minute\";q=120;w=60"));
    }
    let shared = call(&format!("{base}/shared-notes"), Some(&alice));
    assert_eq!(shared.ids(), ["shr_1"], "never the caller's own share");
}

#[test]
fn other_methods_are_405_and_unknown_paths_404_not_found() {
    // Convention 1: "Any other method returns 405 method_not_allowed." Convention 7:
    // "An unknown path returns 404 not_found." DESIGN: a POST to an unknown path is 405.
    let (server, alice) = seeded();
    let base = &server.base_url;
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    for url in [format!("{base}/meetings"), format!("{base}/nope")] {
        let mut response = agent.post(&url).header("Authorization", &format!("Bearer {}", alice)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 405);
        assert!(response.headers().keys().all(|name| !name.as_str().starts_with("access-control-")));
        let body: Value = serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "method_not_allowed");
        let preflight = ureq::http::Request::builder()
            .method("OPTIONS")
            .uri(&url)
            .header("Origin", "https://example.com")
            .header("Access-Control-Request-Method", "GET")
            .body(())
            .unwrap();
        let response = agent.run(preflight).unwrap();
        assert_eq!(response.status().as_u16(), 405, "a CORS preflight is just another method");
        assert!(response.headers().keys().all(|name| !name.as_str().starts_with("access-control-")));
    }
    let reply = call(&format!("{base}/nope"), Some(&alice));
    assert_eq!((reply.status, reply.code()), (404, "not_found"));
    let reply = call(&format!("{base}/nope"), None);
    assert_eq!((reply.status, reply.code()), (404, "not_found"), "route before token");
}

#[test]
fn tokens_and_plans_are_checked_on_every_request() {
    // Authentication 7: missing or unknown token 401 unauthorized, revoked 401
    // token_revoked, on the next request after revocation. Errors: 402 no_plan and
    // feature_not_included (feature public_api).
    let (server, alice) = seeded();
    let base = &server.base_url;
    let url = format!("{base}/meetings");
    assert_eq!(call(&url, None).code(), "unauthorized");
    assert_eq!(call(&url, Some("svc_pat_nobody")).code(), "unauthorized");
    assert_eq!(call(&url, Some("not_a_pat")).code(), "unauthorized");
    assert_eq!(call(&url, Some(&alice)).status, 200);
    server.feed(&[token_revoked("acc_alice", "tok_alice", 2)]);
    let reply = call(&url, Some(&alice));
    assert_eq!((reply.status, reply.code()), (401, "token_revoked"));

    let (no_plan, basic) = (new_token(), new_token());
    server.feed(&[
        account("acc_none", None, None, 1),
        token_created("acc_none", "tok_none", &no_plan, 1),
        account("acc_basic", Some("basic"), None, 1),
        token_created("acc_basic", "tok_basic", &basic, 1),
    ]);
    let reply = call(&format!("{url}?limit=0"), Some(&no_plan));
    assert_eq!((reply.status, reply.code()), (402, "no_plan"), "plan before parameters");
    let reply = call(&url, Some(&basic));
    assert_eq!((reply.status, reply.code(), reply.json["error"]["feature"].as_str()), (402, "feature_not_included", Some("public_api")));

    // Authentication 8: a plan change, like a revocation, is seen on the next request; a token
    // lookup kept by the server does not outlive it.
    server.feed(&[account("acc_basic", Some("flow"), None, 2)]);
    assert_eq!(call(&url, Some(&basic)).status, 200);
    assert_eq!(call(&url, Some(&basic)).status, 200);
    server.feed(&[account("acc_basic", Some("basic"), None, 3)]);
    assert_eq!(call(&url, Some(&basic)).code(), "feature_not_included");
}

#[test]
fn a_page_walk_returns_every_meeting_once_and_cursors_are_tamper_proof() {
    // Pagination 1–6.
    let (server, alice) = seeded();
    let base = &server.base_url;
    let mut ids = Vec::new();
    let mut url = format!("{base}/meetings?limit=2");
    loop {
        let reply = call(&url, Some(&alice));
        assert_eq!(reply.status, 200, "{}", reply.json);
        ids.extend(reply.ids());
        match reply.json["next_cursor"].as_str() {
            Some(cursor) => {
                assert_eq!(reply.json["has_more"], true);
                let tampered = format!("{base}/meetings?limit=2&cursor={}A", cursor);
                let refused = call(&tampered, Some(&alice));
                assert_eq!((refused.status, refused.code(), refused.json["error"]["param"].as_str()), (400, "invalid_request", Some("cursor")));
                let other_filters = call(&format!("{base}/meetings?since=2020-01-01T00:00:00Z&cursor={cursor}"), Some(&alice));
                assert_eq!(other_filters.json["error"]["param"], "cursor");
                url = format!("{base}/meetings?limit=2&cursor={cursor}");
            }
            None => {
                assert_eq!(reply.json["has_more"], false);
                break;
            }
        }
    }
    let expected: Vec<String> = (0..7).rev().map(|index| format!("mtg_{index}")).collect();
    assert_eq!(ids, expected, "newest first, each once, never another account's");
    let reply = call(&format!("{base}/meetings?limit=201"), Some(&alice));
    assert_eq!((reply.status, reply.json["error"]["param"].as_str()), (400, Some("limit")));
    let reply = call(&format!("{base}/meetings?since=2026-01-01"), Some(&alice));
    assert_eq!((reply.status, reply.json["error"]["param"].as_str()), (400, Some("since")));
}

#[test]
fn counted_requests_move_the_quota_by_one_and_others_not_at_all() {
    // Limits 2–3: counted once past authentication and validation, including 404
    // meeting_not_found; never 400, 401, 404 not_found, 405.
    let (server, alice) = seeded();
    let base = &server.base_url;
    let first = call(&format!("{base}/teams"), Some(&alice)).remaining();
    let missing = call(&format!("{base}/meetings/mtg_bob"), Some(&alice));
    assert_eq!((missing.status, missing.code()), (404, "meeting_not_found"));
    assert_eq!(missing.remaining(), first - 1);
    assert_eq!(call(&format!("{base}/meetings?limit=0"), Some(&alice)).status, 400);
    assert_eq!(call(&format!("{base}/nope"), Some(&alice)).status, 404);
    assert_eq!(call(&format!("{base}/meetings"), Some("svc_pat_nobody")).status, 401);
    assert_eq!(call(&format!("{base}/teams"), Some(&alice)).remaining(), first - 2);
}

#[test]
fn the_121st_request_in_a_minute_is_429_with_retry_after() {
    // Limits: 120 requests per minute; Limits 5: "429 rate_limited with a Retry-After
    // header in seconds". Across every query-api process of the distributed edition.
    let (server, alice) = seeded();
    let urls = &server.base_urls;
    for index in 0..120 {
        let base = &urls[index % urls.len()];
        let reply = call(&format!("{base}/teams"), Some(&alice));
        assert_eq!(reply.status, 200, "request {}: {}", index + 1, reply.json);
    }
    let refused = call(&format!("{}/teams", urls[0]), Some(&alice));
    assert_eq!((refused.status, refused.code()), (429, "rate_limited"));
    let retry_after: u64 = refused.header("retry-after").and_then(|value| value.parse().ok()).expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after));
}

#[test]
fn used_up_period_requests_are_402_quota_exhausted() {
    // Limits 6 and the error table: quota_exhausted carries used, limit, resets_at.
    let (server, _alice) = seeded();
    let base = &server.base_url;
    let small = new_token();
    server.feed(&[account("acc_small", Some("flow"), Some(2), 1), token_created("acc_small", "tok_small", &small, 1)]);
    assert_eq!(call(&format!("{base}/teams"), Some(&small)).remaining(), 1);
    assert_eq!(call(&format!("{base}/teams"), Some(&small)).remaining(), 0);
    let exhausted = call(&format!("{base}/teams"), Some(&small));
    assert_eq!((exhausted.status, exhausted.code()), (402, "quota_exhausted"));
    assert_eq!(exhausted.json["error"]["used"], 2);
    assert_eq!(exhausted.json["error"]["limit"], 2);
    assert!(exhausted.json["error"]["resets_at"].as_str().is_some_and(|reset| recap_schemas::Timestamp::parse(reset).is_ok()));
}

#[test]
fn the_period_quota_holds_across_restarts_and_kills() {
    // Limits 2, 4 and 6: a billing period's quota counts every counted request of the
    // period, whatever happens to the processes in between. A clean stop keeps every
    // count; a kill keeps what was counted more than a second before it.
    let mut server = Server::start();
    let token = new_token();
    server.feed(&[account("acc_restarts", Some("flow"), Some(4), 1), token_created("acc_restarts", "tok_restarts", &token, 1)]);
    let teams = |server: &Server| call(&format!("{}/teams", server.base_url), Some(&token));
    assert_eq!(teams(&server).remaining(), 3);
    server.restart();
    assert_eq!(teams(&server).remaining(), 2, "counted again after a clean restart");
    std::thread::sleep(std::time::Duration::from_millis(2_500));
    server.kill9();
    server.restart();
    assert_eq!(teams(&server).remaining(), 1, "counted again after a kill");
    assert_eq!(teams(&server).remaining(), 0);
    let exhausted = teams(&server);
    assert_eq!((exhausted.status, exhausted.code()), (402, "quota_exhausted"));
    assert_eq!(exhausted.json["error"]["used"], 4);
}
