//! Contract events as JSON lines, for building test worlds. Times are minutes after a
//! fixed instant, so orders are easy to reason about.

#![allow(dead_code)]

use serde_json::{json, Value};

/// `2026-09-21T…Z`-style instant `minute` minutes after the tests' epoch.
pub fn at(minute: i64) -> String {
    recap_schemas::Timestamp(1_790_000_000_000_000 + minute * 60_000_000).to_rfc3339()
}

pub fn envelope(event_type: &str, version: u64, data: Value) -> String {
    json!({"id": uuid::Uuid::new_v4().to_string(), "type": event_type, "version": version, "occurred_at": at(0), "data": data}).to_string()
}

/// A fresh personal access token value.
pub fn new_token() -> String {
    format!("svc_pat_{}", uuid::Uuid::new_v4().simple())
}

pub fn account(account_id: &str, tier: Option<&str>, api_quota: Option<u64>, version: u64) -> String {
    let plan = tier.map(|tier| json!({"tier": tier, "api_quota": api_quota, "billing_cycle_anchor": at(0)}));
    envelope("account.upserted", version, json!({"account_id": account_id, "plan": plan}))
}

pub fn account_with_anchor(account_id: &str, tier: &str, api_quota: Option<u64>, anchor: &str, version: u64) -> String {
    envelope("account.upserted", version, json!({"account_id": account_id, "plan": {"tier": tier, "api_quota": api_quota, "billing_cycle_anchor": anchor}}))
}

pub fn token_created(account_id: &str, token_id: &str, token: &str, version: u64) -> String {
    envelope(
        "token.created",
        version,
        json!({"account_id": account_id, "token_id": token_id, "name": "test", "token_sha256": recap_access::token_sha256(token), "created_at": at(0)}),
    )
}

pub fn token_revoked(account_id: &str, token_id: &str, version: u64) -> String {
    envelope("token.revoked", version, json!({"account_id": account_id, "token_id": token_id, "revoked_at": at(1)}))
}

pub fn item(item_id: &str, status: &str, assignee: Option<&str>, created_minute: i64) -> Value {
    json!({"id": item_id, "text": format!("do {item_id}"), "status": status, "assignee_human_id": assignee, "due_at": null, "completed_at": null, "created_at": at(created_minute)})
}

pub struct MeetingSpec<'a> {
    pub account_id: &'a str,
    pub id: &'a str,
    pub title: &'a str,
    pub created_minute: i64,
    pub series_id: Option<&'a str>,
    pub summary: &'a str,
    pub items: Vec<Value>,
}

impl<'a> MeetingSpec<'a> {
    pub fn new(account_id: &'a str, id: &'a str, title: &'a str, created_minute: i64) -> Self {
        MeetingSpec { account_id, id, title, created_minute, series_id: None, summary: "Summary text", items: Vec::new() }
    }

    pub fn meeting_value(&self) -> Value {
        let (id, title, created) = (self.id, self.title, self.created_minute);
        json!({
            "id": id, "title": title, "kind": "call", "status": "done",
            "started_at": at(created), "ended_at": at(created + 30), "created_at": at(created), "updated_at": at(created + 31),
            "series_id": self.series_id, "timezone": "Europe/Berlin", "language": "en",
            "note": {"id": format!("{id}_note"), "kind": "note", "title": title, "template_id": null, "text": format!("{title}\nAgenda\nBudget review"), "created_at": at(created), "updated_at": at(created + 31)},
            "summaries": [{"id": format!("{id}_sum"), "kind": "summary", "title": "Summary", "template_id": null, "text": self.summary, "created_at": at(created + 31), "updated_at": at(created + 31)}],
            "participants": [{"human_id": "hum_1", "name": "Ada", "email": "ada@example.com", "role": null, "job_title": "CTO"}],
            "action_items": self.items,
        })
    }

    pub fn event(&self, version: u64) -> String {
        envelope("meeting.upserted", version, json!({"account_id": self.account_id, "meeting": self.meeting_value()}))
    }
}

pub fn meeting(account_id: &str, id: &str, title: &str, created_minute: i64, version: u64) -> String {
    MeetingSpec::new(account_id, id, title, created_minute).event(version)
}

pub fn meeting_deleted(account_id: &str, meeting_id: &str, version: u64) -> String {
    envelope("meeting.deleted", version, json!({"account_id": account_id, "meeting_id": meeting_id}))
}

pub fn transcript(account_id: &str, meeting_id: &str, text: &str, words: Option<Vec<Value>>, version: u64) -> String {
    let segments = json!([{"id": "seg_1", "track": "mic", "start_ms": 0, "end_ms": 1000, "text": text}]);
    envelope(
        "meeting.transcript_set",
        version,
        json!({"account_id": account_id, "meeting_id": meeting_id, "transcript": {"text": text, "segments": segments, "words": words}}),
    )
}

pub fn word(text: &str, start_ms: i64) -> Value {
    json!({"text": text, "start_ms": start_ms, "end_ms": start_ms + 200, "track": "speaker"})
}

pub fn action_item(account_id: &str, item: Value, version: u64) -> String {
    envelope("action_item.upserted", version, json!({"account_id": account_id, "item": item}))
}

pub fn action_item_deleted(account_id: &str, item_id: &str, version: u64) -> String {
    envelope("action_item.deleted", version, json!({"account_id": account_id, "item_id": item_id}))
}

pub fn team(team_id: &str, name: &str, plan: Option<&str>, includes_team_action_items: bool, version: u64) -> String {
    envelope(
        "team.upserted",
        version,
        json!({"team": {"id": team_id, "name": name, "plan": plan, "can_collaborate": plan.is_some(), "includes_team_action_items": includes_team_action_items}}),
    )
}

pub fn team_deleted(team_id: &str, version: u64) -> String {
    envelope("team.deleted", version, json!({"team_id": team_id}))
}

pub fn member(team_id: &str, account_id: &str, version: u64) -> String {
    envelope("team_member.upserted", version, json!({"team_id": team_id, "account_id": account_id, "role": "member"}))
}

pub fn member_removed(team_id: &str, account_id: &str, version: u64) -> String {
    envelope("team_member.removed", version, json!({"team_id": team_id, "account_id": account_id}))
}

pub struct ShareSpec<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub owner_account_id: &'a str,
    pub team: Option<(&'a str, &'a str)>,
    pub recipients: Vec<&'a str>,
    pub text: &'a str,
    pub published_minute: i64,
}

impl ShareSpec<'_> {
    pub fn event(&self, version: u64) -> String {
        envelope(
            "note.shared",
            version,
            json!({"share": {
                "id": self.id, "title": self.title, "owner_account_id": self.owner_account_id, "owner_name": format!("Owner of {}", self.id),
                "access": "viewer", "published_at": at(self.published_minute),
                "team": self.team.map(|(id, name)| json!({"id": id, "name": name})),
                "recipient_account_ids": self.recipients, "text": self.text}}),
        )
    }
}

pub fn unshared(share_id: &str, version: u64) -> String {
    envelope("note.unshared", version, json!({"share_id": share_id}))
}

pub fn team_item(team_id: &str, item_id: &str, status: &str, created_minute: i64, version: u64) -> String {
    envelope(
        "team_action_item.upserted",
        version,
        json!({"team_id": team_id, "item": {"id": item_id, "text": format!("team task {item_id}"), "status": status, "due_at": null,
               "assignee": "Grace", "owner_name": "Ada", "created_at": at(created_minute), "shared_note": {"id": "shr_1", "title": "Shared"}}}),
    )
}
