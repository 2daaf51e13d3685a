//! Contract events for the black-box suites and the MCP suite's world, made by
//! `recap_schemas::build`: typed envelopes, or drafts where a test sets more fields.
//! Times are minutes after a fixed instant, so orders are easy to reason about.

use recap_schemas::build::{Draft, Epoch, Events};
use recap_schemas::{ActionItem, ActionItemStatus, Envelope, MeetingUpserted, NoteShared, Word};

/// The suite's events: times count from 2026-09-21T14:13:20Z, envelope ids are random.
pub const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_790_000_000)).with_random_ids();

/// `2026-09-21T…Z`-style instant `minute` minutes after the tests' epoch.
pub fn at(minute: i64) -> String {
    EVENTS.minute(minute).to_rfc3339()
}

/// A JSON line of an envelope around untyped `data`, occurred at the epoch: only for
/// what the builders cannot express, events that must be refused (an invalid payload, an
/// unknown type).
pub fn envelope(event_type: &str, version: u64, data: serde_json::Value) -> String {
    serde_json::json!({"id": uuid::Uuid::new_v4().to_string(), "type": event_type, "version": version, "occurred_at": at(0), "data": data}).to_string()
}

/// A fresh personal access token value.
pub fn new_token() -> String {
    format!("svc_pat_{}", uuid::Uuid::new_v4().simple())
}

pub fn status(text: &str) -> ActionItemStatus {
    ActionItemStatus::parse(text).unwrap_or_else(|| panic!("no action item status {text:?}"))
}

pub fn account(account_id: &str, tier: Option<&str>, api_quota: Option<u64>, version: u64) -> Envelope {
    let account = EVENTS.account(account_id).version(version);
    match tier {
        Some(tier) => account.plan(tier, api_quota, EVENTS.minute(0)).envelope(),
        None => account.envelope(),
    }
}

pub fn token_created(account_id: &str, token_id: &str, token: &str, version: u64) -> Envelope {
    EVENTS.token_created(account_id, token_id, recap_access::token_sha256(token)).name("test").version(version).envelope()
}

pub fn token_revoked(account_id: &str, token_id: &str, version: u64) -> Envelope {
    EVENTS.token_revoked(account_id, token_id).revoked_at(EVENTS.minute(1)).version(version).envelope()
}

/// An action item `do {item_id}`.
pub fn item(item_id: &str, status_text: &str, assignee: Option<&str>, created_minute: i64) -> ActionItem {
    EVENTS.item(item_id).status(status(status_text)).assignee(assignee).created_at(EVENTS.minute(created_minute)).into()
}

/// A 30-minute call in Berlin created at `created_minute`, with its note (the title and
/// an agenda), the summary "Summary text", Ada as participant and no action items.
pub fn meeting_draft(account_id: &str, id: &str, title: &str, created_minute: i64) -> Draft<MeetingUpserted> {
    let (created, updated) = (EVENTS.minute(created_minute), EVENTS.minute(created_minute + 31));
    EVENTS
        .meeting(account_id, id)
        .title(title)
        .started_at(created)
        .ended_at(EVENTS.minute(created_minute + 30))
        .created_at(created)
        .updated_at(updated)
        .timezone("Europe/Berlin")
        .note(EVENTS.note(format!("{id}_note")).title(title).text(format!("{title}\nAgenda\nBudget review")).created_at(created).updated_at(updated))
        .summaries([EVENTS.summary(format!("{id}_sum")).text("Summary text").times(updated)])
        .participants([EVENTS.participant("hum_1")])
}

pub fn meeting(account_id: &str, id: &str, title: &str, created_minute: i64, version: u64) -> Envelope {
    meeting_draft(account_id, id, title, created_minute).version(version).envelope()
}

pub fn meeting_deleted(account_id: &str, meeting_id: &str, version: u64) -> Envelope {
    EVENTS.meeting_deleted(account_id, meeting_id).version(version).envelope()
}

/// A transcript of one segment holding the whole text.
pub fn transcript(account_id: &str, meeting_id: &str, text: &str, words: Option<Vec<Word>>, version: u64) -> Envelope {
    EVENTS.transcript(account_id, meeting_id, text).segment("seg_1", "mic", 0, 1000, text).words(words).version(version).envelope()
}

pub fn word(text: &str, start_ms: i64) -> Word {
    EVENTS.word(text, start_ms, start_ms + 200, "speaker")
}

pub fn action_item(account_id: &str, item: ActionItem, version: u64) -> Envelope {
    EVENTS.action_item(account_id, item).version(version).envelope()
}

pub fn action_item_deleted(account_id: &str, item_id: &str, version: u64) -> Envelope {
    EVENTS.action_item_deleted(account_id, item_id).version(version).envelope()
}

/// A team that collaborates when it has a plan.
pub fn team(team_id: &str, name: &str, plan: Option<&str>, includes_team_action_items: bool, version: u64) -> Envelope {
    EVENTS.team(team_id, name).plan(plan).can_collaborate(plan.is_some()).includes_team_action_items(includes_team_action_items).version(version).envelope()
}

pub fn team_deleted(team_id: &str, version: u64) -> Envelope {
    EVENTS.team_deleted(team_id).version(version).envelope()
}

pub fn member(team_id: &str, account_id: &str, version: u64) -> Envelope {
    EVENTS.member(team_id, account_id).version(version).envelope()
}

pub fn member_removed(team_id: &str, account_id: &str, version: u64) -> Envelope {
    EVENTS.member_removed(team_id, account_id).version(version).envelope()
}

/// A share for viewers by "Owner of {share_id}", published at `published_minute`: set
/// its title, text, and team or recipients.
pub fn share(share_id: &str, owner_account_id: &str, published_minute: i64) -> Draft<NoteShared> {
    EVENTS.share(share_id, owner_account_id).owner_name(format!("Owner of {share_id}")).published_at(EVENTS.minute(published_minute))
}

pub fn unshared(share_id: &str, version: u64) -> Envelope {
    EVENTS.unshared(share_id).version(version).envelope()
}

/// A team action item `team task {item_id}` for Grace, from the shared note `shr_1`.
pub fn team_item(team_id: &str, item_id: &str, status_text: &str, created_minute: i64, version: u64) -> Envelope {
    EVENTS
        .team_item(team_id, item_id)
        .text(format!("team task {item_id}"))
        .status(status(status_text))
        .created_at(EVENTS.minute(created_minute))
        .version(version)
        .envelope()
}
