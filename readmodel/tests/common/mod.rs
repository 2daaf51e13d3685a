//! Events (from `recap_schemas::build`) and store helpers shared by the read-model tests.

#![allow(dead_code)]

use std::sync::Arc;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::{Batch, Driver, ReadModel};
use recap_schemas::build::{Draft, Epoch, Events};
use recap_schemas::{
    AccountUpserted, ActionItem, ActionItemStatus, Envelope, MeetingUpserted, NoteShared, TeamActionItemUpserted, TeamUpserted, TokenCreated, TokenRevoked,
};

/// The suite's events: times count from 2026-09-21T14:13:20Z, envelope ids from a counter.
pub const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_790_000_000));

/// An account on `tier` (none: no plan), anchored at the epoch, at the tier's quota.
pub fn account(account_id: &str, tier: Option<&str>) -> Draft<AccountUpserted> {
    let account = EVENTS.account(account_id);
    match tier {
        Some(tier) => account.plan(tier, None, EVENTS.minute(0)),
        None => account,
    }
}

pub fn token_created(account_id: &str, token_id: impl AsRef<str>, token_sha256: &str) -> Draft<TokenCreated> {
    EVENTS.token_created(account_id, token_id, token_sha256).name("n")
}

pub fn token_revoked(account_id: &str, token_id: impl AsRef<str>) -> Draft<TokenRevoked> {
    EVENTS.token_revoked(account_id, token_id).revoked_at(EVENTS.minute(1))
}

/// A 30-minute call created at `created_minute`, with its note, the summary "summary of
/// {title}" and Ada as participant.
pub fn meeting(account_id: &str, meeting_id: &str, title: &str, created_minute: i64, series: Option<&str>, items: Vec<ActionItem>) -> Draft<MeetingUpserted> {
    let created = EVENTS.minute(created_minute);
    EVENTS
        .meeting(account_id, meeting_id)
        .title(title)
        .times(created)
        .ended_at(EVENTS.minute(created_minute + 30))
        .updated_at(EVENTS.minute(created_minute + 31))
        .series_id(series)
        .note(EVENTS.note(format!("{meeting_id}_note")).title(title).text(format!("{title}\nAgenda")).times(created))
        .summaries([EVENTS.summary(format!("{meeting_id}_sum")).text(format!("summary of {title}")).times(created)])
        .participants([EVENTS.participant("hum_1")])
        .action_items(items)
}

/// An action item `do {item_id}`.
pub fn item(item_id: &str, status: &str, assignee: Option<&str>, created_minute: i64) -> ActionItem {
    let status = ActionItemStatus::parse(status).expect("an action item status");
    EVENTS.item(item_id).status(status).assignee(assignee).created_at(EVENTS.minute(created_minute)).into()
}

/// A share for viewers by "owner {owner}", with the team `team {team}` or directly.
pub fn share(share_id: &str, owner: &str, team: Option<&str>, recipients: &[&str], title: &str, published_minute: i64) -> Draft<NoteShared> {
    let team_name = team.map(|team| format!("team {team}"));
    EVENTS
        .share(share_id, owner)
        .title(title)
        .owner_name(format!("owner {owner}"))
        .published_at(EVENTS.minute(published_minute))
        .team(team.zip(team_name.as_deref()))
        .recipients(recipients)
        .text(format!("{title}\nshared text"))
}

pub fn team(team_id: &str, includes_items: bool) -> Draft<TeamUpserted> {
    team_collaborating(team_id, includes_items, true)
}

/// A team `team {team_id}` on the business plan.
pub fn team_collaborating(team_id: &str, includes_items: bool, can_collaborate: bool) -> Draft<TeamUpserted> {
    EVENTS.team(team_id, format!("team {team_id}")).plan(Some("business")).can_collaborate(can_collaborate).includes_team_action_items(includes_items)
}

/// A team action item "t" for Grace, from the shared note `shr_x`.
pub fn team_item(team_id: &str, item_id: &str, status: &str, created_minute: i64) -> Draft<TeamActionItemUpserted> {
    let status = ActionItemStatus::parse(status).expect("an action item status");
    EVENTS.team_item(team_id, item_id).text("t").status(status).created_at(EVENTS.minute(created_minute)).shared_note("shr_x", "x")
}

pub struct Store {
    pub _dir: tempfile::TempDir,
    pub driver: Arc<dyn Driver>,
    pub readmodel: ReadModel,
    position: i64,
}

impl Store {
    pub fn new() -> Store {
        let dir = tempfile::tempdir().expect("temp dir");
        let driver: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).expect("open store"));
        Store { _dir: dir, readmodel: ReadModel::new(driver.clone()), driver, position: 0 }
    }

    /// Applies events, committing a batch every `batch_size` events; positions follow
    /// one another, as in the embedded edition's one log.
    pub async fn apply(&mut self, envelopes: &[Envelope], batch_size: usize) {
        let positioned: Vec<(Envelope, i64)> = envelopes
            .iter()
            .map(|envelope| {
                self.position += 1;
                (envelope.clone(), self.position)
            })
            .collect();
        self.apply_at(&positioned, batch_size).await;
    }

    /// Applies events as [`Store::apply`] does, and returns the messages they announce,
    /// in order.
    pub async fn apply_messages(&mut self, envelopes: &[Envelope], batch_size: usize) -> Vec<recap_readmodel::messages::AccountMessage> {
        let mut messages = Vec::new();
        for chunk in envelopes.chunks(batch_size.max(1)) {
            let mut batch = Batch::new(self.driver.clone());
            for envelope in chunk {
                self.position += 1;
                batch.apply(envelope, self.position).await.expect("apply");
            }
            messages.extend(batch.take_messages());
            self.driver.write(batch.into_mutations()).await.expect("commit");
        }
        messages
    }

    /// Applies events at the given positions (each one's offset in its partition).
    pub async fn apply_at(&mut self, envelopes: &[(Envelope, i64)], batch_size: usize) {
        for chunk in envelopes.chunks(batch_size.max(1)) {
            let mut batch = Batch::new(self.driver.clone());
            // Even batch sizes read their entity states up front, as the Kafka projector
            // does; odd ones read them lazily: the fidelity tests compare both against
            // the one-event-at-a-time reference.
            if batch_size.is_multiple_of(2) {
                batch.prefetch(chunk.iter().map(|(envelope, _)| envelope)).await.expect("prefetch");
            }
            for (envelope, position) in chunk {
                batch.apply(envelope, *position).await.expect("apply");
            }
            self.driver.write(batch.into_mutations()).await.expect("commit");
        }
    }
}
