//! The account's feed of events and its webhook endpoints as REST serves them
//! (`docs/rest.md`, Events and webhooks): reads through the read model's
//! [`WebhookStore`] and the wire form of each answer. Wire types are written here field by
//! field rather than by serialising the stored records, so that nothing added to a
//! record (a secret least of all) reaches a response unless it is added here.
//!
//! Decisions where the rules leave room (docs/rest.md, Decisions):
//! - the feed is listed oldest first: it only grows at its end, so a reader resumes
//!   where it stopped and sees every later event once, in order;
//! - its `next_cursor` is given whenever the page read anything (or a cursor was sent),
//!   `has_more` false included: it is where a poller asks again later. It is null only
//!   when nothing has been read yet, and asking again without a cursor is the same;
//! - an endpoint's `state.status` is one of `enabled`, `failing` (enabled, every attempt
//!   since `failing_since` failed), `disabled_by_account` (the account turned it off) and
//!   `disabled_after_failures` (it failed for too long; `disabled_at` says when, and the
//!   account's next change to it enables it again);
//! - an endpoint's attempts are listed newest first; an attempt's HTTP status is
//!   `response_status`, so that it is not read as a state.

use recap_readmodel::messages::{Message, MessageKind};
use recap_readmodel::webhooks::{AttemptOutcome, AttemptRecord, EndpointRecord, EndpointState};
use recap_readmodel::Val;
use recap_schemas::{Id, Timestamp};
use serde::Serialize;

use crate::endpoints::{close_list, single, Paging, LIST_OPEN};
use crate::error::ApiError;
use crate::pipeline::bounded;
use crate::RestState;

/// The seq a feed cursor resumes after.
pub(crate) fn feed_position(key: &[Val]) -> Option<i64> {
    match key {
        [Val::Int(seq)] => Some(*seq),
        _ => None,
    }
}

/// The attempt (time, id) an attempts cursor resumes after.
pub(crate) fn attempt_position(key: &[Val]) -> Option<(i64, &str)> {
    match key {
        [Val::Int(attempted_at), Val::Text(id)] => Some((*attempted_at, id.as_str())),
        _ => None,
    }
}

fn render<T: Serialize>(value: &T, what: &str) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(|error| ApiError::Internal(format!("rendering {what}: {error}")))
}

fn list_of(bodies: &[String], pagination: Option<(bool, Option<String>)>) -> Vec<u8> {
    let mut out = Vec::with_capacity(LIST_OPEN.len() + bodies.iter().map(|body| body.len() + 1).sum::<usize>() + 160);
    out.extend_from_slice(LIST_OPEN);
    for (index, body) in bodies.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(body.as_bytes());
    }
    close_list(&mut out, pagination);
    out
}

/// `GET /events`: a page of the account's feed after the cursor's seq.
pub(crate) async fn events(state: &RestState, account_id: &str, types: &[MessageKind], paging: &Paging) -> Result<Vec<u8>, ApiError> {
    let after = paging.after.as_deref().and_then(feed_position);
    let store = &state.inner.webhooks;
    let page = bounded(state.inner.store_timeout, "feed read", store.feed_page(account_id, after, paging.limit, types)).await?;
    let bodies: Vec<String> = page.messages.iter().map(|(_, message)| message.to_json()).collect();
    // Where the reader stands after this page, even at the end of the feed: polling
    // resumes from there.
    let next_cursor = page.last_seq.or(after).map(|seq| state.inner.cursors.issue(&paging.binding, &[Val::Int(seq)]));
    Ok(list_of(&bodies, Some((page.has_more, next_cursor))))
}

/// `GET /events/{event_id}`: one message of the account's feed.
pub(crate) async fn event(state: &RestState, account_id: &str, event_id: &Id) -> Result<Vec<u8>, ApiError> {
    let store = &state.inner.webhooks;
    let (_, message): (i64, Message) =
        bounded(state.inner.store_timeout, "event read", store.message(account_id, event_id)).await?.ok_or(ApiError::EventNotFound)?;
    Ok(single(&message.to_json()))
}

/// An endpoint as `GET /webhook-endpoints` lists it: never its secret.
#[derive(Serialize)]
struct EndpointView<'a> {
    id: &'a str,
    url: &'a str,
    description: Option<&'a str>,
    /// Empty: every type.
    types: &'a [MessageKind],
    enabled: bool,
    state: StateView,
    created_at: Timestamp,
    updated_at: Timestamp,
}

#[derive(Serialize)]
struct StateView {
    status: &'static str,
    failing_since: Option<Timestamp>,
    disabled_at: Option<Timestamp>,
    last_attempt_at: Option<Timestamp>,
    last_success_at: Option<Timestamp>,
}

/// What deliveries to the endpoint are doing now (see the module doc).
pub(crate) fn endpoint_status(endpoint: &EndpointRecord, state: &EndpointState) -> &'static str {
    if !endpoint.enabled {
        "disabled_by_account"
    } else if state.disables(endpoint) {
        "disabled_after_failures"
    } else if state.failing_since.is_some() {
        "failing"
    } else {
        "enabled"
    }
}

fn endpoint_view<'a>(endpoint: &'a EndpointRecord, state: &EndpointState) -> EndpointView<'a> {
    let status = endpoint_status(endpoint, state);
    EndpointView {
        id: &endpoint.id,
        url: &endpoint.url,
        description: endpoint.description.as_deref(),
        types: &endpoint.types,
        enabled: endpoint.enabled,
        state: StateView {
            status,
            failing_since: state.failing_since,
            // A disabled_at left from a version the account has changed since says
            // nothing about the endpoint now.
            disabled_at: if status == "disabled_after_failures" { state.disabled_at } else { None },
            last_attempt_at: state.last_attempt_at,
            last_success_at: state.last_success_at,
        },
        created_at: endpoint.created_at,
        updated_at: endpoint.updated_at,
    }
}

/// `GET /webhook-endpoints`: every endpoint of the account, by id, in one response.
pub(crate) async fn webhook_endpoints(state: &RestState, account_id: &str) -> Result<Vec<u8>, ApiError> {
    let store = &state.inner.webhooks;
    let endpoints = bounded(state.inner.store_timeout, "webhook endpoints read", store.endpoints(account_id)).await?;
    let bodies = endpoints
        .iter()
        .map(|(endpoint, endpoint_state)| render(&endpoint_view(endpoint, endpoint_state), "a webhook endpoint"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(list_of(&bodies, None))
}

/// An attempt as `GET /webhook-endpoints/{endpoint_id}/attempts` lists it.
#[derive(Serialize)]
struct AttemptView<'a> {
    id: &'a str,
    event_id: &'a str,
    #[serde(rename = "type")]
    kind: MessageKind,
    attempt: u32,
    attempted_at: Timestamp,
    outcome: AttemptOutcome,
    response_status: Option<u16>,
    error: Option<&'a str>,
    duration_ms: u64,
    next_attempt_at: Option<Timestamp>,
}

fn attempt_view(attempt: &AttemptRecord) -> AttemptView<'_> {
    AttemptView {
        id: &attempt.id,
        event_id: &attempt.message_id,
        kind: attempt.kind,
        attempt: attempt.attempt,
        attempted_at: attempt.attempted_at,
        outcome: attempt.outcome,
        response_status: attempt.status,
        error: attempt.error.as_deref(),
        duration_ms: attempt.duration_ms,
        next_attempt_at: attempt.next_attempt_at,
    }
}

/// `GET /webhook-endpoints/{endpoint_id}/attempts`: the endpoint's attempts, newest
/// first; not those of an endpoint of the same id deleted before it.
pub(crate) async fn webhook_attempts(state: &RestState, account_id: &str, endpoint_id: &Id, paging: &Paging) -> Result<Vec<u8>, ApiError> {
    let (store, timeout) = (&state.inner.webhooks, state.inner.store_timeout);
    let endpoint = bounded(timeout, "webhook endpoint read", store.endpoint_record(account_id, endpoint_id)).await?.ok_or(ApiError::WebhookEndpointNotFound)?;
    let after = paging.after.as_deref().and_then(attempt_position);
    let page = bounded(timeout, "webhook attempts read", store.endpoint_attempts(account_id, &endpoint, after, paging.limit)).await?;
    let bodies = page.attempts.iter().map(|attempt| render(&attempt_view(attempt), "a webhook attempt")).collect::<Result<Vec<_>, _>>()?;
    // After the last row read, which passed-over attempts may lie beyond the last listed.
    let next_cursor = match (page.has_more, &page.last_read) {
        (true, Some((at, id))) => Some(state.inner.cursors.issue(&paging.binding, &[Val::Int(*at), Val::text(id)])),
        _ => None,
    };
    Ok(list_of(&bodies, Some((next_cursor.is_some(), next_cursor))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(enabled: bool, version: u64) -> EndpointRecord {
        let at = Timestamp::parse("2026-11-20T09:00:00Z").unwrap();
        EndpointRecord {
            id: "we_1".into(),
            url: "https://example.com/hook".into(),
            description: None,
            types: vec![],
            enabled,
            version,
            created_version: 1,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn an_endpoints_status_says_who_stopped_it_and_why() {
        let at = Some(Timestamp::parse("2026-11-21T09:00:00Z").unwrap());
        let fine = EndpointState::default();
        let failing = EndpointState { failing_since: at, ..EndpointState::default() };
        let disabled = EndpointState { failing_since: at, disabled_version: Some(3), disabled_at: at, ..EndpointState::default() };
        assert_eq!(endpoint_status(&endpoint(true, 3), &fine), "enabled");
        assert_eq!(endpoint_status(&endpoint(true, 3), &failing), "failing");
        assert_eq!(endpoint_status(&endpoint(true, 3), &disabled), "disabled_after_failures");
        // A newer upsert (version 4) enables it again.
        assert_eq!(endpoint_status(&endpoint(true, 4), &disabled), "failing");
        assert_eq!(endpoint_status(&endpoint(false, 3), &disabled), "disabled_by_account");
        let view = serde_json::to_value(endpoint_view(&endpoint(true, 4), &disabled)).unwrap();
        assert_eq!(view["state"]["disabled_at"], serde_json::Value::Null, "a disabled_at of an older version is not shown");
    }

    #[test]
    fn cursor_keys_read_back_only_in_their_shape() {
        assert_eq!(feed_position(&[Val::Int(7)]), Some(7));
        assert_eq!(feed_position(&[Val::text("7")]), None);
        assert_eq!(attempt_position(&[Val::Int(7), Val::text("att_1")]), Some((7, "att_1")));
        assert_eq!(attempt_position(&[Val::Int(7)]), None);
    }
}
