//! Row builders: what each entity's snapshot becomes in the read model's tables, one
//! row per endpoint or tool that reads it, with the bodies the queries return as they
//! are. Pure functions of the event's data: which rows to keep, replace or delete (the
//! contract's rules 1 and 2) and at which timestamp is decided by the callers.

use std::collections::BTreeSet;

use recap_schemas::{ActionItem, Meeting, Plan, Share, TeamActionItem, Transcript, Word};
use serde::Serialize;

use crate::table::{Table, Val};
use crate::tables::*;
use crate::views::{self, render};
use crate::words::words;

/// The key of one row.
pub type RowKey = (u8, Vec<Val>, Vec<Val>);

/// A row to write.
pub struct RowWrite {
    pub table: &'static Table,
    pub partition: Vec<Val>,
    pub clustering: Vec<Val>,
    pub body: String,
}

impl RowWrite {
    pub(super) fn key(&self) -> RowKey {
        (self.table.id, self.partition.clone(), self.clustering.clone())
    }
}

/// The account's row: its plan, which authorises every request.
pub(super) fn account_row(account_id: &str, plan: &Option<Plan>) -> RowWrite {
    let body = serde_json::json!({ "plan": plan }).to_string();
    RowWrite { table: &ACCOUNTS, partition: vec![Val::text(account_id)], clustering: vec![], body }
}

/// The token's row under its hash, which a request's bearer token is looked up by.
pub(super) fn token_row(account_id: &str, token_id: &str, token_sha256: &str, revoked: bool) -> RowWrite {
    let body = serde_json::json!({ "account_id": account_id, "token_id": token_id, "revoked": revoked }).to_string();
    RowWrite { table: &TOKENS_BY_HASH, partition: vec![Val::text(token_sha256)], clustering: vec![], body }
}

/// Every row a meeting snapshot owns.
pub fn meeting_rows(account_id: &str, meeting: &Meeting) -> Vec<RowWrite> {
    let account = Val::text(account_id);
    let newest = vec![Val::Int(meeting.created_at.micros()), Val::text(&meeting.id)];
    let entry = render(&views::MeetingListEntry::of(meeting));
    let mut rows = vec![
        RowWrite { table: &MEETINGS_BY_ACCOUNT, partition: vec![account.clone()], clustering: newest.clone(), body: entry.clone() },
        RowWrite {
            table: &MEETING_DETAILS,
            partition: vec![account.clone(), Val::text(&meeting.id)],
            clustering: vec![],
            body: render(&views::MeetingDetail::of(meeting)),
        },
    ];
    if let Some(series_id) = &meeting.series_id {
        rows.push(RowWrite { table: &MEETINGS_BY_SERIES, partition: vec![account.clone(), Val::text(series_id)], clustering: newest.clone(), body: entry });
    }
    let mut searchable = words(&meeting.title);
    for summary in &meeting.summaries {
        searchable.extend(words(&summary.title));
        searchable.extend(words(&summary.text));
    }
    for word in searchable {
        rows.push(RowWrite { table: &MEETING_WORDS, partition: vec![account.clone(), Val::Text(word)], clustering: newest.clone(), body: String::new() });
    }
    for item in &meeting.action_items {
        rows.extend(action_item_rows(account_id, item, Some(meeting)));
    }
    rows
}

/// The list-form rows of one action item: by status, by assignee, by meeting.
pub fn action_item_rows(account_id: &str, item: &ActionItem, meeting: Option<&Meeting>) -> Vec<RowWrite> {
    let body = render(&views::ActionItemListEntry::of(item, meeting));
    let status = Val::text(item.status.as_str());
    let newest = vec![Val::Int(item.created_at.micros()), Val::text(&item.id)];
    let account = Val::text(account_id);
    let mut rows =
        vec![RowWrite { table: &ACTION_ITEMS_BY_STATUS, partition: vec![account.clone(), status.clone()], clustering: newest.clone(), body: body.clone() }];
    if let Some(assignee) = &item.assignee_human_id {
        rows.push(RowWrite {
            table: &ACTION_ITEMS_BY_ASSIGNEE,
            partition: vec![account.clone(), Val::text(assignee), status.clone()],
            clustering: newest.clone(),
            body: body.clone(),
        });
    }
    if let Some(meeting) = meeting {
        rows.push(RowWrite { table: &ACTION_ITEMS_BY_MEETING, partition: vec![account, Val::text(&meeting.id), status], clustering: newest, body });
    }
    rows
}

/// The transcript row (REST's transcript object plus the word count) and the word chunks.
pub fn transcript_rows(account_id: &str, meeting_id: &str, transcript: &Transcript) -> Vec<RowWrite> {
    let partition = vec![Val::text(account_id), Val::text(meeting_id)];
    let words: &[Word] = transcript.words.as_deref().unwrap_or_default();
    // Serialised straight from the event's types (no intermediate `Value` tree), in the
    // key order the stored rows have always had.
    #[derive(Serialize)]
    struct TranscriptBody<'a> {
        segments: &'a [recap_schemas::Segment],
        text: &'a str,
        word_count: usize,
    }
    let body = render(&TranscriptBody { segments: &transcript.segments, text: &transcript.text, word_count: words.len() });
    let mut rows = vec![RowWrite { table: &MEETING_TRANSCRIPTS, partition: partition.clone(), clustering: vec![], body }];
    for (index, chunk) in words.chunks(WORDS_PER_CHUNK).enumerate() {
        rows.push(RowWrite {
            table: &TRANSCRIPT_WORDS,
            partition: partition.clone(),
            clustering: vec![Val::Int(index as i64)],
            body: serde_json::to_string(chunk).unwrap_or_default(),
        });
    }
    rows
}

/// The team action item's row, in its team's list under its status.
pub(super) fn team_action_item_row(team_id: &str, item: &TeamActionItem) -> RowWrite {
    RowWrite {
        table: &TEAM_ACTION_ITEMS,
        partition: vec![Val::text(team_id), Val::text(item.status.as_str())],
        clustering: vec![Val::Int(item.created_at.micros()), Val::text(&item.id)],
        body: render(&views::TeamActionItemView::of(item)),
    }
}

/// The share's own record, whoever sees it.
pub(super) fn share_record_row(share: &Share) -> RowWrite {
    RowWrite { table: &SHARES, partition: vec![Val::text(&share.id)], clustering: vec![], body: render(&views::ShareRecord::of(share)) }
}

/// The words a share is found by.
pub(super) fn words_of_share(share: &Share) -> BTreeSet<String> {
    let mut found = words(&share.title);
    found.extend(words(&share.text));
    found
}

/// What one account's partitions hold of one share.
pub(super) fn share_rows(account_id: &str, share: &Share) -> Vec<RowWrite> {
    let account = Val::text(account_id);
    let newest = vec![Val::Int(share.published_at.micros()), Val::text(&share.id)];
    let mut rows = vec![
        RowWrite {
            table: &SHARED_NOTES_BY_ACCOUNT,
            partition: vec![account.clone()],
            clustering: newest.clone(),
            body: render(&views::SharedNoteListEntry::of(share)),
        },
        RowWrite {
            table: &SHARED_NOTE_ACCESS,
            partition: vec![account.clone(), Val::text(&share.id)],
            clustering: vec![],
            body: serde_json::json!({ "published_at_us": share.published_at.micros() }).to_string(),
        },
    ];
    for word in words_of_share(share) {
        rows.push(RowWrite { table: &SHARED_NOTE_WORDS, partition: vec![account.clone(), Val::Text(word)], clustering: newest.clone(), body: String::new() });
    }
    rows
}
