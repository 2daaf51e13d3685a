//! The messages the projection announces (docs/webhooks.md, "Messages"): one scenario
//! per kind and per visibility rule, asserting the exact messages, their order, their
//! accounts and their `data`.

mod common;

use common::*;
use recap_readmodel::messages::{message_id, AccountMessage, MessageKind};
use recap_schemas::{Envelope, MessageKind as Kind, Word};
use serde_json::{json, Value};

/// (account, type, data) of each message.
fn told(messages: &[AccountMessage]) -> Vec<(String, &'static str, Value)> {
    messages.iter().map(|told| (told.account_id.clone(), told.message.kind.as_str(), told.message.data())).collect()
}

/// (account, type) of each message.
fn kinds(messages: &[AccountMessage]) -> Vec<(String, &'static str)> {
    messages.iter().map(|told| (told.account_id.clone(), told.message.kind.as_str())).collect()
}

fn pairs(list: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    list.iter().map(|(account, kind)| (account.to_string(), *kind)).collect()
}

/// The REST list entry of the suite's meeting `m1` titled `title`, created at minute 0.
fn meeting_entry(title: &str) -> Value {
    json!({"id": "m1", "title": title, "kind": "call", "status": "done", "started_at": "2026-09-21T14:13:20Z", "ended_at": "2026-09-21T14:43:20Z",
           "created_at": "2026-09-21T14:13:20Z", "updated_at": "2026-09-21T14:44:20Z", "series_id": null})
}

/// A meeting with neither note text nor summaries.
fn bare_meeting(title: &str) -> recap_schemas::build::Draft<recap_schemas::MeetingUpserted> {
    meeting("acc", "m1", title, 0, None, vec![]).with(|event| {
        event.meeting.note.text = String::new();
        event.meeting.summaries.clear();
    })
}

#[tokio::test]
async fn meeting_created_is_told_to_its_owner_with_the_list_entry_and_notes_ready_the_first_time_it_has_notes() {
    let mut store = Store::new();
    let upsert = meeting("acc", "m1", "Weekly", 0, None, vec![]).version(1).envelope();
    let messages = store.apply_messages(std::slice::from_ref(&upsert), 1).await;
    let data = json!({"meeting_id": "m1", "meeting": meeting_entry("Weekly")});
    assert_eq!(told(&messages), vec![("acc".into(), "meeting.created", data.clone()), ("acc".into(), "meeting.notes_ready", data)]);
    let first = &messages[0].message;
    assert_eq!(first.id, message_id(&upsert.id, "acc", MessageKind::MeetingCreated, "m1", upsert.occurred_at));
    assert_eq!(first.created_at, upsert.occurred_at, "a message is dated by the change it announces");
}

#[tokio::test]
async fn meeting_notes_ready_comes_once_when_a_note_or_summary_first_appears() {
    let mut store = Store::new();
    assert_eq!(kinds(&store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await), pairs(&[("acc", "meeting.created")]));
    // A summary arrives: the list entry is the same, the notes are ready.
    let with_summary = meeting("acc", "m1", "Weekly", 0, None, vec![]).version(2).envelope();
    assert_eq!(kinds(&store.apply_messages(&[with_summary], 1).await), pairs(&[("acc", "meeting.notes_ready")]));
    // Notes edited again: nothing the list shows changed, and notes were ready already.
    let edited = meeting("acc", "m1", "Weekly", 0, None, vec![]).with(|event| event.meeting.note.text = "changed".into()).version(3).envelope();
    assert_eq!(kinds(&store.apply_messages(&[edited], 1).await), vec![]);
}

#[tokio::test]
async fn meeting_updated_is_told_when_its_list_entry_changes_and_an_invisible_change_tells_nothing() {
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await;
    let renamed = store.apply_messages(&[bare_meeting("Renamed").version(2).envelope()], 1).await;
    assert_eq!(told(&renamed), vec![("acc".into(), "meeting.updated", json!({"meeting_id": "m1", "meeting": meeting_entry("Renamed")}))]);
    // A participant's job title is not in the list entry: nothing to tell.
    let invisible = bare_meeting("Renamed").with(|event| event.meeting.participants[0].job_title = "CEO".into()).version(3).envelope();
    assert_eq!(store.apply_messages(&[invisible], 1).await, vec![]);
}

#[tokio::test]
async fn meeting_deleted_carries_only_ids_and_deletes_its_action_items_too() {
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").action_items([item("ai_1", "todo", None, 1)]).version(1).envelope()], 1).await;
    let deleted = store.apply_messages(&[EVENTS.meeting_deleted("acc", "m1").version(2).envelope()], 1).await;
    assert_eq!(
        told(&deleted),
        vec![
            ("acc".into(), "action_item.deleted", json!({"action_item_id": "ai_1", "meeting_id": "m1"})),
            ("acc".into(), "meeting.deleted", json!({"meeting_id": "m1"})),
        ]
    );
    // Brought back by a newer version: created anew.
    let back = store.apply_messages(&[bare_meeting("Weekly").version(3).envelope()], 1).await;
    assert_eq!(kinds(&back), pairs(&[("acc", "meeting.created")]));
}

#[tokio::test]
async fn meeting_transcript_ready_is_told_for_the_first_transcript_and_each_replacement_never_with_its_text() {
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await;
    let first = store.apply_messages(&[EVENTS.transcript("acc", "m1", "secret words").version(2).envelope()], 1).await;
    assert_eq!(told(&first), vec![("acc".into(), "meeting.transcript_ready", json!({"meeting_id": "m1", "meeting": meeting_entry("Weekly")}))]);
    assert!(!serde_json::to_string(&first).unwrap().contains("secret words"), "never a transcript's text");
    let replaced = store.apply_messages(&[EVENTS.transcript("acc", "m1", "other words").version(3).envelope()], 1).await;
    assert_eq!(kinds(&replaced), pairs(&[("acc", "meeting.transcript_ready")]));
    // The same transcript at a newer version changes nothing anyone can read.
    let same = store.apply_messages(&[EVENTS.transcript("acc", "m1", "other words").version(4).envelope()], 1).await;
    assert_eq!(same, vec![]);
}

#[tokio::test]
async fn meeting_transcript_ready_is_told_for_a_replacement_that_changes_only_its_word_timings_or_tracks() {
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await;
    let word = |start_ms: i64, track: &str| Word { text: "hello".into(), start_ms, end_ms: start_ms + 300, track: track.into() };
    // The same text and segments, and one word each time: only the word's timing or
    // track tells the transcripts apart.
    let transcript =
        |version: u64, word: Word| EVENTS.transcript("acc", "m1", "hello").with(|event| event.transcript.words = Some(vec![word])).version(version).envelope();
    let first = store.apply_messages(&[transcript(2, word(0, "mic"))], 1).await;
    assert_eq!(kinds(&first), pairs(&[("acc", "meeting.transcript_ready")]));
    let retimed = store.apply_messages(&[transcript(3, word(500, "mic"))], 1).await;
    assert_eq!(kinds(&retimed), pairs(&[("acc", "meeting.transcript_ready")]), "another timing");
    let retracked = store.apply_messages(&[transcript(4, word(500, "speaker"))], 1).await;
    assert_eq!(kinds(&retracked), pairs(&[("acc", "meeting.transcript_ready")]), "another track");
    let same = store.apply_messages(&[transcript(5, word(500, "speaker"))], 1).await;
    assert_eq!(same, vec![], "the same transcript at a newer version");
}

// A store written while the digest covered only the transcript's first row holds that
// form as told: the same transcript written once more is not told again (as far as that
// form tells them apart), another text is.
#[tokio::test]
async fn a_transcript_told_under_the_digests_earlier_form_is_not_told_again_for_being_written_once_more() {
    use recap_readmodel::driver::{Mutation, Op};
    use recap_readmodel::tables::{ENTITIES, MEETING_TRANSCRIPTS};
    use recap_readmodel::Val;
    use sha2::Digest as _;
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await;
    let word = Word { text: "hello".into(), start_ms: 0, end_ms: 300, track: "mic".into() };
    let transcript = |version: u64, text: &str| {
        let words = Some(vec![Word { text: text.into(), ..word.clone() }]);
        EVENTS.transcript("acc", "m1", text).with(|event| event.transcript.words = words).version(version).envelope()
    };
    assert_eq!(kinds(&store.apply_messages(&[transcript(2, "hello")], 1).await), pairs(&[("acc", "meeting.transcript_ready")]));
    let key = vec![Val::text("transcript"), Val::text("m1")];
    let kept = store.driver.get(&ENTITIES, &key, &[]).await.unwrap().expect("the transcript's state");
    let main = store.driver.get(&MEETING_TRANSCRIPTS, &[Val::text("acc"), Val::text("m1")], &[]).await.unwrap().expect("the transcript's row");
    let mut state: Value = serde_json::from_str(&kept.body).unwrap();
    let earlier_form = hex::encode(&sha2::Sha256::digest(main.body.as_bytes())[..16]);
    assert_ne!(state["seen"]["transcript"], json!(earlier_form), "the digest now covers the words too");
    state["seen"]["transcript"] = json!(earlier_form);
    let put = Op::Put { body: state.to_string(), expires_at: None };
    store.driver.write(vec![Mutation { table: &ENTITIES, partition: key, clustering: vec![], op: put, ts: kept.ts + 1 }]).await.unwrap();
    assert_eq!(store.apply_messages(&[transcript(3, "hello")], 1).await, vec![], "the same transcript");
    assert_eq!(store.apply_messages(&[transcript(4, "hello")], 1).await, vec![], "told under the digest's present form since");
    assert_eq!(kinds(&store.apply_messages(&[transcript(5, "goodbye")], 1).await), pairs(&[("acc", "meeting.transcript_ready")]), "another text");
}

#[tokio::test]
async fn meeting_transcript_ready_waits_for_a_meeting_that_is_not_visible_yet() {
    let mut store = Store::new();
    let early = store.apply_messages(&[EVENTS.transcript("acc", "m1", "hello").version(2).envelope()], 1).await;
    assert_eq!(early, vec![], "no meeting to read it with yet");
    let meeting_arrives = store.apply_messages(&[bare_meeting("Weekly").version(1).envelope()], 1).await;
    assert_eq!(kinds(&meeting_arrives), pairs(&[("acc", "meeting.created"), ("acc", "meeting.transcript_ready")]));
}

/// A transcript newer than a delete that arrives after it stays (rule 2), but the
/// account was told the meeting was deleted: when the meeting is back, its transcript is
/// ready again, as in version order (meeting 1, delete 2, transcript 3, meeting 4).
#[tokio::test]
async fn meeting_transcript_ready_is_told_again_for_a_meeting_back_after_a_delete_that_arrived_late() {
    let in_order = [
        bare_meeting("Weekly").version(1).envelope(),
        EVENTS.meeting_deleted("acc", "m1").version(2).envelope(),
        EVENTS.transcript("acc", "m1", "hello").version(3).envelope(),
        bare_meeting("Weekly").version(4).envelope(),
    ];
    let mut store = Store::new();
    let told = store.apply_messages(&in_order, 1).await;
    assert_eq!(kinds(&told), pairs(&[("acc", "meeting.created"), ("acc", "meeting.deleted"), ("acc", "meeting.created"), ("acc", "meeting.transcript_ready")]));

    let mut store = Store::new();
    let late_delete = [in_order[0].clone(), in_order[2].clone(), in_order[1].clone(), in_order[3].clone()];
    let told = store.apply_messages(&late_delete, 1).await;
    assert_eq!(
        kinds(&told),
        pairs(&[
            ("acc", "meeting.created"),
            ("acc", "meeting.transcript_ready"),
            ("acc", "meeting.deleted"),
            ("acc", "meeting.created"),
            ("acc", "meeting.transcript_ready")
        ])
    );
}

#[tokio::test]
async fn action_item_messages_diff_a_meetings_items_one_by_one() {
    let mut store = Store::new();
    let created = store
        .apply_messages(&[bare_meeting("Weekly").action_items([item("ai_1", "todo", None, 1), item("ai_2", "todo", None, 2)]).version(1).envelope()], 1)
        .await;
    assert_eq!(kinds(&created), pairs(&[("acc", "meeting.created"), ("acc", "action_item.created"), ("acc", "action_item.created")]));
    assert_eq!(
        created[1].message.data(),
        json!({"action_item_id": "ai_1", "action_item": {"id": "ai_1", "text": "do ai_1", "status": "todo", "assignee_human_id": null, "due_at": null,
               "completed_at": null, "meeting": {"id": "m1", "title": "Weekly"}}})
    );
    // ai_1 done, ai_2 unchanged, ai_2 gone... ai_3 new.
    let next = store
        .apply_messages(&[bare_meeting("Weekly").action_items([item("ai_1", "done", None, 1), item("ai_3", "todo", None, 3)]).version(2).envelope()], 1)
        .await;
    assert_eq!(
        told(&next).into_iter().map(|(_, kind, data)| (kind, data["action_item_id"].clone())).collect::<Vec<_>>(),
        vec![("action_item.updated", json!("ai_1")), ("action_item.created", json!("ai_3")), ("action_item.deleted", json!("ai_2"))]
    );
    assert_eq!(next[2].message.data(), json!({"action_item_id": "ai_2", "meeting_id": "m1"}));
}

#[tokio::test]
async fn renaming_a_meeting_updates_its_action_items_whose_entry_names_the_meetings_title() {
    let mut store = Store::new();
    store.apply_messages(&[bare_meeting("Weekly").action_items([item("ai_1", "todo", None, 1)]).version(1).envelope()], 1).await;
    let renamed = store.apply_messages(&[bare_meeting("Renamed").action_items([item("ai_1", "todo", None, 1)]).version(2).envelope()], 1).await;
    assert_eq!(
        told(&renamed),
        vec![
            ("acc".into(), "meeting.updated", json!({"meeting_id": "m1", "meeting": meeting_entry("Renamed")})),
            (
                "acc".into(),
                "action_item.updated",
                json!({"action_item_id": "ai_1", "action_item": {"id": "ai_1", "text": "do ai_1", "status": "todo", "assignee_human_id": null, "due_at": null,
                       "completed_at": null, "meeting": {"id": "m1", "title": "Renamed"}}})
            ),
        ]
    );
}

#[tokio::test]
async fn action_item_messages_for_standalone_items_created_updated_deleted() {
    let mut store = Store::new();
    let created = store.apply_messages(&[EVENTS.action_item("acc", item("ai_9", "todo", None, 1)).version(1).envelope()], 1).await;
    assert_eq!(
        told(&created),
        vec![(
            "acc".into(),
            "action_item.created",
            json!({"action_item_id": "ai_9", "action_item": {"id": "ai_9", "text": "do ai_9", "status": "todo", "assignee_human_id": null, "due_at": null,
                   "completed_at": null, "meeting": null}})
        )]
    );
    let updated = store.apply_messages(&[EVENTS.action_item("acc", item("ai_9", "in_progress", None, 1)).version(2).envelope()], 1).await;
    assert_eq!(kinds(&updated), pairs(&[("acc", "action_item.updated")]));
    let deleted = store.apply_messages(&[EVENTS.action_item_deleted("acc", "ai_9").version(3).envelope()], 1).await;
    assert_eq!(told(&deleted), vec![("acc".into(), "action_item.deleted", json!({"action_item_id": "ai_9", "meeting_id": null}))]);
}

/// The list entry of the suite's share `s1` as its recipients see it.
fn share_entry(title: &str, team: Option<&str>) -> Value {
    json!({"id": "s1", "title": title, "team": team.map(|team| json!({"id": team, "name": format!("team {team}")})), "owner_name": "owner own",
           "access": "viewer", "published_at": "2026-09-21T14:18:20Z"})
}

#[tokio::test]
async fn shared_note_received_goes_to_a_direct_recipient_and_never_to_the_owner() {
    let mut store = Store::new();
    let messages = store.apply_messages(&[share("s1", "own", None, &["bob", "own"], "Plan", 5).version(1).envelope()], 1).await;
    assert_eq!(told(&messages), vec![("bob".into(), "shared_note.received", json!({"share_id": "s1", "shared_note": share_entry("Plan", None)}))]);
}

#[tokio::test]
async fn shared_note_updated_when_a_recipient_keeps_it_and_sees_another_entry_and_withdrawn_on_unshare() {
    let mut store = Store::new();
    store.apply_messages(&[share("s1", "own", None, &["bob", "cat"], "Plan", 5).version(1).envelope()], 1).await;
    // Retitled, and cat is no longer a recipient; dan is.
    let next = store.apply_messages(&[share("s1", "own", None, &["bob", "dan"], "Plan v2", 5).version(2).envelope()], 1).await;
    assert_eq!(
        told(&next),
        vec![
            ("bob".into(), "shared_note.updated", json!({"share_id": "s1", "shared_note": share_entry("Plan v2", None)})),
            ("cat".into(), "shared_note.withdrawn", json!({"share_id": "s1"})),
            ("dan".into(), "shared_note.received", json!({"share_id": "s1", "shared_note": share_entry("Plan v2", None)})),
        ]
    );
    // The shared text changed, not the entry: nothing to tell.
    let text_only = share("s1", "own", None, &["bob", "dan"], "Plan v2", 5).with(|event| event.share.text = "new text".into()).version(3).envelope();
    assert_eq!(store.apply_messages(&[text_only], 1).await, vec![]);
    let unshared = store.apply_messages(&[EVENTS.unshared("s1").version(4).envelope()], 1).await;
    assert_eq!(kinds(&unshared), pairs(&[("bob", "shared_note.withdrawn"), ("dan", "shared_note.withdrawn")]));
}

#[tokio::test]
async fn team_joined_and_shared_note_received_for_the_teams_existing_shares_when_a_member_joins() {
    let mut store = Store::new();
    store
        .apply_messages(&[team("t1", false).envelope(), EVENTS.member("t1", "own").envelope(), share("s1", "own", Some("t1"), &[], "Plan", 5).envelope()], 1)
        .await;
    let joined = store.apply_messages(&[EVENTS.member("t1", "bob").envelope()], 1).await;
    assert_eq!(
        told(&joined),
        vec![
            (
                "bob".into(),
                "team.joined",
                json!({"team_id": "t1", "team": {"id": "t1", "name": "team t1", "role": "member", "member_count": 2, "plan": "business", "can_collaborate": true}})
            ),
            ("bob".into(), "shared_note.received", json!({"share_id": "s1", "shared_note": share_entry("Plan", Some("t1"))})),
        ]
    );
}

#[tokio::test]
async fn team_left_and_shared_note_withdrawn_when_a_member_leaves() {
    let mut store = Store::new();
    store
        .apply_messages(&[team("t1", false).envelope(), EVENTS.member("t1", "bob").envelope(), share("s1", "own", Some("t1"), &[], "Plan", 5).envelope()], 1)
        .await;
    let left = store.apply_messages(&[EVENTS.member_removed("t1", "bob").version(2).envelope()], 1).await;
    assert_eq!(told(&left), vec![("bob".into(), "team.left", json!({"team_id": "t1"})), ("bob".into(), "shared_note.withdrawn", json!({"share_id": "s1"}))]);
}

#[tokio::test]
async fn shared_note_withdrawn_and_team_left_when_the_team_is_deleted() {
    let mut store = Store::new();
    store
        .apply_messages(&[team("t1", false).envelope(), EVENTS.member("t1", "bob").envelope(), share("s1", "own", Some("t1"), &[], "Plan", 5).envelope()], 1)
        .await;
    let deleted = store.apply_messages(&[EVENTS.team_deleted("t1").version(2).envelope()], 1).await;
    assert_eq!(kinds(&deleted), pairs(&[("bob", "shared_note.withdrawn"), ("bob", "team.left")]));
}

#[tokio::test]
async fn shared_note_withdrawn_when_the_team_can_no_longer_collaborate_and_received_again_when_it_can() {
    let mut store = Store::new();
    store
        .apply_messages(&[team("t1", false).envelope(), EVENTS.member("t1", "bob").envelope(), share("s1", "own", Some("t1"), &[], "Plan", 5).envelope()], 1)
        .await;
    let off = store.apply_messages(&[team_collaborating("t1", false, false).version(2).envelope()], 1).await;
    assert_eq!(kinds(&off), pairs(&[("bob", "shared_note.withdrawn")]), "still a member of the team: no team.left");
    let on = store.apply_messages(&[team_collaborating("t1", false, true).version(3).envelope()], 1).await;
    assert_eq!(kinds(&on), pairs(&[("bob", "shared_note.received")]));
}

#[tokio::test]
async fn stale_and_duplicate_events_announce_nothing() {
    let mut store = Store::new();
    let upsert = bare_meeting("Weekly").version(5).envelope();
    store.apply_messages(std::slice::from_ref(&upsert), 1).await;
    assert_eq!(store.apply_messages(std::slice::from_ref(&upsert), 1).await, vec![], "the same event again");
    assert_eq!(store.apply_messages(&[bare_meeting("Older").version(4).envelope()], 1).await, vec![], "an older version");
    let shared = share("s1", "own", None, &["bob"], "Plan", 5).version(2).envelope();
    store.apply_messages(std::slice::from_ref(&shared), 1).await;
    assert_eq!(store.apply_messages(&[shared, share("s1", "own", None, &["cat"], "Old", 5).version(1).envelope()], 1).await, vec![]);
}

/// A stream touching every kind.
fn stream() -> Vec<Envelope> {
    vec![
        team("t1", false).envelope(),
        EVENTS.member("t1", "own").envelope(),
        meeting("own", "m1", "Weekly", 0, None, vec![item("ai_1", "todo", None, 1)]).version(1).envelope(),
        EVENTS.transcript("own", "m1", "hello").version(2).envelope(),
        share("s1", "own", Some("t1"), &[], "Plan", 5).envelope(),
        share("s2", "own", None, &["cat"], "Direct", 6).envelope(),
        EVENTS.member("t1", "bob").envelope(),
        meeting("own", "m1", "Weekly 2", 0, None, vec![item("ai_1", "done", None, 1)]).version(3).envelope(),
        EVENTS.action_item("own", item("ai_9", "todo", None, 1)).envelope(),
        share("s2", "own", None, &["cat", "bob"], "Direct 2", 6).version(2).envelope(),
        EVENTS.member_removed("t1", "bob").version(2).envelope(),
        EVENTS.member("t1", "bob").version(3).envelope(),
        EVENTS.action_item_deleted("own", "ai_9").version(2).envelope(),
        EVENTS.unshared("s2").version(3).envelope(),
        EVENTS.meeting_deleted("own", "m1").version(4).envelope(),
        EVENTS.team_deleted("t1").version(2).envelope(),
    ]
}

#[tokio::test]
async fn projecting_the_stream_again_into_a_fresh_read_model_yields_the_same_message_ids() {
    let events = stream();
    let first = Store::new().apply_messages(&events, 1).await;
    let again = Store::new().apply_messages(&events, 1).await;
    assert_eq!(first, again);
    let mut announced: Vec<Kind> = first.iter().map(|told| told.message.kind).collect();
    announced.sort();
    announced.dedup();
    assert_eq!(announced, Kind::ALL.to_vec(), "the stream announces every kind");
    let ids: std::collections::BTreeSet<&str> = first.iter().map(|told| told.message.id.as_str()).collect();
    assert_eq!(ids.len(), first.len(), "every message has an id of its own");
}

#[tokio::test]
async fn replaying_the_stream_into_the_same_read_model_announces_nothing() {
    let events = stream();
    let mut store = Store::new();
    store.apply_messages(&events, 1).await;
    assert_eq!(store.apply_messages(&events, 3).await, vec![]);
}

#[tokio::test]
async fn a_batch_of_many_events_announces_what_one_event_at_a_time_does() {
    let events = stream();
    let one_by_one = Store::new().apply_messages(&events, 1).await;
    for batch_size in [2, 5, events.len()] {
        assert_eq!(Store::new().apply_messages(&events, batch_size).await, one_by_one, "batches of {batch_size}");
    }
}
