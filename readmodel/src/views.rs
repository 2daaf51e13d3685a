//! What the rows hold: the resources of the REST API, rendered once at projection time
//! so that a read only copies bytes. Field sets, order and nulls follow
//! `docs/rest.md` exactly; timestamps render in UTC with `Z`.

use recap_schemas::{ActionItem, Document, Meeting, Participant, Share, Team, TeamActionItem, TeamRef, Timestamp};
use serde::{Deserialize, Serialize};

/// Meeting (list entry); also the entry of the MCP meeting lists.
#[derive(Serialize)]
pub struct MeetingListEntry<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub kind: &'a str,
    pub status: &'a str,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub series_id: Option<&'a str>,
}

impl<'a> MeetingListEntry<'a> {
    pub fn of(meeting: &'a Meeting) -> Self {
        MeetingListEntry {
            id: &meeting.id,
            title: &meeting.title,
            kind: &meeting.kind,
            status: &meeting.status,
            started_at: meeting.started_at,
            ended_at: meeting.ended_at,
            created_at: meeting.created_at,
            updated_at: meeting.updated_at,
            series_id: meeting.series_id.as_deref(),
        }
    }
}

/// Document object (note or summary), exactly the fields docs/rest.md lists.
#[derive(Serialize)]
pub struct DocumentView<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub title: &'a str,
    pub template_id: Option<&'a str>,
    pub text: &'a str,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl<'a> DocumentView<'a> {
    pub fn of(document: &'a Document) -> Self {
        DocumentView {
            id: &document.id,
            kind: &document.kind,
            title: &document.title,
            template_id: document.template_id.as_deref(),
            text: &document.text,
            created_at: document.created_at,
            updated_at: document.updated_at,
        }
    }
}

#[derive(Serialize)]
pub struct ParticipantView<'a> {
    pub human_id: &'a str,
    pub name: &'a str,
    pub email: &'a str,
    pub role: Option<&'a str>,
    pub job_title: &'a str,
}

impl<'a> ParticipantView<'a> {
    pub fn of(participant: &'a Participant) -> Self {
        ParticipantView {
            human_id: &participant.human_id,
            name: &participant.name,
            email: &participant.email,
            // "Absent values are JSON null, never an empty string."
            role: participant.role.as_deref().filter(|role| !role.is_empty()),
            job_title: &participant.job_title,
        }
    }
}

/// Action item, detail form.
#[derive(Serialize)]
pub struct ActionItemDetail<'a> {
    pub id: &'a str,
    pub text: &'a str,
    pub status: &'static str,
    pub assignee_human_id: Option<&'a str>,
    pub due_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
}

impl<'a> ActionItemDetail<'a> {
    pub fn of(item: &'a ActionItem) -> Self {
        ActionItemDetail {
            id: &item.id,
            text: &item.text,
            status: item.status.as_str(),
            assignee_human_id: item.assignee_human_id.as_deref(),
            due_at: item.due_at,
            completed_at: item.completed_at,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MeetingRef {
    pub id: String,
    pub title: String,
}

/// Action item, list form (GET /action-items): detail fields plus `meeting`.
#[derive(Serialize)]
pub struct ActionItemListEntry<'a> {
    pub id: &'a str,
    pub text: &'a str,
    pub status: &'static str,
    pub assignee_human_id: Option<&'a str>,
    pub due_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub meeting: Option<MeetingRefView<'a>>,
}

#[derive(Serialize)]
pub struct MeetingRefView<'a> {
    pub id: &'a str,
    pub title: &'a str,
}

impl<'a> ActionItemListEntry<'a> {
    pub fn of(item: &'a ActionItem, meeting: Option<&'a Meeting>) -> Self {
        ActionItemListEntry {
            id: &item.id,
            text: &item.text,
            status: item.status.as_str(),
            assignee_human_id: item.assignee_human_id.as_deref(),
            due_at: item.due_at,
            completed_at: item.completed_at,
            meeting: meeting.map(|meeting| MeetingRefView { id: &meeting.id, title: &meeting.title }),
        }
    }
}

/// Meeting (detail), without the transcript (read from its own table on demand).
#[derive(Serialize)]
pub struct MeetingDetail<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub kind: &'a str,
    pub status: &'a str,
    pub started_at: Timestamp,
    pub ended_at: Timestamp,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub series_id: Option<&'a str>,
    pub timezone: &'a str,
    pub language: &'a str,
    pub note: DocumentView<'a>,
    pub summaries: Vec<DocumentView<'a>>,
    pub participants: Vec<ParticipantView<'a>>,
    pub action_items: Vec<ActionItemDetail<'a>>,
}

impl<'a> MeetingDetail<'a> {
    pub fn of(meeting: &'a Meeting) -> Self {
        MeetingDetail {
            id: &meeting.id,
            title: &meeting.title,
            kind: &meeting.kind,
            status: &meeting.status,
            started_at: meeting.started_at,
            ended_at: meeting.ended_at,
            created_at: meeting.created_at,
            updated_at: meeting.updated_at,
            series_id: meeting.series_id.as_deref(),
            timezone: &meeting.timezone,
            language: &meeting.language,
            note: DocumentView::of(&meeting.note),
            summaries: meeting.summaries.iter().map(DocumentView::of).collect(),
            participants: meeting.participants.iter().map(ParticipantView::of).collect(),
            action_items: meeting.action_items.iter().map(ActionItemDetail::of).collect(),
        }
    }
}

/// Shared note (list entry).
#[derive(Serialize)]
pub struct SharedNoteListEntry<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub team: Option<&'a TeamRef>,
    pub owner_name: &'a str,
    pub access: &'a str,
    pub published_at: Timestamp,
}

impl<'a> SharedNoteListEntry<'a> {
    pub fn of(share: &'a Share) -> Self {
        SharedNoteListEntry {
            id: &share.id,
            title: &share.title,
            team: share.team.as_ref(),
            owner_name: &share.owner_name,
            access: &share.access,
            published_at: share.published_at,
        }
    }
}

/// The `shares` row: everything the detail endpoint and the MCP tools render.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ShareRecord {
    pub id: String,
    pub title: String,
    pub team: Option<TeamRef>,
    pub owner_name: String,
    pub access: String,
    pub published_at: Timestamp,
    pub text: String,
}

impl ShareRecord {
    pub fn of(share: &Share) -> Self {
        ShareRecord {
            id: share.id.to_string(),
            title: share.title.clone(),
            team: share.team.clone(),
            owner_name: share.owner_name.clone(),
            access: share.access.clone(),
            published_at: share.published_at,
            text: share.text.clone(),
        }
    }
}

/// Team, as GET /teams renders it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TeamView {
    pub id: String,
    pub name: String,
    pub role: String,
    pub member_count: i64,
    pub plan: Option<String>,
    pub can_collaborate: bool,
}

/// The `teams_by_account` row: the Team plus what the team endpoints check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TeamRecord {
    pub team: TeamView,
    pub includes_team_action_items: bool,
}

impl TeamRecord {
    pub fn of(team: &Team, role: &str, member_count: i64) -> Self {
        TeamRecord {
            team: TeamView {
                id: team.id.to_string(),
                name: team.name.clone(),
                role: role.to_string(),
                member_count,
                // "Absent values are JSON null, never an empty string."
                plan: team.plan.clone().filter(|plan| !plan.is_empty()),
                can_collaborate: team.can_collaborate,
            },
            includes_team_action_items: team.includes_team_action_items,
        }
    }
}

/// Team action item, exactly the fields docs/rest.md lists.
#[derive(Serialize)]
pub struct TeamActionItemView<'a> {
    pub id: &'a str,
    pub text: &'a str,
    pub status: &'static str,
    pub due_at: Option<Timestamp>,
    pub assignee: &'a str,
    pub owner_name: &'a str,
    pub created_at: Timestamp,
    pub shared_note: &'a recap_schemas::SharedNoteRef,
}

impl<'a> TeamActionItemView<'a> {
    pub fn of(item: &'a TeamActionItem) -> Self {
        TeamActionItemView {
            id: &item.id,
            text: &item.text,
            status: item.status.as_str(),
            due_at: item.due_at,
            assignee: &item.assignee,
            owner_name: &item.owner_name,
            created_at: item.created_at,
            shared_note: &item.shared_note,
        }
    }
}

/// Serialises a view. Views hold only strings, numbers and options, so this cannot fail.
pub fn render<T: Serialize>(view: &T) -> String {
    serde_json::to_string(view).unwrap_or_else(|_| "null".into())
}
