//! Builders of the meeting events (`meeting.upserted`, `meeting.transcript_set`,
//! `meeting.deleted`, `action_item.upserted`, `action_item.deleted`) and of the parts of
//! a meeting: its documents, participants, action items and transcript words.

use super::{id, Draft, Events};
use crate::{
    ActionItem, ActionItemDeleted, ActionItemStatus, ActionItemUpserted, Document, Meeting, MeetingDeleted, MeetingTranscriptSet, MeetingUpserted, Participant,
    Segment, Timestamp, Transcript, Word,
};

impl Events {
    /// `meeting.upserted`: a done call in UTC, in English, every time at the epoch, with
    /// an empty note (of the meeting's own id, so that any meeting id makes a valid
    /// event) and no summary, participant or action item.
    #[track_caller]
    pub fn meeting(self, account_id: impl AsRef<str>, meeting_id: impl AsRef<str>) -> Draft<MeetingUpserted> {
        let meeting_id = meeting_id.as_ref();
        let at = self.at();
        self.draft(MeetingUpserted {
            account_id: id(account_id),
            meeting: Meeting {
                id: id(meeting_id),
                title: "Meeting".into(),
                kind: "call".into(),
                status: "done".into(),
                started_at: at,
                ended_at: at,
                created_at: at,
                updated_at: at,
                series_id: None,
                timezone: "UTC".into(),
                language: "en".into(),
                note: self.note(meeting_id).into(),
                summaries: Vec::new(),
                participants: Vec::new(),
                action_items: Vec::new(),
            },
        })
    }

    /// `meeting.transcript_set` of `text`, without segments or word timings.
    #[track_caller]
    pub fn transcript(self, account_id: impl AsRef<str>, meeting_id: impl AsRef<str>, text: impl Into<String>) -> Draft<MeetingTranscriptSet> {
        self.draft(MeetingTranscriptSet {
            account_id: id(account_id),
            meeting_id: id(meeting_id),
            transcript: Transcript { text: text.into(), segments: Vec::new(), words: None },
        })
    }

    #[track_caller]
    pub fn meeting_deleted(self, account_id: impl AsRef<str>, meeting_id: impl AsRef<str>) -> Draft<MeetingDeleted> {
        self.draft(MeetingDeleted { account_id: id(account_id), meeting_id: id(meeting_id) })
    }

    /// `action_item.upserted` of a standalone action item (one not from a meeting).
    #[track_caller]
    pub fn action_item(self, account_id: impl AsRef<str>, item: impl Into<ActionItem>) -> Draft<ActionItemUpserted> {
        self.draft(ActionItemUpserted { account_id: id(account_id), item: item.into() })
    }

    #[track_caller]
    pub fn action_item_deleted(self, account_id: impl AsRef<str>, item_id: impl AsRef<str>) -> Draft<ActionItemDeleted> {
        self.draft(ActionItemDeleted { account_id: id(account_id), item_id: id(item_id) })
    }

    /// A note titled "Notes", empty, written at the epoch.
    #[track_caller]
    pub fn note(self, document_id: impl AsRef<str>) -> DocumentDraft {
        self.document(document_id, "note", "Notes")
    }

    /// A summary titled "Summary", empty, written at the epoch.
    #[track_caller]
    pub fn summary(self, document_id: impl AsRef<str>) -> DocumentDraft {
        self.document(document_id, "summary", "Summary")
    }

    #[track_caller]
    fn document(self, document_id: impl AsRef<str>, kind: &str, title: &str) -> DocumentDraft {
        let at = self.at();
        DocumentDraft(Document {
            id: id(document_id),
            kind: kind.into(),
            title: title.into(),
            template_id: None,
            text: String::new(),
            created_at: at,
            updated_at: at,
        })
    }

    /// Ada, CTO, without a role.
    #[track_caller]
    pub fn participant(self, human_id: impl AsRef<str>) -> ParticipantDraft {
        ParticipantDraft(Participant { human_id: id(human_id), name: "Ada".into(), email: "ada@example.com".into(), role: None, job_title: "CTO".into() })
    }

    /// A todo `do {item_id}`, unassigned, without due date, created at the epoch.
    #[track_caller]
    pub fn item(self, item_id: impl AsRef<str>) -> ItemDraft {
        let item_id = item_id.as_ref();
        ItemDraft(ActionItem {
            id: id(item_id),
            text: format!("do {item_id}"),
            status: ActionItemStatus::Todo,
            assignee_human_id: None,
            due_at: None,
            completed_at: None,
            created_at: self.at(),
        })
    }

    /// A timed word of a transcript.
    pub fn word(self, text: impl Into<String>, start_ms: i64, end_ms: i64, track: impl Into<String>) -> Word {
        Word { text: text.into(), start_ms, end_ms, track: track.into() }
    }
}

impl Draft<MeetingUpserted> {
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.data.meeting.title = title.into();
        self
    }

    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.data.meeting.kind = kind.into();
        self
    }

    pub fn status(mut self, status: impl Into<String>) -> Self {
        self.data.meeting.status = status.into();
        self
    }

    /// Every time of the meeting and of its note (started, ended, created, updated).
    pub fn times(mut self, at: Timestamp) -> Self {
        let meeting = &mut self.data.meeting;
        (meeting.started_at, meeting.ended_at, meeting.created_at, meeting.updated_at) = (at, at, at, at);
        (meeting.note.created_at, meeting.note.updated_at) = (at, at);
        self
    }

    pub fn started_at(mut self, started_at: Timestamp) -> Self {
        self.data.meeting.started_at = started_at;
        self
    }

    pub fn ended_at(mut self, ended_at: Timestamp) -> Self {
        self.data.meeting.ended_at = ended_at;
        self
    }

    pub fn created_at(mut self, created_at: Timestamp) -> Self {
        self.data.meeting.created_at = created_at;
        self
    }

    pub fn updated_at(mut self, updated_at: Timestamp) -> Self {
        self.data.meeting.updated_at = updated_at;
        self
    }

    #[track_caller]
    pub fn series_id(mut self, series_id: Option<&str>) -> Self {
        self.data.meeting.series_id = series_id.map(id);
        self
    }

    pub fn timezone(mut self, timezone: impl Into<String>) -> Self {
        self.data.meeting.timezone = timezone.into();
        self
    }

    pub fn language(mut self, language: impl Into<String>) -> Self {
        self.data.meeting.language = language.into();
        self
    }

    pub fn note(mut self, note: impl Into<Document>) -> Self {
        self.data.meeting.note = note.into();
        self
    }

    pub fn summaries<D: Into<Document>>(mut self, summaries: impl IntoIterator<Item = D>) -> Self {
        self.data.meeting.summaries = summaries.into_iter().map(Into::into).collect();
        self
    }

    pub fn participants<P: Into<Participant>>(mut self, participants: impl IntoIterator<Item = P>) -> Self {
        self.data.meeting.participants = participants.into_iter().map(Into::into).collect();
        self
    }

    pub fn action_items<I: Into<ActionItem>>(mut self, items: impl IntoIterator<Item = I>) -> Self {
        self.data.meeting.action_items = items.into_iter().map(Into::into).collect();
        self
    }
}

impl Draft<MeetingTranscriptSet> {
    /// Adds a segment.
    #[track_caller]
    pub fn segment(mut self, segment_id: impl AsRef<str>, track: impl Into<String>, start_ms: i64, end_ms: i64, text: impl Into<String>) -> Self {
        self.data.transcript.segments.push(Segment { id: id(segment_id), track: track.into(), start_ms, end_ms, text: text.into() });
        self
    }

    /// The word timings; None (or none) means the transcript has none.
    pub fn words(mut self, words: Option<Vec<Word>>) -> Self {
        self.data.transcript.words = words;
        self
    }
}

/// A document of a meeting (its note or a summary) being built.
#[derive(Clone, Debug, PartialEq)]
pub struct DocumentDraft(pub Document);

impl DocumentDraft {
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.0.kind = kind.into();
        self
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.0.title = title.into();
        self
    }

    #[track_caller]
    pub fn template_id(mut self, template_id: Option<&str>) -> Self {
        self.0.template_id = template_id.map(id);
        self
    }

    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.0.text = text.into();
        self
    }

    /// Created and updated at `at`.
    pub fn times(mut self, at: Timestamp) -> Self {
        (self.0.created_at, self.0.updated_at) = (at, at);
        self
    }

    pub fn created_at(mut self, created_at: Timestamp) -> Self {
        self.0.created_at = created_at;
        self
    }

    pub fn updated_at(mut self, updated_at: Timestamp) -> Self {
        self.0.updated_at = updated_at;
        self
    }
}

impl From<DocumentDraft> for Document {
    fn from(draft: DocumentDraft) -> Document {
        draft.0
    }
}

/// A participant of a meeting being built.
#[derive(Clone, Debug, PartialEq)]
pub struct ParticipantDraft(pub Participant);

impl ParticipantDraft {
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.0.name = name.into();
        self
    }

    pub fn email(mut self, email: impl Into<String>) -> Self {
        self.0.email = email.into();
        self
    }

    pub fn role(mut self, role: Option<&str>) -> Self {
        self.0.role = role.map(str::to_string);
        self
    }

    pub fn job_title(mut self, job_title: impl Into<String>) -> Self {
        self.0.job_title = job_title.into();
        self
    }
}

impl From<ParticipantDraft> for Participant {
    fn from(draft: ParticipantDraft) -> Participant {
        draft.0
    }
}

/// An action item being built: of a meeting ([`Draft::action_items`]) or standalone
/// ([`Events::action_item`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ItemDraft(pub ActionItem);

impl ItemDraft {
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.0.text = text.into();
        self
    }

    pub fn status(mut self, status: ActionItemStatus) -> Self {
        self.0.status = status;
        self
    }

    /// The participant it is assigned to.
    #[track_caller]
    pub fn assignee(mut self, assignee_human_id: Option<&str>) -> Self {
        self.0.assignee_human_id = assignee_human_id.map(id);
        self
    }

    pub fn due_at(mut self, due_at: Option<Timestamp>) -> Self {
        self.0.due_at = due_at;
        self
    }

    pub fn completed_at(mut self, completed_at: Option<Timestamp>) -> Self {
        self.0.completed_at = completed_at;
        self
    }

    pub fn created_at(mut self, created_at: Timestamp) -> Self {
        self.0.created_at = created_at;
        self
    }
}

impl From<ItemDraft> for ActionItem {
    fn from(draft: ItemDraft) -> ActionItem {
        draft.0
    }
}
