//! The contract's projection rules and the visibility rules of the REST spec, one
//! scenario each, asserting what the queries answer.

mod common;

use common::*;
use recap_readmodel::{ActionItemFilter, MeetingFilter};
use serde_json::{json, Value};

fn title_of(body: &Option<String>) -> Option<String> {
    body.as_ref().map(|body| serde_json::from_str::<Value>(body).unwrap()["title"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn rule_1_last_version_wins_a_stale_version_after_a_newer_one_changes_nothing() {
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "new title", 0, None, vec![]).version(2).envelope(),
                meeting("acc", "m1", "old title", 0, None, vec![]).version(1).envelope(),
            ],
            10,
        )
        .await;
    assert_eq!(title_of(&store.readmodel.meeting_detail("acc", "m1").await.unwrap()), Some("new title".into()));
    // The same version again is stale too.
    store.apply(&[meeting("acc", "m1", "same version", 0, None, vec![]).version(2).envelope()], 1).await;
    assert_eq!(title_of(&store.readmodel.meeting_detail("acc", "m1").await.unwrap()), Some("new title".into()));
}

#[tokio::test]
async fn rule_2_deletes_shadow_an_older_upsert_arriving_after_the_delete() {
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "t", 0, Some("s1"), vec![item("i1", "todo", Some("h1"), 1)]).version(1).envelope(),
                EVENTS.meeting_deleted("acc", "m1").version(3).envelope(),
                meeting("acc", "m1", "late", 0, Some("s1"), vec![item("i1", "todo", Some("h1"), 1)]).version(2).envelope(),
            ],
            1,
        )
        .await;
    let readmodel = &store.readmodel;
    assert_eq!(readmodel.meeting_detail("acc", "m1").await.unwrap(), None);
    assert!(readmodel.meetings("acc", &MeetingFilter::default(), None, 50).await.unwrap().rows.is_empty());
    // Its action items disappear with it, from every list.
    assert!(readmodel.action_items("acc", &ActionItemFilter::default(), None, 50).await.unwrap().rows.is_empty());
    let by_assignee = ActionItemFilter { assignee_human_id: Some("h1".into()), ..ActionItemFilter::default() };
    assert!(readmodel.action_items("acc", &by_assignee, None, 50).await.unwrap().rows.is_empty());
    assert_eq!(readmodel.series_meetings("acc", "s1", 0, 50).await.unwrap().1, 0);
    assert_eq!(readmodel.search_meetings("acc", &["late".into()], 0, 50).await.unwrap().1, 0);
}

#[tokio::test]
async fn rule_2_a_higher_version_upsert_after_a_delete_brings_the_entity_back() {
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "t", 0, None, vec![]).version(1).envelope(),
                EVENTS.meeting_deleted("acc", "m1").version(2).envelope(),
                meeting("acc", "m1", "back", 0, None, vec![]).version(3).envelope(),
            ],
            2,
        )
        .await;
    assert_eq!(title_of(&store.readmodel.meeting_detail("acc", "m1").await.unwrap()), Some("back".into()));
}

#[tokio::test]
async fn transcripts_compare_only_with_the_last_transcript_and_the_meetings_delete() {
    let transcript = |text: &str| EVENTS.transcript("acc", "m1", text);
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "t", 0, None, vec![]).version(6).envelope(),
                // "a transcript at version 5 arriving after meeting.upserted version 6 is applied"
                transcript("five").version(5).envelope(),
                transcript("four").version(4).envelope(),
                // "A newer meeting.upserted does not remove the transcript."
                meeting("acc", "m1", "t2", 0, None, vec![]).version(7).envelope(),
            ],
            1,
        )
        .await;
    let record = store.readmodel.meeting_transcript("acc", "m1").await.unwrap().unwrap();
    assert_eq!(record.body, r#"{"text":"five","segments":[]}"#);
    assert_eq!(record.word_count, 0);
    store.apply(&[EVENTS.meeting_deleted("acc", "m1").version(8).envelope(), transcript("shadowed").version(8).envelope()], 1).await;
    assert_eq!(
        store.readmodel.meeting_transcript("acc", "m1").await.unwrap(),
        None,
        "deleted with its meeting; a transcript at the delete's version stays shadowed"
    );
}

// Rule 2: "A delete at version v hides the entity and any event for it at a version ≤ v,
// also one that arrives after the delete" — even when the delete itself arrives after a
// newer upsert: in version order (transcript 2, delete 3, upsert 6) the transcript is gone.
#[tokio::test]
async fn a_late_delete_still_shadows_an_older_transcript() {
    let transcript = |text: &str| EVENTS.transcript("acc", "m1", text);
    let mut store = Store::new();
    store
        .apply(
            &[
                transcript("two").version(2).envelope(),
                meeting("acc", "m1", "t", 0, None, vec![]).version(6).envelope(),
                EVENTS.meeting_deleted("acc", "m1").version(3).envelope(),
            ],
            1,
        )
        .await;
    assert!(store.readmodel.meeting_detail("acc", "m1").await.unwrap().is_some(), "the meeting's newer upsert stands");
    assert_eq!(store.readmodel.meeting_transcript("acc", "m1").await.unwrap(), None, "the transcript at version 2 is shadowed by the delete at 3");
    store.apply(&[transcript("three").version(3).envelope(), transcript("four").version(4).envelope()], 1).await;
    assert_eq!(store.readmodel.meeting_transcript("acc", "m1").await.unwrap().unwrap().body, r#"{"text":"four","segments":[]}"#, "above the delete: applied");
}

#[tokio::test]
async fn an_item_absent_from_a_newer_meeting_snapshot_is_gone() {
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "t", 0, None, vec![item("i1", "todo", None, 1), item("i2", "todo", None, 2)]).version(1).envelope(),
                meeting("acc", "m1", "renamed", 0, None, vec![item("i2", "done", None, 2)]).version(2).envelope(),
            ],
            1,
        )
        .await;
    let page = store.readmodel.action_items("acc", &ActionItemFilter::default(), None, 50).await.unwrap();
    let bodies: Vec<Value> = page.rows.iter().map(|row| serde_json::from_str(&row.body).unwrap()).collect();
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["id"], "i2");
    assert_eq!(bodies[0]["status"], "done");
    assert_eq!(bodies[0]["meeting"], json!({"id": "m1", "title": "renamed"}));
}

#[tokio::test]
async fn a_revoked_token_reads_as_revoked() {
    let mut store = Store::new();
    let sha = "a".repeat(64);
    store
        .apply(
            &[
                token_created("acc", "t1", &sha).version(1).envelope(),
                token_revoked("acc", "t1").version(2).envelope(),
                token_created("acc", "t1", &sha).version(1).envelope(),
            ],
            1,
        )
        .await;
    let token = store.readmodel.token_by_hash(&sha).await.unwrap().unwrap();
    assert!(token.revoked);
    assert_eq!(token.account_id, "acc");
}

// note.shared: "published or republished (a newer version replaces it)". Republished at
// the same instant with other words, the share's list row is withdrawn and granted again
// by one event at one timestamp: the grant stands, in any batch.
#[tokio::test]
async fn a_share_republished_at_the_same_instant_with_other_words_stays_listed() {
    for batch_size in [1, 2] {
        let mut store = Store::new();
        let events = [
            share("shr_1", "acc_o", None, &["acc_r"], "alpha note", 5).version(1).envelope(),
            share("shr_1", "acc_o", None, &["acc_r"], "beta note", 5).version(2).envelope(),
        ];
        store.apply(&events, batch_size).await;
        let listed = |page: recap_readmodel::Page| {
            page.rows.iter().map(|row| serde_json::from_str::<Value>(&row.body).expect("a list entry")["title"].clone()).collect::<Vec<_>>()
        };
        let all = store.readmodel.shared_notes("acc_r", &[], None, 10).await.expect("a page");
        assert_eq!(listed(all), [json!("beta note")], "batches of {batch_size}");
        let beta = store.readmodel.shared_notes("acc_r", &["beta".to_string()], None, 10).await.expect("a page");
        assert_eq!(listed(beta), [json!("beta note")], "batches of {batch_size}");
        let alpha = store.readmodel.shared_notes("acc_r", &["alpha".to_string()], None, 10).await.expect("a page");
        assert!(alpha.rows.is_empty(), "batches of {batch_size}");
    }
}

// Two entities writing one row with equal timestamps (here two tokens naming one hash,
// each at its version 1): whichever the batching, the row the stores' tie rule keeps
// (the greater body), as if each event had been written on its own.
#[tokio::test]
async fn a_tie_between_entities_on_one_row_ends_the_same_whatever_the_batching() {
    let sha = "b".repeat(64);
    let created = |token_id: &str| token_created("acc", token_id, &sha).version(1).envelope();
    let mut answers = Vec::new();
    for (order, batch_size) in [(["t1", "t2"], 1), (["t1", "t2"], 2), (["t2", "t1"], 1), (["t2", "t1"], 2)] {
        let mut store = Store::new();
        store.apply(&[created(order[0]), created(order[1])], batch_size).await;
        let token = store.readmodel.token_by_hash(&sha).await.expect("a token read").expect("the token row");
        answers.push(token.token_id);
    }
    assert_eq!(answers[0], answers[1], "one batch ends as one event at a time");
    assert_eq!(answers[2], answers[3], "one batch ends as one event at a time");
    assert_eq!(answers[0], answers[2], "the same row whatever the order");
}

// token.revoked: "After it is projected, the token answers 401 token_revoked", also when
// it is projected before the token.created that names the token's hash.
#[tokio::test]
async fn a_token_revoked_before_its_creation_arrives_reads_as_revoked() {
    let mut store = Store::new();
    let sha = "b".repeat(64);
    store.apply(&[token_revoked("acc", "t1").version(2).envelope()], 1).await;
    assert!(store.readmodel.token_by_hash(&sha).await.unwrap().is_none(), "the hash is not known yet");
    let created = token_created("acc", "t1", &sha).version(1).envelope();
    store.apply(std::slice::from_ref(&created), 1).await;
    let token = store.readmodel.token_by_hash(&sha).await.unwrap().expect("the hash row, revoked");
    assert!(token.revoked);
    assert_eq!(token.account_id, "acc");
    store.apply(&[created], 1).await;
    assert!(store.readmodel.token_by_hash(&sha).await.unwrap().unwrap().revoked, "a redelivery changes nothing");
}

async fn shared_ids(store: &Store, account: &str) -> Vec<String> {
    let page = store.readmodel.shared_notes(account, &[], None, 50).await.unwrap();
    page.rows.iter().map(|row| serde_json::from_str::<Value>(&row.body).unwrap()["id"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn visibility_follows_team_membership_direct_recipients_and_never_the_owner() {
    let mut store = Store::new();
    store
        .apply(
            &[
                team("t1", true).version(1).envelope(),
                EVENTS.member("t1", "owner").version(1).envelope(),
                EVENTS.member("t1", "bob").version(1).envelope(),
                share("s_team", "owner", Some("t1"), &[], "team note", 1).version(1).envelope(),
                share("s_direct", "owner", None, &["carol"], "direct note", 2).version(1).envelope(),
            ],
            1,
        )
        .await;
    assert_eq!(shared_ids(&store, "bob").await, vec!["s_team"]);
    assert_eq!(shared_ids(&store, "carol").await, vec!["s_direct"]);
    assert!(shared_ids(&store, "owner").await.is_empty(), "the owner never sees their own share");
    assert!(store.readmodel.shared_note("carol", "s_team").await.unwrap().is_none());
    assert_eq!(store.readmodel.teams("bob").await.unwrap()[0].team.member_count, 2);

    // A member who joins sees everything the team has, older shares included.
    store.apply(&[EVENTS.member("t1", "carol").version(1).envelope()], 1).await;
    assert_eq!(shared_ids(&store, "carol").await, vec!["s_direct", "s_team"]);
    assert_eq!(store.readmodel.teams("bob").await.unwrap()[0].team.member_count, 3);

    // "When the caller leaves a team, that team's notes stop being visible."
    store.apply(&[EVENTS.member_removed("t1", "bob").version(2).envelope()], 1).await;
    assert!(shared_ids(&store, "bob").await.is_empty());
    assert!(store.readmodel.team_membership("bob", "t1").await.unwrap().is_none());
    assert!(store.readmodel.teams("bob").await.unwrap().is_empty());
    assert_eq!(store.readmodel.teams("carol").await.unwrap()[0].team.member_count, 2);

    // Unsharing withdraws it from everyone.
    store.apply(&[EVENTS.unshared("s_team").version(2).envelope()], 1).await;
    assert_eq!(shared_ids(&store, "carol").await, vec!["s_direct"]);
}

// "Shared with a team: `team` set, visible to the team's current members. Shared
// directly: `team` null, visible to `recipient_account_ids`." A team share's recipient
// list does not widen it: it is gone for all when the team is deleted ("its shares are
// visible to no one") or when they leave.
#[tokio::test]
async fn a_team_share_is_visible_to_the_team_only_whatever_its_recipients() {
    let mut store = Store::new();
    store
        .apply(
            &[
                team("t1", true).version(1).envelope(),
                EVENTS.member("t1", "bob").version(1).envelope(),
                share("s_team", "owner", Some("t1"), &["bob", "carol"], "team note", 1).version(1).envelope(),
            ],
            1,
        )
        .await;
    assert_eq!(shared_ids(&store, "bob").await, vec!["s_team"]);
    assert!(shared_ids(&store, "carol").await.is_empty(), "not a member");
    store.apply(&[EVENTS.member_removed("t1", "bob").version(2).envelope()], 1).await;
    assert!(shared_ids(&store, "bob").await.is_empty(), "the member who leaves sees none of the team's notes");
    store.apply(&[EVENTS.member("t1", "bob").version(3).envelope(), EVENTS.team_deleted("t1").version(2).envelope()], 1).await;
    assert!(shared_ids(&store, "bob").await.is_empty(), "a deleted team's shares are visible to no one");
    // Republished as a direct share: now the recipients see it.
    store.apply(&[share("s_team", "owner", None, &["bob", "carol"], "team note", 1).version(2).envelope()], 1).await;
    assert_eq!(shared_ids(&store, "carol").await, vec!["s_team"]);
    assert_eq!(shared_ids(&store, "bob").await, vec!["s_team"]);
}

// Team, can_collaborate: "when false, the team has nothing shared to read".
#[tokio::test]
async fn a_team_that_cannot_collaborate_has_nothing_shared_to_read() {
    let mut store = Store::new();
    store
        .apply(
            &[
                team("t1", true).version(1).envelope(),
                EVENTS.member("t1", "bob").version(1).envelope(),
                EVENTS.member("t1", "carol").version(1).envelope(),
                share("s_team", "owner", Some("t1"), &[], "team note", 1).version(1).envelope(),
                share("s_both", "owner", Some("t1"), &["carol"], "team and carol", 2).version(1).envelope(),
            ],
            1,
        )
        .await;
    assert_eq!(shared_ids(&store, "bob").await, vec!["s_both", "s_team"]);
    store.apply(&[team_collaborating("t1", true, false).version(2).envelope()], 1).await;
    assert!(shared_ids(&store, "bob").await.is_empty(), "nothing of the team is shared to read");
    assert!(store.readmodel.shared_note("bob", "s_team").await.unwrap().is_none());
    assert!(shared_ids(&store, "carol").await.is_empty(), "a team share is the team's only, whatever its recipient list");
    assert!(!store.readmodel.teams("bob").await.unwrap()[0].team.can_collaborate, "the team itself is still listed");
    // Neither a member who joins nor a note shared meanwhile makes anything readable.
    store
        .apply(&[EVENTS.member("t1", "dave").version(1).envelope(), share("s_later", "owner", Some("t1"), &[], "later note", 3).version(1).envelope()], 1)
        .await;
    assert!(shared_ids(&store, "dave").await.is_empty());
    assert!(shared_ids(&store, "bob").await.is_empty());
    // Collaborating again: every member sees everything the team has.
    store.apply(&[team("t1", true).version(3).envelope()], 1).await;
    for account in ["bob", "dave"] {
        assert_eq!(shared_ids(&store, account).await, vec!["s_later", "s_both", "s_team"], "{account}");
    }
}

#[tokio::test]
async fn a_deleted_team_shows_nothing_until_a_newer_upsert_and_its_memberships_are_gone() {
    let mut store = Store::new();
    store
        .apply(
            &[
                team("t1", true).version(1).envelope(),
                EVENTS.member("t1", "bob").version(1).envelope(),
                share("s1", "owner", Some("t1"), &[], "team note", 1).version(1).envelope(),
                team_item("t1", "ti1", "todo", 1).version(1).envelope(),
                EVENTS.team_deleted("t1").version(2).envelope(),
            ],
            1,
        )
        .await;
    assert!(shared_ids(&store, "bob").await.is_empty());
    assert!(store.readmodel.team_membership("bob", "t1").await.unwrap().is_none());
    assert!(store.readmodel.team_action_items("t1", None, 50).await.unwrap().is_empty());

    // Replays of older member events stay shadowed; the team comes back with a newer
    // version, and only a newer membership brings bob back, seeing the older share.
    store.apply(&[EVENTS.member("t1", "bob").version(1).envelope(), team("t1", true).version(3).envelope()], 1).await;
    assert!(store.readmodel.team_membership("bob", "t1").await.unwrap().is_none());
    store.apply(&[EVENTS.member("t1", "bob").version(2).envelope()], 1).await;
    assert!(store.readmodel.team_membership("bob", "t1").await.unwrap().is_some());
    assert_eq!(shared_ids(&store, "bob").await, vec!["s1"]);
}

// Rule 6 with a team delete: the members a delete tells `team.left` and whose
// memberships it ends are read from the team's member rows, which are written with the
// entity states. So a batch applied again after its states were lost (the rows written,
// the states not) tells the same members the same messages and ends the same
// memberships, and a member who joins the team once it is back joins it anew, seeing
// the team's older share.
#[tokio::test]
async fn a_team_delete_whose_states_were_not_written_tells_and_ends_the_same_memberships_again() {
    use recap_readmodel::messages::MessageKind;
    use recap_readmodel::Batch;
    let setup = [
        team("t1", true).version(1).envelope(),
        EVENTS.member("t1", "bob").version(1).envelope(),
        share("s1", "owner", Some("t1"), &[], "team note", 1).version(1).envelope(),
    ];
    let delete = EVENTS.team_deleted("t1").version(2).envelope();
    let later = [team("t1", true).version(3).envelope(), EVENTS.member("t1", "bob").version(2).envelope()];
    let json =
        |messages: &[recap_readmodel::messages::AccountMessage]| messages.iter().map(|message| serde_json::to_string(message).unwrap()).collect::<Vec<_>>();

    let mut whole = Store::new();
    whole.apply(&setup, 3).await;
    let told = whole.apply_messages(std::slice::from_ref(&delete), 1).await;
    assert!(told.iter().any(|message| message.account_id == "bob" && message.message.kind == MessageKind::TeamLeft), "{:?}", json(&told));
    let rejoined = whole.apply_messages(&later, 2).await;

    let mut interrupted = Store::new();
    interrupted.apply(&setup, 3).await;
    let apply = |driver: std::sync::Arc<dyn recap_readmodel::Driver>| {
        let delete = delete.clone();
        async move {
            let mut batch = Batch::new(driver);
            batch.apply(&delete, 4).await.unwrap();
            let messages = batch.take_messages();
            let (rows, states) = batch.into_mutation_steps();
            (messages, rows, states)
        }
    };
    let (_, rows, _states_lost) = apply(interrupted.driver.clone()).await;
    interrupted.driver.write(rows).await.unwrap();
    let (told_again, rows, states) = apply(interrupted.driver.clone()).await;
    interrupted.driver.write(rows).await.unwrap();
    interrupted.driver.write(states).await.unwrap();
    assert_eq!(json(&told_again), json(&told), "the same messages, the same ids");
    assert!(interrupted.readmodel.team_membership("bob", "t1").await.unwrap().is_none());
    let rejoined_again = interrupted.apply_messages(&later, 2).await;
    assert_eq!(json(&rejoined_again), json(&rejoined), "bob joins the team anew and receives its share");
    assert_eq!(shared_ids(&interrupted, "bob").await, vec!["s1"]);
}

#[tokio::test]
async fn search_matches_every_word_newest_first_with_the_total() {
    let mut store = Store::new();
    store
        .apply(
            &[
                meeting("acc", "m1", "Budget review", 1, None, vec![]).version(1).envelope(),
                meeting("acc", "m2", "Budget planning", 2, None, vec![]).version(1).envelope(),
                meeting("acc", "m3", "Hiring", 3, None, vec![]).version(1).envelope(),
            ],
            3,
        )
        .await;
    let (rows, total) = store.readmodel.search_meetings("acc", &["budget".into()], 0, 1).await.unwrap();
    assert_eq!(total, 2);
    assert!(rows[0].body.contains("\"id\":\"m2\""), "newest first");
    let (rows, total) = store.readmodel.search_meetings("acc", &["budget".into(), "review".into()], 0, 10).await.unwrap();
    assert_eq!((rows.len(), total), (1, 1));
    let (_, total) = store.readmodel.search_meetings("other", &["budget".into()], 0, 10).await.unwrap();
    assert_eq!(total, 0, "only the account's own meetings");
}

// Rule 6, "Nothing is lost ... across crashes": over a store without multi-row atomicity
// a batch is written in two steps, rows then entity states. When the states' step fails
// (or the process dies in between), applying the same events again writes everything,
// as one whole write would have.
#[tokio::test]
async fn a_batch_whose_states_were_not_written_is_applied_again_whole() {
    use recap_readmodel::Batch;
    use recap_testkit::snapshot::{snapshot, Universe};
    let events = vec![
        account("acc", None).version(1).envelope(),
        meeting("acc", "m1", "budget review", 0, None, vec![item("ai_1", "todo", None, 0)]).version(1).envelope(),
        team("t1", true).version(1).envelope(),
        EVENTS.member("t1", "bob").version(1).envelope(),
        share("s1", "acc", Some("t1"), &[], "budget note", 1).version(1).envelope(),
    ];
    let universe = Universe::of(&events);
    let mut whole = Store::new();
    whole.apply(&events, events.len()).await;
    let interrupted = Store::new();
    let apply = |driver: std::sync::Arc<dyn recap_readmodel::Driver>| {
        let events = events.clone();
        async move {
            let mut batch = Batch::new(driver);
            for (index, event) in events.iter().enumerate() {
                batch.apply(event, index as i64 + 1).await.unwrap();
            }
            batch.into_mutation_steps()
        }
    };
    let (rows, _states_lost) = apply(interrupted.driver.clone()).await;
    interrupted.driver.write(rows).await.unwrap();
    let (rows, states) = apply(interrupted.driver.clone()).await;
    interrupted.driver.write(rows).await.unwrap();
    interrupted.driver.write(states).await.unwrap();
    assert_eq!(snapshot(&interrupted.readmodel, &universe).await.unwrap(), snapshot(&whole.readmodel, &universe).await.unwrap());
    assert_eq!(interrupted.readmodel.teams("bob").await.unwrap().len(), 1);
}
