//! Webhook endpoints as projected (docs/events.md, "Webhook endpoints"): the record and
//! its secrets, rule 1 and rule 2, and the previous secret kept through a rotation.

mod common;

use common::*;
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, EndpointRecord, EndpointState, SigningSecret, WebhookStore, DEFAULT_RETENTION};
use recap_schemas::{MessageKind, Timestamp};

const HOUR: i64 = 3_600_000_000;

fn at(minutes: i64) -> Timestamp {
    EVENTS.minute(minutes)
}

#[tokio::test]
async fn an_endpoint_upsert_writes_its_record_and_its_secret_at_the_events_version() {
    let mut store = Store::new();
    let upsert = EVENTS
        .webhook_endpoint("acc", "ep_1", "https://example.com/hooks")
        .key(&[1; 32])
        .types([MessageKind::MeetingCreated])
        .description(Some("CRM"))
        .version(3)
        .occurred_at(at(10));
    let secret = upsert.data.endpoint.secret.as_str().to_owned();
    assert!(store.apply_messages(&[upsert.envelope()], 1).await.is_empty(), "an endpoint is no message");
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    let (record, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!(
        record,
        EndpointRecord {
            id: "ep_1".into(),
            url: "https://example.com/hooks".into(),
            description: Some("CRM".into()),
            types: vec![MessageKind::MeetingCreated],
            enabled: true,
            version: 3,
            created_version: 3,
            created_at: at(10),
            updated_at: at(10),
        }
    );
    assert_eq!(webhooks.secrets("acc", "ep_1").await.unwrap().secrets, vec![SigningSecret { secret, expires_at: None }]);
}

#[tokio::test]
async fn a_changed_secret_keeps_the_previous_one_for_the_overlap_and_created_at_stays_the_first_upserts() {
    let mut store = Store::new();
    let first = EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/hooks").key(&[1; 32]).version(1).occurred_at(at(0));
    let old_secret = first.data.endpoint.secret.as_str().to_owned();
    let second = EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/hooks").key(&[2; 32]).enabled(false).version(2).occurred_at(at(60));
    let new_secret = second.data.endpoint.secret.as_str().to_owned();
    store.apply(&[first.envelope(), second.envelope()], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    let (record, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!((record.enabled, record.version, record.created_at, record.updated_at), (false, 2, at(0), at(60)));
    let secrets = webhooks.secrets("acc", "ep_1").await.unwrap();
    assert_eq!(
        secrets.secrets,
        vec![
            SigningSecret { secret: new_secret.clone(), expires_at: None },
            SigningSecret { secret: old_secret.clone(), expires_at: Some(Timestamp(at(60).0 + 24 * HOUR)) }
        ]
    );
    assert_eq!(secrets.signing_at(at(61)), vec![new_secret.as_str(), old_secret.as_str()]);
    assert_eq!(secrets.signing_at(Timestamp(at(60).0 + 25 * HOUR)), vec![new_secret.as_str()]);
}

#[tokio::test]
async fn rule_1_an_older_endpoint_upsert_after_a_newer_one_changes_nothing() {
    let mut store = Store::new();
    store
        .apply(
            &[
                EVENTS.webhook_endpoint("acc", "ep_1", "https://new.example.com/").version(2).envelope(),
                EVENTS.webhook_endpoint("acc", "ep_1", "https://old.example.com/").version(1).envelope(),
            ],
            1,
        )
        .await;
    let (record, _) = store.readmodel.webhooks(DEFAULT_RETENTION).endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!(record.url, "https://new.example.com/");
}

#[tokio::test]
async fn rule_2_an_endpoint_delete_removes_record_and_secrets_and_shadows_an_older_upsert() {
    let mut store = Store::new();
    store
        .apply(
            &[
                EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/").version(1).envelope(),
                EVENTS.webhook_endpoint_deleted("acc", "ep_1").version(3).envelope(),
                EVENTS.webhook_endpoint("acc", "ep_1", "https://late.example.com/").version(2).envelope(),
            ],
            2,
        )
        .await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    assert_eq!(webhooks.endpoint("acc", "ep_1").await.unwrap(), None);
    assert!(webhooks.endpoints("acc").await.unwrap().is_empty());
    assert!(webhooks.secrets("acc", "ep_1").await.unwrap().secrets.is_empty());
    // A newer upsert brings it back, created anew.
    store.apply(&[EVENTS.webhook_endpoint("acc", "ep_1", "https://back.example.com/").version(4).occurred_at(at(5)).envelope()], 1).await;
    let (record, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!((record.url.as_str(), record.created_at), ("https://back.example.com/", at(5)));
}

#[tokio::test]
async fn an_endpoint_names_the_version_that_created_it_through_its_upserts_and_one_created_again_names_its_own() {
    let mut store = Store::new();
    let upsert = |version: u64| EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/").version(version).envelope();
    store.apply(&[upsert(1), upsert(2)], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    let (record, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!((record.version, record.created_version), (2, 1));
    store.apply(&[EVENTS.webhook_endpoint_deleted("acc", "ep_1").version(3).envelope(), upsert(4), upsert(5)], 1).await;
    let (record, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!((record.version, record.created_version), (5, 4));
}

/// What the runtime recorded of an endpoint: its state and an attempt, each naming the
/// version that created the endpoint.
async fn recorded(webhooks: &WebhookStore, created_version: u64, attempt_id: &str, attempted_at: Timestamp) {
    let failing = EndpointState { endpoint_created_version: Some(created_version), failing_since: Some(attempted_at), ..EndpointState::default() };
    let attempt = AttemptRecord {
        id: attempt_id.into(),
        endpoint_created_version: Some(created_version),
        message_id: "msg_1".into(),
        kind: MessageKind::MeetingCreated,
        attempt: 1,
        attempted_at,
        outcome: AttemptOutcome::Failed,
        status: Some(500),
        error: Some("answered 500".into()),
        duration_ms: 3,
        next_attempt_at: None,
    };
    webhooks
        .write(vec![webhooks.endpoint_state_row("acc", "ep_1", &failing, attempted_at.micros()), webhooks.attempt_row("acc", "ep_1", &attempt)])
        .await
        .unwrap();
}

#[tokio::test]
async fn an_endpoint_created_again_after_a_delete_has_neither_the_state_nor_the_attempts_of_the_deleted_one() {
    let mut store = Store::new();
    let upsert = |version: u64| EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/").version(version).envelope();
    store.apply(&[upsert(1)], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    recorded(&webhooks, 1, "att_old", at(1)).await;
    let (endpoint, state) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!(state.failing_since, Some(at(1)));
    assert_eq!(webhooks.endpoint_attempts("acc", &endpoint, None, 10).await.unwrap().attempts.len(), 1);

    store.apply(&[EVENTS.webhook_endpoint_deleted("acc", "ep_1").version(2).envelope(), upsert(3)], 1).await;
    let (endpoint, state) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!(state, EndpointState { endpoint_created_version: Some(3), ..EndpointState::default() });
    assert_eq!(webhooks.endpoints("acc").await.unwrap(), vec![(endpoint.clone(), state)]);
    let page = webhooks.endpoint_attempts("acc", &endpoint, None, 10).await.unwrap();
    assert_eq!((page.attempts, page.has_more), (vec![], false));
    // The deleted endpoint's state written after the new one's (an attempt that
    // outlived the delete) is not the new one's either.
    recorded(&webhooks, 3, "att_new", at(2)).await;
    recorded(&webhooks, 1, "att_late", at(3)).await;
    let (_, state) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    assert_eq!(state, EndpointState { endpoint_created_version: Some(3), ..EndpointState::default() });
    let listed: Vec<String> = webhooks.endpoint_attempts("acc", &endpoint, None, 10).await.unwrap().attempts.into_iter().map(|attempt| attempt.id).collect();
    assert_eq!(listed, ["att_new"]);
}

#[tokio::test]
async fn a_page_of_attempts_passes_over_at_most_1000_of_a_deleted_endpoints_and_its_cursor_continues_after_them() {
    let mut store = Store::new();
    let upsert = |version: u64| EVENTS.webhook_endpoint("acc", "ep_1", "https://example.com/").version(version).envelope();
    store.apply(&[upsert(1), EVENTS.webhook_endpoint_deleted("acc", "ep_1").version(2).envelope(), upsert(3)], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    for index in 0..1_005 {
        recorded(&webhooks, 1, &format!("att_old_{index:04}"), Timestamp(at(0).micros() + index)).await;
    }
    recorded(&webhooks, 3, "att_new", at(1)).await;
    let (endpoint, _) = webhooks.endpoint("acc", "ep_1").await.unwrap().unwrap();
    let first = webhooks.endpoint_attempts("acc", &endpoint, None, 50).await.unwrap();
    let ids: Vec<&str> = first.attempts.iter().map(|attempt| attempt.id.as_str()).collect();
    assert_eq!((ids, first.has_more), (vec!["att_new"], true), "the newest, then a thousand of the deleted endpoint's read past");
    let (read_at, read_id) = first.last_read.clone().unwrap();
    assert_eq!(read_id, "att_old_0005", "the last row read: five of the deleted endpoint's are left");
    let rest = webhooks.endpoint_attempts("acc", &endpoint, Some((read_at, &read_id)), 50).await.unwrap();
    assert_eq!((rest.attempts, rest.has_more), (vec![], false), "they are read past too, and nothing follows");
}

/// Endpoint ids are unique across accounts; should a producer reuse one under another
/// account, the endpoint moves there whole: the first account no longer lists it, and
/// the other's secrets hold its own secret only, never the first account's, which would
/// otherwise sign the other's messages through the rotation overlap.
#[tokio::test]
async fn an_endpoint_id_reused_under_another_account_moves_there_without_the_first_accounts_secret() {
    let mut store = Store::new();
    let first = EVENTS.webhook_endpoint("acc_a", "ep_1", "https://a.example.com/hooks").key(&[1; 32]).version(1).occurred_at(at(0));
    let moved = EVENTS.webhook_endpoint("acc_b", "ep_1", "https://b.example.com/hooks").key(&[2; 32]).version(2).occurred_at(at(60));
    let secret_b = moved.data.endpoint.secret.as_str().to_owned();
    store.apply(&[first.envelope(), moved.envelope()], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    assert_eq!(webhooks.secrets("acc_b", "ep_1").await.unwrap().secrets, vec![SigningSecret { secret: secret_b, expires_at: None }]);
    let (record, _) = webhooks.endpoint("acc_b", "ep_1").await.unwrap().unwrap();
    assert_eq!((record.url.as_str(), record.created_at), ("https://b.example.com/hooks", at(60)), "created anew under its account");
    assert_eq!(webhooks.endpoint("acc_a", "ep_1").await.unwrap(), None);
    assert!(webhooks.secrets("acc_a", "ep_1").await.unwrap().secrets.is_empty());
}

/// An endpoint state written before states kept their account: the account is the one
/// its secrets row is under, so a reused id still moves without the first account's
/// secret.
#[tokio::test]
async fn an_endpoint_state_without_its_account_is_taken_as_its_secrets_rows() {
    let mut store = Store::new();
    let first = EVENTS.webhook_endpoint("acc_a", "ep_1", "https://a.example.com/hooks").key(&[1; 32]).version(1).occurred_at(at(0));
    store.apply(&[first.envelope()], 1).await;
    forget_account(&store, "ep_1").await;
    let moved = EVENTS.webhook_endpoint("acc_b", "ep_1", "https://b.example.com/hooks").key(&[2; 32]).version(2).occurred_at(at(60));
    let secret_b = moved.data.endpoint.secret.as_str().to_owned();
    store.apply(&[moved.envelope()], 1).await;
    let webhooks = store.readmodel.webhooks(DEFAULT_RETENTION);
    assert_eq!(webhooks.secrets("acc_b", "ep_1").await.unwrap().secrets, vec![SigningSecret { secret: secret_b, expires_at: None }]);
    // Under its own account, such a state still keeps the previous secret.
    let again = EVENTS.webhook_endpoint("acc_b", "ep_1", "https://b.example.com/hooks").key(&[3; 32]).version(3).occurred_at(at(61));
    forget_account(&store, "ep_1").await;
    store.apply(&[again.envelope()], 1).await;
    assert_eq!(webhooks.secrets("acc_b", "ep_1").await.unwrap().secrets.len(), 2, "the previous secret of the same account signs on");
}

/// Rewrites an endpoint's projection state as it was written before states kept their
/// account.
async fn forget_account(store: &Store, endpoint_id: &str) {
    use recap_readmodel::table::Val;
    use recap_readmodel::tables::ENTITIES;
    let key = [Val::text("webhook_endpoint"), Val::text(endpoint_id)];
    let row = store.driver.get(&ENTITIES, &key, &[]).await.unwrap().expect("the endpoint's state");
    let mut state: serde_json::Value = serde_json::from_str(&row.body).unwrap();
    assert!(state["data"]["account_id"].is_string(), "{state}");
    state["data"].as_object_mut().unwrap().remove("account_id");
    let op = recap_readmodel::Op::Put { body: state.to_string(), expires_at: None };
    store.driver.write(vec![recap_readmodel::Mutation { table: &ENTITIES, partition: key.to_vec(), clustering: vec![], op, ts: row.ts + 1 }]).await.unwrap();
}
