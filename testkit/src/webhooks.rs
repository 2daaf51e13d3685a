//! Seeds an account's feed and webhook endpoints straight into a world's store, through
//! the read model's [`WebhookStore`] and with the records of `readmodel/src/webhooks.rs`,
//! as the webhooks runtime and the projection write them: for suites that read the feed,
//! the endpoints and their attempts without running what writes them.
//!
//! - [`Seeder::publish`] claims a message at a seq, writes its feed row, then the
//!   account's head at that seq (what the runtime does per message);
//!   [`Seeder::publish_above_head`] leaves the head where it was (a row that landed before
//!   the rows below it);
//! - [`Seeder::put_endpoint`] writes an endpoint's row and its secrets at the endpoint's
//!   version, [`Seeder::put_state`] its delivery state, [`Seeder::put_attempt`] an attempt.

use std::time::Duration;

use recap_readmodel::messages::{Message, MessageKind};
use recap_readmodel::tables::{WEBHOOK_ENDPOINTS, WEBHOOK_SECRETS};
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, EndpointRecord, EndpointState, SecretsRecord, SigningSecret, WebhookStore, DEFAULT_RETENTION};
use recap_readmodel::{Mutation, Op, ReadModel, Val};
use recap_schemas::Timestamp;

/// Writes feed and endpoint records into one store.
#[derive(Clone)]
pub struct Seeder {
    store: WebhookStore,
}

fn at(instant: &str) -> Timestamp {
    Timestamp::parse(instant).unwrap_or_else(|error| panic!("{instant}: {error}"))
}

/// A message of `kind` about `resource_id`, caused by the event `evt_<resource_id>`, at
/// `created_at`, with `data` naming the resource.
pub fn message(account_id: &str, kind: MessageKind, resource_id: &str, created_at: &str) -> Message {
    let data = serde_json::json!({"id": resource_id});
    Message::new(&format!("evt_{resource_id}"), account_id, kind, resource_id, at(created_at), data)
}

/// An enabled endpoint receiving every type, created at version 1.
pub fn endpoint(id: &str, url: &str) -> EndpointRecord {
    EndpointRecord {
        id: id.into(),
        url: url.into(),
        description: None,
        types: Vec::new(),
        enabled: true,
        version: 1,
        created_version: 1,
        created_at: at("2026-11-01T09:00:00Z"),
        updated_at: at("2026-11-01T09:00:00Z"),
    }
}

/// One current secret.
pub fn secrets(secret: &str) -> SecretsRecord {
    SecretsRecord { secrets: vec![SigningSecret { secret: secret.into(), expires_at: None }] }
}

/// A failed first attempt of `message_id` at `attempted_at`, to an endpoint created at
/// version 1 (as [`endpoint`]'s).
pub fn attempt(id: &str, message_id: &str, attempted_at: &str) -> AttemptRecord {
    AttemptRecord {
        id: id.into(),
        endpoint_created_version: Some(1),
        message_id: message_id.into(),
        kind: MessageKind::MeetingCreated,
        attempt: 1,
        attempted_at: at(attempted_at),
        outcome: AttemptOutcome::Failed,
        status: Some(500),
        error: Some("answered 500".into()),
        duration_ms: 12,
        next_attempt_at: None,
    }
}

impl Seeder {
    /// Rows kept for the default retention.
    pub fn new(readmodel: &ReadModel) -> Seeder {
        Seeder::with_retention(readmodel, DEFAULT_RETENTION)
    }

    /// Rows that expire `retention` after they are written.
    pub fn with_retention(readmodel: &ReadModel, retention: Duration) -> Seeder {
        Seeder { store: readmodel.webhooks(retention) }
    }

    pub fn store(&self) -> &WebhookStore {
        &self.store
    }

    /// `message` at `seq` of the account's feed, readable once this returns.
    pub async fn publish(&self, account_id: &str, seq: i64, message: &Message) {
        self.publish_above_head(account_id, seq, message).await;
        self.store.write(vec![self.store.head_row(account_id, seq)]).await.expect("writing the feed head");
    }

    /// `message` at `seq`, the head left where it was.
    pub async fn publish_above_head(&self, account_id: &str, seq: i64, message: &Message) {
        assert!(self.store.claim(account_id, seq, message).await.expect("claiming the message"), "{} is claimed by another seq", message.id);
        let mut rows = vec![self.store.feed_row(account_id, seq, message)];
        rows.extend(self.store.floor_rows(account_id, seq));
        self.store.write(rows).await.expect("writing the feed row");
    }

    /// The endpoint's row and its secrets, at the endpoint's version.
    pub async fn put_endpoint(&self, account_id: &str, endpoint: &EndpointRecord, secrets: &SecretsRecord) {
        let version = i64::try_from(endpoint.version).expect("a version within i64");
        let row = Mutation {
            table: &WEBHOOK_ENDPOINTS,
            partition: vec![Val::text(account_id)],
            clustering: vec![Val::text(&endpoint.id)],
            op: Op::Put { body: serde_json::to_string(endpoint).expect("an endpoint is JSON"), expires_at: None },
            ts: version,
        };
        let secrets = Mutation {
            table: &WEBHOOK_SECRETS,
            partition: vec![Val::text(account_id), Val::text(&endpoint.id)],
            clustering: vec![],
            op: Op::Put { body: serde_json::to_string(secrets).expect("secrets are JSON"), expires_at: None },
            ts: version,
        };
        self.store.write(vec![row, secrets]).await.expect("writing the endpoint");
    }

    pub async fn put_state(&self, account_id: &str, endpoint_id: &str, state: &EndpointState) {
        self.store.save_endpoint_state(account_id, endpoint_id, state).await.expect("writing the endpoint state");
    }

    pub async fn put_attempt(&self, account_id: &str, endpoint_id: &str, attempt: &AttemptRecord) {
        self.store.write(vec![self.store.attempt_row(account_id, endpoint_id, attempt)]).await.expect("writing the attempt");
    }
}
