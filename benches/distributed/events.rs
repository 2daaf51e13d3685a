//! Contract events for the bench: the demo event mix (the embedded bench's, ~12 row
//! writes an event) copied with fresh identifiers as often as needed, routed to its
//! contract topic and key; and the account the readers use.

use std::sync::atomic::{AtomicUsize, Ordering};

use recap_schemas::build::{Epoch, Events};
use recap_schemas::Timestamp;

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
            .events
            .iter()
            .map(|envelope| {
                let (topic, key) = (envelope.event.topic().to_string(), envelope.event.message_key().to_string());
                (topic, key, serde_json::to_value(envelope).expect("a demo event"))
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

/// The reader's account and token events happen on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

/// A meeting of the reader account, as the REST bench's world has them.
pub fn reader_meeting(meeting_id: &str, created_micros: i64) -> Event {
    let created = Timestamp(created_micros);
    let meeting = EVENTS
        .meeting(READER, meeting_id)
        .title(format!("Budget review {meeting_id}"))
        .note(EVENTS.note(format!("n_{meeting_id}")).text("Agenda\nBudget\nHiring"))
        .summaries([EVENTS.summary(format!("s_{meeting_id}")).text("We agreed on the plan.").times(created)])
        .participants([EVENTS.participant("hum_1")])
        .action_items([EVENTS.item(format!("ai_{meeting_id}")).text("Follow up").assignee(Some("hum_1")).created_at(created)])
        .times(created);
    ("recap.meetings.v1".into(), READER.into(), meeting.id(format!("ev_{meeting_id}")).occurred_at(created).to_line())
}

/// The reader account (flow plan, a quota the bench never reaches), its token and
/// `meetings` meetings.
pub fn reader_world(meetings: usize) -> Vec<Event> {
    let account = EVENTS.account(READER).plan("flow", Some(1_000_000_000_000), EVENTS.minute(0)).id("ev_reader");
    let token = EVENTS.token_created(READER, "tok_reader", recap_access::token_sha256(TOKEN)).name("bench").id("ev_reader_token");
    let mut events: Vec<Event> =
        vec![("recap.accounts.v1".into(), READER.into(), account.to_line()), ("recap.accounts.v1".into(), READER.into(), token.to_line())];
    let base = 1_700_000_000_000_000i64;
    events.extend((0..meetings).map(|index| reader_meeting(&format!("mtg_{index:06}"), base + index as i64 * 60_000_000)));
    events
}
