//! The endpoints: their routes, their parsed parameters, and how each answer is
//! written (the feed's and the webhook endpoints' in `feed.rs`). Bodies are written by concatenating the JSON the read model stored ready to
//! send, never by parsing and re-serialising rows.
//!
//! Rendering decisions where the rules leave room (docs/rest.md, Decisions):
//! - `GET /meetings/{id}?include=transcript` for a meeting without a transcript:
//!   `"transcript": null` (absent values are null, General rule 1).
//! - Shared note detail of a note shared directly (not with a team): `team_name` is
//!   null; there is no team whose name could be given.
//! - `q` of `/shared-notes` without any word (e.g. blank) filters nothing; a word longer
//!   than the index keeps (64 characters) matches no note.

use recap_readmodel::messages::MessageKind;
use recap_readmodel::views::ShareRecord;
use recap_readmodel::{ActionItemFilter, MeetingFilter, Page, Row, Val};
use recap_schemas::{ActionItemStatus, Id, Timestamp};
use serde::Serialize;

use crate::error::ApiError;
use crate::feed;
use crate::params;
use crate::pipeline::bounded;
use crate::RestState;
use recap_access::cursor::Cursors;

/// A matched path; identifiers still raw (percent-encoded) until parameter checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    Meetings,
    Meeting(&'a str),
    ActionItems,
    SharedNotes,
    SharedNote(&'a str),
    Teams,
    TeamActionItems(&'a str),
    Events,
    Event(&'a str),
    WebhookEndpoints,
    WebhookAttempts(&'a str),
}

impl<'a> Route<'a> {
    /// The route of a path, None for every other path (404 not_found). An empty
    /// identifier segment (`/v1/meetings/`) is no route.
    pub(crate) fn parse(path: &'a str) -> Option<Route<'a>> {
        let rest = path.strip_prefix("/v1/")?;
        let mut segments = rest.split('/');
        let route = match (segments.next()?, segments.next(), segments.next()) {
            ("meetings", None, None) => Route::Meetings,
            ("meetings", Some(id), None) if !id.is_empty() => Route::Meeting(id),
            ("action-items", None, None) => Route::ActionItems,
            ("shared-notes", None, None) => Route::SharedNotes,
            ("shared-notes", Some(id), None) if !id.is_empty() => Route::SharedNote(id),
            ("teams", None, None) => Route::Teams,
            ("teams", Some(id), Some("action-items")) if !id.is_empty() => Route::TeamActionItems(id),
            ("events", None, None) => Route::Events,
            ("events", Some(id), None) if !id.is_empty() => Route::Event(id),
            ("webhook-endpoints", None, None) => Route::WebhookEndpoints,
            ("webhook-endpoints", Some(id), Some("attempts")) if !id.is_empty() => Route::WebhookAttempts(id),
            _ => return None,
        };
        segments.next().is_none().then_some(route)
    }

    /// The route's template: what logs show instead of the identifiers.
    pub(crate) fn template(&self) -> &'static str {
        match self {
            Route::Meetings => "/v1/meetings",
            Route::Meeting(_) => "/v1/meetings/{meeting_id}",
            Route::ActionItems => "/v1/action-items",
            Route::SharedNotes => "/v1/shared-notes",
            Route::SharedNote(_) => "/v1/shared-notes/{shared_note_id}",
            Route::Teams => "/v1/teams",
            Route::TeamActionItems(_) => "/v1/teams/{team_id}/action-items",
            Route::Events => "/v1/events",
            Route::Event(_) => "/v1/events/{event_id}",
            Route::WebhookEndpoints => "/v1/webhook-endpoints",
            Route::WebhookAttempts(_) => "/v1/webhook-endpoints/{endpoint_id}/attempts",
        }
    }
}

/// Where a page resumes and what its cursors are bound to.
pub(crate) struct Paging {
    pub(crate) limit: usize,
    pub(crate) after: Option<Vec<Val>>,
    pub(crate) binding: String,
}

impl Paging {
    fn parse(query: &str, signer: &Cursors, binding: String) -> Result<Paging, ApiError> {
        let limit = params::limit(query)?;
        let after = params::cursor(query, signer, &binding)?;
        Ok(Paging { limit, after, binding })
    }

    /// As [`Paging::parse`], for a cursor whose key must have the shape `valid` accepts.
    fn parse_keyed(query: &str, signer: &Cursors, binding: String, valid: impl Fn(&[Val]) -> bool) -> Result<Paging, ApiError> {
        let paging = Paging::parse(query, signer, binding)?;
        if paging.after.as_deref().is_some_and(|key| !valid(key)) {
            return Err(ApiError::invalid("cursor", "cursor is not a next_cursor this endpoint issued"));
        }
        Ok(paging)
    }
}

/// A request whose parameters all passed their checks.
pub(crate) enum Endpoint {
    Meetings { filter: MeetingFilter, paging: Paging },
    Meeting { meeting_id: Id, include_transcript: bool },
    ActionItems { filter: ActionItemFilter, paging: Paging },
    SharedNotes { words: Vec<String>, unmatchable: bool, paging: Paging },
    SharedNote { share_id: Id },
    Teams,
    TeamActionItems { team_id: Id, status: Option<ActionItemStatus>, limit: usize },
    Events { types: Vec<MessageKind>, paging: Paging },
    Event { event_id: Id },
    WebhookEndpoints,
    WebhookAttempts { endpoint_id: Id, paging: Paging },
}

/// The canonical, unambiguous form of what a cursor is bound to: equal filters give
/// equal bindings however they were spelled (e.g. `Z` or `+00:00`, status order).
fn binding(parts: &[Option<&str>]) -> String {
    serde_json::to_string(parts).unwrap_or_default()
}

fn micros(instant: Option<Timestamp>) -> Option<String> {
    instant.map(|instant| instant.micros().to_string())
}

impl Endpoint {
    /// Checks the parameters of a route in the order `params.rs` documents.
    pub(crate) fn parse(route: Route<'_>, query: &str, account_id: &str, signer: &Cursors) -> Result<Endpoint, ApiError> {
        Ok(match route {
            Route::Meetings => {
                let since = params::instant(query, "since")?;
                let until = params::instant(query, "until")?;
                let binding = binding(&[Some("meetings"), Some(account_id), micros(since).as_deref(), micros(until).as_deref()]);
                Endpoint::Meetings { filter: MeetingFilter { since, until }, paging: Paging::parse(query, signer, binding)? }
            }
            Route::Meeting(segment) => {
                let meeting_id = params::path_identifier(segment, "meeting_id")?;
                Endpoint::Meeting { meeting_id, include_transcript: params::include_transcript(query)? }
            }
            Route::ActionItems => {
                let statuses = params::status_set(query)?;
                let assignee = params::identifier_param(query, "assignee_human_id")?;
                let meeting = params::identifier_param(query, "meeting_id")?;
                let status_list = statuses.iter().map(|status| status.as_str()).collect::<Vec<_>>().join(",");
                let binding = binding(&[Some("action-items"), Some(account_id), Some(&status_list), assignee.as_deref(), meeting.as_deref()]);
                let filter = ActionItemFilter { statuses, assignee_human_id: assignee.map(Id::into_string), meeting_id: meeting.map(Id::into_string) };
                Endpoint::ActionItems { filter, paging: Paging::parse(query, signer, binding)? }
            }
            Route::SharedNotes => {
                let words = params::search_words(query)?;
                let unmatchable = params::has_unindexable_word(query);
                let joined = words.join(" ");
                let binding = binding(&[Some("shared-notes"), Some(account_id), Some(&joined), unmatchable.then_some("unmatchable")]);
                Endpoint::SharedNotes { words, unmatchable, paging: Paging::parse(query, signer, binding)? }
            }
            Route::SharedNote(segment) => Endpoint::SharedNote { share_id: params::path_identifier(segment, "shared_note_id")? },
            Route::Teams => Endpoint::Teams,
            Route::TeamActionItems(segment) => {
                let team_id = params::path_identifier(segment, "team_id")?;
                let status = params::single_status(query)?;
                Endpoint::TeamActionItems { team_id, status, limit: params::limit(query)? }
            }
            Route::Events => {
                let types = params::message_types(query)?;
                let type_list = types.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(",");
                let binding = binding(&[Some("events"), Some(account_id), Some(&type_list)]);
                Endpoint::Events { types, paging: Paging::parse_keyed(query, signer, binding, |key| feed::feed_position(key).is_some())? }
            }
            Route::Event(segment) => Endpoint::Event { event_id: params::path_identifier(segment, "event_id")? },
            Route::WebhookEndpoints => Endpoint::WebhookEndpoints,
            Route::WebhookAttempts(segment) => {
                let endpoint_id = params::path_identifier(segment, "endpoint_id")?;
                let binding = binding(&[Some("webhook-attempts"), Some(account_id), Some(&endpoint_id)]);
                Endpoint::WebhookAttempts { endpoint_id, paging: Paging::parse_keyed(query, signer, binding, |key| feed::attempt_position(key).is_some())? }
            }
        })
    }
}

/// `{"data":<body>}`
pub(crate) fn single(body: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 9);
    out.extend_from_slice(b"{\"data\":");
    out.extend_from_slice(body.as_bytes());
    out.push(b'}');
    out
}

/// `{"data":[<bodies>]` and, for paginated lists, `,"has_more":..,"next_cursor":..`, then `}`.
fn list<'b>(bodies: impl Iterator<Item = &'b str> + Clone, pagination: Option<(bool, Option<String>)>) -> Vec<u8> {
    let total: usize = bodies.clone().map(|body| body.len() + 1).sum();
    let mut out = Vec::with_capacity(total + 120);
    out.extend_from_slice(LIST_OPEN);
    for (index, body) in bodies.enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(body.as_bytes());
    }
    close_list(&mut out, pagination);
    out
}

/// What a list body starts with; the items follow, comma-separated.
pub(crate) const LIST_OPEN: &[u8] = b"{\"data\":[";

/// Ends a list body whose items were written after [`LIST_OPEN`]: the array, then
/// `has_more` and `next_cursor` for paginated lists.
pub(crate) fn close_list(out: &mut Vec<u8>, pagination: Option<(bool, Option<String>)>) {
    out.push(b']');
    if let Some((has_more, next_cursor)) = pagination {
        out.extend_from_slice(if has_more { b",\"has_more\":true,\"next_cursor\":" } else { b",\"has_more\":false,\"next_cursor\":" });
        match next_cursor {
            // Cursors are base64url: nothing in them needs JSON escaping.
            Some(cursor) => {
                out.push(b'"');
                out.extend_from_slice(cursor.as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
}

fn page_body(state: &RestState, page: &Page, binding: &str) -> Vec<u8> {
    let next_cursor = match (page.has_more, page.last_key()) {
        (true, Some(key)) => Some(state.inner.cursors.issue(binding, key)),
        _ => None,
    };
    list(page.rows.iter().map(|row: &Row| row.body.as_str()), Some((next_cursor.is_some(), next_cursor)))
}

#[derive(Serialize)]
struct SharedNoteDetail<'r> {
    id: &'r str,
    title: &'r str,
    team_name: Option<&'r str>,
    published_at: Timestamp,
    text: &'r str,
}

fn shared_note_detail(record: &ShareRecord) -> Result<String, ApiError> {
    let detail = SharedNoteDetail {
        id: &record.id,
        title: &record.title,
        team_name: record.team.as_ref().map(|team| team.name.as_str()),
        published_at: record.published_at,
        text: &record.text,
    };
    serde_json::to_string(&detail).map_err(|error| ApiError::Internal(format!("rendering a shared note: {error}")))
}

/// Answers an admitted request.
pub(crate) async fn execute(state: &RestState, account_id: &str, endpoint: Endpoint) -> Result<Vec<u8>, ApiError> {
    let readmodel = &state.inner.readmodel;
    let timeout = state.inner.store_timeout;
    match endpoint {
        Endpoint::Meetings { filter, paging } => {
            // The hottest list: bodies go from the store straight into the response.
            let mut out = Vec::with_capacity(LIST_OPEN.len() + paging.limit * 384 + 160);
            out.extend_from_slice(LIST_OPEN);
            let page = bounded(timeout, "meetings read", readmodel.meetings_into(account_id, &filter, paging.after.as_deref(), paging.limit, &mut out)).await?;
            let next_cursor = match (page.has_more, &page.last_key) {
                (true, Some(key)) => Some(state.inner.cursors.issue(&paging.binding, key)),
                _ => None,
            };
            close_list(&mut out, Some((next_cursor.is_some(), next_cursor)));
            Ok(out)
        }
        Endpoint::Meeting { meeting_id, include_transcript } => {
            let detail = bounded(timeout, "meeting read", readmodel.meeting_detail(account_id, &meeting_id)).await?.ok_or(ApiError::MeetingNotFound)?;
            if !include_transcript {
                return Ok(single(&detail));
            }
            let transcript = bounded(timeout, "transcript read", readmodel.meeting_transcript(account_id, &meeting_id)).await?;
            let transcript = transcript.as_ref().map_or("null", |record| record.body.as_str());
            // The stored detail is one JSON object: the transcript goes in before its
            // closing brace.
            let open = detail.trim_end().strip_suffix('}').ok_or_else(|| ApiError::Internal("stored meeting detail is not a JSON object".into()))?;
            let mut out = String::with_capacity(detail.len() + transcript.len() + 32);
            out.push_str("{\"data\":");
            out.push_str(open);
            out.push_str(",\"transcript\":");
            out.push_str(transcript);
            out.push_str("}}");
            Ok(out.into_bytes())
        }
        Endpoint::ActionItems { filter, paging } => {
            let page = bounded(timeout, "action items read", readmodel.action_items(account_id, &filter, paging.after.as_deref(), paging.limit)).await?;
            Ok(page_body(state, &page, &paging.binding))
        }
        Endpoint::SharedNotes { words, unmatchable, paging } => {
            if unmatchable {
                return Ok(list(std::iter::empty(), Some((false, None))));
            }
            let page = bounded(timeout, "shared notes read", readmodel.shared_notes(account_id, &words, paging.after.as_deref(), paging.limit)).await?;
            Ok(page_body(state, &page, &paging.binding))
        }
        Endpoint::SharedNote { share_id } => {
            let record = bounded(timeout, "shared note read", readmodel.shared_note(account_id, &share_id)).await?.ok_or(ApiError::SharedNoteNotFound)?;
            Ok(single(&shared_note_detail(&record)?))
        }
        Endpoint::Teams => {
            let teams = bounded(timeout, "teams read", readmodel.teams(account_id)).await?;
            let bodies = teams
                .iter()
                .map(|record| serde_json::to_string(&record.team))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| ApiError::Internal(format!("rendering a team: {error}")))?;
            Ok(list(bodies.iter().map(String::as_str), None))
        }
        Endpoint::TeamActionItems { team_id, status, limit } => {
            let membership = bounded(timeout, "team membership read", readmodel.team_membership(account_id, &team_id)).await?.ok_or(ApiError::TeamNotFound)?;
            if !membership.includes_team_action_items {
                return Err(ApiError::TeamPlanRequired);
            }
            // "can_collaborate: when false, the team has nothing shared to read": its
            // action items come from the notes shared with it, which its members cannot
            // open then either.
            if !membership.team.can_collaborate {
                return Ok(list(std::iter::empty::<&str>(), None));
            }
            let rows = bounded(timeout, "team action items read", readmodel.team_action_items(&team_id, status, limit)).await?;
            Ok(list(rows.iter().map(|row| row.body.as_str()), None))
        }
        Endpoint::Events { types, paging } => feed::events(state, account_id, &types, &paging).await,
        Endpoint::Event { event_id } => feed::event(state, account_id, &event_id).await,
        Endpoint::WebhookEndpoints => feed::webhook_endpoints(state, account_id).await,
        Endpoint::WebhookAttempts { endpoint_id, paging } => feed::webhook_attempts(state, account_id, &endpoint_id, &paging).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_exactly() {
        assert_eq!(Route::parse("/v1/meetings"), Some(Route::Meetings));
        assert_eq!(Route::parse("/v1/meetings/mtg_1"), Some(Route::Meeting("mtg_1")));
        assert_eq!(Route::parse("/v1/teams/t1/action-items"), Some(Route::TeamActionItems("t1")));
        assert_eq!(Route::parse("/v1/events"), Some(Route::Events));
        assert_eq!(Route::parse("/v1/events/msg_1"), Some(Route::Event("msg_1")));
        assert_eq!(Route::parse("/v1/webhook-endpoints"), Some(Route::WebhookEndpoints));
        assert_eq!(Route::parse("/v1/webhook-endpoints/we_1/attempts"), Some(Route::WebhookAttempts("we_1")));
        for unknown in [
            "/",
            "/v1",
            "/v1/",
            "/v1/meetings/",
            "/v1/meetings/a/b",
            "/v2/meetings",
            "/v1/teams/t1",
            "/v1/teams//action-items",
            "/meetings",
            "/v1/events/",
            "/v1/events/msg_1/x",
            "/v1/webhook-endpoints/we_1",
            "/v1/webhook-endpoints//attempts",
        ] {
            assert_eq!(Route::parse(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn lists_concatenate_stored_bodies() {
        assert_eq!(list(["{\"a\":1}", "{\"b\":2}"].into_iter(), None), br#"{"data":[{"a":1},{"b":2}]}"#);
        assert_eq!(list(std::iter::empty(), Some((false, None))), br#"{"data":[],"has_more":false,"next_cursor":null}"#);
    }
}
