//! The nine read-only tools: their arguments read into each tool's argument type
//! (`inputs.rs`, by the rules of `arguments.rs` and `argument_reader.rs`), one read-model query each, and the
//! result JSON (its shape in `outputs.rs`); the account's feed in `feed.rs`. A tool that cannot answer returns a
//! [`ToolError`], which becomes a normal result with `isError: true`.

mod argument_reader;
mod arguments;
mod catalog;
mod feed;
mod inputs;
pub mod json;
mod outputs;
mod shared;

pub use argument_reader::Args;
pub use catalog::Catalog;

use recap_readmodel::words::query_words;
use recap_readmodel::{Row, StoreError};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::StoreFailure;
use crate::state::McpState;
use argument_reader::parse;
use inputs::*;
use json::{page, Pagination};

/// Offsets of the list and search tools above this are clamped: their offset paging
/// reads the skipped rows, so an unbounded offset would be an unbounded read. A page
/// whose next offset would be clamped back is the last one (`next_offset` null), so a
/// client walking the pages always stops. Transcript words are read from their index
/// at any offset, so transcript offsets are not capped.
pub const MAX_OFFSET: usize = 100_000;

/// Why a tool could not answer; rendered as `{"error": {"code", "message"}}` with
/// `isError: true`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("meeting {0} not found")]
    MeetingNotFound(String),
    #[error("shared note {0} not found")]
    SharedNoteNotFound(String),
    /// The account's tool calls of the last minute reached `--mcp-tool-calls-per-minute`.
    #[error("too many tool calls: at most {per_minute} a minute for the account; retry after {retry_after_seconds} s")]
    RateLimited { per_minute: u32, retry_after_seconds: u64 },
    /// A store call failed (unanswered, or stored data that did not read back):
    /// classified by `StoreFailure` and logged once, where the tool's result is made.
    #[error("{}", store_message(.0))]
    Store(#[from] StoreError),
}

fn store_message(error: &StoreError) -> &'static str {
    match StoreFailure::of(error) {
        StoreFailure::Unavailable => "the data could not be read right now; retry shortly",
        StoreFailure::Unreadable => "the data could not be read",
        StoreFailure::Defect => "failure on the service side",
    }
}

impl ToolError {
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::InvalidArgument(_) => "invalid_argument",
            ToolError::MeetingNotFound(_) => "meeting_not_found",
            ToolError::SharedNoteNotFound(_) => "shared_note_not_found",
            ToolError::RateLimited { .. } => "rate_limited",
            ToolError::Store(error) => match StoreFailure::of(error) {
                StoreFailure::Unavailable => "unavailable",
                StoreFailure::Unreadable => "read_failed",
                StoreFailure::Defect => "internal_error",
            },
        }
    }

    /// The JSON text of the error result; a rate-limited call also says how many
    /// seconds to wait (`retry_after_seconds`).
    pub fn to_json(&self) -> String {
        let mut error = serde_json::json!({"code": self.code(), "message": self.to_string()});
        if let ToolError::RateLimited { retry_after_seconds, .. } = self {
            error["retry_after_seconds"] = (*retry_after_seconds).into();
        }
        serde_json::json!({ "error": error }).to_string()
    }
}

/// Runs `tool` for the account once its call is counted against
/// `--mcp-tool-calls-per-minute` (the revision's "servers MUST rate limit tool
/// invocations"); refused past it, counted nowhere then. When the limiter says the call
/// is very likely admitted (Redis's last decision here left room to spare), the tool's
/// reads start alongside the count's round trip, as the REST API's do: the decision
/// still rules, and a refusal drops what the tool read.
pub async fn call_counted(state: &McpState, account_id: &str, tool: &str, arguments: &Args) -> Result<String, ToolError> {
    let key = format!("mcp_tools:{account_id}");
    if !state.limiter().admits_likely(&key) {
        admit(state, &key).await?;
        return call(state, account_id, tool, arguments).await;
    }
    let (admitted, outcome) = tokio::join!(admit(state, &key), call(state, account_id, tool, arguments));
    admitted?;
    outcome
}

/// Counts one tool call under the limiter's `key`. A limiter that cannot decide is an
/// unavailable store: retry shortly.
async fn admit(state: &McpState, key: &str) -> Result<(), ToolError> {
    use recap_access::{Limits, Verdict};
    let per_minute = state.inner.config.tool_calls_per_minute;
    let limits = Limits { per_minute, period_quota: u64::MAX, billing_cycle_anchor: recap_schemas::Timestamp(0) };
    match state.limiter().admit(key, &limits).await {
        Ok(decision) => match decision.verdict {
            Verdict::Admitted => Ok(()),
            Verdict::RateLimited { retry_after_seconds } => Err(ToolError::RateLimited { per_minute, retry_after_seconds: retry_after_seconds.max(1) }),
            // No period quota: an exhausted one cannot come back; refused as a minute.
            Verdict::QuotaExhausted => Err(ToolError::RateLimited { per_minute, retry_after_seconds: 60 }),
        },
        Err(error) => Err(ToolError::Store(StoreError::Unavailable(error.to_string()))),
    }
}

/// A stored body that did not parse: stored data that does not read back.
impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> ToolError {
        ToolError::Store(StoreError::Corrupt(format!("a stored body did not parse: {error}")))
    }
}

/// The offset of the next page of a list or search tool: None on the last page, and on
/// the page past which offsets are clamped.
fn next_offset(offset: usize, returned: usize, more: bool) -> Option<usize> {
    let next = offset + returned;
    (more && next <= MAX_OFFSET).then_some(next)
}

/// Runs a tool; `Ok` is the JSON text of a successful result.
pub async fn call(state: &McpState, account_id: &str, name: &str, args: &Args) -> Result<String, ToolError> {
    match name {
        "list_meetings" => list_meetings(state, account_id, parse(args)?).await,
        "get_meeting" => get_meeting(state, account_id, parse(args)?).await,
        "get_meeting_transcript" => get_meeting_transcript(state, account_id, parse(args)?).await,
        "get_recurring_meeting_history" => get_recurring_meeting_history(state, account_id, parse(args)?).await,
        "search_meetings" => search_meetings(state, account_id, parse(args)?).await,
        "list_pending_action_items" => list_pending_action_items(state, account_id, parse(args)?).await,
        "search_shared_notes" => shared::search_shared_notes(state, account_id, parse(args)?).await,
        "get_shared_note" => shared::get_shared_note(state, account_id, parse(args)?).await,
        "list_recent_changes" => feed::list_recent_changes(state, account_id, parse(args)?).await,
        // The transport checks the name against the catalog first.
        _ => Err(ToolError::InvalidArgument(format!("unknown tool {name}"))),
    }
}

fn meetings_page(rows: &[Row], pagination: &Pagination) -> String {
    page("meetings", rows.iter().map(|row| row.body.as_str()), pagination)
}

async fn list_meetings(state: &McpState, account_id: &str, arguments: ListMeetingsArguments<'_>) -> Result<String, ToolError> {
    let (query, series_id) = (arguments.query.as_deref(), arguments.series_id.as_deref());
    let (limit, offset) = (arguments.limit.get(), arguments.offset.get());
    let inner = &state.inner;
    let (rows, more) = match (series_id, query) {
        (None, None) => {
            // The common call, newest first: bodies go from the store straight into the text.
            let mut out = json::page_open("meetings", limit * 384 + 160).into_bytes();
            let page = inner.bounded(inner.readmodel.recent_meetings_into(account_id, offset, limit, &mut out)).await?;
            let pagination = Pagination { offset, limit, returned: page.count, total: None, next_offset: next_offset(offset, page.count, page.has_more) };
            // One check of the whole page, as the text must be a string.
            let mut out = String::from_utf8(out).map_err(|_| StoreError::Corrupt("a meeting list body is not UTF-8".into()))?;
            json::page_close(&mut out, &pagination);
            return Ok(out);
        }
        (None, Some(query)) => {
            let page = inner.bounded(inner.readmodel.meetings_matching(account_id, query, offset, limit)).await?;
            (page.rows, page.has_more)
        }
        (Some(series_id), _) => {
            // A series is small: read it whole and filter, in the series' own order.
            let (all, _) = inner.bounded(inner.readmodel.series_meetings(account_id, series_id, 0, usize::MAX)).await?;
            let needle = query.map(str::to_lowercase);
            let mut matched = Vec::new();
            for row in all {
                if let Some(needle) = &needle {
                    #[derive(Deserialize)]
                    struct Entry<'a> {
                        id: std::borrow::Cow<'a, str>,
                        title: std::borrow::Cow<'a, str>,
                    }
                    let entry: Entry = serde_json::from_str(&row.body)?;
                    if !entry.title.to_lowercase().contains(needle.as_str()) && !entry.id.to_lowercase().contains(needle.as_str()) {
                        continue;
                    }
                }
                matched.push(row);
            }
            let more = matched.len() > offset + limit;
            (matched.into_iter().skip(offset).take(limit).collect(), more)
        }
    };
    let pagination = Pagination { offset, limit, returned: rows.len(), total: None, next_offset: next_offset(offset, rows.len(), more) };
    Ok(meetings_page(&rows, &pagination))
}

async fn meeting_detail(state: &McpState, account_id: &str, meeting_id: &str) -> Result<String, ToolError> {
    let inner = &state.inner;
    inner.bounded(inner.readmodel.meeting_detail(account_id, meeting_id)).await?.ok_or_else(|| ToolError::MeetingNotFound(meeting_id.to_string()))
}

async fn get_meeting(state: &McpState, account_id: &str, arguments: GetMeetingArguments<'_>) -> Result<String, ToolError> {
    let meeting_id = arguments.meeting_id.as_str();
    let detail = meeting_detail(state, account_id, meeting_id).await?;
    Ok(json::meeting_with_markdown(&detail)?)
}

async fn get_meeting_transcript(state: &McpState, account_id: &str, arguments: GetMeetingTranscriptArguments<'_>) -> Result<String, ToolError> {
    let meeting_id = arguments.meeting_id.as_str();
    let (limit, offset) = (arguments.limit.get(), arguments.offset.get());
    // The meeting first: a transcript may outlive its meeting's delete in the store.
    meeting_detail(state, account_id, meeting_id).await?;
    let inner = &state.inner;
    let transcript = inner.bounded(inner.readmodel.meeting_transcript(account_id, meeting_id)).await?;
    #[derive(Deserialize)]
    struct Text<'a> {
        #[serde(borrow)]
        text: &'a RawValue,
    }
    let (text, total) = match &transcript {
        Some(record) => (Some(serde_json::from_str::<Text>(&record.body)?.text.get()), record.word_count),
        None => (None, 0),
    };
    let words = if offset < total { inner.bounded(inner.readmodel.transcript_words(account_id, meeting_id, offset, limit)).await? } else { Vec::new() };
    let returned = words.len();
    let pagination = Pagination { offset, limit, returned, total: Some(total), next_offset: (offset + returned < total).then_some(offset + returned) };
    let mut out = String::with_capacity(256 + text.map_or(0, str::len) + returned * 64);
    out.push('{');
    json::push_key(&mut out, "meeting_id");
    json::push_string(&mut out, meeting_id);
    json::push_key(&mut out, "text");
    // The text comes with the first page only; later pages page the words.
    match (offset, text) {
        (0, Some(text)) => out.push_str(text),
        (0, None) => out.push_str("\"\""),
        _ => out.push_str("null"),
    }
    json::push_key(&mut out, "words");
    json::push_value(&mut out, &words);
    json::push_key(&mut out, "pagination");
    json::push_value(&mut out, &pagination);
    out.push('}');
    Ok(out)
}

async fn get_recurring_meeting_history(state: &McpState, account_id: &str, arguments: GetRecurringMeetingHistoryArguments<'_>) -> Result<String, ToolError> {
    let meeting_id = arguments.meeting_id.as_str();
    let (limit, offset) = (arguments.limit.get(), arguments.offset.get());
    let detail = meeting_detail(state, account_id, meeting_id).await?;
    #[derive(Deserialize)]
    struct Series {
        series_id: Option<String>,
    }
    let series: Series = serde_json::from_str(&detail)?;
    let (rows, total) = match series.series_id {
        Some(series_id) => {
            let inner = &state.inner;
            inner.bounded(inner.readmodel.series_meetings(account_id, &series_id, offset, limit)).await?
        }
        None => (Vec::new(), 0),
    };
    let pagination =
        Pagination { offset, limit, returned: rows.len(), total: Some(total), next_offset: next_offset(offset, rows.len(), offset + rows.len() < total) };
    Ok(meetings_page(&rows, &pagination))
}

async fn search_meetings(state: &McpState, account_id: &str, arguments: SearchMeetingsArguments<'_>) -> Result<String, ToolError> {
    let (limit, offset) = (arguments.limit.get(), arguments.offset.get());
    let words = query_words(arguments.query.as_str());
    let (rows, total) = if words.is_empty() {
        (Vec::new(), 0)
    } else {
        let inner = &state.inner;
        inner.bounded(inner.readmodel.search_meetings(account_id, &words, offset, limit)).await?
    };
    let pagination =
        Pagination { offset, limit, returned: rows.len(), total: Some(total), next_offset: next_offset(offset, rows.len(), offset + rows.len() < total) };
    Ok(meetings_page(&rows, &pagination))
}

async fn list_pending_action_items(state: &McpState, account_id: &str, arguments: ListPendingActionItemsArguments) -> Result<String, ToolError> {
    let (limit, offset) = (arguments.limit.get(), arguments.offset.get());
    let inner = &state.inner;
    let page_rows = inner.bounded(inner.readmodel.pending_action_items(account_id, offset, limit)).await?;
    let items = page_rows.rows.iter().map(|row| json::pending_item(&row.body)).collect::<Result<Vec<String>, _>>()?;
    // Counting every pending item would read them all; like list_meetings, total is null.
    let pagination = Pagination { offset, limit, returned: items.len(), total: None, next_offset: next_offset(offset, items.len(), page_rows.has_more) };
    Ok(page("action_items", items.iter().map(String::as_str), &pagination))
}

#[cfg(test)]
mod tests {
    use super::*;

    // "pagination.next_offset is null on the last page": list offsets above MAX_OFFSET are
    // clamped, so the page whose next offset would be clamped back is the last one, and
    // a client walking the pages stops instead of reading that page again forever.
    #[test]
    fn the_next_offset_never_points_past_the_offset_cap() {
        assert_eq!(next_offset(0, 20, true), Some(20));
        assert_eq!(next_offset(40, 20, false), None);
        assert_eq!(next_offset(MAX_OFFSET - 20, 20, true), Some(MAX_OFFSET));
        assert_eq!(next_offset(MAX_OFFSET - 10, 20, true), None);
        assert_eq!(next_offset(MAX_OFFSET, 20, true), None);
        let args = serde_json::json!({"offset": 1e12}).as_object().cloned().unwrap_or_default();
        assert_eq!(parse::<ListMeetingsArguments>(&args).map(|arguments| arguments.offset.get()), Ok(MAX_OFFSET));
    }
}
