//! Each tool's arguments as a type: the catalog derives the tool's `inputSchema` from it
//! and the tool reads its call's arguments into it, so the advertised schema and the
//! parsing cannot drift apart. One struct per tool of the argument kinds in
//! `arguments.rs`, fields in the order they are checked, each described by its doc
//! comment. An optional argument is `#[serde(default)]`, which is also what leaves it out
//! of the schema's `required`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::arguments::{Clamped, OptionalString, RequiredString};
use super::MAX_OFFSET;

/// `limit` of the list and search tools.
pub type PageSize = Clamped<20, 1, 200>;
/// `offset` of the list and search tools (see [`MAX_OFFSET`]).
pub type PageOffset = Clamped<0, 0, MAX_OFFSET>;

/// The arguments of list_meetings.
#[derive(Deserialize, JsonSchema)]
pub struct ListMeetingsArguments<'a> {
    /// Case-insensitive substring of the title or meeting identifier.
    #[serde(default, borrow)]
    pub query: OptionalString<'a>,
    /// Exact recurring series identifier.
    #[serde(default, borrow)]
    pub series_id: OptionalString<'a>,
    /// Page size; values outside 1..200 are clamped.
    #[serde(default)]
    pub limit: PageSize,
    /// Number of results to skip; a negative value counts as 0, one above 100000 as 100000.
    #[serde(default)]
    pub offset: PageOffset,
}

/// The arguments of get_meeting.
#[derive(Deserialize, JsonSchema)]
pub struct GetMeetingArguments<'a> {
    /// A meeting identifier returned by the service.
    #[serde(borrow)]
    pub meeting_id: RequiredString<'a>,
}

/// The arguments of get_meeting_transcript. Transcript words are read from their index at
/// any offset, so the offset is not capped.
#[derive(Deserialize, JsonSchema)]
pub struct GetMeetingTranscriptArguments<'a> {
    /// A meeting identifier returned by the service.
    #[serde(borrow)]
    pub meeting_id: RequiredString<'a>,
    /// Words per page; values outside 1..500 are clamped.
    #[serde(default)]
    pub limit: Clamped<200, 1, 500>,
    /// Word offset; a negative value counts as 0.
    #[serde(default)]
    pub offset: Clamped<0, 0, { usize::MAX }>,
}

/// The arguments of get_recurring_meeting_history.
#[derive(Deserialize, JsonSchema)]
pub struct GetRecurringMeetingHistoryArguments<'a> {
    /// A meeting identifier returned by the service.
    #[serde(borrow)]
    pub meeting_id: RequiredString<'a>,
    /// Page size; values outside 1..200 are clamped.
    #[serde(default)]
    pub limit: PageSize,
    /// Number of results to skip; a negative value counts as 0, one above 100000 as 100000.
    #[serde(default)]
    pub offset: PageOffset,
}

/// The arguments of search_meetings.
#[derive(Deserialize, JsonSchema)]
pub struct SearchMeetingsArguments<'a> {
    /// Text to find in meeting titles and summaries, case-insensitive.
    #[serde(borrow)]
    pub query: RequiredString<'a>,
    /// Page size; values outside 1..200 are clamped.
    #[serde(default)]
    pub limit: PageSize,
    /// Number of results to skip; a negative value counts as 0, one above 100000 as 100000.
    #[serde(default)]
    pub offset: PageOffset,
}

/// The arguments of list_pending_action_items.
#[derive(Deserialize, JsonSchema)]
pub struct ListPendingActionItemsArguments {
    /// Page size; values outside 1..200 are clamped.
    #[serde(default)]
    pub limit: PageSize,
    /// Number of results to skip; a negative value counts as 0, one above 100000 as 100000.
    #[serde(default)]
    pub offset: PageOffset,
}

/// The arguments of search_shared_notes.
#[derive(Deserialize, JsonSchema)]
pub struct SearchSharedNotesArguments<'a> {
    /// Words that must all appear in the note.
    #[serde(borrow)]
    pub query: RequiredString<'a>,
    /// Number of results; values outside 1..20 are clamped.
    #[serde(default)]
    pub limit: Clamped<10, 1, 20>,
}

/// The arguments of get_shared_note.
#[derive(Deserialize, JsonSchema)]
pub struct GetSharedNoteArguments<'a> {
    /// A share identifier returned by search_shared_notes.
    #[serde(borrow)]
    pub share_id: RequiredString<'a>,
}

/// The arguments of list_recent_changes.
#[derive(Deserialize, JsonSchema)]
pub struct ListRecentChangesArguments<'a> {
    /// Only changes of these types, comma-separated (for example `meeting.created,meeting.notes_ready`); every type when absent.
    #[serde(default, borrow)]
    pub types: OptionalString<'a>,
    /// The next_cursor of an earlier result, to get the changes after it; absent: from the oldest change kept.
    #[serde(default, borrow)]
    pub cursor: OptionalString<'a>,
    /// Page size; values outside 1..200 are clamped.
    #[serde(default)]
    pub limit: PageSize,
}
