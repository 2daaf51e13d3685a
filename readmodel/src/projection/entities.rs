//! Entity states: the projection's memory of every entity, kept in the
//! `projection_entities` table under the entity's kind and id. They implement the
//! contract's rule 1 (last version wins per entity: an event at or below the entity's
//! last applied version changes nothing) and the bookkeeping of rule 2 (deletes shadow: a
//! delete keeps the entity's version, so an older upsert arriving later is stale), and
//! the one step most events share: newer than the entity's last version, replace the rows
//! it owns, save its state. States are read through the batch's overlay, and prefetched
//! concurrently for a whole batch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use recap_schemas::{Envelope, Event};
use serde::{Deserialize, Serialize};

use crate::driver::{Driver, StoreError};
use crate::table::Val;
use crate::tables::ENTITIES;

use super::batch::{Batch, Stamp};
use super::rows::{RowKey, RowWrite};
use super::Applied;

/// What kind of entity a state belongs to. Its name is the first part of the state's
/// key in `projection_entities`, so the names never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum EntityKind {
    Account,
    Token,
    Meeting,
    /// A meeting's transcript: its own versions, under the meeting's id.
    Transcript,
    ActionItem,
    Team,
    /// A membership, under [`member_entity_id`].
    Member,
    Share,
    TeamItem,
    WebhookEndpoint,
}

impl EntityKind {
    /// The kind's name in stored keys.
    pub(super) const fn as_str(self) -> &'static str {
        match self {
            EntityKind::Account => "account",
            EntityKind::Token => "token",
            EntityKind::Meeting => "meeting",
            EntityKind::Transcript => "transcript",
            EntityKind::ActionItem => "action_item",
            EntityKind::Team => "team",
            EntityKind::Member => "member",
            EntityKind::Share => "share",
            EntityKind::TeamItem => "team_item",
            EntityKind::WebhookEndpoint => "webhook_endpoint",
        }
    }
}

/// The id of a membership entity: the team and the account, joined by a character no id
/// contains.
pub(super) fn member_entity_id(team_id: &str, account_id: &str) -> String {
    format!("{team_id}\u{1f}{account_id}")
}

/// The projection's memory of one entity.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct EntityState {
    pub(super) v: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub(super) deleted: bool,
    /// The rows this entity owns now (deleted when a newer version no longer has them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) rows: Vec<RowKey>,
    /// The highest delete version ever applied (a transcript at or below it is shadowed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) last_delete: u64,
    /// What later events of other entities need from this one, as JSON text: read into
    /// the type it holds where it is needed, never kept as a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) data: Option<Box<serde_json::value::RawValue>>,
    /// A share's clock: the latest position its rows were written at (see
    /// [`Batch::share_stamp`]).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub(super) clock: i64,
    /// What subscribers last saw of the entity, as digests of what was announced to
    /// them (see `announce.rs`): a change that renders the same announces nothing.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) seen: BTreeMap<String, String>,
}

fn is_zero_i64(value: &i64) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Entity states by kind and id; `None` for one known to be absent from the store.
pub(super) type EntityStates = BTreeMap<(EntityKind, String), Option<EntityState>>;

/// What an event makes of an entity whose state is the rows it owns.
pub(super) enum Revision {
    /// The entity exists and owns exactly these rows.
    Present(Vec<RowWrite>),
    /// The entity is deleted: it owns no rows, and keeps its version so that older
    /// events stay stale.
    Deleted,
}

/// Entity reads a prefetch keeps in flight at once.
const PREFETCH_CONCURRENCY: usize = 64;

fn entity_key(kind: EntityKind, id: &str) -> (EntityKind, String) {
    (kind, id.to_owned())
}

/// The entity states `apply` looks up for an event (the ones every event of its type
/// reads; fan-out reads of teams and shares are left to `apply`).
fn entity_keys(event: &Event) -> Vec<(EntityKind, String)> {
    use EntityKind::*;
    match event {
        Event::AccountUpserted(event) => vec![entity_key(Account, &event.account_id)],
        Event::TokenCreated(event) => vec![entity_key(Token, &event.token_id)],
        Event::TokenRevoked(event) => vec![entity_key(Token, &event.token_id)],
        Event::MeetingUpserted(event) => vec![entity_key(Meeting, &event.meeting.id), entity_key(Transcript, &event.meeting.id)],
        Event::MeetingDeleted(event) => vec![entity_key(Meeting, &event.meeting_id), entity_key(Transcript, &event.meeting_id)],
        Event::MeetingTranscriptSet(event) => vec![entity_key(Transcript, &event.meeting_id), entity_key(Meeting, &event.meeting_id)],
        Event::ActionItemUpserted(event) => vec![entity_key(ActionItem, &event.item.id)],
        Event::ActionItemDeleted(event) => vec![entity_key(ActionItem, &event.item_id)],
        Event::TeamUpserted(event) => vec![entity_key(Team, &event.team.id)],
        Event::TeamDeleted(event) => vec![entity_key(Team, &event.team_id)],
        Event::TeamMemberUpserted(event) => vec![(Member, member_entity_id(&event.team_id, &event.account_id))],
        Event::TeamMemberRemoved(event) => vec![(Member, member_entity_id(&event.team_id, &event.account_id))],
        Event::NoteShared(event) => vec![entity_key(Share, &event.share.id)],
        Event::NoteUnshared(event) => vec![entity_key(Share, &event.share_id)],
        Event::TeamActionItemUpserted(event) => vec![entity_key(TeamItem, &event.item.id)],
        Event::TeamActionItemDeleted(event) => vec![entity_key(TeamItem, &event.item_id)],
        Event::WebhookEndpointUpserted(event) => vec![entity_key(WebhookEndpoint, &event.endpoint.id)],
        Event::WebhookEndpointDeleted(event) => vec![entity_key(WebhookEndpoint, &event.endpoint_id)],
    }
}

fn entity_partition(kind: EntityKind, id: &str) -> Vec<Val> {
    vec![Val::text(kind.as_str()), Val::text(id)]
}

/// An entity state from its stored body.
fn decode_entity(kind: EntityKind, id: &str, body: &str) -> Result<EntityState, StoreError> {
    serde_json::from_str(body).map_err(|error| StoreError::Corrupt(format!("entity {} {id}: {error}", kind.as_str())))
}

/// One entity state as stored, for [`Batch::prefetch`].
async fn read_entity(driver: Arc<dyn Driver>, kind: EntityKind, id: String) -> Result<((EntityKind, String), Option<EntityState>), StoreError> {
    let row = driver.get(&ENTITIES, &entity_partition(kind, &id), &[]).await?;
    let state = row.map(|row| decode_entity(kind, &id, &row.body)).transpose()?;
    Ok(((kind, id), state))
}

impl Batch {
    /// The entity's state: from this batch, the previous one, or the store.
    pub(super) async fn entity(&mut self, kind: EntityKind, id: &str) -> Result<Option<EntityState>, StoreError> {
        let key = entity_key(kind, id);
        if let Some(state) = self.entities.get(&key).or_else(|| self.base.as_ref().and_then(|base| base.entities.get(&key))) {
            return Ok(state.clone());
        }
        let state = self.get(&ENTITIES, &entity_partition(kind, id), &[]).await?.map(|body| decode_entity(kind, id, &body)).transpose()?;
        self.entities.insert(key, state.clone());
        Ok(state)
    }

    /// Reads, concurrently, the entity states applying `envelopes` will look up first,
    /// so that applying them does not wait on one store round trip per event: over a
    /// networked store those sequential reads are most of a batch's time. Optional:
    /// `apply` reads whatever was not prefetched, with the same result.
    pub async fn prefetch<'e>(&mut self, envelopes: impl IntoIterator<Item = &'e Envelope>) -> Result<(), StoreError> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        let mut wanted: BTreeSet<(EntityKind, String)> = BTreeSet::new();
        for envelope in envelopes {
            wanted.extend(entity_keys(&envelope.event));
        }
        // What the overlays already answer is not read again (`entity` looks there first).
        wanted.retain(|key| {
            let cached = self.entities.contains_key(key) || self.base.as_ref().is_some_and(|base| base.entities.contains_key(key));
            let pending = self.overlay_writes(&ENTITIES, entity_partition(key.0, &key.1));
            !cached && !pending
        });
        // Futures of a named async fn, built without a closure: an inferred closure
        // signature makes the projector's future not `Send` for callers that spawn it.
        let mut reads = Vec::with_capacity(wanted.len());
        for (kind, id) in wanted {
            reads.push(read_entity(self.driver.clone(), kind, id));
        }
        let states: Vec<_> = stream::iter(reads).buffer_unordered(PREFETCH_CONCURRENCY).try_collect().await?;
        self.entities.extend(states);
        Ok(())
    }

    pub(super) fn save_entity(&mut self, kind: EntityKind, id: &str, state: EntityState, stamp: Stamp) {
        let body = serde_json::to_string(&state).unwrap_or_default();
        self.put_raw(&ENTITIES, entity_partition(kind, id), vec![], body, stamp.for_table(&ENTITIES));
        self.entities.insert(entity_key(kind, id), Some(state));
    }

    /// The entity's state when `version` is newer than everything applied to it.
    pub(super) async fn newer(&mut self, kind: EntityKind, id: &str, version: u64) -> Result<Option<EntityState>, StoreError> {
        let state = self.entity(kind, id).await?.unwrap_or_default();
        Ok((version > state.v).then_some(state))
    }

    /// Applies an event at `version` to an entity whose state is the rows it owns: when
    /// the event is newer than the entity, the entity owns the rows of `revision` (built
    /// only then) at that version; otherwise nothing changes.
    pub(super) async fn revise_if_newer(
        &mut self,
        kind: EntityKind,
        id: &str,
        version: u64,
        stamp: Stamp,
        revision: impl FnOnce() -> Revision,
    ) -> Result<Applied, StoreError> {
        let Some(state) = self.newer(kind, id, version).await? else { return Ok(Applied::Stale) };
        self.revise(kind, id, state, version, revision(), stamp);
        Ok(Applied::Applied)
    }

    /// Moves the entity to `version` with the rows of `revision` (deleting those it owned
    /// and no longer does), and saves its state.
    pub(super) fn revise(&mut self, kind: EntityKind, id: &str, mut state: EntityState, version: u64, revision: Revision, stamp: Stamp) {
        let (rows, deleted) = match revision {
            Revision::Present(rows) => (rows, false),
            Revision::Deleted => (Vec::new(), true),
        };
        state.rows = self.replace_rows(&state.rows, rows, stamp);
        state.v = version;
        state.deleted = deleted;
        self.save_entity(kind, id, state, stamp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_names_are_the_stored_ones() {
        let names: Vec<&str> = [
            EntityKind::Account,
            EntityKind::Token,
            EntityKind::Meeting,
            EntityKind::Transcript,
            EntityKind::ActionItem,
            EntityKind::Team,
            EntityKind::Member,
            EntityKind::Share,
            EntityKind::TeamItem,
            EntityKind::WebhookEndpoint,
        ]
        .into_iter()
        .map(EntityKind::as_str)
        .collect();
        assert_eq!(names, ["account", "token", "meeting", "transcript", "action_item", "team", "member", "share", "team_item", "webhook_endpoint"]);
    }

    #[test]
    fn a_state_serialises_as_stored() {
        let state = EntityState { v: 3, ..EntityState::default() };
        assert_eq!(serde_json::to_string(&state).unwrap(), r#"{"v":3}"#);
        let state = EntityState {
            v: 4,
            deleted: true,
            last_delete: 4,
            clock: 9,
            data: Some(crate::messages::raw_json(&serde_json::json!({"a": 1}))),
            rows: Vec::new(),
            seen: BTreeMap::new(),
        };
        assert_eq!(serde_json::to_string(&state).unwrap(), r#"{"v":4,"deleted":true,"last_delete":4,"data":{"a":1},"clock":9}"#);
    }
}
