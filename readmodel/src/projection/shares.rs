//! Shares and their visibility: `note.shared` and `note.unshared`, and the fan-out that
//! team events trigger. Visibility is decided at write time: a share is materialised into
//! the partitions of every account that may see it ("shared with a team: visible to the
//! team's current members", "shared directly: visible to `recipient_account_ids`", "the
//! owner never sees their own share") and withdrawn when that changes. Rule 1 per share,
//! with a clock of the share's own so that its rows, written by events of two stream
//! keys, still go newest-last.

use std::collections::BTreeSet;

use recap_schemas::{NoteShared, NoteUnshared, Share};

use crate::driver::StoreError;
use crate::table::Val;
use crate::tables::TEAM_SHARES;

use super::batch::{Batch, Stamp};
use super::entities::{EntityKind, EntityState, Revision};
use super::rows::{share_record_row, share_rows, words_of_share, RowWrite};
use super::Applied;

/// The share a share entity holds, when it is published.
fn published(state: &EntityState) -> Option<Share> {
    if state.deleted {
        return None;
    }
    state.data.as_deref().and_then(|data| serde_json::from_str(data.get()).ok())
}

impl Batch {
    pub(super) async fn note_shared(&mut self, event: &NoteShared, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let share = &event.share;
        let share_id: &str = &share.id;
        let Some(mut state) = self.newer(EntityKind::Share, share_id, version).await? else { return Ok(Applied::Stale) };
        let stamp = Self::share_stamp(&mut state, stamp);
        let audience = self.audience(share).await?;
        if let Some(previous) = published(&state) {
            self.withdraw_superseded(&previous, share, &audience, stamp).await?;
        }
        for account in &audience {
            self.grant(account, share, stamp);
        }
        if let Some(team) = &share.team {
            self.put(RowWrite { table: &TEAM_SHARES, partition: vec![Val::text(&team.id)], clustering: vec![Val::text(share_id)], body: String::new() }, stamp);
        }
        state.data = serde_json::value::to_raw_value(share).ok();
        self.revise(EntityKind::Share, share_id, state, version, Revision::Present(vec![share_record_row(share)]), stamp);
        self.announce_share(share_id, Some(share), stamp).await?;
        Ok(Applied::Applied)
    }

    /// Withdraws what `share` no longer keeps of `previous`, its published version: its
    /// rows from whoever no longer sees it, or from everybody when its published time
    /// or words changed (their keys hold them), and its entry in a team it left.
    async fn withdraw_superseded(&mut self, previous: &Share, share: &Share, audience: &BTreeSet<String>, stamp: Stamp) -> Result<(), StoreError> {
        let before = self.audience(previous).await?;
        let same_keys = previous.published_at == share.published_at && words_of_share(previous) == words_of_share(share);
        for account in &before {
            if !(same_keys && audience.contains(account)) {
                self.withdraw(account, previous, stamp);
            }
        }
        if previous.team.as_ref().map(|team| &team.id) != share.team.as_ref().map(|team| &team.id) {
            if let Some(team) = &previous.team {
                self.delete(&TEAM_SHARES, vec![Val::text(&team.id)], vec![Val::text(&share.id)], stamp);
            }
        }
        Ok(())
    }

    pub(super) async fn note_unshared(&mut self, event: &NoteUnshared, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let share_id: &str = &event.share_id;
        let Some(mut state) = self.newer(EntityKind::Share, share_id, version).await? else { return Ok(Applied::Stale) };
        let stamp = Self::share_stamp(&mut state, stamp);
        if let Some(previous) = published(&state) {
            for account in self.audience(&previous).await? {
                self.withdraw(&account, &previous, stamp);
            }
            if let Some(team) = &previous.team {
                self.delete(&TEAM_SHARES, vec![Val::text(&team.id)], vec![Val::text(share_id)], stamp);
            }
        }
        state.data = None;
        self.revise(EntityKind::Share, share_id, state, version, Revision::Deleted, stamp);
        self.announce_share(share_id, None, stamp).await?;
        Ok(Applied::Applied)
    }

    /// Who sees the share, never the owner: "Shared with a team: `team` set, visible to
    /// the team's current members" (while the team exists and can collaborate);
    /// "Shared directly: `team` null, visible to `recipient_account_ids`".
    pub(super) async fn audience(&mut self, share: &Share) -> Result<BTreeSet<String>, StoreError> {
        let mut audience: BTreeSet<String> = match &share.team {
            Some(team) if self.sharing_team(&team.id).await? => self.members(&team.id).await?.into_iter().map(|(account, _)| account).collect(),
            Some(_) => BTreeSet::new(),
            None => share.recipient_account_ids.iter().map(|account| account.to_string()).collect(),
        };
        audience.remove(&*share.owner_account_id);
        Ok(audience)
    }

    /// Whether the team's members read its shares: it exists, is not deleted, and can
    /// collaborate ("when false, the team has nothing shared to read").
    async fn sharing_team(&mut self, team_id: &str) -> Result<bool, StoreError> {
        Ok(self.active_team(team_id).await?.is_some_and(|team| team.can_collaborate))
    }

    /// The position at which this event writes the share's rows (who sees it, its
    /// team's index, its entity state): the event's own, or just past the latest one
    /// the share's rows were written at, whichever is later.
    ///
    /// Positions are Kafka offsets, ordered only within a partition, and a share's
    /// events travel under two keys when it moves between a direct share and a team (or
    /// between teams). Its rows are written by its own events and by its team's events;
    /// with a clock of its own that only grows, each write wins over the ones applied
    /// before it, whichever partition they came from. In one log (the embedded edition)
    /// this is the event's position, as before.
    pub(super) fn share_stamp(state: &mut EntityState, stamp: Stamp) -> Stamp {
        let position = stamp.position.max(state.clock.saturating_add(1));
        state.clock = position;
        Stamp { position, ..stamp }
    }

    async fn team_share_ids(&self, team_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.scan_all(&TEAM_SHARES, &[Val::text(team_id)]).await?;
        Ok(rows.into_iter().filter_map(|(clustering, _)| Some(clustering.first()?.as_text()?.to_string())).collect())
    }

    /// The team's published shares, each with the stamp at which this team event writes
    /// its rows ([`Self::share_stamp`]; the share's clock moves on in its saved state).
    /// A `team_shares` row that a newer version of its share moved elsewhere is passed
    /// over.
    pub(super) async fn team_shares(&mut self, team_id: &str, stamp: Stamp) -> Result<Vec<(Share, Stamp)>, StoreError> {
        let mut shares = Vec::new();
        for share_id in self.team_share_ids(team_id).await? {
            let Some(mut state) = self.entity(EntityKind::Share, &share_id).await? else { continue };
            let Some(share) = published(&state).filter(|share| share.team.as_ref().is_some_and(|team| *team.id == *team_id)) else { continue };
            let share_stamp = Self::share_stamp(&mut state, stamp);
            self.save_entity(EntityKind::Share, &share_id, state, share_stamp);
            shares.push((share, share_stamp));
        }
        Ok(shares)
    }

    /// Shows the team's shares to its members, each but to its owner.
    pub(super) async fn grant_team_shares(&mut self, team_id: &str, stamp: Stamp) -> Result<(), StoreError> {
        let members = self.members(team_id).await?;
        for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
            for (account, _) in &members {
                if **account != *share.owner_account_id {
                    self.grant(account, &share, share_stamp);
                }
            }
            self.announce_share(&share.id, Some(&share), share_stamp).await?;
        }
        Ok(())
    }

    /// Withdraws the team's shares from its members.
    pub(super) async fn withdraw_team_shares(&mut self, team_id: &str, stamp: Stamp) -> Result<(), StoreError> {
        let members = self.members(team_id).await?;
        for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
            for (account, _) in &members {
                self.withdraw(account, &share, share_stamp);
            }
            self.announce_share(&share.id, Some(&share), share_stamp).await?;
        }
        Ok(())
    }

    pub(super) fn grant(&mut self, account_id: &str, share: &Share, stamp: Stamp) {
        for row in share_rows(account_id, share) {
            self.put(row, stamp);
        }
    }

    pub(super) fn withdraw(&mut self, account_id: &str, share: &Share, stamp: Stamp) {
        for row in share_rows(account_id, share) {
            self.delete(row.table, row.partition, row.clustering, stamp);
        }
    }
}
