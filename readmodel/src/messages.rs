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

use recap_schemas::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The kinds of message, by their wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum MessageKind {
    #[serde(rename = "meeting.created")]
    MeetingCreated,
    #[serde(rename = "meeting.updated")]
    MeetingUpdated,
    #[serde(rename = "meeting.deleted")]
    MeetingDeleted,
    #[serde(rename = "meeting.transcript_ready")]
    MeetingTranscriptReady,
    #[serde(rename = "meeting.notes_ready")]
    MeetingNotesReady,
    #[serde(rename = "action_item.created")]
    ActionItemCreated,
    #[serde(rename = "action_item.updated")]
    ActionItemUpdated,
    #[serde(rename = "action_item.deleted")]
    ActionItemDeleted,
    #[serde(rename = "shared_note.received")]
    SharedNoteReceived,
    #[serde(rename = "shared_note.updated")]
    SharedNoteUpdated,
    #[serde(rename = "shared_note.withdrawn")]
    SharedNoteWithdrawn,
    #[serde(rename = "team.joined")]
    TeamJoined,
    #[serde(rename = "team.left")]
    TeamLeft,
}

impl MessageKind {
    /// Every kind, in the order `docs/webhooks.md` lists them.
    pub const ALL: [MessageKind; 13] = [
        MessageKind::MeetingCreated,
        MessageKind::MeetingUpdated,
        MessageKind::MeetingDeleted,
        MessageKind::MeetingTranscriptReady,
        MessageKind::MeetingNotesReady,
        MessageKind::ActionItemCreated,
        MessageKind::ActionItemUpdated,
        MessageKind::ActionItemDeleted,
        MessageKind::SharedNoteReceived,
        MessageKind::SharedNoteUpdated,
        MessageKind::SharedNoteWithdrawn,
        MessageKind::TeamJoined,
        MessageKind::TeamLeft,
    ];

    /// The wire name (`type` of a message).
    pub const fn as_str(self) -> &'static str {
        match self {
            MessageKind::MeetingCreated => "meeting.created",
            MessageKind::MeetingUpdated => "meeting.updated",
            MessageKind::MeetingDeleted => "meeting.deleted",
            MessageKind::MeetingTranscriptReady => "meeting.transcript_ready",
            MessageKind::MeetingNotesReady => "meeting.notes_ready",
            MessageKind::ActionItemCreated => "action_item.created",
            MessageKind::ActionItemUpdated => "action_item.updated",
            MessageKind::ActionItemDeleted => "action_item.deleted",
            MessageKind::SharedNoteReceived => "shared_note.received",
            MessageKind::SharedNoteUpdated => "shared_note.updated",
            MessageKind::SharedNoteWithdrawn => "shared_note.withdrawn",
            MessageKind::TeamJoined => "team.joined",
            MessageKind::TeamLeft => "team.left",
        }
    }

    /// The kind of a wire name; None for a name no kind has.
    pub fn parse(name: &str) -> Option<MessageKind> {
        MessageKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }
}

impl std::fmt::Display for MessageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One message, as the feed lists it and a webhook delivers it: `{"id", "type",
/// "created_at", "data"}`. `data` holds the ids of what changed and the REST list-entry
/// form of the resource (never a transcript's text, never another account's data).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageKind,
    /// When the change happened upstream: the `occurred_at` of the event that caused it,
    /// so that projecting the stream again gives every message the same time.
    pub created_at: Timestamp,
    pub data: serde_json::Value,
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
        Message { id: message_id(source_event_id, account_id, kind, resource_id), kind, created_at, data }
    }

    /// The message's JSON, as the feed stores it and a webhook's body carries it.
    pub fn to_json(&self) -> String {
        // A message holds strings, numbers, booleans and objects only: serialising it
        // cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `msg_` and 32 hex digits of the SHA-256 of the change's parts, each length-prefixed so
/// that no two different changes hash the same input.
pub fn message_id(source_event_id: &str, account_id: &str, kind: MessageKind, resource_id: &str) -> String {
    let mut hasher = Sha256::new();
    for part in [source_event_id, account_id, kind.as_str(), resource_id] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut id = String::with_capacity(36);
    id.push_str("msg_");
    for byte in &digest[..16] {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_wire_names() {
        for kind in MessageKind::ALL {
            assert_eq!(MessageKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(MessageKind::parse("meeting.archived"), None);
    }

    #[test]
    fn the_same_change_gets_the_same_id_and_another_change_another() {
        let id = message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1");
        assert_eq!(id, message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_1"));
        assert!(id.starts_with("msg_") && id.len() == 36, "{id}");
        for other in [
            message_id("evt_2", "acc_1", MessageKind::MeetingCreated, "mtg_1"),
            message_id("evt_1", "acc_2", MessageKind::MeetingCreated, "mtg_1"),
            message_id("evt_1", "acc_1", MessageKind::MeetingUpdated, "mtg_1"),
            message_id("evt_1", "acc_1", MessageKind::MeetingCreated, "mtg_2"),
            // Length prefixes: moving a boundary between parts is another change.
            message_id("evt_1a", "cc_1", MessageKind::MeetingCreated, "mtg_1"),
        ] {
            assert_ne!(id, other);
        }
    }

    #[test]
    fn a_message_serialises_as_the_wire_form() {
        let created_at = Timestamp::parse("2026-11-20T09:00:00Z").unwrap();
        let message = Message::new("evt_1", "acc_1", MessageKind::TeamLeft, "team_1", created_at, serde_json::json!({"team_id": "team_1"}));
        let json: serde_json::Value = serde_json::from_str(&message.to_json()).unwrap();
        assert_eq!(json, serde_json::json!({"id": message.id, "type": "team.left", "created_at": "2026-11-20T09:00:00Z", "data": {"team_id": "team_1"}}));
        assert_eq!(serde_json::from_value::<Message>(json).unwrap(), message);
    }
}
