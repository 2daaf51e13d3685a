//! The shape of each tool's structured result, as a type the catalog derives the tool's
//! `outputSchema` from.
//!
//! Results are written by copying stored JSON (see `json.rs`), so most of these types
//! are never built: they describe, and a test checks real results against the schemas
//! derived from them. The schemas are derived for serialisation: a field is required
//! unless it is marked `skip_serializing_if`, schemars' way of saying that a written
//! value may lack it; an `Option` is a value that may be null.

// Described, never built.
#![allow(dead_code)]

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

use super::json::Pagination;
use super::shared::SearchResult;

/// Any JSON object: the schema promises no fields of it.
pub struct AnyObject;

impl JsonSchema for AnyObject {
    fn inline_schema() -> bool {
        true
    }
    fn schema_name() -> Cow<'static, str> {
        "AnyObject".into()
    }
    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object"})
    }
}

/// The result of list_meetings, get_recurring_meeting_history and search_meetings.
#[derive(JsonSchema)]
pub struct MeetingsPage {
    pub meetings: Vec<MeetingEntry>,
    pub pagination: Pagination,
}

/// A meeting of a list: the stored list entry as it is.
#[derive(JsonSchema)]
pub struct MeetingEntry {
    pub id: String,
    pub title: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub started_at: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub ended_at: String,
    pub created_at: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub updated_at: String,
    #[schemars(skip_serializing_if = "Option::is_none")]
    pub series_id: Option<String>,
}

/// The result of get_meeting: the stored meeting detail, with `markdown` on the note and
/// on every summary.
#[derive(JsonSchema)]
pub struct MeetingWithDocuments {
    pub id: String,
    pub title: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub created_at: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub updated_at: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub started_at: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub ended_at: String,
    #[schemars(skip_serializing_if = "Option::is_none")]
    pub series_id: Option<String>,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub timezone: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub language: String,
    pub note: DocumentWithMarkdown,
    pub summaries: Vec<DocumentWithMarkdown>,
    pub participants: Vec<AnyObject>,
    pub action_items: Vec<AnyObject>,
}

/// A note or summary with its text in `markdown`.
#[derive(JsonSchema)]
pub struct DocumentWithMarkdown {
    pub id: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[schemars(skip_serializing_if = "String::is_empty")]
    pub title: String,
    pub text: String,
    pub markdown: String,
}

/// The result of get_meeting_transcript; `text` is null after the first page.
#[derive(JsonSchema)]
pub struct TranscriptPage {
    pub meeting_id: String,
    pub text: Option<String>,
    pub words: Vec<TranscriptWord>,
    pub pagination: Pagination,
}

#[derive(JsonSchema)]
pub struct TranscriptWord {
    pub text: String,
    pub start_ms: i64,
    pub end_ms: i64,
    pub track: String,
}

/// The result of list_pending_action_items.
#[derive(JsonSchema)]
pub struct PendingActionItems {
    pub action_items: Vec<PendingActionItem>,
    pub pagination: Pagination,
}

/// An action item with the meeting it came from (both null for an item outside a
/// meeting).
#[derive(JsonSchema)]
pub struct PendingActionItem {
    pub id: String,
    pub text: String,
    pub status: String,
    pub meeting_id: Option<String>,
    pub meeting_title: Option<String>,
}

/// The result of search_shared_notes.
#[derive(JsonSchema)]
pub struct SharedNotesFound {
    pub results: Vec<SearchResult<'static>>,
}

/// The result of get_shared_note.
#[derive(JsonSchema)]
pub struct SharedNote {
    pub share_id: String,
    pub title: String,
    pub team: Option<AnyObject>,
    pub published_at: String,
    pub text: String,
    pub truncated: bool,
}

/// The result of list_recent_changes.
#[derive(JsonSchema)]
pub struct RecentChanges {
    pub changes: Vec<Change>,
    /// More changes are readable now.
    pub has_more: bool,
    /// Where this result stopped, also at the end: null only when nothing was read yet.
    pub next_cursor: Option<String>,
}

/// One change, as the account's feed keeps it and a webhook delivers it.
#[derive(JsonSchema)]
pub struct Change {
    pub id: String,
    #[schemars(rename = "type")]
    pub kind: String,
    pub created_at: String,
    pub data: AnyObject,
}
