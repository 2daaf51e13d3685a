//! The two sharing tools: search_shared_notes (results with a snippet around the first
//! matching word) and get_shared_note (the text cut at 12,000 characters). Only notes
//! shared with the caller, directly or through a team, are ever read.

use recap_readmodel::words::query_words;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::inputs::{GetSharedNoteArguments, SearchSharedNotesArguments};
use super::outputs::AnyObject;
use super::ToolError;
use crate::state::McpState;

/// get_shared_note text limit, in characters (Unicode scalar values, not bytes).
pub const SHARED_NOTE_MAX_CHARS: usize = 12_000;

/// Snippet length in characters, and how much of it comes before the first match.
const SNIPPET_CHARS: usize = 200;
const SNIPPET_LEAD_CHARS: usize = 60;

/// One result of search_shared_notes. Its schema shows `team` as any object and
/// `published_at` as a string, as the tool always advertised them.
#[derive(Serialize, JsonSchema)]
pub struct SearchResult<'a> {
    share_id: &'a str,
    title: &'a str,
    #[schemars(with = "Option<AnyObject>")]
    team: &'a Option<recap_schemas::TeamRef>,
    #[schemars(with = "String")]
    published_at: recap_schemas::Timestamp,
    snippet: String,
}

pub async fn search_shared_notes(state: &McpState, account_id: &str, arguments: SearchSharedNotesArguments<'_>) -> Result<String, ToolError> {
    let limit = arguments.limit.get();
    let words = query_words(arguments.query.as_str());
    if words.is_empty() {
        // Punctuation only: no word can match.
        return Ok("{\"results\":[]}".into());
    }
    let inner = &state.inner;
    let page = inner.bounded(inner.readmodel.shared_notes(account_id, &words, None, limit)).await?;
    #[derive(Deserialize)]
    struct Entry {
        id: String,
    }
    let mut shares = Vec::with_capacity(page.rows.len());
    for row in &page.rows {
        let entry: Entry = serde_json::from_str(&row.body)?;
        // Unshared between the two reads: leave it out.
        if let Some(share) = inner.bounded(inner.readmodel.shared_note(account_id, &entry.id)).await? {
            shares.push(share);
        }
    }
    let results: Vec<SearchResult> = shares
        .iter()
        .map(|share| SearchResult {
            share_id: &share.id,
            title: &share.title,
            team: &share.team,
            published_at: share.published_at,
            snippet: snippet(&share.text, &words),
        })
        .collect();
    Ok(serde_json::json!({ "results": results }).to_string())
}

pub async fn get_shared_note(state: &McpState, account_id: &str, arguments: GetSharedNoteArguments<'_>) -> Result<String, ToolError> {
    let share_id = arguments.share_id.as_str();
    let inner = &state.inner;
    let share = inner.bounded(inner.readmodel.shared_note(account_id, share_id)).await?.ok_or_else(|| ToolError::SharedNoteNotFound(share_id.to_string()))?;
    let (text, truncated) = match share.text.char_indices().nth(SHARED_NOTE_MAX_CHARS) {
        Some((cut, _)) => (&share.text[..cut], true),
        None => (share.text.as_str(), false),
    };
    Ok(serde_json::json!({
        "share_id": share.id, "title": share.title, "team": share.team, "published_at": share.published_at,
        "text": text, "truncated": truncated,
    })
    .to_string())
}

/// About 200 characters of the text around the first word of the query it contains
/// (whole word, case-insensitive, as the search matched), on one line, with `…` where
/// the text was cut. When only the title matched, the start of the text.
pub fn snippet(text: &str, words: &[String]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut first_match = None;
    let mut start = None;
    for (index, character) in chars.iter().chain(std::iter::once(&' ')).enumerate() {
        if character.is_alphanumeric() {
            start.get_or_insert(index);
            continue;
        }
        if let Some(word_start) = start.take() {
            let word: String = chars[word_start..index].iter().collect::<String>().to_lowercase();
            if words.contains(&word) {
                first_match = Some(word_start);
                break;
            }
        }
    }
    let from = first_match.map_or(0, |at| at.saturating_sub(SNIPPET_LEAD_CHARS));
    let to = (from + SNIPPET_CHARS).min(chars.len());
    let mut snippet = String::with_capacity(SNIPPET_CHARS + 8);
    if from > 0 {
        snippet.push('…');
    }
    let mut previous_space = false;
    for character in &chars[from..to] {
        let character = if character.is_whitespace() { ' ' } else { *character };
        if character == ' ' && previous_space {
            continue;
        }
        previous_space = character == ' ';
        snippet.push(character);
    }
    if to < chars.len() {
        snippet.push('…');
    }
    snippet
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_center_on_the_first_matching_word() {
        let text = format!("{}Budget review\nnext steps{}", "x ".repeat(100), " y".repeat(200));
        let snippet = snippet(&text, &["budget".to_string()]);
        assert!(snippet.starts_with('…') && snippet.ends_with('…'));
        assert!(snippet.contains("Budget review next steps"));
        assert!(snippet.chars().count() <= SNIPPET_CHARS + 2);
    }

    #[test]
    fn short_texts_are_whole() {
        assert_eq!(snippet("Q3 planning\nDecisions", &["planning".to_string()]), "Q3 planning Decisions");
    }
}
