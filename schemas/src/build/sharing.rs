//! Builders of the team and sharing events: `team.*`, `team_member.*`, `note.*` and
//! `team_action_item.*`.

use super::{id, Draft, Events};
use crate::{
    ActionItemStatus, NoteShared, NoteUnshared, Share, SharedNoteRef, Team, TeamActionItem, TeamActionItemDeleted, TeamActionItemUpserted, TeamDeleted,
    TeamMemberRemoved, TeamMemberUpserted, TeamRef, TeamUpserted, Timestamp,
};

impl Events {
    /// `team.upserted` of a team without a plan: no collaboration, no team action items.
    #[track_caller]
    pub fn team(self, team_id: impl AsRef<str>, name: impl Into<String>) -> Draft<TeamUpserted> {
        self.draft(TeamUpserted { team: Team { id: id(team_id), name: name.into(), plan: None, can_collaborate: false, includes_team_action_items: false } })
    }

    #[track_caller]
    pub fn team_deleted(self, team_id: impl AsRef<str>) -> Draft<TeamDeleted> {
        self.draft(TeamDeleted { team_id: id(team_id) })
    }

    /// `team_member.upserted` with the role "member".
    #[track_caller]
    pub fn member(self, team_id: impl AsRef<str>, account_id: impl AsRef<str>) -> Draft<TeamMemberUpserted> {
        self.draft(TeamMemberUpserted { team_id: id(team_id), account_id: id(account_id), role: "member".into() })
    }

    #[track_caller]
    pub fn member_removed(self, team_id: impl AsRef<str>, account_id: impl AsRef<str>) -> Draft<TeamMemberRemoved> {
        self.draft(TeamMemberRemoved { team_id: id(team_id), account_id: id(account_id) })
    }

    /// `note.shared` for viewers, published at the epoch, shared with nobody yet: set
    /// its team or its recipients.
    #[track_caller]
    pub fn share(self, share_id: impl AsRef<str>, owner_account_id: impl AsRef<str>) -> Draft<NoteShared> {
        self.draft(NoteShared {
            share: Share {
                id: id(share_id),
                title: "Notes".into(),
                owner_account_id: id(owner_account_id),
                owner_name: "Owner".into(),
                access: "viewer".into(),
                published_at: self.at(),
                team: None,
                recipient_account_ids: Vec::new(),
                text: String::new(),
            },
        })
    }

    #[track_caller]
    pub fn unshared(self, share_id: impl AsRef<str>) -> Draft<NoteUnshared> {
        self.draft(NoteUnshared { share_id: id(share_id) })
    }

    /// `team_action_item.upserted`: a todo `do {item_id}` for Grace, owned by Ada,
    /// created at the epoch, from the shared note `shr_1` "Shared".
    #[track_caller]
    pub fn team_item(self, team_id: impl AsRef<str>, item_id: impl AsRef<str>) -> Draft<TeamActionItemUpserted> {
        let item_id = item_id.as_ref();
        self.draft(TeamActionItemUpserted {
            team_id: id(team_id),
            item: TeamActionItem {
                id: id(item_id),
                text: format!("do {item_id}"),
                status: ActionItemStatus::Todo,
                due_at: None,
                assignee: "Grace".into(),
                owner_name: "Ada".into(),
                created_at: self.at(),
                shared_note: SharedNoteRef { id: id("shr_1"), title: "Shared".into() },
            },
        })
    }

    #[track_caller]
    pub fn team_item_deleted(self, team_id: impl AsRef<str>, item_id: impl AsRef<str>) -> Draft<TeamActionItemDeleted> {
        self.draft(TeamActionItemDeleted { team_id: id(team_id), item_id: id(item_id) })
    }
}

impl Draft<TeamUpserted> {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.data.team.name = name.into();
        self
    }

    /// The team's plan; None is no active plan.
    pub fn plan(mut self, plan: Option<&str>) -> Self {
        self.data.team.plan = plan.map(str::to_string);
        self
    }

    pub fn can_collaborate(mut self, can_collaborate: bool) -> Self {
        self.data.team.can_collaborate = can_collaborate;
        self
    }

    pub fn includes_team_action_items(mut self, includes: bool) -> Self {
        self.data.team.includes_team_action_items = includes;
        self
    }
}

impl Draft<TeamMemberUpserted> {
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.data.role = role.into();
        self
    }
}

impl Draft<NoteShared> {
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.data.share.title = title.into();
        self
    }

    pub fn owner_name(mut self, owner_name: impl Into<String>) -> Self {
        self.data.share.owner_name = owner_name.into();
        self
    }

    /// viewer, commenter or editor.
    pub fn access(mut self, access: impl Into<String>) -> Self {
        self.data.share.access = access.into();
        self
    }

    pub fn published_at(mut self, published_at: Timestamp) -> Self {
        self.data.share.published_at = published_at;
        self
    }

    /// The team it is published to, as (id, name); None: shared directly.
    #[track_caller]
    pub fn team(mut self, team: Option<(&str, &str)>) -> Self {
        self.data.share.team = team.map(|(team_id, name)| TeamRef { id: id(team_id), name: name.into() });
        self
    }

    /// The accounts it is shared with directly.
    #[track_caller]
    pub fn recipients<A: AsRef<str>>(mut self, account_ids: impl IntoIterator<Item = A>) -> Self {
        self.data.share.recipient_account_ids = account_ids.into_iter().map(id).collect();
        self
    }

    /// The shared version: the note and its summary.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.data.share.text = text.into();
        self
    }
}

impl Draft<TeamActionItemUpserted> {
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.data.item.text = text.into();
        self
    }

    pub fn status(mut self, status: ActionItemStatus) -> Self {
        self.data.item.status = status;
        self
    }

    pub fn due_at(mut self, due_at: Option<Timestamp>) -> Self {
        self.data.item.due_at = due_at;
        self
    }

    /// The name written in the note (not an account).
    pub fn assignee(mut self, assignee: impl Into<String>) -> Self {
        self.data.item.assignee = assignee.into();
        self
    }

    pub fn owner_name(mut self, owner_name: impl Into<String>) -> Self {
        self.data.item.owner_name = owner_name.into();
        self
    }

    pub fn created_at(mut self, created_at: Timestamp) -> Self {
        self.data.item.created_at = created_at;
        self
    }

    /// The shared note it comes from, as (id, title).
    #[track_caller]
    pub fn shared_note(mut self, share_id: impl AsRef<str>, title: impl Into<String>) -> Self {
        self.data.item.shared_note = SharedNoteRef { id: id(share_id), title: title.into() };
        self
    }
}
