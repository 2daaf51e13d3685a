//! Assembling tool results from stored bodies without parsing them into values and
//! serialising them again: stored bodies are already the JSON docs/mcp.md describes, so
//! results are written by copying raw JSON, touching only the fields MCP changes
//! (`markdown` on documents, `meeting_id`/`meeting_title` on action items). Key order is
//! kept as stored.

use std::fmt;

use schemars::JsonSchema;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The entries of one JSON object, in order, values left raw.
pub struct Entries<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for EntriesVisitor<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Entries<'a>, M::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(std::marker::PhantomData))
    }
}

pub fn push_key(out: &mut String, key: &str) {
    if out.ends_with('{') || out.ends_with('[') {
        // first member
    } else {
        out.push(',');
    }
    push_string(out, key);
    out.push(':');
}

pub fn push_string(out: &mut String, text: &str) {
    // Serialising a &str cannot fail.
    out.push_str(&serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into()));
}

pub fn push_value<T: Serialize>(out: &mut String, value: &T) {
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "null".into()));
}

/// A note or summary object with `markdown` added: its text, which the projection keeps
/// as plain text with one line per paragraph or heading.
pub fn with_markdown(document: &RawValue) -> Result<String, serde_json::Error> {
    let entries: Entries = serde_json::from_str(document.get())?;
    let mut out = String::with_capacity(document.get().len() * 2);
    out.push('{');
    let mut text = None;
    for (key, value) in &entries.0 {
        if key == "markdown" {
            continue;
        }
        if key == "text" {
            text = Some(*value);
        }
        push_key(&mut out, key);
        out.push_str(value.get());
    }
    push_key(&mut out, "markdown");
    out.push_str(text.map_or("\"\"", RawValue::get));
    out.push('}');
    Ok(out)
}

/// A stored meeting detail with `markdown` on the note and on every summary.
///
/// The detail is copied as stored with `,"markdown":<text>` spliced in before the closing
/// brace of each document: only the note and the summaries are parsed, into borrowed
/// slices of the detail, so nothing but the result is allocated. A document that already
/// has a `markdown` field takes the general path (every entry parsed and rewritten).
pub fn meeting_with_markdown(detail: &str) -> Result<String, serde_json::Error> {
    #[derive(Deserialize)]
    struct Detail<'a> {
        #[serde(borrow, default)]
        note: Option<&'a RawValue>,
        #[serde(borrow, default)]
        summaries: Option<Vec<&'a RawValue>>,
    }
    #[derive(Deserialize)]
    struct Document<'a> {
        #[serde(borrow, default)]
        text: Option<&'a RawValue>,
        #[serde(borrow, default)]
        markdown: Option<&'a RawValue>,
    }
    let parsed: Detail = serde_json::from_str(detail)?;
    let documents = parsed.note.into_iter().chain(parsed.summaries.unwrap_or_default());
    // (offset of the document's closing brace, its text, whether it has other fields)
    let mut splices: Vec<(usize, &str, bool)> = Vec::new();
    for document in documents {
        let fields: Document = serde_json::from_str(document.get())?;
        let raw = document.get();
        let start = (raw.as_ptr() as usize).checked_sub(detail.as_ptr() as usize);
        let close = start.map(|start| start + raw.len() - 1).filter(|&close| detail.as_bytes().get(close) == Some(&b'}'));
        match (close, fields.markdown) {
            (Some(close), None) => splices.push((close, fields.text.map_or("\"\"", RawValue::get), !raw[1..raw.len() - 1].trim().is_empty())),
            _ => return meeting_with_markdown_rewritten(detail),
        }
    }
    splices.sort_unstable_by_key(|splice| splice.0);
    let mut out = String::with_capacity(detail.len() + splices.iter().map(|splice| splice.1.len() + 12).sum::<usize>());
    let mut copied = 0;
    for (close, text, has_fields) in splices {
        out.push_str(&detail[copied..close]);
        out.push_str(if has_fields { ",\"markdown\":" } else { "\"markdown\":" });
        out.push_str(text);
        copied = close;
    }
    out.push_str(&detail[copied..]);
    Ok(out)
}

/// [`meeting_with_markdown`] by parsing every entry and writing each one again.
fn meeting_with_markdown_rewritten(detail: &str) -> Result<String, serde_json::Error> {
    let entries: Entries = serde_json::from_str(detail)?;
    let mut out = String::with_capacity(detail.len() * 2);
    out.push('{');
    for (key, value) in &entries.0 {
        push_key(&mut out, key);
        match key.as_str() {
            "note" if value.get() != "null" => out.push_str(&with_markdown(value)?),
            "summaries" => {
                let summaries: Vec<&RawValue> = serde_json::from_str(value.get())?;
                out.push('[');
                for (index, summary) in summaries.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(&with_markdown(summary)?);
                }
                out.push(']');
            }
            _ => out.push_str(value.get()),
        }
    }
    out.push('}');
    Ok(out)
}

/// An action item in REST's list form (`meeting: {id, title} | null`) in MCP's form:
/// `meeting_id` and `meeting_title` in place of `meeting` (both null for an item that
/// did not come from a meeting).
pub fn pending_item(body: &str) -> Result<String, serde_json::Error> {
    #[derive(Deserialize)]
    struct MeetingRef<'a> {
        #[serde(borrow)]
        id: &'a RawValue,
        #[serde(borrow)]
        title: &'a RawValue,
    }
    let entries: Entries = serde_json::from_str(body)?;
    let mut out = String::with_capacity(body.len() + 32);
    out.push('{');
    for (key, value) in &entries.0 {
        if key == "meeting" {
            let meeting: Option<MeetingRef> = serde_json::from_str(value.get())?;
            push_key(&mut out, "meeting_id");
            out.push_str(meeting.as_ref().map_or("null", |meeting| meeting.id.get()));
            push_key(&mut out, "meeting_title");
            out.push_str(meeting.as_ref().map_or("null", |meeting| meeting.title.get()));
        } else {
            push_key(&mut out, key);
            out.push_str(value.get());
        }
    }
    out.push('}');
    Ok(out)
}

/// The pagination object of every paginated tool.
#[derive(Serialize, JsonSchema, Debug, Clone, PartialEq, Eq)]
pub struct Pagination {
    pub offset: usize,
    pub limit: usize,
    pub returned: usize,
    pub total: Option<usize>,
    pub next_offset: Option<usize>,
}

/// `{"<list_key>": [items...], "pagination": {...}}` from raw items.
pub fn page<'a>(list_key: &str, items: impl IntoIterator<Item = &'a str>, pagination: &Pagination) -> String {
    let mut out = page_open(list_key, 4096);
    for (index, item) in items.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(item);
    }
    page_close(&mut out, pagination);
    out
}

/// The start of a [`page`] with room for `capacity` bytes: items follow, comma-separated,
/// then [`page_close`].
pub fn page_open(list_key: &str, capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    out.push('{');
    push_key(&mut out, list_key);
    out.push('[');
    out
}

pub fn page_close(out: &mut String, pagination: &Pagination) {
    out.push(']');
    push_key(out, "pagination");
    push_value(out, pagination);
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_added_after_the_existing_fields_in_order() {
        let detail = r#"{"id":"m","note":{"id":"d","text":"A\nB","updated_at":"x"},"summaries":[{"id":"s","text":"S"}],"participants":[]}"#;
        assert_eq!(
            meeting_with_markdown(detail).expect("a meeting detail object"),
            r#"{"id":"m","note":{"id":"d","text":"A\nB","updated_at":"x","markdown":"A\nB"},"summaries":[{"id":"s","text":"S","markdown":"S"}],"participants":[]}"#
        );
    }

    #[test]
    fn splicing_markdown_in_equals_rewriting_every_entry() {
        for detail in [
            r#"{"id":"m","note":{"id":"d","text":"A\nB \"q\" \u00e9","updated_at":"x"},"summaries":[{"id":"s","text":"S"},{"id":"t","text":"T"}],"participants":[]}"#,
            r#"{"id":"m","note":null,"summaries":[],"participants":[{"name":"{}"}]}"#,
            r#"{"id":"m","summaries":[{"id":"s"},{}],"note":{"text":"x"}}"#,
            r#"{"id":"m","note":{"text":"new","markdown":"old"},"summaries":[{"text":"S","markdown":"stale"}]}"#,
            r#"{"title":"no documents at all"}"#,
        ] {
            assert_eq!(
                meeting_with_markdown(detail).expect("a meeting detail object"),
                meeting_with_markdown_rewritten(detail).expect("a meeting detail object"),
                "{detail}"
            );
        }
        // Stored bodies are compact; with whitespace the result is still the same JSON.
        let spaced = r#"{"note": { } ,"summaries":[ {"text" : "a"} ]}"#;
        let value = |text: String| serde_json::from_str::<serde_json::Value>(&text).expect("the result is JSON");
        assert_eq!(
            value(meeting_with_markdown(spaced).expect("a meeting detail object")),
            value(meeting_with_markdown_rewritten(spaced).expect("a meeting detail object"))
        );
        assert!(meeting_with_markdown("[1]").is_err());
        assert!(meeting_with_markdown(r#"{"note":"not an object"}"#).is_err());
    }

    #[test]
    fn pending_items_name_their_meeting() {
        assert_eq!(
            pending_item(r#"{"id":"a","meeting":{"id":"m","title":"T"}}"#).expect("an action item object"),
            r#"{"id":"a","meeting_id":"m","meeting_title":"T"}"#
        );
        assert_eq!(pending_item(r#"{"id":"a","meeting":null}"#).expect("an action item object"), r#"{"id":"a","meeting_id":null,"meeting_title":null}"#);
    }

    #[test]
    fn pages_render_items_and_pagination() {
        let pagination = Pagination { offset: 0, limit: 2, returned: 1, total: None, next_offset: None };
        assert_eq!(
            page("meetings", ["{\"id\":1}"], &pagination),
            r#"{"meetings":[{"id":1}],"pagination":{"offset":0,"limit":2,"returned":1,"total":null,"next_offset":null}}"#
        );
    }
}
