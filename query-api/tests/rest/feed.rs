//! The account's feed of events and its webhook endpoints (`docs/rest.md`, Events and
//! webhooks): order, cursors, limits, the type filter, retention, the head, who sees
//! what, and the same authentication, plan, counting and limits as every endpoint. The
//! feed and the endpoints are seeded straight into the store through the read model's
//! webhook records (`recap_testkit::webhooks`), as the runtime that writes them would.

use std::time::Duration;

use recap_query_api::RestConfig;
use recap_readmodel::messages::{Message, MessageKind};
use recap_readmodel::webhooks::{AttemptOutcome, EndpointState};
use recap_schemas::Timestamp;
use recap_testkit::webhooks::{attempt, endpoint, message, secrets, Seeder};
use recap_testkit::InProcess;
use serde_json::{json, Value};

use crate::common::*;

const SECRET: &str = "whsec_c2VjcmV0IGtleSBvZiB0aGUgdGVzdHM=";

fn at(minute: i64) -> String {
    format!("2026-11-20T09:{minute:02}:00Z")
}

async fn world() -> World<InProcess> {
    World::in_process(&standard_events(), RestConfig::default()).await
}

/// `count` messages in Alice's feed at seqs 1..=count, types cycling through
/// meeting.created, action_item.created and team.joined.
async fn alice_feed(seeder: &Seeder, count: i64) -> Vec<Message> {
    let kinds = [MessageKind::MeetingCreated, MessageKind::ActionItemCreated, MessageKind::TeamJoined];
    let mut messages = Vec::new();
    for seq in 1..=count {
        let kind = kinds[(seq as usize - 1) % kinds.len()];
        let message = message("acc_a", kind, &format!("res_{seq}"), &at(seq % 60));
        seeder.publish("acc_a", seq, &message).await;
        messages.push(message);
    }
    messages
}

fn ids(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|message| message.id.clone()).collect()
}

#[tokio::test]
async fn events_are_listed_oldest_first_each_as_id_type_created_at_and_data() {
    // Decided: the feed is oldest first; it only grows at its end, so a reader resumes
    // where it stopped. Each entry is the message as a webhook delivers it.
    let world = world().await;
    let messages = alice_feed(&world.seeder(), 3).await;
    let response = world.get("/v1/events", ALICE).await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.ids(), ids(&messages));
    assert_eq!(
        response.json["data"][0],
        json!({"id": messages[0].id, "type": "meeting.created", "created_at": "2026-11-20T09:01:00Z", "data": {"id": "res_1"}})
    );
    assert_eq!(response.json["has_more"], false);
    assert!(response.json["next_cursor"].is_string(), "a cursor to poll from, at the end too: {}", response.text);
}

#[tokio::test]
async fn an_empty_feed_has_no_cursor_and_asking_again_without_one_is_the_same() {
    let world = world().await;
    let response = world.get("/v1/events", ALICE).await;
    assert_eq!(response.json, json!({"data": [], "has_more": false, "next_cursor": null}));
}

#[tokio::test]
async fn a_cursor_resumes_after_the_last_event_read_and_at_the_end_keeps_the_readers_place() {
    let world = world().await;
    let seeder = world.seeder();
    let messages = alice_feed(&seeder, 5).await;
    let first = world.get("/v1/events?limit=2", ALICE).await;
    assert_eq!(first.ids(), ids(&messages[..2]));
    assert_eq!(first.json["has_more"], true);
    let cursor = first.json["next_cursor"].as_str().unwrap().to_string();
    let second = world.get(&format!("/v1/events?limit=2&cursor={cursor}"), ALICE).await;
    assert_eq!(second.ids(), ids(&messages[2..4]));
    let cursor = second.json["next_cursor"].as_str().unwrap().to_string();
    let last = world.get(&format!("/v1/events?limit=2&cursor={cursor}"), ALICE).await;
    assert_eq!((last.ids(), &last.json["has_more"]), (ids(&messages[4..]), &json!(false)));
    // At the end: the cursor still stands where the reader stopped, now and later.
    let end = last.json["next_cursor"].as_str().unwrap().to_string();
    let nothing_new = world.get(&format!("/v1/events?cursor={end}"), ALICE).await;
    assert_eq!((nothing_new.ids().len(), &nothing_new.json["has_more"]), (0, &json!(false)));
    assert!(nothing_new.json["next_cursor"].is_string());
    let later = message("acc_a", MessageKind::MeetingUpdated, "res_6", &at(6));
    seeder.publish("acc_a", 6, &later).await;
    let polled = world.get(&format!("/v1/events?cursor={end}"), ALICE).await;
    assert_eq!(polled.ids(), std::slice::from_ref(&later.id), "only what happened since");
    let still = nothing_new.json["next_cursor"].as_str().unwrap();
    assert_eq!(world.get(&format!("/v1/events?cursor={still}"), ALICE).await.ids(), [later.id], "an empty page's cursor resumes at the same place");
}

#[tokio::test]
async fn events_limit_is_1_to_200_and_defaults_to_50() {
    let world = world().await;
    alice_feed(&world.seeder(), 55).await;
    let default = world.get("/v1/events", ALICE).await;
    assert_eq!((default.ids().len(), &default.json["has_more"]), (50, &json!(true)));
    assert_eq!(world.get("/v1/events?limit=1", ALICE).await.ids().len(), 1);
    assert_eq!(world.get("/v1/events?limit=200", ALICE).await.ids().len(), 55);
    for bad in ["limit=0", "limit=201", "limit=abc", "limit="] {
        let response = world.get(&format!("/v1/events?{bad}"), ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "limit", "{bad}");
    }
}

#[tokio::test]
async fn an_unknown_event_type_is_400_invalid_request_naming_it() {
    let world = world().await;
    for bad in ["types=meeting.archived", "types=meeting.created,meeting.archived", "types=", "types=meeting.created,"] {
        let response = world.get(&format!("/v1/events?{bad}"), ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "types", "{bad}");
    }
    let named = world.get("/v1/events?types=meeting.archived", ALICE).await;
    assert!(named.json["error"]["message"].as_str().unwrap().contains("\"meeting.archived\""), "{}", named.text);
}

#[tokio::test]
async fn the_types_filter_keeps_only_those_types_and_its_cursor_is_bound_to_it() {
    let world = world().await;
    let messages = alice_feed(&world.seeder(), 7).await;
    let wanted: Vec<String> = messages.iter().filter(|message| message.kind == MessageKind::TeamJoined).map(|message| message.id.clone()).collect();
    let response = world.get("/v1/events?types=team.joined", ALICE).await;
    assert_eq!(response.ids(), wanted);
    let both = world.get("/v1/events?types=team.joined,meeting.created&limit=2", ALICE).await;
    assert_eq!(both.ids(), [messages[0].id.clone(), messages[2].id.clone()]);
    let cursor = both.json["next_cursor"].as_str().unwrap().to_string();
    // The same filter in another order is the same filter.
    let next = world.get(&format!("/v1/events?types=meeting.created,team.joined&limit=2&cursor={cursor}"), ALICE).await;
    assert_eq!(next.ids(), [messages[3].id.clone(), messages[5].id.clone()]);
    let other = world.get(&format!("/v1/events?types=team.joined&cursor={cursor}"), ALICE).await;
    other.assert_error(400, "invalid_request", &["param"]);
    assert_eq!(other.json["error"]["param"], "cursor");
}

#[tokio::test]
async fn a_filtered_page_reads_at_most_1000_other_events_and_its_cursor_continues_after_them() {
    // More events of other types than one page reads past, then the one wanted: the
    // first page is empty but says there is more, and following the cursors reaches it,
    // once.
    let world = world().await;
    let seeder = world.seeder();
    for seq in 1..=1_100 {
        seeder.publish("acc_a", seq, &message("acc_a", MessageKind::MeetingCreated, &format!("res_{seq}"), &at(seq % 60))).await;
    }
    let joined = message("acc_a", MessageKind::TeamJoined, "res_joined", &at(1));
    seeder.publish("acc_a", 1_101, &joined).await;
    let first = world.get("/v1/events?types=team.joined", ALICE).await;
    assert_eq!((first.ids(), &first.json["has_more"]), (vec![], &json!(true)), "{}", first.text);
    let mut cursor = first.json["next_cursor"].as_str().expect("a cursor after what the page read").to_string();
    let mut listed = Vec::new();
    for _ in 0..3 {
        let page = world.get(&format!("/v1/events?types=team.joined&cursor={cursor}"), ALICE).await;
        listed.extend(page.ids());
        cursor = page.json["next_cursor"].as_str().unwrap().to_string();
        if page.json["has_more"] == false {
            break;
        }
    }
    assert_eq!(listed, std::slice::from_ref(&joined.id), "the event wanted, once");
}

// docs/rest.md, Cursors: the feed's position is the message log's, shared with other
// accounts, so a cursor shows nothing of it; one issued before positions were sealed
// (the key in the clear, signed) still resumes where it stood until the end date of
// signed cursors, and is refused from then on.
#[tokio::test]
async fn a_feed_cursor_shows_nothing_of_its_position_and_a_signed_one_from_before_still_resumes() {
    use base64::Engine;
    let world = world().await;
    let messages = alice_feed(&world.seeder(), 3).await;
    let cursor = world.get("/v1/events?limit=1", ALICE).await.json["next_cursor"].as_str().unwrap().to_string();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&cursor).expect("base64url");
    assert!(!bytes.windows(3).any(|window| window == b"[1]"), "the position in the clear: {bytes:?}");
    assert_eq!(world.get(&format!("/v1/events?cursor={cursor}"), ALICE).await.ids(), ids(&messages[1..]));
    // As issued before: the same binding (endpoint, account, no types), signed.
    let cursors = recap_access::cursor::Cursors::new(b"test cursor secret, 32 bytes long!");
    let signed = cursors.issue_signed(r#"["events","acc_a",""]"#, &[recap_readmodel::Val::Int(1)]);
    assert!(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&signed).unwrap().starts_with(b"[1]"));
    if recap_access::cursor::signed_cursors_open_at(std::time::SystemTime::now()) {
        assert_eq!(world.get(&format!("/v1/events?cursor={signed}"), ALICE).await.ids(), ids(&messages[1..]));
    } else {
        world.get(&format!("/v1/events?cursor={signed}"), ALICE).await.assert_error(400, "invalid_request", &["param"]);
    }
    let response = world.get(&format!("/v1/events?cursor={signed}"), BOB).await;
    response.assert_error(400, "invalid_request", &["param"]);
}

#[tokio::test]
async fn a_cursor_is_bound_to_its_account_and_endpoint() {
    let world = world().await;
    alice_feed(&world.seeder(), 2).await;
    let cursor = world.get("/v1/events?limit=1", ALICE).await.json["next_cursor"].as_str().unwrap().to_string();
    for (path, token) in [(format!("/v1/events?cursor={cursor}"), BOB), (format!("/v1/meetings?cursor={cursor}"), ALICE)] {
        let response = world.get(&path, token).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "cursor", "{path}");
    }
}

#[tokio::test]
async fn an_event_past_the_retention_is_not_served() {
    let world = world().await;
    let kept = message("acc_a", MessageKind::MeetingCreated, "res_kept", &at(1));
    let expiring = message("acc_a", MessageKind::MeetingCreated, "res_old", &at(2));
    // Retention long enough for two writes and a read on a busy Cassandra to come first.
    let retention = Duration::from_secs(3);
    let published = tokio::time::Instant::now();
    world.seeder_with_retention(retention).publish("acc_a", 1, &expiring).await;
    world.seeder().publish("acc_a", 2, &kept).await;
    assert_eq!(world.get("/v1/events", ALICE).await.ids(), [expiring.id.clone(), kept.id.clone()]);
    assert!(published.elapsed() < retention, "served within the retention: {:?}", published.elapsed());
    tokio::time::sleep_until(published + retention + Duration::from_millis(500)).await;
    assert_eq!(world.get("/v1/events", ALICE).await.ids(), std::slice::from_ref(&kept.id));
    world.get(&format!("/v1/events/{}", expiring.id), ALICE).await.assert_error(404, "event_not_found", &[]);
    assert_eq!(world.get(&format!("/v1/events/{}", kept.id), ALICE).await.status, 200);
}

#[tokio::test]
async fn a_feed_row_above_the_head_is_not_served_until_the_head_reaches_it() {
    // The head is written once every row at or below it is: a row that landed early is
    // not served, so no cursor moves past a row still to land below it.
    let world = world().await;
    let seeder = world.seeder();
    let messages = alice_feed(&seeder, 2).await;
    let early = message("acc_a", MessageKind::TeamLeft, "res_early", &at(9));
    seeder.publish_above_head("acc_a", 4, &early).await;
    let page = world.get("/v1/events", ALICE).await;
    assert_eq!((page.ids(), &page.json["has_more"]), (ids(&messages), &json!(false)));
    world.get(&format!("/v1/events/{}", early.id), ALICE).await.assert_error(404, "event_not_found", &[]);
    let cursor = page.json["next_cursor"].as_str().unwrap().to_string();
    let late = message("acc_a", MessageKind::TeamJoined, "res_late", &at(8));
    seeder.publish("acc_a", 3, &late).await;
    seeder.store().write(vec![seeder.store().head_row("acc_a", 4)]).await.unwrap();
    assert_eq!(world.get(&format!("/v1/events?cursor={cursor}"), ALICE).await.ids(), [late.id, early.id.clone()]);
    assert_eq!(world.get(&format!("/v1/events/{}", early.id), ALICE).await.json["data"]["id"], early.id.as_str());
}

#[tokio::test]
async fn one_event_by_id_and_another_accounts_is_404_event_not_found_like_an_unknown_one() {
    let world = world().await;
    let seeder = world.seeder();
    let messages = alice_feed(&seeder, 1).await;
    let bobs = message("acc_b", MessageKind::MeetingCreated, "res_bob", &at(3));
    seeder.publish("acc_b", 1, &bobs).await;
    let response = world.get(&format!("/v1/events/{}", messages[0].id), ALICE).await;
    assert_eq!(
        response.json,
        json!({"data": {"id": messages[0].id, "type": "meeting.created", "created_at": "2026-11-20T09:01:00Z", "data": {"id": "res_1"}}})
    );
    let foreign = world.get(&format!("/v1/events/{}", bobs.id), ALICE).await;
    foreign.assert_error(404, "event_not_found", &[]);
    let unknown = world.get("/v1/events/msg_nope", ALICE).await;
    unknown.assert_error(404, "event_not_found", &[]);
    assert_eq!(foreign.json["error"], unknown.json["error"], "nothing tells a foreign id from an unknown one");
    assert!(world.get("/v1/events", ALICE).await.ids().iter().all(|id| *id != bobs.id), "another account's events are never listed");
    world.get("/v1/events/%FF", ALICE).await.assert_error(400, "invalid_request", &["param"]);
}

#[tokio::test]
async fn webhook_endpoints_are_listed_by_id_with_their_state_and_never_a_secret() {
    let world = world().await;
    let seeder = world.seeder();
    let mut second = endpoint("we_2", "https://crm.example.com/hooks");
    second.description = Some("CRM sync".into());
    second.types = vec![MessageKind::MeetingNotesReady, MessageKind::MeetingCreated];
    seeder.put_endpoint("acc_a", &second, &secrets(SECRET)).await;
    seeder.put_endpoint("acc_a", &endpoint("we_1", "https://bot.example.com/in"), &secrets(SECRET)).await;
    seeder.put_endpoint("acc_b", &endpoint("we_b", "https://bob.example.com/in"), &secrets(SECRET)).await;
    let success = Timestamp::parse("2026-11-20T09:30:00Z").unwrap();
    let answered =
        EndpointState { endpoint_created_version: Some(1), last_attempt_at: Some(success), last_success_at: Some(success), ..EndpointState::default() };
    seeder.put_state("acc_a", "we_2", &answered).await;
    let response = world.get("/v1/webhook-endpoints", ALICE).await;
    assert_eq!(response.status, 200, "{}", response.text);
    assert!(!response.text.contains("whsec_") && !response.text.contains("secret"), "never a secret: {}", response.text);
    assert_eq!(
        response.json,
        json!({"data": [
            {"id": "we_1", "url": "https://bot.example.com/in", "description": null, "types": [], "enabled": true,
             "state": {"status": "enabled", "failing_since": null, "disabled_at": null, "last_attempt_at": null, "last_success_at": null},
             "created_at": "2026-11-01T09:00:00Z", "updated_at": "2026-11-01T09:00:00Z"},
            {"id": "we_2", "url": "https://crm.example.com/hooks", "description": "CRM sync", "types": ["meeting.notes_ready", "meeting.created"], "enabled": true,
             "state": {"status": "enabled", "failing_since": null, "disabled_at": null, "last_attempt_at": "2026-11-20T09:30:00Z", "last_success_at": "2026-11-20T09:30:00Z"},
             "created_at": "2026-11-01T09:00:00Z", "updated_at": "2026-11-01T09:00:00Z"}
        ]})
    );
    assert_eq!(world.get("/v1/webhook-endpoints", CAROL).await.json, json!({"data": []}));
}

#[tokio::test]
async fn an_endpoints_status_tells_failing_disabled_after_failures_and_disabled_by_account_apart() {
    let world = world().await;
    let seeder = world.seeder();
    let since = Timestamp::parse("2026-11-17T09:00:00Z").unwrap();
    let disabled_at = Timestamp::parse("2026-11-20T09:00:00Z").unwrap();
    for (id, enabled) in [("we_failing", true), ("we_dead", true), ("we_off", false)] {
        let mut record = endpoint(id, "https://example.com/in");
        record.enabled = enabled;
        seeder.put_endpoint("acc_a", &record, &secrets(SECRET)).await;
    }
    let failing =
        EndpointState { endpoint_created_version: Some(1), failing_since: Some(since), last_attempt_at: Some(disabled_at), ..EndpointState::default() };
    seeder.put_state("acc_a", "we_failing", &failing).await;
    let dead = EndpointState {
        endpoint_created_version: Some(1),
        failing_since: Some(since),
        disabled_version: Some(1),
        disabled_at: Some(disabled_at),
        last_attempt_at: Some(disabled_at),
        last_success_at: None,
    };
    seeder.put_state("acc_a", "we_dead", &dead).await;
    let response = world.get("/v1/webhook-endpoints", ALICE).await;
    let states: Vec<(&str, &Value)> = response.json["data"].as_array().unwrap().iter().map(|entry| (entry["id"].as_str().unwrap(), &entry["state"])).collect();
    assert_eq!(states[0].0, "we_dead");
    assert_eq!(
        states[0].1,
        &json!({"status": "disabled_after_failures", "failing_since": "2026-11-17T09:00:00Z", "disabled_at": "2026-11-20T09:00:00Z", "last_attempt_at": "2026-11-20T09:00:00Z", "last_success_at": null})
    );
    assert_eq!((states[1].0, &states[1].1["status"], &states[1].1["failing_since"]), ("we_failing", &json!("failing"), &json!("2026-11-17T09:00:00Z")));
    assert_eq!((states[2].0, &states[2].1["status"]), ("we_off", &json!("disabled_by_account")));
    // The account's next change (a newer version) enables it again.
    let mut upserted = endpoint("we_dead", "https://example.com/in");
    upserted.version = 2;
    seeder.put_endpoint("acc_a", &upserted, &secrets(SECRET)).await;
    let after = world.get("/v1/webhook-endpoints", ALICE).await;
    assert_eq!((&after.json["data"][0]["state"]["status"], &after.json["data"][0]["state"]["disabled_at"]), (&json!("failing"), &Value::Null));
}

#[tokio::test]
async fn attempts_are_listed_newest_first_and_paged_by_cursor() {
    let world = world().await;
    let seeder = world.seeder();
    seeder.put_endpoint("acc_a", &endpoint("we_1", "https://bot.example.com/in"), &secrets(SECRET)).await;
    for (id, minute) in [("att_1", 1), ("att_2", 2), ("att_3", 3)] {
        seeder.put_attempt("acc_a", "we_1", &attempt(id, "msg_1", &at(minute))).await;
    }
    let mut succeeded = attempt("att_4", "msg_2", &at(4));
    (succeeded.outcome, succeeded.status, succeeded.error, succeeded.attempt) = (AttemptOutcome::Succeeded, Some(204), None, 2);
    seeder.put_attempt("acc_a", "we_1", &succeeded).await;
    let first = world.get("/v1/webhook-endpoints/we_1/attempts?limit=2", ALICE).await;
    assert_eq!(first.ids(), ["att_4", "att_3"]);
    assert_eq!(
        first.json["data"][0],
        json!({"id": "att_4", "event_id": "msg_2", "type": "meeting.created", "attempt": 2, "attempted_at": "2026-11-20T09:04:00Z",
               "outcome": "succeeded", "response_status": 204, "error": null, "duration_ms": 12, "next_attempt_at": null})
    );
    assert_eq!(first.json["has_more"], true);
    let cursor = first.json["next_cursor"].as_str().unwrap().to_string();
    let rest = world.get(&format!("/v1/webhook-endpoints/we_1/attempts?limit=2&cursor={cursor}"), ALICE).await;
    assert_eq!((rest.ids(), &rest.json["has_more"], &rest.json["next_cursor"]), (vec!["att_2".to_string(), "att_1".into()], &json!(false), &Value::Null));
    let bounded = world.get("/v1/webhook-endpoints/we_1/attempts?limit=201", ALICE).await;
    bounded.assert_error(400, "invalid_request", &["param"]);
    assert_eq!(bounded.json["error"]["param"], "limit");
}

#[tokio::test]
async fn an_endpoint_deleted_and_created_again_under_its_id_has_neither_the_old_state_nor_the_old_attempts() {
    let world = world().await;
    let seeder = world.seeder();
    let upsert = |version: u64| EVENTS.webhook_endpoint("acc_a", "we_1", "https://bot.example.com/in").version(version).envelope();
    world.apply(&[upsert(1)]).await;
    // What the runtime recorded of the endpoint created at version 1.
    let since = Timestamp::parse("2026-11-17T09:00:00Z").unwrap();
    let failing = EndpointState { endpoint_created_version: Some(1), failing_since: Some(since), last_attempt_at: Some(since), ..EndpointState::default() };
    seeder.put_state("acc_a", "we_1", &failing).await;
    seeder.put_attempt("acc_a", "we_1", &attempt("att_1", "msg_1", &at(1))).await;
    let before = world.get("/v1/webhook-endpoints", ALICE).await;
    assert_eq!(before.json["data"][0]["state"]["status"], "failing", "{}", before.text);
    assert_eq!(world.get("/v1/webhook-endpoints/we_1/attempts", ALICE).await.ids(), ["att_1"]);

    world.apply(&[EVENTS.webhook_endpoint_deleted("acc_a", "we_1").version(2).envelope(), upsert(3)]).await;
    let after = world.get("/v1/webhook-endpoints", ALICE).await;
    assert_eq!(after.ids(), ["we_1"]);
    assert_eq!(
        after.json["data"][0]["state"],
        json!({"status": "enabled", "failing_since": null, "disabled_at": null, "last_attempt_at": null, "last_success_at": null})
    );
    let attempts = world.get("/v1/webhook-endpoints/we_1/attempts", ALICE).await;
    assert_eq!(attempts.json, json!({"data": [], "has_more": false, "next_cursor": null}));
}

#[tokio::test]
async fn attempts_of_an_unknown_or_another_accounts_endpoint_are_404_webhook_endpoint_not_found() {
    let world = world().await;
    let seeder = world.seeder();
    seeder.put_endpoint("acc_b", &endpoint("we_b", "https://bob.example.com/in"), &secrets(SECRET)).await;
    seeder.put_attempt("acc_b", "we_b", &attempt("att_b", "msg_b", &at(1))).await;
    for path in ["/v1/webhook-endpoints/we_b/attempts", "/v1/webhook-endpoints/we_nope/attempts"] {
        world.get(path, ALICE).await.assert_error(404, "webhook_endpoint_not_found", &[]);
    }
    assert_eq!(world.get("/v1/webhook-endpoints/we_b/attempts", BOB).await.ids(), ["att_b"]);
}

#[tokio::test]
async fn the_feed_and_the_endpoints_are_authenticated_plan_gated_and_counted_like_every_endpoint() {
    let world = world().await;
    let messages = alice_feed(&world.seeder(), 1).await;
    world.seeder().put_endpoint("acc_a", &endpoint("we_1", "https://bot.example.com/in"), &secrets(SECRET)).await;
    let paths =
        ["/v1/events".to_string(), format!("/v1/events/{}", messages[0].id), "/v1/webhook-endpoints".into(), "/v1/webhook-endpoints/we_1/attempts".into()];
    for path in &paths {
        world.request(axum::http::Method::GET, path, None).await.assert_error(401, "unauthorized", &[]);
        world.get(path, REVOKED).await.assert_error(401, "token_revoked", &[]);
        world.get(path, NO_PLAN).await.assert_error(402, "no_plan", &[]);
        world.get(path, BASIC).await.assert_error(402, "feature_not_included", &["feature"]);
        world.request(axum::http::Method::POST, path, Some(ALICE)).await.assert_error(405, "method_not_allowed", &[]);
    }
    let mut expected = world.get("/v1/teams", ALICE).await.remaining();
    let counted = [paths.to_vec(), vec!["/v1/events/msg_nope".into(), "/v1/webhook-endpoints/we_nope/attempts".into()]].concat();
    for path in &counted {
        let response = world.get(path, ALICE).await;
        expected -= 1;
        assert_eq!(response.remaining(), expected, "{path} counts once");
    }
    for not_counted in ["/v1/events?types=nope", "/v1/events?limit=0", "/v1/webhook-endpoints/we_1", "/v1/events/"] {
        let response = world.get(not_counted, ALICE).await;
        assert!(response.header("x-quota-remaining").is_none(), "{not_counted}: {}", response.text);
    }
    assert_eq!(world.get("/v1/teams", ALICE).await.remaining(), expected - 1);
}

#[tokio::test]
async fn the_feed_is_rate_limited_like_every_endpoint() {
    let world = World::in_process(&standard_events(), RestConfig { rate_limit_per_minute: 2, ..RestConfig::default() }).await;
    assert_eq!(world.get("/v1/events", ALICE).await.status, 200);
    assert_eq!(world.get("/v1/webhook-endpoints", ALICE).await.status, 200);
    let refused = world.get("/v1/events", ALICE).await;
    refused.assert_error(429, "rate_limited", &[]);
    assert!(refused.header("retry-after").is_some());
}
