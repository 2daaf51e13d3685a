//! The queries: one function per endpoint or tool, each reading the partition shaped
//! for it, so a page costs O(limit) rows whatever the account's size. Bodies come back
//! as stored JSON, ready to send.

use std::ops::Bound;
use std::sync::Arc;

use recap_schemas::{ActionItemStatus, Plan, Timestamp};
use serde::Deserialize;

use crate::driver::{BodiesPage, Driver, Row, ScanRange, StoreError};
use crate::table::{Table, Val};
use crate::tables::*;
use crate::views::{ShareRecord, TeamRecord};

/// A page of rows in the endpoint's order. `has_more` is known by reading one row more
/// than asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub rows: Vec<Row>,
    pub has_more: bool,
}

impl Page {
    fn from_rows(mut rows: Vec<Row>, limit: usize) -> Page {
        let has_more = rows.len() > limit;
        rows.truncate(limit);
        Page { rows, has_more }
    }

    /// The clustering key of the last row: what a cursor resumes after.
    pub fn last_key(&self) -> Option<&[Val]> {
        self.rows.last().map(|row| row.clustering.as_slice())
    }
}

/// A personal access token as the auth check sees it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct TokenRecord {
    pub account_id: String,
    pub token_id: String,
    pub revoked: bool,
}

/// An account as the plan check sees it. `plan` None: no active plan.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct AccountRecord {
    pub plan: Option<Plan>,
}

/// A stored transcript: REST's transcript object (text and segments, raw JSON) and the
/// number of word timings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranscriptRecord {
    /// `{"text": ..., "segments": [...]}`
    pub body: String,
    pub word_count: usize,
}

/// Filters of GET /meetings.
#[derive(Clone, Debug, Default)]
pub struct MeetingFilter {
    /// Created at or after (inclusive).
    pub since: Option<Timestamp>,
    /// Created strictly before.
    pub until: Option<Timestamp>,
}

/// Filters of GET /action-items. An empty `statuses` means all three.
#[derive(Clone, Debug, Default)]
pub struct ActionItemFilter {
    pub statuses: Vec<ActionItemStatus>,
    pub assignee_human_id: Option<String>,
    pub meeting_id: Option<String>,
}

/// The read side of the read model.
#[derive(Clone)]
pub struct ReadModel {
    driver: Arc<dyn Driver>,
}

fn corrupt(table: &Table, error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{}: {error}", table.name))
}

impl ReadModel {
    pub fn new(driver: Arc<dyn Driver>) -> ReadModel {
        ReadModel { driver }
    }

    pub fn driver(&self) -> &Arc<dyn Driver> {
        &self.driver
    }

    /// The MCP server's OAuth state, in the same store.
    pub fn oauth(&self) -> crate::oauth::OAuthStore {
        crate::oauth::OAuthStore::new(self.driver.clone())
    }

    /// The webhooks' records (endpoints, feed, deliveries), messages kept for `retention`.
    pub fn webhooks(&self, retention: std::time::Duration) -> crate::webhooks::WebhookStore {
        crate::webhooks::WebhookStore::new(self.driver.clone(), retention)
    }

    pub async fn ping(&self) -> Result<(), StoreError> {
        self.driver.ping().await
    }

    async fn get_body(&self, table: &'static Table, partition: &[Val]) -> Result<Option<String>, StoreError> {
        self.driver.get_body(table, partition, &[]).await
    }

    // ---- auth ------------------------------------------------------------------

    /// The version of everything [`ReadModel::token_by_hash`] and [`ReadModel::account`]
    /// read, when the driver sees every write ([`Driver::change_count`]): it changes
    /// whenever a token or account row is written, so a lookup made after reading it
    /// stays current while it is unchanged. None when the store is shared.
    pub fn token_lookup_version(&self) -> Option<u64> {
        Some(self.driver.change_count(&TOKENS_BY_HASH)? + self.driver.change_count(&ACCOUNTS)?)
    }

    /// The token whose lowercase hex SHA-256 is `token_sha256`.
    pub async fn token_by_hash(&self, token_sha256: &str) -> Result<Option<TokenRecord>, StoreError> {
        match self.get_body(&TOKENS_BY_HASH, &[Val::text(token_sha256)]).await? {
            Some(body) => serde_json::from_str(&body).map(Some).map_err(|error| corrupt(&TOKENS_BY_HASH, error)),
            None => Ok(None),
        }
    }

    pub async fn account(&self, account_id: &str) -> Result<Option<AccountRecord>, StoreError> {
        match self.get_body(&ACCOUNTS, &[Val::text(account_id)]).await? {
            Some(body) => serde_json::from_str(&body).map(Some).map_err(|error| corrupt(&ACCOUNTS, error)),
            None => Ok(None),
        }
    }

    // ---- meetings --------------------------------------------------------------

    /// GET /meetings: newest first, after the cursor key, within since/until.
    pub async fn meetings(&self, account_id: &str, filter: &MeetingFilter, after: Option<&[Val]>, limit: usize) -> Result<Page, StoreError> {
        let rows = self.driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &Self::meetings_range(filter, after), limit + 1).await?;
        Ok(Page::from_rows(rows, limit))
    }

    /// [`ReadModel::meetings`] written straight into a response: the page's bodies
    /// appended to `out`, comma-separated (see [`Driver::scan_bodies`]).
    pub async fn meetings_into(
        &self,
        account_id: &str,
        filter: &MeetingFilter,
        after: Option<&[Val]>,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<BodiesPage, StoreError> {
        self.driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &Self::meetings_range(filter, after), 0, limit, out).await
    }

    /// The newest meetings past the first `offset`, written into `out` as
    /// [`ReadModel::meetings_into`] does (list_meetings without a query).
    pub async fn recent_meetings_into(&self, account_id: &str, offset: usize, limit: usize, out: &mut Vec<u8>) -> Result<BodiesPage, StoreError> {
        self.driver.scan_bodies(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &ScanRange::all(), offset, limit, out).await
    }

    fn meetings_range(filter: &MeetingFilter, after: Option<&[Val]>) -> ScanRange {
        // Clustering order is created_at descending: `until` (exclusive) is where a scan
        // starts, `since` (inclusive) where it stops; a cursor starts later still.
        // A cursor is bound to the filters it was issued with, so it always lies inside
        // the range and simply replaces the start.
        let start = match (after, filter.until) {
            (Some(after), _) => Bound::Excluded(after.to_vec()),
            (None, Some(until)) => Bound::Included(vec![Val::Int(until.micros() - 1)]),
            (None, None) => Bound::Unbounded,
        };
        let end = match filter.since {
            Some(since) => Bound::Included(vec![Val::Int(since.micros())]),
            None => Bound::Unbounded,
        };
        ScanRange { start, end }
    }

    /// GET /meetings/{id} and get_meeting: the detail body, None when the meeting is not
    /// the account's (or deleted).
    pub async fn meeting_detail(&self, account_id: &str, meeting_id: &str) -> Result<Option<String>, StoreError> {
        self.get_body(&MEETING_DETAILS, &[Val::text(account_id), Val::text(meeting_id)]).await
    }

    /// The transcript of a meeting (check the meeting first: a transcript newer than a
    /// meeting's delete is kept for when the meeting comes back).
    pub async fn meeting_transcript(&self, account_id: &str, meeting_id: &str) -> Result<Option<TranscriptRecord>, StoreError> {
        let Some(body) = self.get_body(&MEETING_TRANSCRIPTS, &[Val::text(account_id), Val::text(meeting_id)]).await? else {
            return Ok(None);
        };
        #[derive(Deserialize)]
        struct Stored<'a> {
            #[serde(borrow)]
            text: &'a serde_json::value::RawValue,
            #[serde(borrow)]
            segments: &'a serde_json::value::RawValue,
            word_count: usize,
        }
        let stored: Stored = serde_json::from_str(&body).map_err(|error| corrupt(&MEETING_TRANSCRIPTS, error))?;
        Ok(Some(TranscriptRecord { body: format!("{{\"text\":{},\"segments\":{}}}", stored.text.get(), stored.segments.get()), word_count: stored.word_count }))
    }

    /// Word timings `offset..offset+limit` (limit ≤ WORDS_PER_CHUNK), as JSON values.
    pub async fn transcript_words(&self, account_id: &str, meeting_id: &str, offset: usize, limit: usize) -> Result<Vec<serde_json::Value>, StoreError> {
        let partition = [Val::text(account_id), Val::text(meeting_id)];
        let first = (offset / WORDS_PER_CHUNK) as i64;
        let range = ScanRange { start: Bound::Included(vec![Val::Int(first)]), end: Bound::Unbounded };
        let chunks = self.driver.scan(&TRANSCRIPT_WORDS, &partition, &range, limit.div_ceil(WORDS_PER_CHUNK) + 1).await?;
        let mut words = Vec::with_capacity(limit);
        let mut index = first as usize * WORDS_PER_CHUNK;
        for chunk in chunks {
            let chunk: Vec<serde_json::Value> = serde_json::from_str(&chunk.body).map_err(|error| corrupt(&TRANSCRIPT_WORDS, error))?;
            for word in chunk {
                if index >= offset && words.len() < limit {
                    words.push(word);
                }
                index += 1;
            }
        }
        Ok(words)
    }

    /// get_recurring_meeting_history: the series, newest first, and its size.
    pub async fn series_meetings(&self, account_id: &str, series_id: &str, offset: usize, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        let all = self.driver.scan(&MEETINGS_BY_SERIES, &[Val::text(account_id), Val::text(series_id)], &ScanRange::all(), usize::MAX).await?;
        let total = all.len();
        Ok((all.into_iter().skip(offset).take(limit).collect(), total))
    }

    /// list_meetings with a query: newest first, only the meetings whose title or
    /// identifier contains `query` (case-insensitive; without a query, see
    /// [`ReadModel::recent_meetings_into`]). Returns the page and whether more follow.
    /// A substring is not a word, so no posting list answers it: this walks the
    /// account's meetings newest first and stops as soon as the page is full.
    pub async fn meetings_matching(&self, account_id: &str, query: &str, offset: usize, limit: usize) -> Result<Page, StoreError> {
        let needle = query.to_lowercase();
        #[derive(Deserialize)]
        struct Entry<'a> {
            id: &'a str,
            title: std::borrow::Cow<'a, str>,
        }
        let mut matched = Vec::new();
        let mut after: Option<Vec<Val>> = None;
        loop {
            let batch = self.driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &ScanRange::after(after.as_deref()), 512).await?;
            let exhausted = batch.len() < 512;
            after = batch.last().map(|row| row.clustering.clone());
            for row in batch {
                let entry: Entry = serde_json::from_str(&row.body).map_err(|error| corrupt(&MEETINGS_BY_ACCOUNT, error))?;
                if entry.title.to_lowercase().contains(&needle) || entry.id.to_lowercase().contains(&needle) {
                    matched.push(row);
                    if matched.len() > offset + limit {
                        let rows: Vec<Row> = matched.into_iter().skip(offset).collect();
                        return Ok(Page::from_rows(rows, limit));
                    }
                }
            }
            if exhausted {
                let rows: Vec<Row> = matched.into_iter().skip(offset).collect();
                return Ok(Page::from_rows(rows, limit));
            }
        }
    }

    /// search_meetings: meetings whose title or summaries contain every word, newest
    /// first, and the number of matches. Walks the posting list of the first (longest)
    /// word and probes the others: never the account's whole history.
    pub async fn search_meetings(&self, account_id: &str, words: &[String], offset: usize, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        if let [word] = words {
            // One word: its posting list is the answer, read once for the page's keys and
            // counted for the total.
            let partition = [Val::text(account_id), Val::text(word)];
            let (postings, total) = self.driver.scan_counted(&MEETING_WORDS, &partition, &ScanRange::all(), offset.saturating_add(limit)).await?;
            let mut rows = Vec::new();
            for posting in postings.into_iter().skip(offset) {
                if let Some(row) = self.driver.get(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &posting.clustering).await? {
                    rows.push(row);
                }
            }
            return Ok((rows, total));
        }
        let keys = self.intersect(&MEETING_WORDS, account_id, words, None, usize::MAX).await?;
        let total = keys.len();
        let mut rows = Vec::new();
        for key in keys.into_iter().skip(offset).take(limit) {
            if let Some(row) = self.driver.get(&MEETINGS_BY_ACCOUNT, &[Val::text(account_id)], &key).await? {
                rows.push(row);
            }
        }
        Ok((rows, total))
    }

    /// The clustering keys (newest first) present in the posting list of every word,
    /// after `after`, at most `limit` of them.
    async fn intersect(
        &self,
        table: &'static Table,
        account_id: &str,
        words: &[String],
        after: Option<&[Val]>,
        limit: usize,
    ) -> Result<Vec<Vec<Val>>, StoreError> {
        let Some((driver_word, others)) = words.split_first() else { return Ok(Vec::new()) };
        let partition = [Val::text(account_id), Val::text(driver_word)];
        let mut found = Vec::new();
        let mut cursor: Option<Vec<Val>> = after.map(<[Val]>::to_vec);
        loop {
            let batch = self.driver.scan(table, &partition, &ScanRange::after(cursor.as_deref()), 1024).await?;
            let exhausted = batch.len() < 1024;
            cursor = batch.last().map(|row| row.clustering.clone());
            'candidates: for row in batch {
                for word in others {
                    if self.driver.get(table, &[Val::text(account_id), Val::text(word)], &row.clustering).await?.is_none() {
                        continue 'candidates;
                    }
                }
                found.push(row.clustering);
                if found.len() >= limit {
                    return Ok(found);
                }
            }
            if exhausted {
                return Ok(found);
            }
        }
    }

    // ---- action items ----------------------------------------------------------

    /// GET /action-items: newest first across the requested statuses (one partition
    /// each, merged), after the cursor key.
    pub async fn action_items(&self, account_id: &str, filter: &ActionItemFilter, after: Option<&[Val]>, limit: usize) -> Result<Page, StoreError> {
        let statuses: Vec<ActionItemStatus> = if filter.statuses.is_empty() { ActionItemStatus::ALL.to_vec() } else { filter.statuses.clone() };
        let account = Val::text(account_id);
        let (table, prefix): (&'static Table, Vec<Val>) = match (&filter.meeting_id, &filter.assignee_human_id) {
            (Some(meeting_id), _) => (&ACTION_ITEMS_BY_MEETING, vec![account, Val::text(meeting_id)]),
            (None, Some(assignee)) => (&ACTION_ITEMS_BY_ASSIGNEE, vec![account, Val::text(assignee)]),
            (None, None) => (&ACTION_ITEMS_BY_STATUS, vec![account]),
        };
        // With both meeting and assignee, the meeting's partitions are read whole (a
        // meeting has few items) and filtered.
        let both = filter.meeting_id.is_some() && filter.assignee_human_id.is_some();
        let mut merged: Vec<Row> = Vec::new();
        for status in statuses {
            let mut partition = prefix.clone();
            partition.push(Val::text(status.as_str()));
            let want = if both { usize::MAX } else { limit + 1 };
            let mut rows = self.driver.scan(table, &partition, &ScanRange::after(after), want).await?;
            if both {
                let assignee = filter.assignee_human_id.as_deref();
                rows.retain(|row| assignee_of(&row.body).as_deref() == assignee);
            }
            merged.extend(rows);
        }
        merged.sort_by(|a, b| table.cmp_clustering(&a.clustering, &b.clustering));
        merged.truncate(limit + 1);
        Ok(Page::from_rows(merged, limit))
    }

    /// list_pending_action_items: todo and in_progress, newest first, after `offset`.
    pub async fn pending_action_items(&self, account_id: &str, offset: usize, limit: usize) -> Result<Page, StoreError> {
        let filter = ActionItemFilter { statuses: vec![ActionItemStatus::Todo, ActionItemStatus::InProgress], ..ActionItemFilter::default() };
        let page = self.action_items(account_id, &filter, None, offset + limit).await?;
        let has_more = page.has_more || page.rows.len() > offset + limit;
        let rows: Vec<Row> = page.rows.into_iter().skip(offset).take(limit).collect();
        Ok(Page { rows, has_more })
    }

    // ---- sharing and teams -----------------------------------------------------

    /// GET /shared-notes: what others share with the account, newest first; with
    /// words, only notes whose title or text contain every one.
    pub async fn shared_notes(&self, account_id: &str, words: &[String], after: Option<&[Val]>, limit: usize) -> Result<Page, StoreError> {
        if words.is_empty() {
            let rows = self.driver.scan(&SHARED_NOTES_BY_ACCOUNT, &[Val::text(account_id)], &ScanRange::after(after), limit + 1).await?;
            return Ok(Page::from_rows(rows, limit));
        }
        let keys = self.intersect(&SHARED_NOTE_WORDS, account_id, words, after, limit + 1).await?;
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            if let Some(row) = self.driver.get(&SHARED_NOTES_BY_ACCOUNT, &[Val::text(account_id)], &key).await? {
                rows.push(row);
            }
        }
        Ok(Page::from_rows(rows, limit))
    }

    /// GET /shared-notes/{id} and get_shared_note: the share, when shared with the account.
    pub async fn shared_note(&self, account_id: &str, share_id: &str) -> Result<Option<ShareRecord>, StoreError> {
        if self.get_body(&SHARED_NOTE_ACCESS, &[Val::text(account_id), Val::text(share_id)]).await?.is_none() {
            return Ok(None);
        }
        match self.get_body(&SHARES, &[Val::text(share_id)]).await? {
            Some(body) => serde_json::from_str(&body).map(Some).map_err(|error| corrupt(&SHARES, error)),
            None => Ok(None),
        }
    }

    /// GET /teams: the account's teams, by name.
    pub async fn teams(&self, account_id: &str) -> Result<Vec<TeamRecord>, StoreError> {
        let rows = self.driver.scan(&TEAMS_BY_ACCOUNT, &[Val::text(account_id)], &ScanRange::all(), usize::MAX).await?;
        let mut teams = rows
            .iter()
            .map(|row| serde_json::from_str::<TeamRecord>(&row.body).map_err(|error| corrupt(&TEAMS_BY_ACCOUNT, error)))
            .collect::<Result<Vec<_>, _>>()?;
        teams.sort_by(|a, b| a.team.name.cmp(&b.team.name).then_with(|| a.team.id.cmp(&b.team.id)));
        Ok(teams)
    }

    /// The account's membership of one team; None when not a member.
    pub async fn team_membership(&self, account_id: &str, team_id: &str) -> Result<Option<TeamRecord>, StoreError> {
        match self.driver.get(&TEAMS_BY_ACCOUNT, &[Val::text(account_id)], &[Val::text(team_id)]).await? {
            Some(row) => serde_json::from_str(&row.body).map(Some).map_err(|error| corrupt(&TEAMS_BY_ACCOUNT, error)),
            None => Ok(None),
        }
    }

    /// GET /teams/{id}/action-items: newest first, optionally one status.
    pub async fn team_action_items(&self, team_id: &str, status: Option<ActionItemStatus>, limit: usize) -> Result<Vec<Row>, StoreError> {
        let statuses: Vec<ActionItemStatus> = match status {
            Some(status) => vec![status],
            None => ActionItemStatus::ALL.to_vec(),
        };
        let mut merged = Vec::new();
        for status in statuses {
            merged.extend(self.driver.scan(&TEAM_ACTION_ITEMS, &[Val::text(team_id), Val::text(status.as_str())], &ScanRange::all(), limit).await?);
        }
        merged.sort_by(|a, b| TEAM_ACTION_ITEMS.cmp_clustering(&a.clustering, &b.clustering));
        merged.truncate(limit);
        Ok(merged)
    }
}

fn assignee_of(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Item {
        assignee_human_id: Option<String>,
    }
    serde_json::from_str::<Item>(body).ok()?.assignee_human_id
}
