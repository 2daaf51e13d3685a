//! The kinds of message an account is told of (`docs/webhooks.md`), by their wire names.
//! They live with the contract because the contract names them too: a webhook
//! endpoint's `types` filter (`webhook_endpoint.upserted`) lists kinds, and an unknown
//! name there makes the event invalid.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kinds of message, by their wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
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
}
