//! The resources: exact field sets, types and nulls, and who sees what.

use serde_json::{json, Value};

use crate::common::*;

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value.as_object().unwrap_or_else(|| panic!("not an object: {value}")).keys().map(String::as_str).collect();
    keys.sort();
    keys
}

fn sorted(mut names: Vec<&str>) -> Vec<&str> {
    names.sort();
    names
}

const MEETING_LIST_FIELDS: [&str; 9] = ["id", "title", "kind", "status", "started_at", "ended_at", "created_at", "updated_at", "series_id"];

#[tokio::test]
async fn meeting_list_entries_have_exactly_the_spec_fields() {
    // "Meeting (list entry)": id, title, kind, status, started_at, ended_at, created_at, updated_at, series_id.
    let world = World::standard().await;
    let response = world.get("/v1/meetings", ALICE).await;
    assert_eq!(response.ids(), ["mtg_a5", "mtg_a4", "mtg_a3", "mtg_a2", "mtg_a1"], "newest first; deleted and foreign excluded");
    for entry in response.json["data"].as_array().unwrap() {
        assert_eq!(keys(entry), sorted(MEETING_LIST_FIELDS.to_vec()));
    }
    let first = &response.json["data"][0];
    assert_eq!(first["created_at"], ts(50));
    assert_eq!(first["series_id"], "ser_1");
    assert_eq!(response.json["data"][1]["series_id"], Value::Null, "absent values are JSON null");
}

#[tokio::test]
async fn meeting_detail_has_the_list_fields_plus_the_detail_fields() {
    // "Meeting (detail): All fields of the list entry, plus" timezone, language, note,
    // summaries, participants, action_items; transcript "present only when include=transcript is sent".
    let world = World::standard().await;
    let data = world.get("/v1/meetings/mtg_a1", ALICE).await.json["data"].clone();
    let mut expected = MEETING_LIST_FIELDS.to_vec();
    expected.extend(["timezone", "language", "note", "summaries", "participants", "action_items"]);
    assert_eq!(keys(&data), sorted(expected));
    assert_eq!(keys(&data["note"]), ["created_at", "id", "kind", "template_id", "text", "title", "updated_at"]);
    assert_eq!(data["note"]["template_id"], Value::Null);
    // "kind: note for the note; summary for the generated summary; template_output for
    // a summary made from a template".
    assert_eq!(data["note"]["kind"], "note");
    assert_eq!(data["summaries"][0]["kind"], "template_output");
    assert_eq!(keys(&data["participants"][0]), ["email", "human_id", "job_title", "name", "role"]);
    assert_eq!(data["participants"][0]["role"], Value::Null);
    assert_eq!(keys(&data["action_items"][0]), ["assignee_human_id", "completed_at", "due_at", "id", "status", "text"]);
    assert_eq!(data["action_items"][1]["assignee_human_id"], Value::Null);
}

#[tokio::test]
async fn absent_values_are_null_never_an_empty_string() {
    // General rule 1: "Absent values are JSON null, never an empty string." A producer
    // that sends an empty participant role or team plan (both "string or null") means
    // none.
    let mut events = standard_events();
    events.push(
        meeting_draft("acc_c", "mtg_roles", "Roles", 900, vec![])
            .participants([EVENTS.participant("hum_1").role(Some("")), EVENTS.participant("hum_2").role(Some("Host"))])
            .envelope(),
    );
    events.push(EVENTS.team("team_blank", "Blank").plan(Some("")).can_collaborate(true).version(1).envelope());
    events.push(member("team_blank", "acc_c"));
    let world = World::new(&events).await;
    let participants = world.get("/v1/meetings/mtg_roles", CAROL).await.json["data"]["participants"].clone();
    assert_eq!(participants[0]["role"], Value::Null, "{participants}");
    assert_eq!(participants[1]["role"], "Host", "{participants}");
    let teams = world.get("/v1/teams", CAROL).await.json["data"].clone();
    let blank = teams.as_array().unwrap().iter().find(|team| team["id"] == "team_blank").cloned().unwrap();
    assert_eq!(blank["plan"], Value::Null, "{blank}");
}

#[tokio::test]
async fn include_transcript_adds_the_whole_transcript_object() {
    // "include: the value transcript adds the transcript object, returned whole".
    let world = World::standard().await;
    let data = world.get("/v1/meetings/mtg_a5?include=transcript", ALICE).await.json["data"].clone();
    assert_eq!(
        data["transcript"],
        json!({"text": "Hello there", "segments": [
            {"id": "seg_1", "track": "mic", "start_ms": 0, "end_ms": 4200, "text": "Hello"},
            {"id": "seg_2", "track": "speaker", "start_ms": 4200, "end_ms": 5000, "text": "there"}]})
    );
    assert!(world.get("/v1/meetings/mtg_a5", ALICE).await.json["data"].get("transcript").is_none(), "absent without include");
    // Decided: requested for a meeting without one, the transcript is null (General rule 1).
    assert_eq!(world.get("/v1/meetings/mtg_a1?include=transcript", ALICE).await.json["data"]["transcript"], Value::Null);
}

#[tokio::test]
async fn include_accepts_only_transcript() {
    let world = World::standard().await;
    for bad in ["include=", "include=transcripts", "include=transcript,note", "include=TRANSCRIPT", "include=transcript&include=transcript"] {
        let response = world.get(&format!("/v1/meetings/mtg_a1?{bad}"), ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "include", "{bad}");
    }
}

#[tokio::test]
async fn a_deleted_missing_or_foreign_meeting_is_404_meeting_not_found() {
    // "A meeting that does not exist, was deleted, or belongs to someone else returns 404 meeting_not_found."
    let world = World::standard().await;
    for id in ["mtg_gone", "mtg_b1", "mtg_nope"] {
        world.get(&format!("/v1/meetings/{id}"), ALICE).await.assert_error(404, "meeting_not_found", &[]);
    }
    assert_eq!(world.get("/v1/meetings/mtg_b1", BOB).await.status, 200);
}

#[tokio::test]
async fn a_malformed_identifier_is_400_naming_the_path_parameter() {
    // Decided: a well-formed identifier is UTF-8 text of 1 to 256 bytes, the bound of the
    // events' identifiers.
    let world = World::standard().await;
    let long = "x".repeat(257);
    let long_multibyte = "é".repeat(129);
    for (path, param) in [
        (format!("/v1/meetings/{long}"), "meeting_id"),
        (format!("/v1/meetings/{}", encode(&long_multibyte)), "meeting_id"),
        ("/v1/shared-notes/%FF".into(), "shared_note_id"),
        // A % that begins no escape (RFC 3986, 2.1) is not taken as itself.
        ("/v1/meetings/%".into(), "meeting_id"),
        ("/v1/meetings/a%G1".into(), "meeting_id"),
        ("/v1/events/%4".into(), "event_id"),
        ("/v1/action-items?assignee_human_id=100%".into(), "assignee_human_id"),
        ("/v1/shared-notes?q=50%off".into(), "q"),
        (format!("/v1/teams/{long}/action-items"), "team_id"),
        ("/v1/action-items?meeting_id=".into(), "meeting_id"),
        (format!("/v1/action-items?assignee_human_id={long}"), "assignee_human_id"),
    ] {
        let response = world.get(&path, ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], param, "{path}");
    }
    let exactly_256 = "x".repeat(256);
    world.get(&format!("/v1/meetings/{exactly_256}"), ALICE).await.assert_error(404, "meeting_not_found", &[]);
    world.get("/v1/meetings/a%00b", ALICE).await.assert_error(404, "meeting_not_found", &[]);
    world.get("/v1/meetings/100%25", ALICE).await.assert_error(404, "meeting_not_found", &[]);
}

fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::test]
async fn every_identifier_a_list_shows_can_be_asked_for_up_to_the_events_256_bytes() {
    // Decided: events' identifiers are at most 256 bytes, any characters; the request
    // identifiers have the same bound, so a listed id followed back is never refused.
    let meeting_id = format!("{}x\u{1}", "é".repeat(127));
    let assignee = format!("{}\n", "h".repeat(255));
    assert_eq!((meeting_id.len(), assignee.len()), (256, 256));
    // The documents' ids would outgrow the bound as `{meeting_id}_note`: their own.
    let event = meeting_draft("acc_a", "mtg_long", "Long ids", 60, vec![item("ai_long", "todo", Some(&assignee), 60)]).with(|event| {
        event.meeting.id = recap_schemas::build::id(&meeting_id);
        event.meeting.note.id = recap_schemas::build::id("doc_long_note");
        event.meeting.summaries[0].id = recap_schemas::build::id("doc_long_sum");
    });
    let mut events = standard_events();
    events.push(event.envelope());
    let world = World::new(&events).await;

    assert_eq!(world.get("/v1/meetings?limit=1", ALICE).await.ids(), std::slice::from_ref(&meeting_id));
    let detail = world.get(&format!("/v1/meetings/{}", encode(&meeting_id)), ALICE).await;
    assert_eq!(detail.status, 200);
    assert_eq!(detail.json["data"]["id"], meeting_id);
    assert_eq!(detail.json["data"]["action_items"][0]["assignee_human_id"], assignee);
    assert_eq!(world.get(&format!("/v1/action-items?meeting_id={}", encode(&meeting_id)), ALICE).await.ids(), ["ai_long"]);
    assert_eq!(world.get(&format!("/v1/action-items?assignee_human_id={}", encode(&assignee)), ALICE).await.ids(), ["ai_long"]);
}

#[tokio::test]
async fn action_items_list_form_carries_the_meeting_or_null() {
    // "The detail-form fields plus meeting: an object with id (string) and title (string),
    // or null for an item that did not come from a meeting."
    let world = World::standard().await;
    let response = world.get("/v1/action-items", ALICE).await;
    assert_eq!(response.ids(), ["ai_9", "ai_5", "ai_4", "ai_3", "ai_2", "ai_1"], "newest first; deleted meeting's items gone");
    let data = response.json["data"].as_array().unwrap();
    for entry in data {
        assert_eq!(keys(entry), ["assignee_human_id", "completed_at", "due_at", "id", "meeting", "status", "text"]);
    }
    assert_eq!(data[0]["meeting"], Value::Null);
    assert_eq!(data[1]["meeting"], json!({"id": "mtg_a5", "title": "Retro"}));
}

#[tokio::test]
async fn action_item_filters_combine() {
    // "status: comma-separated subset of todo, in_progress, done"; assignee_human_id; meeting_id.
    let world = World::standard().await;
    let ids = |path: &'static str| async { world.get(path, ALICE).await.ids() };
    assert_eq!(ids("/v1/action-items?status=todo").await, ["ai_5", "ai_4", "ai_1"]);
    assert_eq!(ids("/v1/action-items?status=done,in_progress").await, ["ai_9", "ai_3", "ai_2"]);
    assert_eq!(ids("/v1/action-items?status=todo,in_progress,done").await, ["ai_9", "ai_5", "ai_4", "ai_3", "ai_2", "ai_1"]);
    assert_eq!(ids("/v1/action-items?assignee_human_id=hum_2").await, ["ai_4", "ai_3"]);
    assert_eq!(ids("/v1/action-items?assignee_human_id=hum_2&status=todo").await, ["ai_4"]);
    assert_eq!(ids("/v1/action-items?meeting_id=mtg_a1").await, ["ai_2", "ai_1"]);
    assert_eq!(ids("/v1/action-items?meeting_id=mtg_a1&status=done").await, ["ai_2"]);
    assert_eq!(ids("/v1/action-items?meeting_id=mtg_a1&assignee_human_id=hum_1").await, ["ai_1"]);
    assert_eq!(ids("/v1/action-items?meeting_id=mtg_b1").await, Vec::<String>::new(), "another account's meeting gives nothing");
    assert_eq!(ids("/v1/action-items?unknown=1&status=done").await, ["ai_2"], "unknown parameters are ignored");
    assert_eq!(ids("/v1/action-items?unknown=%ZZ&status=done").await, ["ai_2"], "an unknown parameter is ignored whole, a bad escape in it included");
}

#[tokio::test]
async fn action_item_status_must_be_a_subset_of_the_three_values() {
    let world = World::standard().await;
    for bad in ["status=", "status=open", "status=todo,", "status=todo,,done", "status=Todo", "status=todo%20"] {
        let response = world.get(&format!("/v1/action-items?{bad}"), ALICE).await;
        response.assert_error(400, "invalid_request", &["param"]);
        assert_eq!(response.json["error"]["param"], "status", "{bad}");
    }
}

#[tokio::test]
async fn shared_notes_are_team_and_direct_shares_never_the_callers_own() {
    // "Notes that others share with the caller, newest first. The caller's own meetings are under /meetings."
    let world = World::standard().await;
    let response = world.get("/v1/shared-notes", ALICE).await;
    assert_eq!(response.ids(), ["shr_direct", "shr_team"], "not shr_own (hers), not shr_secret (not her team)");
    let data = response.json["data"].as_array().unwrap();
    for entry in data {
        assert_eq!(keys(entry), ["access", "id", "owner_name", "published_at", "team", "title"]);
    }
    assert_eq!(data[0]["team"], Value::Null, "shared directly");
    assert_eq!(data[1]["team"], json!({"id": "team_design", "name": "Design"}));
    assert_eq!(world.get("/v1/shared-notes", BOB).await.ids(), ["shr_own"], "Bob sees Alice's team share, not his own");
}

#[tokio::test]
async fn shared_notes_q_matches_every_word() {
    // "q: only notes whose title or text contain every word".
    let world = World::standard().await;
    assert_eq!(world.get("/v1/shared-notes?q=budget", ALICE).await.ids(), ["shr_team"]);
    assert_eq!(world.get("/v1/shared-notes?q=BUDGET%20plan", ALICE).await.ids(), ["shr_team"]);
    assert_eq!(world.get("/v1/shared-notes?q=shared+text", ALICE).await.ids(), ["shr_direct", "shr_team"]);
    assert_eq!(world.get("/v1/shared-notes?q=budget%20direct", ALICE).await.ids(), Vec::<String>::new());
    assert_eq!(world.get("/v1/shared-notes?q=secret", ALICE).await.ids(), Vec::<String>::new(), "search never widens visibility");
    let unindexable = "a".repeat(65);
    assert_eq!(world.get(&format!("/v1/shared-notes?q={unindexable}"), ALICE).await.ids(), Vec::<String>::new());
    let response = world.get(&format!("/v1/shared-notes?q={}", "a".repeat(1001)), ALICE).await;
    assert_eq!(response.json["error"]["param"], "q");
}

#[tokio::test]
async fn shared_notes_q_finds_words_of_the_title_and_of_the_text() {
    // "q: only notes whose title or text contain every word": a word only the title
    // holds finds the note, as does one only the text holds, and every word may come
    // from either.
    let mut events = standard_events();
    events.push(
        EVENTS
            .share("shr_titled", "acc_b")
            .title("Quarterly roadmap")
            .owner_name("owner acc_b")
            .published_at(EVENTS.minute(120))
            .team(None)
            .recipients(["acc_a"])
            .text("Milestones and owners")
            .envelope(),
    );
    let world = World::new(&events).await;
    assert_eq!(world.get("/v1/shared-notes?q=roadmap", ALICE).await.ids(), ["shr_titled"], "a word of the title only");
    assert_eq!(world.get("/v1/shared-notes?q=milestones", ALICE).await.ids(), ["shr_titled"], "a word of the text only");
    assert_eq!(world.get("/v1/shared-notes?q=quarterly%20owners", ALICE).await.ids(), ["shr_titled"], "one word from each");
    assert_eq!(world.get("/v1/shared-notes?q=roadmap%20budget", ALICE).await.ids(), Vec::<String>::new(), "every word");
}

#[tokio::test]
async fn shared_note_detail_has_exactly_the_spec_fields() {
    // "Shared note (detail)": id, title, team_name, published_at, text.
    let world = World::standard().await;
    let data = world.get("/v1/shared-notes/shr_team", ALICE).await.json["data"].clone();
    assert_eq!(keys(&data), ["id", "published_at", "team_name", "text", "title"]);
    assert_eq!(data["team_name"], "Design");
    assert_eq!(data["text"], "Team plan budget\nshared text");
    // Decided: a note shared directly has no team, so team_name is null.
    assert_eq!(world.get("/v1/shared-notes/shr_direct", ALICE).await.json["data"]["team_name"], Value::Null);
}

#[tokio::test]
async fn a_note_not_shared_with_the_caller_is_404_shared_note_not_found() {
    // "An identifier that has no note shared with the caller returns 404 shared_note_not_found."
    let world = World::standard().await;
    for id in ["shr_own", "shr_secret", "shr_nope"] {
        world.get(&format!("/v1/shared-notes/{id}"), ALICE).await.assert_error(404, "shared_note_not_found", &[]);
    }
    world.get("/v1/shared-notes/shr_direct", BOB).await.assert_error(404, "shared_note_not_found", &[]);
}

#[tokio::test]
async fn leaving_a_team_hides_its_notes() {
    // "When the caller leaves a team, that team's notes stop being visible."
    let world = World::standard().await;
    world.apply(&[remove_member("team_design", "acc_a")]).await;
    assert_eq!(world.get("/v1/shared-notes", ALICE).await.ids(), ["shr_direct"]);
    world.get("/v1/shared-notes/shr_team", ALICE).await.assert_error(404, "shared_note_not_found", &[]);
    world.get("/v1/teams/team_design/action-items", ALICE).await.assert_error(404, "team_not_found", &[]);
    assert_eq!(world.get("/v1/teams", ALICE).await.ids(), ["team_free"]);
}

#[tokio::test]
async fn teams_are_the_callers_with_exactly_the_spec_fields() {
    // "Team": id, name, role, member_count, plan, can_collaborate.
    let world = World::standard().await;
    let response = world.get("/v1/teams", ALICE).await;
    assert_eq!(keys(&response.json), ["data"]);
    let data = response.json["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    let design = data.iter().find(|team| team["id"] == "team_design").unwrap();
    assert_eq!(design, &json!({"id": "team_design", "name": "Design", "role": "member", "member_count": 2, "plan": "business", "can_collaborate": true}));
    let free = data.iter().find(|team| team["id"] == "team_free").unwrap();
    assert_eq!(free["plan"], Value::Null, "null when the team has no active plan");
    assert_eq!(world.get("/v1/teams", CAROL).await.json["data"], json!([]));
}

#[tokio::test]
async fn team_action_items_for_members_of_teams_whose_plan_includes_them() {
    // "Team action item": id, text, status, due_at, assignee, owner_name, created_at, shared_note.
    let world = World::standard().await;
    let response = world.get("/v1/teams/team_design/action-items", ALICE).await;
    assert_eq!(response.ids(), ["tai_3", "tai_2", "tai_1"]);
    assert_eq!(keys(&response.json), ["data"], "no has_more and no next_cursor");
    assert_eq!(keys(&response.json["data"][0]), ["assignee", "created_at", "due_at", "id", "owner_name", "shared_note", "status", "text"]);
    assert_eq!(response.json["data"][0]["shared_note"], json!({"id": "shr_team", "title": "Team plan"}));
    assert_eq!(world.get("/v1/teams/team_design/action-items?status=todo", ALICE).await.ids(), ["tai_3", "tai_1"]);
    assert_eq!(world.get("/v1/teams/team_design/action-items?limit=1", ALICE).await.ids(), ["tai_3"]);
    assert_eq!(world.get("/v1/teams/team_design/action-items?status=todo&limit=1", ALICE).await.ids(), ["tai_3"]);
}

#[tokio::test]
async fn team_action_items_status_is_a_single_value_and_there_is_no_cursor() {
    let world = World::standard().await;
    for bad in ["status=todo,done", "status=", "status=open"] {
        let response = world.get(&format!("/v1/teams/team_design/action-items?{bad}"), ALICE).await;
        assert_eq!(response.json["error"]["param"], "status", "{bad}");
    }
    // "there is no cursor parameter": an unknown parameter, ignored.
    assert_eq!(world.get("/v1/teams/team_design/action-items?cursor=whatever", ALICE).await.status, 200);
}

#[tokio::test]
async fn team_endpoints_are_for_members_only_404_team_not_found() {
    // "A team the caller is not a member of returns 404 team_not_found."
    let world = World::standard().await;
    for team in ["team_secret", "team_nope"] {
        world.get(&format!("/v1/teams/{team}/action-items"), ALICE).await.assert_error(404, "team_not_found", &[]);
    }
    assert_eq!(world.get("/v1/teams/team_secret/action-items", BOB).await.ids(), ["tai_s"]);
}

#[tokio::test]
async fn a_team_that_cannot_collaborate_has_no_shared_note_and_no_action_item_to_read() {
    // "can_collaborate: when false, the team has nothing shared to read"; team action
    // items are "Action items from the notes shared with the team", and "The source note
    // is opened with GET {base_url}/shared-notes/{shared_note.id}".
    let world = World::standard().await;
    let collaborating = |can: bool, version: u64| {
        EVENTS.team("team_design", "Design").plan(Some("business")).can_collaborate(can).includes_team_action_items(true).version(version).envelope()
    };
    world.apply(&[collaborating(false, 5)]).await;
    let design = world.get("/v1/teams", ALICE).await.json["data"].as_array().unwrap().iter().find(|team| team["id"] == "team_design").cloned().unwrap();
    assert_eq!(design["can_collaborate"], false);
    assert_eq!(world.get("/v1/shared-notes", ALICE).await.ids(), ["shr_direct"], "the team's share is gone");
    world.get("/v1/shared-notes/shr_team", ALICE).await.assert_error(404, "shared_note_not_found", &[]);
    let items = world.get("/v1/teams/team_design/action-items", ALICE).await;
    assert_eq!(items.status, 200, "{}", items.text);
    assert_eq!(items.json, json!({"data": []}), "no action item of a note the members cannot open");
    // Able again: the shares and their items are back, and every item's note opens.
    world.apply(&[collaborating(true, 6)]).await;
    let items = world.get("/v1/teams/team_design/action-items", ALICE).await;
    assert_eq!(items.ids(), ["tai_3", "tai_2", "tai_1"]);
    for item in items.json["data"].as_array().unwrap() {
        let note = item["shared_note"]["id"].as_str().unwrap();
        assert_eq!(world.get(&format!("/v1/shared-notes/{note}"), ALICE).await.status, 200, "{note}");
    }
}

#[tokio::test]
async fn a_team_plan_without_team_action_items_is_402_team_plan_required() {
    // "The team's plan must include team action items, otherwise 402 team_plan_required."
    let world = World::standard().await;
    world.get("/v1/teams/team_free/action-items", ALICE).await.assert_error(402, "team_plan_required", &[]);
}
