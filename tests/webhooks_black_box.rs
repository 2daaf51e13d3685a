//! The event feed and webhooks end to end through the real binary, docs/webhooks.md and
//! docs/rest.md "Events and webhooks": events appended to the log (endpoints included,
//! as `webhook_endpoint.*` events) become messages delivered to a receiver on 127.0.0.1
//! and listed by `GET /v1/events`. On `recap serve` (the embedded edition), and with
//! `RECAP_TEST_WORLD=cluster` on the distributed one: a projector, two query-api, an mcp
//! and a `recap webhooks` process over Kafka, Cassandra and Redis (there the replay test
//! produces the same stream to a second cluster, with topics and a keyspace of its own).
//!
//! - kinds, ids, data and visibility: the exact messages of each account, per endpoint,
//!   in the feed and in MCP's `list_recent_changes`, with the ids derived from the
//!   events that caused them;
//! - read-your-webhook: on every receipt the receiver reads the announced resource
//!   through the REST API (and a meeting through MCP) and sees the change;
//! - replay: the same log in a fresh data dir (the same stream in a fresh cluster)
//!   announces the same ids;
//! - endpoint settings: a types filter, `enabled: false`, a deleted endpoint.
//!
//! Deliveries to one endpoint run concurrently, so they are compared with the feed's
//! order (the order the account saw the changes) rather than by arrival.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use recap_readmodel::messages::{message_id, MessageKind};
use recap_schemas::{Envelope, Timestamp};
use recap_testkit::events::*;
use recap_testkit::process::get;
use recap_testkit::receiver;
use recap_testkit::server::Server;
use receiver::{Received, Receiver};
use serde_json::{json, Value};

const WITHIN: Duration = Duration::from_secs(30);

/// A message expected in an account's feed: its account, type and resource, and the
/// event that caused it (its id derives from them).
#[derive(Clone, Debug)]
struct Expected {
    account: &'static str,
    kind: &'static str,
    resource: String,
    cause: String,
    at: Timestamp,
}

impl Expected {
    fn id(&self) -> String {
        let kind = MessageKind::parse(self.kind).unwrap_or_else(|| panic!("no message kind {}", self.kind));
        message_id(&self.cause, self.account, kind, &self.resource, self.at)
    }
}

fn told(account: &'static str, kind: &'static str, resource: &str, cause: &Envelope) -> Expected {
    Expected { account, kind, resource: resource.into(), cause: cause.id.to_string(), at: cause.occurred_at }
}

/// `recap serve` delivering to loopback, with limits no test reaches; with
/// `RECAP_TEST_WORLD=cluster`, the distributed edition with one `recap webhooks` process.
fn server() -> Server {
    if !recap_testkit::server::distributed() {
        return server_over(None);
    }
    let mut server = Server::builder().env("RECAP_REST_RATE_LIMIT_PER_MINUTE", "1000000").env("RECAP_MCP_TOOL_CALLS_PER_MINUTE", "1000000").start();
    server.cluster.as_mut().expect("the distributed edition").add_webhooks();
    server
}

/// Where the webhooks runtime serves `/metrics`: `recap serve`'s admin listener, or the
/// `recap webhooks` process's.
fn webhooks_admin_url(server: &Server) -> String {
    match &server.cluster {
        Some(cluster) => cluster.webhooks[0].admin_url.clone(),
        None => server.admin_url.clone(),
    }
}

fn server_over(data_dir: Option<&std::path::Path>) -> Server {
    let mut builder = Server::builder()
        .arg("--webhooks-allow-insecure")
        .arg("--rest-rate-limit-per-minute")
        .arg("1000000")
        .arg("--mcp-tool-calls-per-minute")
        .arg("1000000")
        .embedded();
    if let Some(data_dir) = data_dir {
        builder = builder.data_dir(data_dir);
    }
    builder.start()
}

/// An account whose plan includes REST and MCP (`flow`), and a token of it.
fn account_with_token(account_id: &str, token: &str) -> Vec<Envelope> {
    vec![account(account_id, Some("flow"), None, 1), token_created(account_id, &format!("tok_{account_id}"), token, 1)]
}

fn endpoint(account_id: &str, endpoint_id: &str, receiver: &Receiver) -> recap_schemas::build::Draft<recap_schemas::WebhookEndpointUpserted> {
    EVENTS.webhook_endpoint(account_id, endpoint_id, receiver.url(endpoint_id))
}

/// A meeting without note text or summaries (its notes are not ready).
fn bare_meeting(account_id: &str, meeting_id: &str, title: &str, version: u64) -> Envelope {
    meeting_draft(account_id, meeting_id, title, 0)
        .with(|event| {
            event.meeting.note.text = String::new();
            event.meeting.summaries.clear();
        })
        .version(version)
        .envelope()
}

fn call(url: &str, token: &str) -> (u16, Value) {
    let (status, _, body) = get(url, Some(token));
    (status, serde_json::from_str(&body).unwrap_or_else(|error| panic!("{url}: not JSON ({error}): {body}")))
}

/// One MCP `tools/call`: Ok(its result's JSON), or Err(the error's text).
fn mcp_tool(mcp_url: &str, token: &str, name: &str, arguments: Value) -> Result<Value, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let mut response = agent
        .post(mcp_url)
        .header("Authorization", &format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .send(body.to_string())
        .map_err(|error| format!("{name}: {error}"))?;
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let data = text.lines().find_map(|line| line.strip_prefix("data:")).unwrap_or(&text);
    let reply: Value = serde_json::from_str(data.trim()).map_err(|error| format!("{name}: not JSON-RPC ({error}): {text}"))?;
    let result = &reply["result"];
    let content = result["content"][0]["text"].as_str().ok_or_else(|| format!("{name}: no result in {reply}"))?;
    if result["isError"] == true {
        return Err(content.to_owned());
    }
    serde_json::from_str(content).map_err(|error| format!("{name}: a result that is not JSON ({error}): {content}"))
}

/// The account's whole feed, oldest first, walked page by page.
fn feed(server: &Server, token: &str) -> Vec<Value> {
    let mut events = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{}/events?limit=7&cursor={cursor}", server.base_url),
            None => format!("{}/events?limit=7", server.base_url),
        };
        let (status, page) = call(&url, token);
        assert_eq!(status, 200, "{page}");
        events.extend(page["data"].as_array().unwrap().iter().cloned());
        if page["has_more"] != true {
            return events;
        }
        cursor = Some(page["next_cursor"].as_str().unwrap().to_owned());
    }
}

/// Polls the feed until it holds `count` events (or more), then gives them.
fn feed_of(server: &Server, token: &str, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let events = feed(server, token);
        if events.len() >= count {
            return events;
        }
        assert!(Instant::now() < deadline, "the feed holds {} of {count} events: {events:#?}", events.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls the endpoint's attempts (`GET /v1/webhook-endpoints/{id}/attempts`) until
/// each of `ids` has one recorded, then gives the attempts: a delivery is recorded after
/// the receiver answered, so this is when the deliverer is done with them.
fn wait_attempted(server: &Server, token: &str, endpoint: &str, ids: &BTreeSet<String>) -> Vec<Value> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let (status, page) = call(&format!("{}/webhook-endpoints/{endpoint}/attempts?limit=100", server.base_url), token);
        assert_eq!(status, 200, "{page}");
        let attempts = page["data"].as_array().unwrap().clone();
        let attempted: BTreeSet<&str> = attempts.iter().filter_map(|attempt| attempt["event_id"].as_str()).collect();
        if ids.iter().all(|id| attempted.contains(id.as_str())) {
            return attempts;
        }
        assert!(Instant::now() < deadline, "{endpoint}: {} of {} attempts recorded", attempted.len(), ids.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (type, resource id) of a message: the resource its id is derived from.
fn resource_of(message: &Value) -> (String, String) {
    let kind = message["type"].as_str().unwrap().to_owned();
    let key = match kind.split('.').next().unwrap() {
        "meeting" => "meeting_id",
        "action_item" => "action_item_id",
        "shared_note" => "share_id",
        "team" => "team_id",
        other => panic!("no message kind of {other}: {message}"),
    };
    let resource = message["data"][key].as_str().unwrap_or_else(|| panic!("no {key} in {message}")).to_owned();
    (kind, resource)
}

/// (type, resource id) of each expected message of `account`, in order.
fn expected_of(expected: &[Expected], account: &str) -> Vec<(String, String, String)> {
    expected.iter().filter(|told| told.account == account).map(|told| (told.kind.to_owned(), told.resource.clone(), told.id())).collect()
}

/// (type, resource id, id) of feed events.
fn listed(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|event| {
            let (kind, resource) = resource_of(event);
            (kind, resource, event["id"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// The distinct messages delivered to `endpoint`, ordered as in `feed_ids`; a
/// delivery of a message the feed does not hold fails.
fn delivered_in_feed_order(requests: &[Received], endpoint: &str, feed_ids: &[String]) -> Vec<Value> {
    let mut by_id: BTreeMap<String, Value> = BTreeMap::new();
    for request in requests.iter().filter(|request| request.endpoint == endpoint) {
        let body = request.json();
        assert_eq!(body["id"], request.webhook_id(), "the body's id is the webhook-id");
        if let Some(earlier) = by_id.insert(request.webhook_id().to_owned(), body.clone()) {
            assert_eq!(earlier, body, "a repeated delivery carries the same message");
        }
    }
    let unknown: Vec<&String> = by_id.keys().filter(|id| !feed_ids.contains(id)).collect();
    assert!(unknown.is_empty(), "{endpoint} got messages the feed does not list: {unknown:?}");
    feed_ids.iter().filter_map(|id| by_id.get(id).cloned()).collect()
}

/// Two accounts' changes: the events in log order and the messages they announce.
struct Scenario {
    events: Vec<Envelope>,
    expected: Vec<Expected>,
}

const ADA: &str = "acc_ada";
const BOB: &str = "acc_bob";

/// Ada's meeting lives and dies, with its transcript (replaced once), notes and items;
/// Ada's standalone items, one updated; Bob's meeting; a team of both; Bob shares a note
/// with Ada directly and one with the team, which he republishes; the direct share is
/// withdrawn and Ada leaves the team. Then a second team whose share predates Ada's
/// joining, which stops and starts collaborating, and is deleted. A stale upsert and a
/// duplicate delivery of an event are in the middle.
fn scenario(receiver: &Receiver, ada_token: &str, bob_token: &str) -> Scenario {
    let mut events = account_with_token(ADA, ada_token);
    events.extend(account_with_token(BOB, bob_token));
    events.push(endpoint(ADA, "ep_ada", receiver).version(1).envelope());
    events.push(endpoint(BOB, "ep_bob", receiver).version(1).envelope());
    let mut expected = Vec::new();

    let bob_meeting = meeting(BOB, "mtg_bob", "Bob only", 0, 1);
    expected.push(told(BOB, "meeting.created", "mtg_bob", &bob_meeting));
    expected.push(told(BOB, "meeting.notes_ready", "mtg_bob", &bob_meeting));
    let created = bare_meeting(ADA, "mtg_1", "Weekly", 1);
    expected.push(told(ADA, "meeting.created", "mtg_1", &created));
    let renamed = bare_meeting(ADA, "mtg_1", "Renamed", 2);
    expected.push(told(ADA, "meeting.updated", "mtg_1", &renamed));
    // Rule 1 of the contract: an older version than the one applied changes nothing.
    let stale = bare_meeting(ADA, "mtg_1", "Stale", 1);
    let transcript = EVENTS.transcript(ADA, "mtg_1", "the words said").version(3).envelope();
    expected.push(told(ADA, "meeting.transcript_ready", "mtg_1", &transcript));
    let notes = meeting(ADA, "mtg_1", "Renamed", 0, 4);
    expected.push(told(ADA, "meeting.notes_ready", "mtg_1", &notes));
    // A replacement that differs from the transcript told.
    let transcript_again = EVENTS.transcript(ADA, "mtg_1", "other words said").version(4).envelope();
    expected.push(told(ADA, "meeting.transcript_ready", "mtg_1", &transcript_again));
    let with_item = meeting_draft(ADA, "mtg_1", "Renamed", 0).action_items([item("ai_1", "todo", None, 1)]).version(5).envelope();
    expected.push(told(ADA, "action_item.created", "ai_1", &with_item));
    let standalone = action_item(ADA, item("ai_2", "todo", None, 2), 1);
    expected.push(told(ADA, "action_item.created", "ai_2", &standalone));
    let standalone_deleted = action_item_deleted(ADA, "ai_2", 2);
    expected.push(told(ADA, "action_item.deleted", "ai_2", &standalone_deleted));
    let item_created = action_item(ADA, item("ai_3", "todo", None, 3), 1);
    expected.push(told(ADA, "action_item.created", "ai_3", &item_created));
    let item_done = action_item(ADA, item("ai_3", "done", None, 3), 2);
    expected.push(told(ADA, "action_item.updated", "ai_3", &item_done));
    let design = team("team_1", "Design", Some("business"), false, 1);
    let ada_joins = member("team_1", ADA, 1);
    expected.push(told(ADA, "team.joined", "team_1", &ada_joins));
    let bob_joins = member("team_1", BOB, 1);
    expected.push(told(BOB, "team.joined", "team_1", &bob_joins));
    let direct = share("shr_direct", BOB, 5).title("For Ada").recipients([ADA]).text("direct").version(1).envelope();
    expected.push(told(ADA, "shared_note.received", "shr_direct", &direct));
    let to_team = share("shr_team", BOB, 6).title("For Design").team(Some(("team_1", "Design"))).text("team").version(1).envelope();
    expected.push(told(ADA, "shared_note.received", "shr_team", &to_team));
    let withdrawn = unshared("shr_direct", 2);
    expected.push(told(ADA, "shared_note.withdrawn", "shr_direct", &withdrawn));
    let to_team_again = share("shr_team", BOB, 6).title("For Design, again").team(Some(("team_1", "Design"))).text("team").version(2).envelope();
    expected.push(told(ADA, "shared_note.updated", "shr_team", &to_team_again));
    let ada_leaves = member_removed("team_1", ADA, 2);
    expected.push(told(ADA, "team.left", "team_1", &ada_leaves));
    expected.push(told(ADA, "shared_note.withdrawn", "shr_team", &ada_leaves));
    let deleted = meeting_deleted(ADA, "mtg_1", 6);
    expected.push(told(ADA, "action_item.deleted", "ai_1", &deleted));
    expected.push(told(ADA, "meeting.deleted", "mtg_1", &deleted));

    // A team's existing share is received by a member joining; a team that stops
    // collaborating withdraws it, one that starts again gives it back; deleting the
    // team tells each member.
    let ops = team("team_2", "Ops", Some("business"), false, 1);
    let bob_joins_ops = member("team_2", BOB, 1);
    expected.push(told(BOB, "team.joined", "team_2", &bob_joins_ops));
    let to_ops = share("shr_ops", BOB, 7).title("For Ops").team(Some(("team_2", "Ops"))).text("ops").version(1).envelope();
    let ada_joins_ops = member("team_2", ADA, 1);
    expected.push(told(ADA, "team.joined", "team_2", &ada_joins_ops));
    expected.push(told(ADA, "shared_note.received", "shr_ops", &ada_joins_ops));
    let ops_closed = team("team_2", "Ops", None, false, 2);
    expected.push(told(ADA, "shared_note.withdrawn", "shr_ops", &ops_closed));
    let ops_open = team("team_2", "Ops", Some("business"), false, 3);
    expected.push(told(ADA, "shared_note.received", "shr_ops", &ops_open));
    let ops_deleted = team_deleted("team_2", 4);
    expected.push(told(ADA, "shared_note.withdrawn", "shr_ops", &ops_deleted));
    expected.push(told(ADA, "team.left", "team_2", &ops_deleted));
    expected.push(told(BOB, "team.left", "team_2", &ops_deleted));

    events.extend([bob_meeting, created, renamed.clone(), stale, renamed, transcript, notes, transcript_again, with_item, standalone, standalone_deleted]);
    events.extend([item_created, item_done, design, ada_joins, bob_joins, direct, to_team, withdrawn, to_team_again, ada_leaves, deleted]);
    events.extend([ops, bob_joins_ops, to_ops, ada_joins_ops, ops_closed, ops_open, ops_deleted]);
    Scenario { events, expected }
}

#[test]
fn messages_of_every_kind_reach_each_account_s_endpoint_with_derived_ids_and_only_what_it_can_see() {
    let receiver = Receiver::start();
    let server = server();
    let (ada, bob) = (new_token(), new_token());
    let scenario = scenario(&receiver, &ada, &bob);
    if recap_testkit::server::distributed() {
        // Events of different resources travel in different Kafka partitions, so the
        // distributed projector may apply them in another order than appended (each
        // resource's own in order). Applied one at a time, the account sees the changes
        // in the order written here, on either edition.
        for event in &scenario.events {
            server.feed(std::slice::from_ref(event));
        }
    } else {
        server.feed(&scenario.events);
    }

    for (account, token, endpoint) in [(ADA, &ada, "ep_ada"), (BOB, &bob, "ep_bob")] {
        let expected = expected_of(&scenario.expected, account);
        let events = feed_of(&server, token, expected.len());
        // The stale upsert and the duplicate event announce nothing: the feed holds
        // exactly the expected messages, in the order the account saw them.
        assert_eq!(listed(&events), expected, "{account}'s feed");
        let ids: Vec<String> = expected.iter().map(|(_, _, id)| id.clone()).collect();
        let requests = receiver.wait_for_ids(endpoint, &ids.iter().cloned().collect(), WITHIN);
        assert_eq!(delivered_in_feed_order(&requests, endpoint, &ids), events, "{endpoint} receives the feed's messages as listed");
        // MCP's list_recent_changes lists the same messages as GET /v1/events.
        let changes = mcp_tool(&server.mcp_url, token, "list_recent_changes", json!({"limit": 200})).unwrap();
        assert_eq!(changes["changes"].as_array().unwrap(), &events, "list_recent_changes of {account}");
        for event in &events {
            let id = event["id"].as_str().unwrap();
            let (status, one) = call(&format!("{}/events/{id}", server.base_url), token);
            assert_eq!((status, &one["data"]), (200, event), "GET /events/{id}");
        }
    }
    let ada_endpoint = receiver.requests_to("ep_ada");
    assert!(
        ada_endpoint.iter().all(|request| !["the words said", "other words said"].iter().any(|text| request.json()["data"].to_string().contains(text))),
        "never a transcript's text"
    );

    // Each message's data: the ids, and the REST list entry as the account sees it
    // while it sees the resource; only ids once it does not.
    let data_of = |events: &[Value], kind: &str, resource: &str| -> Value {
        let event = events.iter().find(|event| resource_of(event) == (kind.to_owned(), resource.to_owned())).unwrap_or_else(|| panic!("no {kind} {resource}"));
        event["data"].clone()
    };
    let (ada_events, bob_events) = (feed(&server, &ada), feed(&server, &bob));
    let meeting_entry = |title: &str| {
        json!({"id": "mtg_1", "title": title, "kind": "call", "status": "done", "started_at": at(0), "ended_at": at(30),
               "created_at": at(0), "updated_at": at(31), "series_id": null})
    };
    assert_eq!(data_of(&ada_events, "meeting.created", "mtg_1"), json!({"meeting_id": "mtg_1", "meeting": meeting_entry("Weekly")}));
    assert_eq!(data_of(&ada_events, "meeting.updated", "mtg_1"), json!({"meeting_id": "mtg_1", "meeting": meeting_entry("Renamed")}));
    assert_eq!(data_of(&ada_events, "meeting.transcript_ready", "mtg_1"), json!({"meeting_id": "mtg_1", "meeting": meeting_entry("Renamed")}));
    assert_eq!(data_of(&ada_events, "action_item.created", "ai_1")["action_item"]["meeting"], json!({"id": "mtg_1", "title": "Renamed"}));
    assert_eq!(data_of(&ada_events, "action_item.created", "ai_2")["action_item"]["meeting"], Value::Null);
    assert_eq!(data_of(&ada_events, "action_item.deleted", "ai_2"), json!({"action_item_id": "ai_2", "meeting_id": null}));
    assert_eq!(data_of(&ada_events, "action_item.deleted", "ai_1"), json!({"action_item_id": "ai_1", "meeting_id": "mtg_1"}));
    assert_eq!(
        data_of(&ada_events, "shared_note.received", "shr_direct"),
        json!({"share_id": "shr_direct", "shared_note": {"id": "shr_direct", "title": "For Ada", "team": null, "owner_name": "Owner of shr_direct",
                                                         "access": "viewer", "published_at": at(5)}})
    );
    assert_eq!(
        data_of(&ada_events, "shared_note.received", "shr_team"),
        json!({"share_id": "shr_team", "shared_note": {"id": "shr_team", "title": "For Design", "team": {"id": "team_1", "name": "Design"},
                                                       "owner_name": "Owner of shr_team", "access": "viewer", "published_at": at(6)}})
    );
    assert_eq!(data_of(&ada_events, "shared_note.withdrawn", "shr_direct"), json!({"share_id": "shr_direct"}));
    assert_eq!(data_of(&ada_events, "shared_note.withdrawn", "shr_team"), json!({"share_id": "shr_team"}));
    assert_eq!(data_of(&ada_events, "team.left", "team_1"), json!({"team_id": "team_1"}));
    assert_eq!(data_of(&ada_events, "meeting.deleted", "mtg_1"), json!({"meeting_id": "mtg_1"}));
    let updated_item = data_of(&ada_events, "action_item.updated", "ai_3");
    assert_eq!((&updated_item["action_item_id"], &updated_item["action_item"]["status"]), (&json!("ai_3"), &json!("done")));
    let republished = data_of(&ada_events, "shared_note.updated", "shr_team");
    assert_eq!((&republished["share_id"], &republished["shared_note"]["title"]), (&json!("shr_team"), &json!("For Design, again")));
    assert_eq!(data_of(&ada_events, "shared_note.received", "shr_ops")["shared_note"]["team"], json!({"id": "team_2", "name": "Ops"}));
    assert_eq!(data_of(&ada_events, "team.left", "team_2"), json!({"team_id": "team_2"}));
    assert_eq!(data_of(&bob_events, "team.left", "team_2"), json!({"team_id": "team_2"}));
    for (events, member_count) in [(&ada_events, 1), (&bob_events, 2)] {
        let joined = data_of(events, "team.joined", "team_1");
        assert_eq!(joined["team_id"], "team_1");
        let team = &joined["team"];
        assert_eq!(
            (&team["id"], &team["name"], &team["member_count"], &team["plan"], &team["can_collaborate"]),
            (&json!("team_1"), &json!("Design"), &json!(member_count), &json!("business"), &json!(true))
        );
    }
    assert!(feed(&server, &bob).iter().all(|event| !event["type"].as_str().unwrap().starts_with("shared_note.")), "a share's owner is told nothing of it");
    // Another account's message is not found by id.
    let bobs_first = feed(&server, &bob)[0]["id"].as_str().unwrap().to_owned();
    let (status, error) = call(&format!("{}/events/{bobs_first}", server.base_url), &ada);
    assert_eq!((status, error["error"]["code"].as_str()), (404, Some("event_not_found")));
}

#[test]
fn replaying_the_whole_log_into_a_fresh_data_dir_announces_the_same_message_ids() {
    let receiver = Receiver::start();
    let (ada, bob) = (new_token(), new_token());
    let scenario = scenario(&receiver, &ada, &bob);
    let counts = [(ADA, &ada, expected_of(&scenario.expected, ADA).len()), (BOB, &bob, expected_of(&scenario.expected, BOB).len())];
    let ids = |events: &[Value]| events.iter().map(|event| event["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    if recap_testkit::server::distributed() {
        // The distributed edition: the same stream, produced again to a fresh cluster
        // (its own topics, consumer groups and keyspace) in the same order, is announced
        // with the same ids, whatever the offsets, the processes and the times differ.
        let feeds: Vec<Vec<Vec<Value>>> = (0..2)
            .map(|_| {
                let server = server();
                for event in &scenario.events {
                    server.feed(std::slice::from_ref(event));
                }
                counts.iter().map(|(_, token, count)| feed_of(&server, token, *count)).collect()
            })
            .collect();
        for ((account, _, _), (first, again)) in counts.iter().zip(feeds[0].iter().zip(&feeds[1])) {
            assert_eq!(ids(again), ids(first), "{account}: the same ids in the same order");
            assert_eq!(again, first, "{account}: the same messages");
        }
        return;
    }
    let first = server_over(None);
    first.feed(&scenario.events);
    let originals: Vec<Vec<Value>> = counts.iter().map(|(_, token, count)| feed_of(&first, token, *count)).collect();

    let fresh = tempfile::tempdir().unwrap();
    let data_dir = fresh.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    std::fs::copy(first.data_dir.join("events.log"), data_dir.join("events.log")).unwrap();
    let replayed = server_over(Some(&data_dir));
    replayed.wait_caught_up();
    for ((account, token, count), original) in counts.iter().zip(&originals) {
        let again = feed_of(&replayed, token, *count);
        assert_eq!(ids(&again), ids(original), "{account}: the same ids in the same order");
        assert_eq!(&again, original, "{account}: the same messages");
    }
}

#[test]
fn an_endpoint_gets_only_its_types_a_disabled_one_nothing_and_a_deleted_one_nothing_after_its_deletion() {
    let receiver = Receiver::start();
    let server = server();
    let ada = new_token();
    let mut setup = account_with_token(ADA, &ada);
    setup.push(endpoint(ADA, "ep_all", &receiver).version(1).envelope());
    let only = [MessageKind::MeetingDeleted, MessageKind::TeamJoined];
    setup.push(endpoint(ADA, "ep_some", &receiver).types(only).version(1).envelope());
    setup.push(endpoint(ADA, "ep_off", &receiver).enabled(false).version(1).envelope());
    setup.push(endpoint(ADA, "ep_gone", &receiver).version(1).envelope());
    // The endpoints before what they are told of (their events and the meeting's travel
    // in different partitions on the distributed edition).
    server.feed(&setup);
    let created = meeting(ADA, "mtg_1", "Weekly", 0, 1);
    server.feed(std::slice::from_ref(&created));
    let before: BTreeSet<String> = [MessageKind::MeetingCreated, MessageKind::MeetingNotesReady]
        .into_iter()
        .map(|kind| message_id(created.id.as_ref(), ADA, kind, "mtg_1", created.occurred_at))
        .collect();
    receiver.wait_for_ids("ep_gone", &before, WITHIN);

    let deleted = meeting_deleted(ADA, "mtg_1", 2);
    let joined = member("team_1", ADA, 1);
    server.feed(&[EVENTS.webhook_endpoint_deleted(ADA, "ep_gone").version(2).envelope()]);
    server.feed(&[deleted.clone(), team("team_1", "Design", None, false, 1), joined.clone()]);
    let after = [
        message_id(deleted.id.as_ref(), ADA, MessageKind::MeetingDeleted, "mtg_1", deleted.occurred_at),
        message_id(joined.id.as_ref(), ADA, MessageKind::TeamJoined, "team_1", joined.occurred_at),
    ];
    let every: BTreeSet<String> = before.iter().chain(&after).cloned().collect();
    receiver.wait_for_ids("ep_all", &every, WITHIN);
    let some: BTreeSet<String> = after.iter().cloned().collect();
    receiver.wait_for_ids("ep_some", &some, WITHIN);
    // Every delivery is an attempt listed with its endpoint, succeeded.
    let attempts = wait_attempted(&server, &ada, "ep_all", &every);
    wait_attempted(&server, &ada, "ep_some", &some);
    assert!(attempts.iter().all(|attempt| attempt["outcome"] == "succeeded" && attempt["response_status"] == 200), "{attempts:#?}");
    assert_eq!(attempts.len(), every.len(), "one attempt per delivery");

    let ids_at = |endpoint: &str| receiver.requests_to(endpoint).iter().map(|request| request.webhook_id().to_owned()).collect::<BTreeSet<_>>();
    assert_eq!(ids_at("ep_all"), every);
    assert_eq!(ids_at("ep_some"), after.iter().cloned().collect(), "only the types it asked for");
    assert_eq!(ids_at("ep_off"), BTreeSet::new(), "a disabled endpoint receives nothing");
    let (status, off_attempts) = call(&format!("{}/webhook-endpoints/ep_off/attempts", server.base_url), &ada);
    assert_eq!((status, &off_attempts["data"]), (200, &json!([])), "nothing was attempted to it");
    assert_eq!(ids_at("ep_gone"), before, "a deleted endpoint receives nothing after its deletion");

    // The feed filtered by the same types lists what the filtered endpoint got.
    let (status, filtered) = call(&format!("{}/events?types=team.joined,meeting.deleted", server.base_url), &ada);
    assert_eq!(status, 200, "{filtered}");
    let filtered: BTreeSet<String> = filtered["data"].as_array().unwrap().iter().map(|event| event["id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(filtered, ids_at("ep_some"));

    let (status, endpoints) = call(&format!("{}/webhook-endpoints", server.base_url), &ada);
    assert_eq!(status, 200);
    let listed: Vec<(&str, &str)> = endpoints["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|endpoint| (endpoint["id"].as_str().unwrap(), endpoint["state"]["status"].as_str().unwrap()))
        .collect();
    assert_eq!(listed, vec![("ep_all", "enabled"), ("ep_off", "disabled_by_account"), ("ep_some", "enabled")]);

    // The runtime's figures are on /metrics under the names docs/operations.md and the
    // chart's dashboards and alerts use: messages, attempts and deliveries by outcome,
    // attempt latency, queue depth and the oldest pending delivery's age.
    let metrics = ureq::get(&format!("{}metrics", webhooks_admin_url(&server))).call().expect("GET /metrics").into_body().read_to_string().expect("the body");
    for name in [
        "recap_webhooks_messages_total{",
        "recap_webhooks_attempts_total{",
        "recap_webhooks_deliveries_total{",
        "recap_webhooks_attempt_duration_seconds_bucket{",
        "recap_webhooks_queue_depth",
        "recap_webhooks_oldest_pending_age_seconds",
    ] {
        assert!(metrics.contains(name), "/metrics lacks {name}:\n{metrics}");
    }
    // Reading Kafka, the lag of each partition of the message log it holds, down to zero
    // once every message is read and its first attempts settled.
    if server.cluster.is_some() {
        let lag_of = |metrics: &str| -> Vec<(String, f64)> {
            metrics
                .lines()
                .filter_map(|line| line.strip_prefix("recap_webhooks_partition_lag{"))
                .filter_map(|rest| {
                    let (labels, value) = rest.rsplit_once("} ")?;
                    let partition = labels.split("partition=\"").nth(1)?.split('"').next()?.to_owned();
                    Some((partition, value.trim().parse().ok()?))
                })
                .collect()
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let metrics =
                ureq::get(&format!("{}metrics", webhooks_admin_url(&server))).call().expect("GET /metrics").into_body().read_to_string().expect("the body");
            let lags = lag_of(&metrics);
            if !lags.is_empty() && lags.iter().all(|(partition, lag)| partition.contains("recap.messages.v1/") && *lag == 0.0) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the message log's partitions never showed a lag of zero: {lags:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    for (name, outcome) in
        [("recap_webhooks_messages_total", "appended"), ("recap_webhooks_attempts_total", "succeeded"), ("recap_webhooks_deliveries_total", "delivered")]
    {
        assert!(
            metrics.lines().any(|line| line.starts_with(name) && line.contains(&format!("outcome=\"{outcome}\""))),
            "{name} has no {outcome} series:\n{metrics}"
        );
    }
}

/// What the REST API and the MCP server show of the resource `message` announces,
/// checked on receipt.
fn sees_the_change(base_url: &str, mcp_url: &str, token: &str, message: &Value) -> Result<(), String> {
    sees_the_change_on_rest(base_url, token, message)?;
    sees_the_change_on_mcp(mcp_url, token, message)
}

/// What the MCP server shows of a meeting `message` announces: the meeting, its title
/// as announced, or none once deleted.
fn sees_the_change_on_mcp(mcp_url: &str, token: &str, message: &Value) -> Result<(), String> {
    let (kind, resource) = resource_of(message);
    if !kind.starts_with("meeting.") {
        return Ok(());
    }
    let shown = mcp_tool(mcp_url, token, "get_meeting", json!({"meeting_id": resource}));
    match (kind.as_str(), shown) {
        ("meeting.deleted", Err(error)) if error.contains("not found") => Ok(()),
        ("meeting.deleted", Err(error)) => Err(format!("{kind} {resource}: get_meeting failed otherwise than not found: {error}")),
        ("meeting.deleted", Ok(meeting)) => Err(format!("{kind} {resource}: get_meeting still shows {meeting}")),
        (_, Err(error)) => Err(format!("{kind} {resource}: get_meeting failed: {error}")),
        (_, Ok(meeting)) if meeting.to_string().contains(&format!("\"{}\"", message["data"]["meeting"]["title"].as_str().unwrap_or_default())) => Ok(()),
        (_, Ok(meeting)) => Err(format!("{kind} {resource}: get_meeting shows {meeting}, not the title of {message}")),
    }
}

fn sees_the_change_on_rest(base_url: &str, token: &str, message: &Value) -> Result<(), String> {
    let (kind, resource) = resource_of(message);
    let data = &message["data"];
    let expect = |path: &str, status: u16| -> Result<Value, String> {
        let (got, body) = call(&format!("{base_url}{path}"), token);
        if got == status {
            Ok(body)
        } else {
            Err(format!("{kind} {resource}: GET {path} answered {got} {body}, not {status}"))
        }
    };
    let same_entry = |entry: &Value, shown: &Value| -> Result<(), String> {
        let entry = entry.as_object().ok_or_else(|| format!("{kind}: no list entry in {data}"))?;
        match entry.iter().find(|(key, value)| shown.get(key.as_str()) != Some(value)) {
            Some((key, value)) => Err(format!("{kind} {resource}: {key} is {value} in the message, {} in the API", shown[key.as_str()])),
            None => Ok(()),
        }
    };
    match kind.as_str() {
        "meeting.created" | "meeting.updated" | "meeting.notes_ready" => same_entry(&data["meeting"], &expect(&format!("/meetings/{resource}"), 200)?["data"]),
        "meeting.transcript_ready" => {
            let shown = expect(&format!("/meetings/{resource}?include=transcript"), 200)?;
            if shown["data"].to_string().contains(&format!("words of {resource}")) {
                Ok(())
            } else {
                Err(format!("{resource}: the transcript is not readable yet: {shown}"))
            }
        }
        "meeting.deleted" => expect(&format!("/meetings/{resource}"), 404).map(drop),
        "shared_note.received" | "shared_note.updated" => {
            // The detail has the entry's id, title and published_at, and the team's name
            // as team_name (docs/rest.md, Resources).
            let entry = &data["shared_note"];
            let team_name = entry["team"].get("name").cloned().unwrap_or(Value::Null);
            let in_detail = json!({"id": entry["id"], "title": entry["title"], "published_at": entry["published_at"], "team_name": team_name});
            same_entry(&in_detail, &expect(&format!("/shared-notes/{resource}"), 200)?["data"])
        }
        "shared_note.withdrawn" => expect(&format!("/shared-notes/{resource}"), 404).map(drop),
        "action_item.created" | "action_item.updated" | "action_item.deleted" => {
            let items = expect("/action-items?limit=200", 200)?;
            let shown = items["data"].as_array().and_then(|items| items.iter().find(|item| item["id"] == resource.as_str()));
            match (kind.as_str(), shown) {
                ("action_item.deleted", None) => Ok(()),
                ("action_item.deleted", Some(item)) => Err(format!("{kind} {resource}: GET /action-items still lists {item}")),
                (_, Some(item)) => same_entry(&data["action_item"], item),
                (_, None) => Err(format!("{kind} {resource}: GET /action-items does not list it yet")),
            }
        }
        "team.joined" | "team.left" => {
            let teams = expect("/teams", 200)?;
            let shown = teams["data"].as_array().and_then(|teams| teams.iter().find(|team| team["id"] == resource.as_str()));
            match (kind.as_str(), shown) {
                ("team.left", None) => Ok(()),
                ("team.left", Some(team)) => Err(format!("{kind} {resource}: GET /teams still lists {team}")),
                (_, Some(team)) => same_entry(&data["team"], team),
                (_, None) => Err(format!("{kind} {resource}: GET /teams does not list it yet")),
            }
        }
        other => Err(format!("no check for {other}")),
    }
}

/// Where the receiver's checks read, and with which token per endpoint.
struct Api {
    base_url: String,
    mcp_url: String,
    tokens: BTreeMap<String, String>,
}

#[test]
fn a_receiver_reading_the_api_on_receipt_always_sees_the_change_announced() {
    // Tokens are only known once the accounts exist; the check reads them then.
    let api: Arc<OnceLock<Api>> = Arc::new(OnceLock::new());
    let seen = api.clone();
    let receiver = Receiver::builder()
        .check(move |endpoint, message| {
            let api = seen.get().ok_or("a delivery before the test knew the API")?;
            sees_the_change(&api.base_url, &api.mcp_url, &api.tokens[endpoint], message)
        })
        .start();
    let server = server();
    let (ada, bob) = (new_token(), new_token());
    api.set(Api {
        base_url: server.base_url.clone(),
        mcp_url: server.mcp_url.clone(),
        tokens: BTreeMap::from([("ep_ada".to_owned(), ada.clone()), ("ep_bob".to_owned(), bob.clone())]),
    })
    .unwrap_or_else(|_| panic!("the API is set once"));
    let mut setup = account_with_token(ADA, &ada);
    setup.extend(account_with_token(BOB, &bob));
    setup.push(endpoint(ADA, "ep_ada", &receiver).version(1).envelope());
    setup.push(endpoint(BOB, "ep_bob", &receiver).version(1).envelope());
    // An endpoint is told of the messages that follow it: on the distributed edition
    // the endpoints' events and the resources' travel in different partitions, so the
    // endpoints are in place before anything they are to be told of.
    server.feed(&setup);
    setup.clear();
    // What is deleted and withdrawn later already exists, and its announcements were read.
    const SIZE: usize = 100;
    for index in 0..SIZE / 4 {
        setup.push(bare_meeting(ADA, &format!("mtg_old_{index}"), "Old", 1));
        setup.push(share(&format!("shr_old_{index}"), ADA, 1).title("Old share").recipients([BOB]).text("old").version(1).envelope());
        setup.push(action_item(ADA, item(&format!("ai_old_{index}"), "todo", None, index as i64), 1));
        if index % 5 == 0 {
            setup.push(team(&format!("team_old_{index}"), "Old", Some("business"), false, 1));
            setup.push(member(&format!("team_old_{index}"), BOB, 1));
        }
    }
    server.feed(&setup);
    receiver.wait_until(WITHIN, "the setup's messages", |requests| requests.len() >= SIZE / 2 + SIZE / 4 + SIZE / 20);

    // Then a few hundred changes, appended as fast as the log takes them.
    let mut load = Vec::new();
    for index in 0..SIZE {
        let meeting_id = format!("mtg_{index}");
        load.push(meeting(ADA, &meeting_id, &format!("Meeting {index}"), index as i64, 1));
        load.push(EVENTS.transcript(ADA, &meeting_id, format!("words of {meeting_id}")).version(2).envelope());
        load.push(share(&format!("shr_{index}"), ADA, index as i64).title(format!("Share {index}")).recipients([BOB]).text("text").version(1).envelope());
        if index < SIZE / 4 {
            load.push(meeting_deleted(ADA, &format!("mtg_old_{index}"), 2));
            load.push(unshared(&format!("shr_old_{index}"), 2));
            load.push(action_item(ADA, item(&format!("ai_old_{index}"), "done", None, index as i64), 2));
            load.push(action_item(ADA, item(&format!("ai_{index}"), "todo", None, index as i64), 1));
            if index % 5 == 0 {
                load.push(member_removed(&format!("team_old_{index}"), BOB, 2));
                load.push(team(&format!("team_{index}"), "New", Some("business"), false, 1));
                load.push(member(&format!("team_{index}"), BOB, 1));
            }
        }
    }
    for chunk in load.chunks(40) {
        server.append(chunk);
    }
    // Per meeting: created, notes ready, transcript ready; per share: received; per old
    // meeting, share, item and team: deleted, withdrawn, updated, left; per new item and
    // team: created, joined. (The setup's announcements are in the feeds too.) No load
    // change supersedes another, so each receipt can see its own.
    let (items, teams) = (SIZE / 4, SIZE / 20);
    let total = SIZE / 2 + SIZE * 4 + SIZE / 2 + items * 3 + teams * 3;
    let ada_count = SIZE / 4 + SIZE * 3 + SIZE / 4 + items * 3;
    let bob_count = SIZE / 4 + SIZE + SIZE / 4 + teams * 3;
    assert_eq!(ada_count + bob_count, total);
    let ids_of =
        |token: &str, count: usize| feed_of(&server, token, count).iter().map(|event| event["id"].as_str().unwrap().to_owned()).collect::<BTreeSet<_>>();
    let (ada_ids, bob_ids) = (ids_of(&ada, ada_count), ids_of(&bob, bob_count));
    assert_eq!((ada_ids.len(), bob_ids.len()), (ada_count, bob_count));
    receiver.wait_for_ids("ep_ada", &ada_ids, WITHIN);
    receiver.wait_for_ids("ep_bob", &bob_ids, WITHIN);
    let failures: Vec<String> = receiver.requests().into_iter().filter_map(|request| request.check_failed).collect();
    assert_eq!(failures, Vec::<String>::new(), "every receipt saw its change");
}
