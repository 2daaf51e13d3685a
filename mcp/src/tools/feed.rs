//! list_recent_changes: the account's feed of changes (the events of `GET /v1/events`),
//! oldest first, paged by a cursor rather than an offset: the feed drops its oldest
//! changes as they pass the retention, so an offset would move under a reader, while the
//! position of the last change read stays put.
//!
//! The cursor is the feed position of the last change read, sealed as REST's cursors are
//! (`recap_access::cursor`) and bound to the tool and the account, not to `types`: the
//! position is the message log's, shared with other accounts, and must not show how
//! many messages others had between two of the caller's cursors. A position in decimal,
//! as issued before positions were sealed, is refused with the rest: read as given, it
//! would let a caller probe where its own changes sit in the log, one page of one at a
//! time, and learn the gaps between them all the same.

use recap_readmodel::messages::MessageKind;
use recap_readmodel::webhooks::DEFAULT_RETENTION;
use recap_readmodel::Val;

use recap_access::cursor::Cursors;

use super::inputs::ListRecentChangesArguments;
use super::json;
use super::ToolError;
use crate::state::McpState;

/// The kinds `types` names, sorted, without repeats; every kind when absent.
fn kinds(types: Option<&str>) -> Result<Vec<MessageKind>, ToolError> {
    let Some(types) = types else { return Ok(Vec::new()) };
    let mut kinds = Vec::new();
    for name in types.split(',') {
        let kind = MessageKind::parse(name.trim()).ok_or_else(|| {
            let known = MessageKind::ALL.iter().map(|kind| kind.as_str()).collect::<Vec<_>>().join(", ");
            let shown: String = name.chars().take(64).collect();
            ToolError::InvalidArgument(format!("types names an unknown type {shown:?}; the types are {known}"))
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    kinds.sort();
    Ok(kinds)
}

/// What a cursor of `account_id` is bound to.
fn binding(account_id: &str) -> String {
    format!("list_recent_changes|{account_id}")
}

fn position(cursors: &Cursors, account_id: &str, cursor: Option<&str>) -> Result<Option<i64>, ToolError> {
    let Some(cursor) = cursor else { return Ok(None) };
    match cursors.open(&binding(account_id), cursor).as_deref() {
        Some([Val::Int(seq)]) if *seq >= 0 => Ok(Some(*seq)),
        _ => Err(ToolError::InvalidArgument(
            "cursor must be a next_cursor list_recent_changes returned to this account; without one it reads from the oldest change kept".into(),
        )),
    }
}

pub async fn list_recent_changes(state: &McpState, account_id: &str, arguments: ListRecentChangesArguments<'_>) -> Result<String, ToolError> {
    let kinds = kinds(arguments.types.as_deref())?;
    let cursors = state.cursors();
    let after = position(cursors, account_id, arguments.cursor.as_deref())?;
    let limit = arguments.limit.get();
    let inner = &state.inner;
    // Reading does not depend on the retention: rows past it are never returned.
    let store = inner.readmodel.webhooks(DEFAULT_RETENTION);
    let page = inner.bounded(store.feed_page(account_id, after, limit, &kinds)).await?;
    let mut out = String::with_capacity(64 + page.messages.len() * 256);
    out.push('{');
    json::push_key(&mut out, "changes");
    out.push('[');
    for (index, (_, message)) in page.messages.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&message.to_json());
    }
    out.push(']');
    json::push_key(&mut out, "has_more");
    json::push_value(&mut out, &page.has_more);
    json::push_key(&mut out, "next_cursor");
    json::push_value(&mut out, &page.last_seq.or(after).map(|seq| cursors.issue(&binding(account_id), &[Val::Int(seq)])));
    out.push('}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_known_kinds_and_cursors_are_positions() {
        assert_eq!(kinds(None), Ok(vec![]));
        assert_eq!(kinds(Some("team.left, meeting.created,team.left")), Ok(vec![MessageKind::MeetingCreated, MessageKind::TeamLeft]));
        for bad in ["meeting.archived", "meeting.created,", ""] {
            assert!(matches!(kinds(Some(bad)), Err(ToolError::InvalidArgument(message)) if message.starts_with("types")), "{bad}");
        }
        let cursors = Cursors::new(b"secret");
        assert_eq!(position(&cursors, "acc_a", None), Ok(None));
        let sealed = cursors.issue(&binding("acc_a"), &[Val::Int(42)]);
        assert_eq!(position(&cursors, "acc_a", Some(&sealed)), Ok(Some(42)));
        assert!(!sealed.contains("42"), "{sealed}");
        assert!(position(&cursors, "acc_b", Some(&sealed)).is_err(), "another account's cursor");
        assert!(position(&Cursors::new(b"other"), "acc_a", Some(&sealed)).is_err(), "another secret's cursor");
        // A bare position, as issued before positions were sealed, is not a cursor.
        for bad in ["42", "0", "-1", "+4", "x", "4.0", "99999999999999999999", ""] {
            assert!(position(&cursors, "acc_a", Some(bad)).is_err(), "{bad}");
        }
    }
}
