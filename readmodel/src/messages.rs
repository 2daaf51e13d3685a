//! Messages: what an account is told happened, one message per change it can see. The
//! projection derives them while it applies events (a meeting created, a shared note
//! received, a team left…); they are what the account's feed lists (`GET /v1/events`) and
//! what its webhook endpoints receive, in the same JSON (`docs/webhooks.md`).
//!
//! A message's id is derived from the change it announces: the event that caused it, the
//! account told, its kind and the resource it names. The same change always gets the same
//! id, so a stream projected again (into a fresh read model, or after a crash replays a
//! batch) announces nothing new, and a receiver dedupes deliveries by that id.
//!
//! Where messages travel, in order: the embedded edition keeps them in the
//! `message_outbox` table, written in the same commit as the rows they announce; the
//! distributed edition produces them to the `recap.messages.v1` topic once those rows are
//! acknowledged. Either way the webhooks runtime appends them to each account's feed and
//! schedules their deliveries (`tables.rs` documents every row's body).

pub use recap_schemas::MessageKind;
use recap_schemas::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

/// One message, as the feed lists it and a webhook delivers it: `{"id", "type",
/// "created_at", "data"}`. `data` holds the ids of what changed and the REST list-entry
/// form of the resource (never a transcript's text, never another account's data).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// When the change happened upstream: the `occurred_at` of the event that caused it,
    /// so that projecting the stream again gives every message the same time.
    pub created_at: Timestamp,
    /// Kept as JSON text: the projection embeds the list entries it rendered as they are,
    /// without reading them back into values and writing them again ([`Message::data`]
    /// reads it). A `Message` is therefore read from JSON text (`serde_json::from_str`,
    /// `from_slice`), not from a `serde_json::Value`.
    pub data: Box<RawValue>,
}

/// Two messages are equal when their ids, kinds, times and data's JSON text are.
impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.id == other.id && self.kind == other.kind && self.created_at == other.created_at && self.data.get() == other.data.get()
    }
}

/// A message and the account it is for, as the message log carries it (an outbox row's
/// body, a `recap.messages.v1` record's value; the record's key is the account id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AccountMessage {
    pub account_id: String,
    pub message: Message,
}

impl Message {
    /// The message announcing that `kind` happened to `resource_id` for `account_id`,
    /// because of the event `source_event_id` (its envelope id).
    pub fn new(source_event_id: &str, account_id: &str, kind: MessageKind, resource_id: &str, created_at: Timestamp, data: serde_json::Value) -> Message {
        Message::with_data(source_event_id, account_id, kind, resource_id, created_at, raw_json(&data))
    }

    /// [`Message::new`] with its data as JSON text already.
    pub fn with_data(source_event_id: &str, account_id: &str, kind: MessageKind, resource_id: &str, created_at: Timestamp, data: Box<RawValue>) -> Message {
        Message { id: message_id(source_event_id, account_id, kind, resource_id, created_at), kind, created_at, data }
    }

    /// The data, read as a value.
    pub fn data(&self) -> serde_json::Value {
        serde_json::from_str(self.data.get()).unwrap_or(serde_json::Value::Null)
    }

    /// The message's JSON, as the feed stores it and a webhook's body carries it.
    pub fn to_json(&self) -> String {
        // A message holds strings, numbers, booleans and objects only: serialising it
        // cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `value` as JSON text (a `Value` always serialises).
pub fn raw_json(value: &serde_json::Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| null())
}

/// JSON text made by the caller (`text` is JSON by construction); `null` should it not be.
pub fn raw_text(text: String) -> Box<RawValue> {
    RawValue::from_string(text).unwrap_or_else(|_| null())
}

/// JSON's `null`.
fn null() -> Box<RawValue> {
    Box::<RawValue>::default()
}

/// `msg_` and 32 hex digits: 12 of the change's time (`at`, the event's `occurred_at`,
/// in milliseconds since the Unix epoch, 0 before it), then 20 of the SHA-256 of the
/// change's parts, each length-prefixed so that no two different changes hash the same
/// input. The same change always gets the same id; ids sort by the time of their
/// change, as UUIDv7 and ULID do, so an index of ids grows at its end (the embedded
/// store's B-tree writes one page for many ids, not a page each).
pub fn message_id(source_event_id: &str, account_id: &str, kind: MessageKind, resource_id: &str, at: Timestamp) -> String {
    use std::fmt::Write as _;
    let mut hasher = Sha256::new();
    for part in [source_event_id, account_id, kind.as_str(), resource_id] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let milliseconds = (at.micros().max(0) / 1_000).min(TIME_DIGITS_MAX);
    let mut id = String::with_capacity(36);
    id.push_str("msg_");
    let _ = write!(id, "{milliseconds:012x}");
    id.push_str(&hex::encode(&digest[..10]));
    id
}

/// The largest time twelve hex digits hold (in the year 10889).
const TIME_DIGITS_MAX: i64 = (1 << 48) - 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_change_gets_the_same_id_and_another_change_another() {
        let at = Timestamp::parse("2026-11-20T09:00:00.123Z").unwrap();
        let id = message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1", at);
        assert_eq!(id, message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1", at));
        assert!(id.starts_with("msg_") && id.len() == 36 && id[4..].bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')), "{id}");
        for other in [
            message_id("evt_2", "acc_1", MessageKind::MeetingCreated, "mtg_1", at),
            message_id("evt_1", "acc_2", MessageKind::MeetingCreated, "mtg_1", at),
            message_id("evt_1", "acc_1", MessageKind::MeetingUpdated, "mtg_1", at),
            message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_2", at),
            // Length prefixes: moving a boundary between parts is another change.
            message_id("evt_1a", "cc_1", MessageKind::MeetingCreated, "mtg_1", at),
        ] {
            assert_ne!(id, other);
        }
    }

    #[test]
    fn ids_begin_with_the_changes_time_in_milliseconds_so_they_sort_by_it() {
        let at = Timestamp::parse("2026-11-20T09:00:00.123456Z").unwrap();
        let id = message_id("evt_9", "acc_1", MessageKind::MeetingCreated, "mtg_1", at);
        assert_eq!(i64::from_str_radix(&id[4..16], 16).unwrap(), at.micros() / 1_000, "{id}");
        // Later changes sort after, whatever their other parts hash to.
        let ids: Vec<String> = (0..100i64)
            .map(|index| message_id(&format!("evt_{}", 99 - index), "acc_1", MessageKind::MeetingCreated, "mtg_1", Timestamp(at.micros() + index * 1_000)))
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        // Times the twelve digits cannot hold are clamped, never longer or negative.
        for edge in [Timestamp(-5), Timestamp(i64::MAX)] {
            let id = message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1", edge);
            assert_eq!(id.len(), 36, "{id}");
        }
        assert!(message_id("e", "a", MessageKind::TeamLeft, "t", Timestamp(-5)).starts_with("msg_000000000000"));
        assert!(message_id("e", "a", MessageKind::TeamLeft, "t", Timestamp(i64::MAX)).starts_with("msg_ffffffffffff"));
    }

    #[test]
    fn a_message_serialises_as_the_wire_form() {
        let created_at = Timestamp::parse("2026-11-20T09:00:00Z").unwrap();
        let message = Message::new("evt_1", "acc_1", MessageKind::TeamLeft, "team_1", created_at, serde_json::json!({"team_id": "team_1"}));
        let json: serde_json::Value = serde_json::from_str(&message.to_json()).unwrap();
        assert_eq!(json, serde_json::json!({"id": message.id, "type": "team.left", "created_at": "2026-11-20T09:00:00Z", "data": {"team_id": "team_1"}}));
        assert_eq!(serde_json::from_str::<Message>(&message.to_json()).unwrap(), message);
        assert_eq!(message.data(), serde_json::json!({"team_id": "team_1"}));
    }
}
