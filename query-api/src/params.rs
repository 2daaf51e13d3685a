//! Request parameters: the query string and path identifiers of each endpoint, checked
//! in a fixed order per endpoint so a request with several invalid parameters always
//! names the same (first) one in `param`. Unknown query parameters are ignored; a known
//! one given twice is invalid (which value was meant is unknowable).
//!
//! Check order per endpoint:
//! - GET /meetings: `since`, `until`, `limit`, `cursor`
//! - GET /meetings/{meeting_id}: `meeting_id`, `include`
//! - GET /action-items: `status`, `assignee_human_id`, `meeting_id`, `limit`, `cursor`
//! - GET /shared-notes: `q`, `limit`, `cursor`
//! - GET /shared-notes/{shared_note_id}: `shared_note_id`
//! - GET /teams: none
//! - GET /teams/{team_id}/action-items: `team_id`, `status`, `limit`
//! - GET /events: `types`, `limit`, `cursor`
//! - GET /events/{event_id}: `event_id`
//! - GET /webhook-endpoints: none
//! - GET /webhook-endpoints/{endpoint_id}/attempts: `endpoint_id`, `limit`, `cursor`
//!
//! The cursor comes last because it is checked against the filters it was issued with.
//!
//! Query strings are percent-decoded as URIs are (RFC 3986), not as HTML forms: a `+`
//! stays a plus, so `since=2026-01-01T00:00:00+00:00` works without encoding.

use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use recap_readmodel::messages::MessageKind;
use recap_readmodel::Val;
use recap_schemas::{ActionItemStatus, Id, Timestamp, MAX_ID_BYTES};

use crate::error::ApiError;
use recap_access::cursor::Cursors;

pub const DEFAULT_LIMIT: usize = 50;
pub const MAX_LIMIT: usize = 200;
/// Longest accepted `q` of GET /shared-notes.
pub const MAX_QUERY_CHARS: usize = 1000;

/// The decoded value of the query parameter `name`; None when absent.
pub fn query_param<'a>(query: &'a str, name: &'static str) -> Result<Option<Cow<'a, str>>, ApiError> {
    let mut found = None;
    for pair in query.split('&') {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let matches = if raw_key.contains('%') { percent_decode_str(raw_key).decode_utf8().is_ok_and(|key| key == name) } else { raw_key == name };
        if !matches {
            continue;
        }
        if found.is_some() {
            return Err(ApiError::invalid(name, format!("{name} is given more than once")));
        }
        found = Some(decode(raw_value, name)?);
    }
    Ok(found)
}

/// limit: an integer from 1 to 200, default 50, in decimal digits only (no sign, space
/// or exponent). Leading zeros are allowed, however many: `0050` and `00050` are both 50.
pub fn limit(query: &str) -> Result<usize, ApiError> {
    let Some(text) = query_param(query, "limit")? else { return Ok(DEFAULT_LIMIT) };
    let significant = text.trim_start_matches('0');
    let parsed =
        (!text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) && significant.len() <= 3).then(|| significant.parse::<usize>().unwrap_or(0));
    match parsed {
        Some(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        _ => Err(ApiError::invalid("limit", format!("limit must be an integer from 1 to {MAX_LIMIT}"))),
    }
}

/// A well-formed identifier (path segment or filter value): UTF-8 text of 1 to
/// [`MAX_ID_BYTES`] bytes, the bound the events' identifiers have, so that every
/// identifier a response lists can be asked for in turn.
pub fn identifier(value: Cow<'_, str>, param: &'static str) -> Result<Id, ApiError> {
    Id::try_from(value).map_err(|_| ApiError::invalid(param, format!("{param} must be 1 to {MAX_ID_BYTES} bytes of UTF-8 text")))
}

/// A path segment, percent-decoded, as a well-formed identifier.
pub fn path_identifier(segment: &str, param: &'static str) -> Result<Id, ApiError> {
    identifier(decode(segment, param)?, param)
}

/// A percent-encoded value decoded (RFC 3986, 2.1): every `%` begins an escape of two
/// hexadecimal digits, and the bytes are UTF-8. A `%` that does not is refused rather
/// than taken as itself, so that `%` and `%25` never name the same thing.
fn decode<'a>(raw: &'a str, param: &'static str) -> Result<Cow<'a, str>, ApiError> {
    let bytes = raw.as_bytes();
    let malformed = bytes
        .iter()
        .enumerate()
        .any(|(at, &byte)| byte == b'%' && !(bytes.get(at + 1).is_some_and(u8::is_ascii_hexdigit) && bytes.get(at + 2).is_some_and(u8::is_ascii_hexdigit)));
    if malformed {
        return Err(ApiError::invalid(param, format!("{param} has a % that is not followed by two hexadecimal digits (write % as %25)")));
    }
    percent_decode_str(raw).decode_utf8().map_err(|_| ApiError::invalid(param, format!("{param} is not UTF-8 text")))
}

/// An optional identifier filter.
pub fn identifier_param(query: &str, name: &'static str) -> Result<Option<Id>, ApiError> {
    query_param(query, name)?.map(|value| identifier(value, name)).transpose()
}

/// since / until: an ISO 8601 instant with a time and a zone.
pub fn instant(query: &str, name: &'static str) -> Result<Option<Timestamp>, ApiError> {
    let Some(text) = query_param(query, name)? else { return Ok(None) };
    Timestamp::parse(&text)
        .map(Some)
        .map_err(|_| ApiError::invalid(name, format!("{name} must be an ISO 8601 instant with a time and a time zone, e.g. 2026-01-15T09:00:00Z")))
}

fn status(text: &str) -> Option<ActionItemStatus> {
    ActionItemStatus::parse(text)
}

/// status of GET /action-items: a comma-separated subset of todo, in_progress, done;
/// returned sorted and without repeats (its canonical form).
pub fn status_set(query: &str) -> Result<Vec<ActionItemStatus>, ApiError> {
    let Some(text) = query_param(query, "status")? else { return Ok(Vec::new()) };
    let mut statuses = Vec::with_capacity(3);
    for item in text.split(',') {
        let parsed = status(item).ok_or_else(|| ApiError::invalid("status", "status must be a comma-separated list of todo, in_progress, done"))?;
        if !statuses.contains(&parsed) {
            statuses.push(parsed);
        }
    }
    statuses.sort();
    Ok(statuses)
}

/// status of GET /teams/{id}/action-items: one of todo, in_progress, done.
pub fn single_status(query: &str) -> Result<Option<ActionItemStatus>, ApiError> {
    let Some(text) = query_param(query, "status")? else { return Ok(None) };
    status(&text).map(Some).ok_or_else(|| ApiError::invalid("status", "status must be one of todo, in_progress, done"))
}

/// types of GET /events: a comma-separated list of message kinds by their wire names
/// (`meeting.created,team.joined`); returned sorted and without repeats (its canonical
/// form). Absent: every kind. A name no kind has, an empty item included, is refused
/// naming it, so a typo never silently filters everything out.
pub fn message_types(query: &str) -> Result<Vec<MessageKind>, ApiError> {
    let Some(text) = query_param(query, "types")? else { return Ok(Vec::new()) };
    let mut kinds = Vec::new();
    for name in text.split(',') {
        let kind = MessageKind::parse(name).ok_or_else(|| {
            let known = MessageKind::ALL.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ");
            let shown: String = name.chars().take(64).collect();
            ApiError::invalid("types", format!("types names an unknown event type {shown:?}; the types are {known}"))
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.sort();
    Ok(kinds)
}

/// include of GET /meetings/{id}: only `transcript`.
pub fn include_transcript(query: &str) -> Result<bool, ApiError> {
    match query_param(query, "include")? {
        None => Ok(false),
        Some(value) if value == "transcript" => Ok(true),
        Some(_) => Err(ApiError::invalid("include", "include accepts only the value transcript")),
    }
}

/// q of GET /shared-notes: its words (none when absent or without any word).
pub fn search_words(query: &str) -> Result<Vec<String>, ApiError> {
    let Some(text) = query_param(query, "q")? else { return Ok(Vec::new()) };
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid("q", format!("q must be at most {MAX_QUERY_CHARS} characters")));
    }
    Ok(recap_readmodel::words::query_words(&text))
}

/// True when `q` holds a word too long for the word index: no note can match it.
pub fn has_unindexable_word(query: &str) -> bool {
    let Ok(Some(text)) = query_param(query, "q") else { return false };
    text.split(|c: char| !c.is_alphanumeric()).any(|word| word.chars().count() > recap_readmodel::words::MAX_WORD_CHARS)
}

/// The cursor parameter, verified against its binding; None when absent.
pub fn cursor(query: &str, signer: &Cursors, binding: &str) -> Result<Option<Vec<Val>>, ApiError> {
    let Some(text) = query_param(query, "cursor")? else { return Ok(None) };
    signer
        .open(binding, &text)
        .map(Some)
        .ok_or_else(|| ApiError::invalid("cursor", "cursor is not a next_cursor this endpoint issued for these filters; send the same filters with every page"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_integers_from_1_to_200() {
        assert_eq!(limit(""), Ok(50));
        assert_eq!(limit("limit=1"), Ok(1));
        assert_eq!(limit("limit=200"), Ok(200));
        // Leading zeros, however many, do not change the integer.
        assert_eq!(limit("limit=0050"), Ok(50));
        assert_eq!(limit("limit=00050"), Ok(50));
        assert_eq!(limit("limit=00000000000000000000000000200"), Ok(200));
        for bad in [
            "limit=0",
            "limit=000",
            "limit=201",
            "limit=0201",
            "limit=00000000000000000000001000",
            "limit=",
            "limit=1.5",
            "limit=-1",
            "limit=%2B5",
            "limit=0x10",
            "limit=050%20",
            "limit=abc",
            "limit=99999999999999999999",
            "limit=1&limit=2",
        ] {
            assert_eq!(limit(bad).unwrap_err().code(), "invalid_request", "{bad}");
        }
    }

    #[test]
    fn plus_is_not_a_space() {
        assert!(instant("since=2026-01-01T00:00:00+00:00", "since").expect("a valid instant").is_some());
        assert!(instant("since=2026-01-01T00:00:00%2B00:00", "since").expect("a valid instant").is_some());
        assert!(instant("since=2026-01-01", "since").is_err());
    }

    #[test]
    fn status_sets_are_canonical() {
        assert_eq!(status_set("status=done,todo,done"), Ok(vec![ActionItemStatus::Todo, ActionItemStatus::Done]));
        for bad in ["status=", "status=todo,", "status=,todo", "status=open", "status=TODO"] {
            assert!(status_set(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn event_types_are_known_kinds_in_canonical_order() {
        assert_eq!(message_types(""), Ok(vec![]));
        assert_eq!(message_types("types=team.left,meeting.created,team.left"), Ok(vec![MessageKind::MeetingCreated, MessageKind::TeamLeft]));
        assert_eq!(message_types("types=meeting.created%2Cteam.left"), Ok(vec![MessageKind::MeetingCreated, MessageKind::TeamLeft]));
        for bad in ["types=", "types=meeting.created,", "types=meeting.archived", "types=Meeting.Created", "types=meeting.created&types=team.left"] {
            let error = message_types(bad).unwrap_err();
            assert_eq!((error.code(), error.status().as_u16()), ("invalid_request", 400), "{bad}");
        }
        let body: serde_json::Value = serde_json::from_str(&message_types("types=meeting.archived").unwrap_err().body("r")).unwrap();
        assert_eq!(body["error"]["param"], "types");
        assert!(body["error"]["message"].as_str().unwrap().contains("\"meeting.archived\""), "{body}");
    }

    #[test]
    fn identifiers_are_utf8_of_1_to_256_bytes() {
        assert!(path_identifier("mtg_01", "meeting_id").is_ok());
        assert_eq!(path_identifier("a%20b", "meeting_id").expect("a valid identifier"), "a b");
        assert_eq!(path_identifier("a%00b", "meeting_id").expect("an event may carry it"), "a\0b");
        assert!(path_identifier(&"x".repeat(256), "meeting_id").is_ok());
        assert!(path_identifier(&"é".repeat(128), "meeting_id").is_ok(), "256 bytes");
        for refused in ["x".repeat(257), "é".repeat(129), "%FF".into(), "".into()] {
            assert!(path_identifier(&refused, "meeting_id").is_err(), "{refused}");
        }
    }
}
