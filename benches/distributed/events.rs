//! Contract events for the bench: the demo event mix (the embedded bench's, ~12 row
//! writes an event) copied with fresh identifiers as often as needed, routed to its
//! contract topic and key; and the account the readers use.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

pub const TOKEN: &str = "svc_pat_benchmarkbenchmarkbenchmark0000";
pub const READER: &str = "acc_reader";

/// One event: (topic without prefix, key, JSON line).
pub type Event = (String, String, String);

const ID_PREFIXES: [&str; 9] = ["acc_", "team_", "shr_", "mtg_", "tok_", "ai_", "tai_", "ser_", "doc_"];

/// The demo world, routed and parsed once; copies only rename identifiers.
pub struct DemoMix {
    template: Vec<(String, String, serde_json::Value)>,
    next_copy: AtomicUsize,
}

/// Renames every identifier among the string values (never keys or event types).
fn rename(value: &mut serde_json::Value, copy: usize) {
    match value {
        serde_json::Value::String(text) => *text = rename_id(text, copy),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|item| rename(item, copy)),
        serde_json::Value::Object(fields) => fields.iter_mut().filter(|(name, _)| name.as_str() != "type").for_each(|(_, field)| rename(field, copy)),
        _ => {}
    }
}

fn rename_id(text: &str, copy: usize) -> String {
    match ID_PREFIXES.iter().find(|prefix| text.starts_with(*prefix)) {
        Some(prefix) => format!("{prefix}c{copy}_{}", &text[prefix.len()..]),
        None => text.to_string(),
    }
}

impl DemoMix {
    pub fn new() -> DemoMix {
        let world = recap::demo::world(1_800_000_000_000_000);
        let template = world
            .lines
            .into_iter()
            .map(|line| {
                let (topic, key) = recap_projector::kafka::route(line.as_bytes());
                (topic, key, serde_json::from_str(&line).expect("a demo event"))
            })
            .collect();
        DemoMix { template, next_copy: AtomicUsize::new(0) }
    }

    pub fn events_per_copy(&self) -> usize {
        self.template.len()
    }

    /// The next `count` events: whole copies of the world (the last one cut short).
    /// Every copy has identifiers of its own, so every event is applied (none stale).
    pub fn take(&self, count: usize) -> Vec<Event> {
        let mut events = Vec::with_capacity(count);
        while events.len() < count {
            let copy = self.next_copy.fetch_add(1, Ordering::Relaxed);
            for (topic, key, value) in self.template.iter().take(count - events.len()) {
                let mut value = value.clone();
                rename(&mut value, copy);
                events.push((topic.clone(), rename_id(key, copy), value.to_string()));
            }
        }
        events
    }
}

fn envelope(id: &str, event_type: &str, occurred_at: &str, data: serde_json::Value) -> String {
    json!({"id": id, "type": event_type, "version": 1, "occurred_at": occurred_at, "data": data}).to_string()
}

/// A meeting of the reader account, as the REST bench's world has them.
pub fn reader_meeting(meeting_id: &str, created_micros: i64) -> Event {
    let created = recap_schemas::Timestamp(created_micros).to_rfc3339();
    let meeting = json!({"account_id": READER, "meeting": {
        "id": meeting_id, "title": format!("Budget review {meeting_id}"), "kind": "call", "status": "done", "started_at": created, "ended_at": created,
        "created_at": created, "updated_at": created, "series_id": null, "timezone": "UTC", "language": "en",
        "note": {"id": format!("n_{meeting_id}"), "kind": "note", "title": "Notes", "template_id": null, "text": "Agenda\nBudget\nHiring", "created_at": created, "updated_at": created},
        "summaries": [{"id": format!("s_{meeting_id}"), "kind": "summary", "title": "Summary", "template_id": null, "text": "We agreed on the plan.", "created_at": created, "updated_at": created}],
        "participants": [{"human_id": "hum_1", "name": "Ada", "email": "ada@example.com", "role": null, "job_title": "CTO"}],
        "action_items": [{"id": format!("ai_{meeting_id}"), "text": "Follow up", "status": "todo", "assignee_human_id": "hum_1", "due_at": null, "completed_at": null, "created_at": created}]}});
    ("recap.meetings.v1".into(), READER.into(), envelope(&format!("ev_{meeting_id}"), "meeting.upserted", &created, meeting))
}

/// The reader account (flow plan, a quota the bench never reaches), its token and
/// `meetings` meetings.
pub fn reader_world(meetings: usize) -> Vec<Event> {
    let anchor = "2026-01-01T00:00:00Z";
    let plan = json!({"tier": "flow", "api_quota": 1_000_000_000_000u64, "billing_cycle_anchor": anchor});
    let mut events: Vec<Event> = vec![
        ("recap.accounts.v1".into(), READER.into(), envelope("ev_reader", "account.upserted", anchor, json!({"account_id": READER, "plan": plan}))),
        (
            "recap.accounts.v1".into(),
            READER.into(),
            envelope(
                "ev_reader_token",
                "token.created",
                anchor,
                json!({"account_id": READER, "token_id": "tok_reader", "name": "bench", "token_sha256": recap_access::token_sha256(TOKEN), "created_at": anchor}),
            ),
        ),
    ];
    let base = 1_700_000_000_000_000i64;
    events.extend((0..meetings).map(|index| reader_meeting(&format!("mtg_{index:06}"), base + index as i64 * 60_000_000)));
    events
}
