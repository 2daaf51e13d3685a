//! Teams, members and team action items: `team.upserted`, `team.deleted`,
//! `team_member.upserted`, `team_member.removed`, `team_action_item.upserted` and
//! `team_action_item.deleted`. Rule 1 per entity (a membership is an entity of its own);
//! rule 2 for a team delete: "the team, its memberships and its team action items are
//! gone, and its shares are visible to no one", while later member and item events are
//! still applied and nothing of the team shows until a newer `team.upserted`. What
//! members see of the team's shares follows them in and out ("a member who joins sees
//! everything the team has, older shares included"; "from then on the member sees none
//! of the team's notes").

use recap_schemas::{ActionItemStatus, Team, TeamActionItemDeleted, TeamActionItemUpserted, TeamDeleted, TeamMemberRemoved, TeamMemberUpserted, TeamUpserted};

use crate::driver::StoreError;
use crate::table::Val;
use crate::tables::{TEAMS_BY_ACCOUNT, TEAM_ACTION_ITEMS, TEAM_MEMBERS};
use crate::views::{self, render};

use super::batch::{Batch, Stamp};
use super::entities::{member_entity_id, EntityKind, Revision};
use super::rows::{team_action_item_row, RowWrite};
use super::Applied;

impl Batch {
    pub(super) async fn team_upserted(&mut self, event: &TeamUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let team = &event.team;
        let team_id: &str = &team.id;
        let Some(mut state) = self.newer(EntityKind::Team, team_id, version).await? else { return Ok(Applied::Stale) };
        let was_active = state.v > 0 && !state.deleted;
        let was_sharing =
            was_active && state.data.as_deref().and_then(|data| serde_json::from_str::<Team>(data.get()).ok()).is_some_and(|team| team.can_collaborate);
        state.v = version;
        state.deleted = false;
        state.data = serde_json::value::to_raw_value(team).ok();
        self.save_entity(EntityKind::Team, team_id, state, stamp);
        // The members see the team first (team.joined), then what it shares.
        self.write_team_rows(team, stamp).await?;
        match (was_sharing, team.can_collaborate) {
            // The team is back, new, or can collaborate again: its members see its shares.
            (false, true) => self.grant_team_shares(team_id, stamp).await?,
            // It can no longer collaborate: nothing of it is shared to read any more.
            (true, false) => self.withdraw_team_shares(team_id, stamp).await?,
            _ => {}
        }
        Ok(Applied::Applied)
    }

    pub(super) async fn team_deleted(&mut self, event: &TeamDeleted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let team_id: &str = &event.team_id;
        let Some(mut state) = self.newer(EntityKind::Team, team_id, version).await? else { return Ok(Applied::Stale) };
        let was_active = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = true;
        state.data = None;
        self.save_entity(EntityKind::Team, team_id, state, stamp);
        if was_active {
            self.withdraw_team_shares(team_id, stamp).await?;
        }
        // Memberships and team action items are gone; their versions are kept, so
        // only newer member and item events bring them back.
        self.delete_memberships(team_id, stamp).await?;
        self.delete_team_action_items(team_id, stamp).await?;
        Ok(Applied::Applied)
    }

    async fn delete_memberships(&mut self, team_id: &str, stamp: Stamp) -> Result<(), StoreError> {
        for (account, _) in self.members(team_id).await? {
            self.delete(&TEAMS_BY_ACCOUNT, vec![Val::text(&account)], vec![Val::text(team_id)], stamp);
            self.delete(&TEAM_MEMBERS, vec![Val::text(team_id)], vec![Val::text(&account)], stamp);
            let member_id = member_entity_id(team_id, &account);
            if let Some(mut member) = self.entity(EntityKind::Member, &member_id).await? {
                member.deleted = true;
                self.announce_membership(&account, team_id, None, &mut member);
                self.save_entity(EntityKind::Member, &member_id, member, stamp);
            }
        }
        Ok(())
    }

    async fn delete_team_action_items(&mut self, team_id: &str, stamp: Stamp) -> Result<(), StoreError> {
        for status in ActionItemStatus::ALL {
            let partition = vec![Val::text(team_id), Val::text(status.as_str())];
            for (clustering, _) in self.scan_all(&TEAM_ACTION_ITEMS, &partition).await? {
                let Some(item_id) = clustering.get(1).and_then(Val::as_text).map(str::to_string) else { continue };
                if let Some(mut item) = self.entity(EntityKind::TeamItem, &item_id).await? {
                    // The rows go at the item's own version, which the delete leaves as it is.
                    let item_stamp = Stamp { version: item.v as i64, position: stamp.position };
                    item.rows = self.replace_rows(&item.rows, Vec::new(), item_stamp);
                    item.deleted = true;
                    self.save_entity(EntityKind::TeamItem, &item_id, item, stamp);
                }
            }
        }
        Ok(())
    }

    pub(super) async fn member_upserted(&mut self, event: &TeamMemberUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let (team_id, account_id): (&str, &str) = (&event.team_id, &event.account_id);
        let member_id = member_entity_id(team_id, account_id);
        let Some(mut state) = self.newer(EntityKind::Member, &member_id, version).await? else { return Ok(Applied::Stale) };
        let was_member = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = false;
        self.save_entity(EntityKind::Member, &member_id, state, stamp);
        let body = serde_json::json!({ "role": event.role }).to_string();
        self.put(RowWrite { table: &TEAM_MEMBERS, partition: vec![Val::text(team_id)], clustering: vec![Val::text(account_id)], body }, stamp);
        let Some(team) = self.active_team(team_id).await? else { return Ok(Applied::Applied) };
        self.write_team_rows(&team, stamp).await?;
        if !was_member && team.can_collaborate {
            // A member who joins sees everything the team has, older shares included.
            for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
                if *share.owner_account_id != *account_id {
                    self.grant(account_id, &share, share_stamp);
                }
                self.announce_share(&share.id, Some(&share), share_stamp).await?;
            }
        }
        Ok(Applied::Applied)
    }

    pub(super) async fn member_removed(&mut self, event: &TeamMemberRemoved, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let (team_id, account_id): (&str, &str) = (&event.team_id, &event.account_id);
        let member_id = member_entity_id(team_id, account_id);
        let Some(mut state) = self.newer(EntityKind::Member, &member_id, version).await? else { return Ok(Applied::Stale) };
        let was_member = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = true;
        self.announce_membership(account_id, team_id, None, &mut state);
        self.save_entity(EntityKind::Member, &member_id, state, stamp);
        if !was_member {
            return Ok(Applied::Applied);
        }
        self.delete(&TEAM_MEMBERS, vec![Val::text(team_id)], vec![Val::text(account_id)], stamp);
        let Some(team) = self.active_team(team_id).await? else { return Ok(Applied::Applied) };
        // "From then on the member sees none of the team's notes."
        for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
            self.withdraw(account_id, &share, share_stamp);
            self.announce_share(&share.id, Some(&share), share_stamp).await?;
        }
        self.delete(&TEAMS_BY_ACCOUNT, vec![Val::text(account_id)], vec![Val::text(team_id)], stamp);
        self.write_team_rows(&team, stamp).await?;
        Ok(Applied::Applied)
    }

    pub(super) async fn team_action_item_upserted(&mut self, event: &TeamActionItemUpserted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let item_id: &str = &event.item.id;
        self.revise_if_newer(EntityKind::TeamItem, item_id, version, stamp, || Revision::Present(vec![team_action_item_row(&event.team_id, &event.item)])).await
    }

    pub(super) async fn team_action_item_deleted(&mut self, event: &TeamActionItemDeleted, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        self.revise_if_newer(EntityKind::TeamItem, &event.item_id, version, stamp, || Revision::Deleted).await
    }

    /// The team, when it exists and is not deleted.
    pub(super) async fn active_team(&mut self, team_id: &str) -> Result<Option<Team>, StoreError> {
        let Some(state) = self.entity(EntityKind::Team, team_id).await? else { return Ok(None) };
        if state.deleted {
            return Ok(None);
        }
        Ok(state.data.and_then(|data| serde_json::from_str(data.get()).ok()))
    }

    /// The team's members (account id, role), whatever the team's state.
    pub(super) async fn members(&self, team_id: &str) -> Result<Vec<(String, String)>, StoreError> {
        let rows = self.scan_all(&TEAM_MEMBERS, &[Val::text(team_id)]).await?;
        Ok(rows
            .into_iter()
            .filter_map(|(clustering, body)| {
                let account = clustering.first()?.as_text()?.to_string();
                let role = serde_json::from_str::<serde_json::Value>(&body).ok()?.get("role")?.as_str()?.to_string();
                Some((account, role))
            })
            .collect())
    }

    /// Rewrites the Team row of every member (name, plan, role, member count).
    async fn write_team_rows(&mut self, team: &Team, stamp: Stamp) -> Result<(), StoreError> {
        let team_id: &str = &team.id;
        let members = self.members(team_id).await?;
        let count = members.len() as i64;
        for (account, role) in &members {
            let record = views::TeamRecord::of(team, role, count);
            let body = render(&record);
            self.put(RowWrite { table: &TEAMS_BY_ACCOUNT, partition: vec![Val::text(account)], clustering: vec![Val::text(team_id)], body }, stamp);
            // A member who sees the team for the first time has joined it.
            let member_id = member_entity_id(team_id, account);
            if let Some(mut member) = self.entity(EntityKind::Member, &member_id).await? {
                if self.announce_membership(account, team_id, Some(&record.team), &mut member) {
                    self.save_entity(EntityKind::Member, &member_id, member, stamp);
                }
            }
        }
        Ok(())
    }
}
