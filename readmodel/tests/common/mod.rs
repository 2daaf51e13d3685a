//! Event builders and store helpers shared by the read-model tests.

#![allow(dead_code)]

use std::sync::Arc;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::{Batch, Driver, ReadModel};
use recap_schemas::Envelope;
use serde_json::{json, Value};

pub fn ts(minute: i64) -> String {
    recap_schemas::Timestamp(1_790_000_000_000_000 + minute * 60_000_000).to_rfc3339()
}

pub fn envelope(event_type: &str, version: u64, data: Value) -> Envelope {
    let line = json!({"id": uuid(), "type": event_type, "version": version, "occurred_at": ts(0), "data": data}).to_string();
    Envelope::decode(line.as_bytes()).unwrap_or_else(|error| panic!("{error}: {line}"))
}

fn uuid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("00000000-0000-4000-8000-{:012}", NEXT.fetch_add(1, Ordering::Relaxed))
}

pub fn account(account_id: &str, tier: Option<&str>) -> Value {
    let plan = tier.map(|tier| json!({"tier": tier, "api_quota": null, "billing_cycle_anchor": ts(0)}));
    json!({"account_id": account_id, "plan": plan})
}

pub fn meeting(account_id: &str, meeting_id: &str, title: &str, created_minute: i64, series: Option<&str>, items: Vec<Value>) -> Value {
    json!({"account_id": account_id, "meeting": {
        "id": meeting_id, "title": title, "kind": "call", "status": "done",
        "started_at": ts(created_minute), "ended_at": ts(created_minute + 30), "created_at": ts(created_minute), "updated_at": ts(created_minute + 31),
        "series_id": series, "timezone": "UTC", "language": "en",
        "note": {"id": format!("{meeting_id}_note"), "kind": "note", "title": title, "template_id": null, "text": format!("{title}\nAgenda"), "created_at": ts(created_minute), "updated_at": ts(created_minute)},
        "summaries": [{"id": format!("{meeting_id}_sum"), "kind": "summary", "title": "Summary", "template_id": null, "text": format!("summary of {title}"), "created_at": ts(created_minute), "updated_at": ts(created_minute)}],
        "participants": [{"human_id": "hum_1", "name": "Ada", "email": "ada@example.com", "role": null, "job_title": "CTO"}],
        "action_items": items}})
}

pub fn item(item_id: &str, status: &str, assignee: Option<&str>, created_minute: i64) -> Value {
    json!({"id": item_id, "text": format!("do {item_id}"), "status": status, "assignee_human_id": assignee, "due_at": null, "completed_at": null, "created_at": ts(created_minute)})
}

pub fn share(share_id: &str, owner: &str, team: Option<&str>, recipients: &[&str], title: &str, published_minute: i64) -> Value {
    json!({"share": {"id": share_id, "title": title, "owner_account_id": owner, "owner_name": format!("owner {owner}"), "access": "viewer",
        "published_at": ts(published_minute), "team": team.map(|team| json!({"id": team, "name": format!("team {team}")})),
        "recipient_account_ids": recipients, "text": format!("{title}\nshared text")}})
}

pub fn team(team_id: &str, includes_items: bool) -> Value {
    team_collaborating(team_id, includes_items, true)
}

pub fn team_collaborating(team_id: &str, includes_items: bool, can_collaborate: bool) -> Value {
    json!({"team": {"id": team_id, "name": format!("team {team_id}"), "plan": "business", "can_collaborate": can_collaborate, "includes_team_action_items": includes_items}})
}

pub fn team_item(team_id: &str, item_id: &str, status: &str, created_minute: i64) -> Value {
    json!({"team_id": team_id, "item": {"id": item_id, "text": "t", "status": status, "due_at": null, "assignee": "Grace", "owner_name": "Ada", "created_at": ts(created_minute), "shared_note": {"id": "shr_x", "title": "x"}}})
}

pub struct Store {
    pub _dir: tempfile::TempDir,
    pub driver: Arc<dyn Driver>,
    pub readmodel: ReadModel,
    position: i64,
}

impl Store {
    pub fn new() -> Store {
        let dir = tempfile::tempdir().expect("temp dir");
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).expect("open store"));
        Store { _dir: dir, readmodel: ReadModel::new(driver.clone()), driver, position: 0 }
    }

    /// Applies events, committing a batch every `batch_size` events; positions follow
    /// one another, as in the embedded edition's one log.
    pub async fn apply(&mut self, envelopes: &[Envelope], batch_size: usize) {
        let positioned: Vec<(Envelope, i64)> = envelopes
            .iter()
            .map(|envelope| {
                self.position += 1;
                (envelope.clone(), self.position)
            })
            .collect();
        self.apply_at(&positioned, batch_size).await;
    }

    /// Applies events at the given positions (each one's offset in its partition).
    pub async fn apply_at(&mut self, envelopes: &[(Envelope, i64)], batch_size: usize) {
        for chunk in envelopes.chunks(batch_size.max(1)) {
            let mut batch = Batch::new(self.driver.clone());
            // Even batch sizes read their entity states up front, as the Kafka projector
            // does; odd ones read them lazily: the fidelity tests compare both against
            // the one-event-at-a-time reference.
            if batch_size.is_multiple_of(2) {
                batch.prefetch(chunk.iter().map(|(envelope, _)| envelope)).await.expect("prefetch");
            }
            for (envelope, position) in chunk {
                batch.apply(envelope, *position).await.expect("apply");
            }
            self.driver.write(batch.into_mutations()).await.expect("commit");
        }
    }
}
