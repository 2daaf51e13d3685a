//! Meetings, transcripts and action items: `meeting.upserted`, `meeting.deleted`,
//! `meeting.transcript_set`, `action_item.upserted` and `action_item.deleted`. Rule 1
//! per entity, with the transcript an entity of its own (its versions are compared only
//! with the last transcript applied and with the meeting's delete); rule 2 across the
//! two: a meeting delete at version v takes the transcript at or below v with it, also
//! one that arrives after the delete, and even a delete that is stale for the meeting
//! itself still shadows such a transcript.

use recap_schemas::{ActionItemDeleted, ActionItemUpserted, MeetingDeleted, MeetingTranscriptSet, MeetingUpserted};

use crate::driver::StoreError;

use super::announce::digest;
use super::batch::{Batch, Stamp};
use super::entities::{EntityKind, Revision};
use super::rows::{action_item_rows, meeting_rows, transcript_rows, RowWrite};
use super::Applied;

/// The digest a transcript is told by: of every row it writes, the words' chunks with
/// the text and segments, so a replacement that changes only its word timings or tracks
/// is told too, and the same transcript again is not. Each body is JSON on one line, so
/// joined by newlines they cannot run into one another; a transcript without words
/// keeps the digest of its one row. Also the digest's earlier form, of the first row
/// only, when it differs: a transcript told under it is not told again for being
/// written once more.
fn transcript_digest(rows: &[RowWrite]) -> (String, Option<String>) {
    let earlier_form = (rows.len() > 1).then(|| digest(&rows[0].body));
    (digest(&rows.iter().map(|row| row.body.as_str()).collect::<Vec<_>>().join("\n")), earlier_form)
}

impl Batch {
    pub(super) async fn meeting_upserted(&mut self, event: &MeetingUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let meeting_id: &str = &event.meeting.id;
        let Some(mut state) = self.newer(EntityKind::Meeting, meeting_id, version).await? else { return Ok(Applied::Stale) };
        self.announce_meeting(&event.account_id, &event.meeting, &mut state, stamp).await?;
        self.revise(EntityKind::Meeting, meeting_id, state, version, Revision::Present(meeting_rows(&event.account_id, &event.meeting)), stamp);
        Ok(Applied::Applied)
    }

    pub(super) async fn meeting_deleted(&mut self, event: &MeetingDeleted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let meeting_id: &str = &event.meeting_id;
        let Some(mut state) = self.newer(EntityKind::Meeting, meeting_id, version).await? else {
            return self.stale_meeting_delete(meeting_id, version, stamp).await;
        };
        state.last_delete = version;
        self.announce_meeting_deleted(&event.account_id, meeting_id, &mut state);
        state.data = None;
        self.revise(EntityKind::Meeting, meeting_id, state, version, Revision::Deleted, stamp);
        self.shadow_transcript(meeting_id, version, stamp, true).await?;
        Ok(Applied::Applied)
    }

    pub(super) async fn transcript_set(&mut self, event: &MeetingTranscriptSet, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let meeting_id: &str = &event.meeting_id;
        let Some(state) = self.newer(EntityKind::Transcript, meeting_id, version).await? else { return Ok(Applied::Stale) };
        let meeting = self.entity(EntityKind::Meeting, meeting_id).await?.unwrap_or_default();
        if version <= meeting.last_delete {
            return Ok(Applied::Stale);
        }
        let rows = transcript_rows(&event.account_id, meeting_id, &event.transcript);
        let (applied, earlier_form) = transcript_digest(&rows);
        let mut state = state;
        self.announce_transcript(&event.account_id, meeting_id, &mut state, applied, earlier_form).await?;
        self.revise(EntityKind::Transcript, meeting_id, state, version, Revision::Present(rows), stamp);
        Ok(Applied::Applied)
    }

    pub(super) async fn action_item_upserted(&mut self, event: &ActionItemUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let item_id: &str = &event.item.id;
        let Some(mut state) = self.newer(EntityKind::ActionItem, item_id, version).await? else { return Ok(Applied::Stale) };
        self.announce_standalone_item(&event.account_id, item_id, Some(&event.item), &mut state);
        self.revise(EntityKind::ActionItem, item_id, state, version, Revision::Present(action_item_rows(&event.account_id, &event.item, None)), stamp);
        Ok(Applied::Applied)
    }

    pub(super) async fn action_item_deleted(&mut self, event: &ActionItemDeleted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let item_id: &str = &event.item_id;
        let Some(mut state) = self.newer(EntityKind::ActionItem, item_id, version).await? else { return Ok(Applied::Stale) };
        self.announce_standalone_item(&event.account_id, item_id, None, &mut state);
        self.revise(EntityKind::ActionItem, item_id, state, version, Revision::Deleted, stamp);
        Ok(Applied::Applied)
    }

    /// A meeting.deleted at or below the meeting's version changes nothing of the
    /// meeting, but a delete still shadows what is at or below it ("also one that arrives
    /// after the delete"): a transcript at or below it goes, and later ones at or below
    /// it are stale, as in version order.
    async fn stale_meeting_delete(&mut self, meeting_id: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut meeting) = self.entity(EntityKind::Meeting, meeting_id).await? else { return Ok(Applied::Stale) };
        if version <= meeting.last_delete {
            return Ok(Applied::Stale);
        }
        meeting.last_delete = version;
        self.save_entity(EntityKind::Meeting, meeting_id, meeting, stamp);
        self.shadow_transcript(meeting_id, version, stamp, false).await?;
        Ok(Applied::Applied)
    }

    /// A meeting delete at `version` takes the transcript with it unless the transcript
    /// is newer than the delete. One that stays, when the delete took the meeting
    /// (`meeting_gone`, told as meeting.deleted), is ready anew once the meeting is back,
    /// as it would be had the delete come before it.
    async fn shadow_transcript(&mut self, meeting_id: &str, version: u64, stamp: Stamp, meeting_gone: bool) -> Result<(), StoreError> {
        if let Some(mut transcript) = self.entity(EntityKind::Transcript, meeting_id).await? {
            if transcript.v <= version && !transcript.rows.is_empty() {
                transcript.rows = self.replace_rows(&transcript.rows, Vec::new(), stamp);
                // Gone with the meeting: a transcript applied later is announced anew.
                transcript.seen.clear();
                transcript.data = None;
                self.save_entity(EntityKind::Transcript, meeting_id, transcript, stamp);
            } else if meeting_gone && !transcript.seen.is_empty() {
                transcript.seen.clear();
                self.save_entity(EntityKind::Transcript, meeting_id, transcript, stamp);
            }
        }
        Ok(())
    }
}
