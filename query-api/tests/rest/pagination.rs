//! Pagination 1–6 and the parameters of the paginated lists.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::*;

fn meetings(account: &str, count: i64) -> Vec<recap_schemas::Envelope> {
    (0..count).map(|index| meeting(account, &format!("m{index:03}"), &format!("Meeting {index}"), 1000 + index, vec![])).collect()
}

async fn world_with_meetings(count: i64) -> World {
    let mut events = standard_events();
    events.extend(meetings("acc_c", count));
    World::new(&events).await
}

/// Walks a list to its end; returns the ids in order.
async fn walk(world: &World, first: &str, token: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let separator = if first.contains('?') { '&' } else { '?' };
    let mut next: Option<String> = None;
    for _ in 0..1000 {
        let path = match &next {
            Some(cursor) => format!("{first}{separator}cursor={cursor}"),
            None => first.to_string(),
        };
        let response = world.get(&path, token).await;
        assert_eq!(response.status, 200, "{path}: {}", response.text);
        ids.extend(response.ids());
        match (&response.json["has_more"], &response.json["next_cursor"]) {
            (Value::Bool(true), Value::String(cursor)) => next = Some(cursor.clone()),
            (Value::Bool(false), Value::Null) => return ids,
            other => panic!("has_more/next_cursor inconsistent: {other:?}"),
        }
    }
    panic!("no end")
}

#[tokio::test]
async fn pagination_1_to_4_a_walk_returns_every_item_exactly_once_newest_first() {
    // "Results are ordered newest first." "When has_more is true, the next page is
    // requested with cursor set to the received next_cursor." "The last page has
    // has_more false and next_cursor null."
    let world = world_with_meetings(23).await;
    let expected: Vec<String> = (0..23).rev().map(|index| format!("m{index:03}")).collect();
    for limit in [1, 2, 5, 22, 23, 24, 200] {
        assert_eq!(walk(&world, &format!("/v1/meetings?limit={limit}"), CAROL).await, expected, "limit {limit}");
    }
    assert_eq!(walk(&world, "/v1/action-items?limit=2", ALICE).await, ["ai_9", "ai_5", "ai_4", "ai_3", "ai_2", "ai_1"]);
    assert_eq!(walk(&world, "/v1/action-items?limit=1&status=todo,done", ALICE).await, ["ai_5", "ai_4", "ai_2", "ai_1"]);
    assert_eq!(walk(&world, "/v1/shared-notes?limit=1", ALICE).await, ["shr_direct", "shr_team"]);
    assert_eq!(walk(&world, "/v1/shared-notes?limit=1&q=shared", ALICE).await, ["shr_direct", "shr_team"]);
}

#[tokio::test]
async fn pagination_a_walk_sees_every_item_once_while_new_items_arrive() {
    let world = world_with_meetings(10).await;
    let mut seen = Vec::new();
    let mut response = world.get("/v1/meetings?limit=3", CAROL).await;
    let mut round = 0;
    loop {
        seen.extend(response.ids());
        let Value::String(cursor) = response.json["next_cursor"].clone() else { break };
        // Newer meetings arrive between pages: they are newer than the cursor, so the
        // walk neither repeats nor skips the ones it is going through.
        round += 1;
        world.apply(&[meeting("acc_c", &format!("new{round}"), "New", 5000 + round, vec![])]).await;
        response = world.get(&format!("/v1/meetings?limit=3&cursor={cursor}"), CAROL).await;
    }
    let expected: Vec<String> = (0..10).rev().map(|index| format!("m{index:03}")).collect();
    assert_eq!(seen, expected);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), seen.len());
}

#[tokio::test]
async fn pagination_2_limit_defaults_to_50_and_is_an_integer_from_1_to_200() {
    // "The first request may carry limit (integer, 1 to 200, default 50)."
    let world = world_with_meetings(201).await;
    let first = world.get("/v1/meetings", CAROL).await;
    assert_eq!(first.ids().len(), 50);
    assert_eq!(first.json["has_more"], true);
    assert_eq!(world.get("/v1/meetings?limit=200", CAROL).await.ids().len(), 200);
    assert_eq!(world.get("/v1/meetings?limit=1", CAROL).await.ids().len(), 1);
    for path in ["/v1/meetings", "/v1/action-items", "/v1/shared-notes", "/v1/teams/team_design/action-items"] {
        for bad in ["0", "201", "-1", "1.5", "ten", "", "1e2", "%201"] {
            let response = world.get(&format!("{path}?limit={bad}"), ALICE).await;
            response.assert_error(400, "invalid_request", &["param"]);
            assert_eq!(response.json["error"]["param"], "limit", "{path}?limit={bad}");
        }
    }
}

#[tokio::test]
async fn pagination_2_every_list_endpoint_defaults_to_50_and_accepts_200() {
    // "limit parameter: 1 to 200 on list endpoints, default 50", on each list endpoint.
    let mut events = standard_events();
    events.push(team("team_big", "Big", true));
    events.push(member("team_big", "acc_c"));
    for index in 0..201 {
        events.push(standalone_item("acc_c", item(&format!("ai_c{index:03}"), "todo", None, 1000 + index)));
        events.push(share(&format!("shr_c{index:03}"), "acc_b", None, &["acc_c"], "Direct", 1000 + index));
        events.push(team_item("team_big", &format!("tai_c{index:03}"), "todo", 1000 + index));
    }
    let world = World::new(&events).await;
    for path in ["/v1/action-items", "/v1/shared-notes", "/v1/teams/team_big/action-items"] {
        let first = world.get(path, CAROL).await;
        assert_eq!(first.status, 200, "{path}: {}", first.text);
        assert_eq!(first.ids().len(), 50, "{path}: the default");
        assert_eq!(world.get(&format!("{path}?limit=200"), CAROL).await.ids().len(), 200, "{path}?limit=200");
        assert_eq!(world.get(&format!("{path}?limit=1"), CAROL).await.ids().len(), 1, "{path}?limit=1");
    }
}

#[tokio::test]
async fn pagination_6_edited_forged_or_garbage_cursors_are_400_cursor() {
    // "Cursors are opaque. Clients must not build or edit them."
    let world = world_with_meetings(5).await;
    let cursor = world.get("/v1/meetings?limit=2", CAROL).await.json["next_cursor"].as_str().unwrap().to_string();
    let mut edited = cursor.clone().into_bytes();
    edited[2] = if edited[2] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    let truncated = cursor[..cursor.len() - 1].to_string();
    use base64::Engine;
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"[1790000000000000,"m001"]0123456789abcdef0123456789abcdef"#);
    let forged_sealed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([&[1u8][..], &[0x5a; 40]].concat());
    for bad in [edited.as_str(), truncated.as_str(), forged.as_str(), forged_sealed.as_str(), "", "garbage", "%FF", "null"] {
        let response = world.get(&format!("/v1/meetings?limit=2&cursor={bad}"), CAROL).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "cursor", "{bad}");
    }
}

#[tokio::test]
async fn pagination_5_a_cursor_is_bound_to_its_endpoint_account_and_filters() {
    // "The same filters must be sent with every page."
    let world = world_with_meetings(5).await;
    let page = world.get("/v1/meetings?limit=2&since=2026-11-01T00:00:00Z", CAROL).await;
    let cursor = page.json["next_cursor"].as_str().unwrap().to_string();
    assert_eq!(world.get(&format!("/v1/meetings?limit=2&since=2026-11-01T00:00:00Z&cursor={cursor}"), CAROL).await.status, 200);
    // Same instant, other spelling: the same filter.
    assert_eq!(world.get(&format!("/v1/meetings?limit=3&since=2026-11-01T01:00:00%2B01:00&cursor={cursor}"), CAROL).await.status, 200);
    for other in [
        format!("/v1/meetings?limit=2&cursor={cursor}"),
        format!("/v1/meetings?since=2026-11-01T00:00:01Z&cursor={cursor}"),
        format!("/v1/meetings?since=2026-11-01T00:00:00Z&until=2027-01-01T00:00:00Z&cursor={cursor}"),
        format!("/v1/action-items?cursor={cursor}"),
        format!("/v1/shared-notes?cursor={cursor}"),
    ] {
        let response = world.get(&other, CAROL).await;
        assert_eq!(response.json["error"]["param"], "cursor", "{other}");
    }
    let foreign = world.get(&format!("/v1/meetings?since=2026-11-01T00:00:00Z&cursor={cursor}"), ALICE).await;
    assert_eq!(foreign.json["error"]["param"], "cursor", "another account's cursor");
    let items = world.get("/v1/action-items?limit=1&status=todo", ALICE).await.json["next_cursor"].as_str().unwrap().to_string();
    assert_eq!(world.get(&format!("/v1/action-items?status=todo&cursor={items}"), ALICE).await.status, 200);
    assert_eq!(world.get(&format!("/v1/action-items?status=todo,todo&cursor={items}"), ALICE).await.status, 200, "the same set");
    assert_eq!(world.get(&format!("/v1/action-items?status=done&cursor={items}"), ALICE).await.json["error"]["param"], "cursor");
    assert_eq!(world.get(&format!("/v1/action-items?status=todo&meeting_id=mtg_a1&cursor={items}"), ALICE).await.json["error"]["param"], "cursor");
    let notes = world.get("/v1/shared-notes?limit=1&q=shared", ALICE).await.json["next_cursor"].as_str().unwrap().to_string();
    assert_eq!(world.get(&format!("/v1/shared-notes?q=SHARED&cursor={notes}"), ALICE).await.status, 200, "same words");
    assert_eq!(world.get(&format!("/v1/shared-notes?q=text&cursor={notes}"), ALICE).await.json["error"]["param"], "cursor");
}

#[tokio::test]
async fn since_is_inclusive_and_until_exclusive() {
    // "since: only meetings created at or after this instant"; "until: only meetings created strictly before this instant".
    let world = world_with_meetings(5).await;
    let at = |index: i64| ts(1000 + index);
    assert_eq!(world.get(&format!("/v1/meetings?since={}", at(2)), CAROL).await.ids(), ["m004", "m003", "m002"]);
    assert_eq!(world.get(&format!("/v1/meetings?until={}", at(2)), CAROL).await.ids(), ["m001", "m000"]);
    assert_eq!(world.get(&format!("/v1/meetings?since={}&until={}", at(1), at(3)), CAROL).await.ids(), ["m002", "m001"]);
    assert_eq!(world.get(&format!("/v1/meetings?since={}&until={}", at(3), at(1)), CAROL).await.ids(), Vec::<String>::new());
    assert_eq!(walk(&world, &format!("/v1/meetings?limit=1&since={}&until={}", at(1), at(4)), CAROL).await, ["m003", "m002", "m001"]);
}

#[tokio::test]
async fn meetings_are_ordered_and_filtered_by_created_at_not_by_started_at() {
    // "Meetings are sorted by created_at, newest first"; "since: only meetings created at
    // or after this instant"; "until: only meetings created strictly before this
    // instant". Each meeting here started in the reverse order of its creation (a
    // meeting recorded late and synced early, and the other way round), so an order or
    // a bound taken from started_at gives other ids.
    let mut events = standard_events();
    events.extend((0..4).map(|index| {
        meeting_draft("acc_c", &format!("m{index:03}"), &format!("Meeting {index}"), 1000 + index, vec![]).started_at(EVENTS.minute(2000 - index)).envelope()
    }));
    let world = World::new(&events).await;
    let at = |index: i64| ts(1000 + index);
    let listed = world.get("/v1/meetings", CAROL).await;
    assert_eq!(listed.ids(), ["m003", "m002", "m001", "m000"], "newest created first: {}", listed.text);
    assert_eq!(listed.json["data"][0]["started_at"], ts(1997), "the newest created started first: {}", listed.text);
    assert_eq!(world.get(&format!("/v1/meetings?since={}", at(2)), CAROL).await.ids(), ["m003", "m002"]);
    assert_eq!(world.get(&format!("/v1/meetings?until={}", at(2)), CAROL).await.ids(), ["m001", "m000"]);
    assert_eq!(walk(&world, "/v1/meetings?limit=1", CAROL).await, ["m003", "m002", "m001", "m000"]);
}

#[tokio::test]
async fn since_and_until_must_include_a_time_and_a_time_zone() {
    // "since and until must include a time and a time zone (ISO 8601, for example with a Z suffix)."
    let world = World::standard().await;
    for (query, param) in [
        ("since=2026-11-01", "since"),
        ("since=2026-11-01T00:00:00", "since"),
        ("until=2026-11-01T00:00", "until"),
        ("until=yesterday", "until"),
        ("since=1790000000", "since"),
    ] {
        let response = world.get(&format!("/v1/meetings?{query}"), ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], param, "{query}");
    }
    for good in ["since=2026-11-01T00:00:00Z", "since=2026-11-01T00:00:00.5%2B00:00", "since=2026-11-01T00:00:00+00:00", "until=2026-11-01T02:00:00%2B02:00"] {
        assert_eq!(world.get(&format!("/v1/meetings?{good}"), ALICE).await.status, 200, "{good}");
    }
}

#[tokio::test]
async fn the_first_invalid_parameter_is_named_in_a_fixed_order() {
    // Decided order: /meetings since, until, limit, cursor; /meetings/{id} meeting_id, include;
    // /action-items status, assignee_human_id, meeting_id, limit, cursor; /shared-notes q, limit, cursor;
    // /teams/{id}/action-items team_id, status, limit.
    let world = World::standard().await;
    let long = "x".repeat(257);
    let cases = [
        ("/v1/meetings?cursor=bad&limit=0&until=x&since=y".to_string(), "since"),
        ("/v1/meetings?cursor=bad&limit=0&until=x".to_string(), "until"),
        ("/v1/meetings?cursor=bad&limit=0".to_string(), "limit"),
        (format!("/v1/meetings/{long}?include=x"), "meeting_id"),
        ("/v1/action-items?cursor=bad&limit=0&meeting_id=&assignee_human_id=&status=x".to_string(), "status"),
        ("/v1/action-items?cursor=bad&limit=0&meeting_id=&assignee_human_id=".to_string(), "assignee_human_id"),
        ("/v1/action-items?cursor=bad&limit=0&meeting_id=".to_string(), "meeting_id"),
        ("/v1/action-items?cursor=bad&limit=0".to_string(), "limit"),
        (format!("/v1/shared-notes?cursor=bad&limit=0&q={}", "q".repeat(1001)), "q"),
        ("/v1/shared-notes?cursor=bad&limit=0".to_string(), "limit"),
        (format!("/v1/teams/{long}/action-items?limit=0&status=x"), "team_id"),
        ("/v1/teams/team_design/action-items?limit=0&status=x".to_string(), "status"),
        ("/v1/meetings?limit=1&limit=2".to_string(), "limit"),
    ];
    for (path, param) in cases {
        let response = world.get(&path, ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], param, "{path}");
    }
}
