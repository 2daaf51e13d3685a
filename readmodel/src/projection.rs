//! The projection: events in, row writes out, written once for both drivers.
//!
//! The contract's rules live here:
//! 1. last version wins per entity: every entity's last applied version is kept in
//!    `projection_entities`; an event at or below it changes nothing;
//! 2. deletes shadow: a delete keeps the entity's version, so an older upsert arriving
//!    later is stale, and a higher one brings it back;
//! 3. unknown fields are ignored by the types (`recap-schemas`).
//!
//! Rows owned by one entity are written with the entity's version as timestamp; rows
//! derived from several (what a member sees of a team) with the event's stream
//! position; both drivers keep newest-timestamp-wins with shadowing tombstones.
//!
//! Visibility is decided here, not at read time: a share is materialised into the
//! partitions of every account that may see it (the team's current members and the
//! direct recipients, never the owner), and withdrawn when a member leaves, the team is
//! deleted or the share is withdrawn. Reads then stay one partition, O(page).
//!
//! A [`Batch`] accumulates the writes of many events and reads its own writes, so a
//! whole batch commits as one atomic write together with the stream position.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use recap_schemas::{ActionItem, Envelope, Event, Meeting, Share, Team};
use serde::{Deserialize, Serialize};

use crate::driver::{Driver, Mutation, MutationRef, Op, ScanRange, StoreError};
use crate::table::{Clock, Table, Val};
use crate::tables::*;
use crate::views::{self, render};
use crate::words::words;

/// What applying one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The event changed the read model.
    Applied,
    /// The event was at or below its entity's last version: nothing changed.
    Stale,
}

/// The key of one row.
pub type RowKey = (u8, Vec<Val>, Vec<Val>);

/// A row to write.
pub struct RowWrite {
    pub table: &'static Table,
    pub partition: Vec<Val>,
    pub clustering: Vec<Val>,
    pub body: String,
}

impl RowWrite {
    fn key(&self) -> RowKey {
        (self.table.id, self.partition.clone(), self.clustering.clone())
    }
}

/// The projection's memory of one entity.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct EntityState {
    v: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    deleted: bool,
    /// The rows this entity owns now (deleted when a newer version no longer has them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rows: Vec<RowKey>,
    /// The highest delete version ever applied (a transcript at or below it is shadowed).
    #[serde(default, skip_serializing_if = "is_zero")]
    last_delete: u64,
    /// What later events of other entities need from this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data: Option<serde_json::Value>,
    /// A share's clock: the latest position its rows were written at (see
    /// [`Batch::share_stamp`]).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    clock: i64,
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

/// The timestamps of the event being applied.
#[derive(Clone, Copy)]
struct Stamp {
    version: i64,
    position: i64,
}

impl Stamp {
    fn for_table(self, table: &Table) -> i64 {
        match table.clock {
            Clock::Version => self.version,
            Clock::Position => self.position,
            Clock::Wall => crate::driver::now_micros(),
        }
    }
}

struct Pending {
    table: &'static Table,
    op: Op,
    ts: i64,
    /// Which of the batch's events wrote it ([`Batch::apply`] counts them).
    event: u64,
}

/// Entity reads a prefetch keeps in flight at once.
const PREFETCH_CONCURRENCY: usize = 64;

/// The entity states `apply` looks up for an event (the ones every event of its type
/// reads; fan-out reads of teams and shares are left to `apply`).
fn entity_keys(event: &Event) -> Vec<(&'static str, String)> {
    match event {
        Event::AccountUpserted(event) => vec![("account", event.account_id.to_string())],
        Event::TokenCreated(event) => vec![("token", event.token_id.to_string())],
        Event::TokenRevoked(event) => vec![("token", event.token_id.to_string())],
        Event::MeetingUpserted(event) => vec![("meeting", event.meeting.id.to_string())],
        Event::MeetingDeleted(event) => vec![("meeting", event.meeting_id.to_string()), ("transcript", event.meeting_id.to_string())],
        Event::MeetingTranscriptSet(event) => vec![("transcript", event.meeting_id.to_string()), ("meeting", event.meeting_id.to_string())],
        Event::ActionItemUpserted(event) => vec![("action_item", event.item.id.to_string())],
        Event::ActionItemDeleted(event) => vec![("action_item", event.item_id.to_string())],
        Event::TeamUpserted(event) => vec![("team", event.team.id.to_string())],
        Event::TeamDeleted(event) => vec![("team", event.team_id.to_string())],
        Event::TeamMemberUpserted(event) => vec![("member", member_entity_id(&event.team_id, &event.account_id))],
        Event::TeamMemberRemoved(event) => vec![("member", member_entity_id(&event.team_id, &event.account_id))],
        Event::NoteShared(event) => vec![("share", event.share.id.to_string())],
        Event::NoteUnshared(event) => vec![("share", event.share_id.to_string())],
        Event::TeamActionItemUpserted(event) => vec![("team_item", event.item.id.to_string())],
        Event::TeamActionItemDeleted(event) => vec![("team_item", event.item_id.to_string())],
    }
}

/// An entity state from its stored body.
fn decode_entity(kind: &str, id: &str, body: &str) -> Result<EntityState, StoreError> {
    serde_json::from_str(body).map_err(|error| StoreError::Corrupt(format!("entity {kind} {id}: {error}")))
}

/// One entity state as stored, for [`Batch::prefetch`].
async fn read_entity(driver: Arc<dyn Driver>, kind: &'static str, id: String) -> Result<((&'static str, String), Option<EntityState>), StoreError> {
    let row = driver.get(&ENTITIES, &[Val::text(kind), Val::text(&id)], &[]).await?;
    let state = row.map(|row| decode_entity(kind, &id, &row.body)).transpose()?;
    Ok(((kind, id), state))
}

/// Writes of a batch of events, readable before they are committed.
pub struct Batch {
    driver: Arc<dyn Driver>,
    pending: PendingRows,
    entities: BTreeMap<(&'static str, String), Option<EntityState>>,
    writes: usize,
    /// The events applied so far: the one being applied, while it is.
    events: u64,
    /// The previous batch, while its write is still in flight: read through it.
    base: Option<Arc<Frozen>>,
}

type PendingRows = BTreeMap<(u8, Vec<Val>), BTreeMap<Vec<Val>, Pending>>;

/// A batch whose rows are being written: what the next batch reads before the store.
pub struct Frozen {
    pending: PendingRows,
    entities: BTreeMap<(&'static str, String), Option<EntityState>>,
}

impl Frozen {
    /// The rows to write, in key order, borrowed.
    pub fn mutations(&self) -> impl Iterator<Item = MutationRef<'_>> {
        self.pending.iter().flat_map(|((_, partition), rows)| {
            rows.iter().map(move |(clustering, pending)| MutationRef { table: pending.table, partition, clustering, op: &pending.op, ts: pending.ts })
        })
    }
}

impl Batch {
    pub fn new(driver: Arc<dyn Driver>) -> Batch {
        Batch { driver, pending: BTreeMap::new(), entities: BTreeMap::new(), writes: 0, events: 0, base: None }
    }

    /// A batch that reads `base` (a previous batch whose write has not completed yet)
    /// before the store, so projecting it can overlap that write. Its own write must
    /// start only after the base's write has completed.
    pub fn on_top_of(driver: Arc<dyn Driver>, base: Arc<Frozen>) -> Batch {
        Batch { base: Some(base), ..Batch::new(driver) }
    }

    /// The batch as written: its rows, which the next batch reads until they land.
    pub fn freeze(self) -> Arc<Frozen> {
        Arc::new(Frozen { pending: self.pending, entities: self.entities })
    }

    /// How many row writes the batch holds.
    pub fn len(&self) -> usize {
        self.writes
    }

    pub fn is_empty(&self) -> bool {
        self.writes == 0
    }

    /// Records the stream position this batch reaches (with whatever the source keeps
    /// beside it), committed in the same write as its rows.
    pub fn set_position_body(&mut self, source: &str, position: i64, body: String) {
        self.put_raw(&POSITIONS, vec![Val::text(source)], vec![], body, position);
    }

    /// The rows to write, in key order.
    pub fn into_mutations(self) -> Vec<Mutation> {
        let mut mutations = Vec::with_capacity(self.writes);
        for ((_, partition), rows) in self.pending {
            for (clustering, pending) in rows {
                mutations.push(Mutation { table: pending.table, partition: partition.clone(), clustering, op: pending.op, ts: pending.ts });
            }
        }
        mutations
    }

    /// The rows to write in two steps, for a store without multi-row atomicity: first
    /// every row but the entities' states, then the states. Should the second step fail
    /// (or the process die between the two), the states are as they were, so applying
    /// the same events again recomputes and rewrites the same rows with the same
    /// timestamps. A state written ahead of its rows would instead make those events
    /// stale, and rows that failed would never be written.
    pub fn into_mutation_steps(self) -> (Vec<Mutation>, Vec<Mutation>) {
        self.into_mutations().into_iter().partition(|mutation| mutation.table.id != ENTITIES.id)
    }

    // ---- reads through the overlay ---------------------------------------------

    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<String>, StoreError> {
        let key = (table.id, partition.to_vec());
        let layers = std::iter::once(&self.pending).chain(self.base.as_ref().map(|base| &base.pending));
        for layer in layers {
            if let Some(pending) = layer.get(&key).and_then(|rows| rows.get(clustering)) {
                return Ok(match &pending.op {
                    Op::Put { body, .. } => Some(body.clone()),
                    Op::Delete => None,
                });
            }
        }
        Ok(self.driver.get(table, partition, clustering).await?.map(|row| row.body))
    }

    async fn scan_all(&self, table: &'static Table, partition: &[Val]) -> Result<Vec<(Vec<Val>, String)>, StoreError> {
        let mut rows: BTreeMap<Vec<Val>, String> = BTreeMap::new();
        for row in self.driver.scan(table, partition, &ScanRange::all(), usize::MAX).await? {
            rows.insert(row.clustering, row.body);
        }
        let key = (table.id, partition.to_vec());
        // Oldest layer first, so the newest write of a row is the one that stays.
        let layers = self.base.as_ref().map(|base| &base.pending).into_iter().chain(std::iter::once(&self.pending));
        for layer in layers {
            for (clustering, pending) in layer.get(&key).into_iter().flatten() {
                match &pending.op {
                    Op::Put { body, .. } => rows.insert(clustering.clone(), body.clone()),
                    Op::Delete => rows.remove(clustering),
                };
            }
        }
        Ok(rows.into_iter().collect())
    }

    // ---- writes into the overlay -----------------------------------------------

    fn record(&mut self, table: &'static Table, partition: Vec<Val>, clustering: Vec<Val>, op: Op, ts: i64) {
        let rows = self.pending.entry((table.id, partition)).or_default();
        // A batch leaves the rows that applying its events one at a time would. Within one
        // event the projection's decisions are sequential: a later write of a row wins
        // unless it is older (a withdrawal followed by a grant of the same row leaves the
        // grant). Between events, the one the store keeps when they reach it one after the
        // other: the stores' LWW rule, ties included.
        match rows.get(&clustering) {
            Some(existing) if existing.event == self.events && existing.ts > ts => return,
            Some(existing) if existing.event != self.events && op.precedence(ts) <= existing.op.precedence(existing.ts) => return,
            Some(_) => {}
            None => self.writes += 1,
        }
        rows.insert(clustering, Pending { table, op, ts, event: self.events });
    }

    fn put_raw(&mut self, table: &'static Table, partition: Vec<Val>, clustering: Vec<Val>, body: String, ts: i64) {
        self.record(table, partition, clustering, Op::Put { body, expires_at: None }, ts);
    }

    fn put(&mut self, row: RowWrite, stamp: Stamp) {
        let ts = stamp.for_table(row.table);
        self.put_raw(row.table, row.partition, row.clustering, row.body, ts);
    }

    fn delete(&mut self, table: &'static Table, partition: Vec<Val>, clustering: Vec<Val>, ts: i64) {
        self.record(table, partition, clustering, Op::Delete, ts);
    }

    fn delete_key(&mut self, key: &RowKey, stamp: Stamp) {
        if let Some(table) = by_id(key.0) {
            let ts = stamp.for_table(table);
            self.delete(table, key.1.clone(), key.2.clone(), ts);
        }
    }

    /// Makes the entity own exactly `rows`: deletes what it owned and no longer does.
    fn replace_rows(&mut self, old: &[RowKey], new: Vec<RowWrite>, stamp: Stamp) -> Vec<RowKey> {
        let keys: Vec<RowKey> = new.iter().map(RowWrite::key).collect();
        let keep: BTreeSet<&RowKey> = keys.iter().collect();
        for key in old {
            if !keep.contains(key) {
                self.delete_key(key, stamp);
            }
        }
        for row in new {
            self.put(row, stamp);
        }
        keys
    }

    // ---- entity states ---------------------------------------------------------

    async fn entity(&mut self, kind: &'static str, id: &str) -> Result<Option<EntityState>, StoreError> {
        let key = (kind, id.to_string());
        if let Some(state) = self.entities.get(&key).or_else(|| self.base.as_ref().and_then(|base| base.entities.get(&key))) {
            return Ok(state.clone());
        }
        let state = self.get(&ENTITIES, &[Val::text(kind), Val::text(id)], &[]).await?.map(|body| decode_entity(kind, id, &body)).transpose()?;
        self.entities.insert((kind, id.to_string()), state.clone());
        Ok(state)
    }

    /// Reads, concurrently, the entity states applying `envelopes` will look up first,
    /// so that applying them does not wait on one store round trip per event: over a
    /// networked store those sequential reads are most of a batch's time. Optional:
    /// `apply` reads whatever was not prefetched, with the same result.
    pub async fn prefetch<'e>(&mut self, envelopes: impl IntoIterator<Item = &'e Envelope>) -> Result<(), StoreError> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        let mut wanted: BTreeSet<(&'static str, String)> = BTreeSet::new();
        for envelope in envelopes {
            wanted.extend(entity_keys(&envelope.event));
        }
        // What the overlays already answer is not read again (`entity` looks there first).
        wanted.retain(|key| {
            let cached = self.entities.contains_key(key) || self.base.as_ref().is_some_and(|base| base.entities.contains_key(key));
            let partition = (ENTITIES.id, vec![Val::text(key.0), Val::text(&key.1)]);
            let pending = std::iter::once(&self.pending).chain(self.base.as_ref().map(|base| &base.pending)).any(|layer| layer.contains_key(&partition));
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

    fn save_entity(&mut self, kind: &'static str, id: &str, state: EntityState, stamp: Stamp) {
        let body = serde_json::to_string(&state).unwrap_or_default();
        self.put_raw(&ENTITIES, vec![Val::text(kind), Val::text(id)], vec![], body, stamp.for_table(&ENTITIES));
        self.entities.insert((kind, id.to_string()), Some(state));
    }

    /// The entity's state when `version` is newer than everything applied to it.
    async fn newer(&mut self, kind: &'static str, id: &str, version: u64) -> Result<Option<EntityState>, StoreError> {
        let state = self.entity(kind, id).await?.unwrap_or_default();
        Ok((version > state.v).then_some(state))
    }

    // ---- the events ------------------------------------------------------------

    /// Applies one event at `position` of its stream partition.
    pub async fn apply(&mut self, envelope: &Envelope, position: i64) -> Result<Applied, StoreError> {
        self.events += 1;
        let version = envelope.version;
        let stamp = Stamp { version: version as i64, position };
        match &envelope.event {
            Event::AccountUpserted(event) => {
                let Some(mut state) = self.newer("account", &event.account_id, version).await? else { return Ok(Applied::Stale) };
                let body = serde_json::json!({ "plan": event.plan }).to_string();
                let row = RowWrite { table: &ACCOUNTS, partition: vec![Val::text(&event.account_id)], clustering: vec![], body };
                state.rows = self.replace_rows(&state.rows, vec![row], stamp);
                state.v = version;
                self.save_entity("account", &event.account_id, state, stamp);
            }
            Event::TokenCreated(event) => {
                let Some(state) = self.newer("token", &event.token_id, version).await? else {
                    return self.stale_token_created(&event.token_id, &event.token_sha256, stamp).await;
                };
                let token = TokenData {
                    account_id: event.account_id.to_string(),
                    token_id: event.token_id.to_string(),
                    token_sha256: Some(event.token_sha256.clone()),
                    revoked: false,
                };
                self.write_token(state, token, stamp);
            }
            Event::TokenRevoked(event) => {
                let Some(state) = self.newer("token", &event.token_id, version).await? else { return Ok(Applied::Stale) };
                let known: Option<TokenData> = state.data.clone().and_then(|data| serde_json::from_value(data).ok());
                let token = TokenData {
                    account_id: event.account_id.to_string(),
                    token_id: event.token_id.to_string(),
                    token_sha256: known.and_then(|known| known.token_sha256),
                    revoked: true,
                };
                self.write_token(state, token, stamp);
            }
            Event::MeetingUpserted(event) => {
                let Some(mut state) = self.newer("meeting", &event.meeting.id, version).await? else { return Ok(Applied::Stale) };
                let rows = meeting_rows(&event.account_id, &event.meeting);
                state.rows = self.replace_rows(&state.rows, rows, stamp);
                state.v = version;
                state.deleted = false;
                self.save_entity("meeting", &event.meeting.id, state, stamp);
            }
            Event::MeetingDeleted(event) => {
                let Some(mut state) = self.newer("meeting", &event.meeting_id, version).await? else {
                    return self.stale_meeting_delete(&event.meeting_id, version, stamp).await;
                };
                state.rows = self.replace_rows(&state.rows, Vec::new(), stamp);
                state.v = version;
                state.deleted = true;
                state.last_delete = version;
                self.save_entity("meeting", &event.meeting_id, state, stamp);
                self.shadow_transcript(&event.meeting_id, version, stamp).await?;
            }
            Event::MeetingTranscriptSet(event) => {
                let Some(mut state) = self.newer("transcript", &event.meeting_id, version).await? else { return Ok(Applied::Stale) };
                let meeting = self.entity("meeting", &event.meeting_id).await?.unwrap_or_default();
                if version <= meeting.last_delete {
                    return Ok(Applied::Stale);
                }
                let rows = transcript_rows(&event.account_id, &event.meeting_id, &event.transcript);
                state.rows = self.replace_rows(&state.rows, rows, stamp);
                state.v = version;
                self.save_entity("transcript", &event.meeting_id, state, stamp);
            }
            Event::ActionItemUpserted(event) => {
                let Some(mut state) = self.newer("action_item", &event.item.id, version).await? else { return Ok(Applied::Stale) };
                let rows = action_item_rows(&event.account_id, &event.item, None);
                state.rows = self.replace_rows(&state.rows, rows, stamp);
                state.v = version;
                state.deleted = false;
                self.save_entity("action_item", &event.item.id, state, stamp);
            }
            Event::ActionItemDeleted(event) => {
                let Some(mut state) = self.newer("action_item", &event.item_id, version).await? else { return Ok(Applied::Stale) };
                state.rows = self.replace_rows(&state.rows, Vec::new(), stamp);
                state.v = version;
                state.deleted = true;
                self.save_entity("action_item", &event.item_id, state, stamp);
            }
            Event::TeamUpserted(event) => return self.team_upserted(&event.team, version, stamp).await,
            Event::TeamDeleted(event) => return self.team_deleted(&event.team_id, version, stamp).await,
            Event::TeamMemberUpserted(event) => return self.member_upserted(&event.team_id, &event.account_id, &event.role, version, stamp).await,
            Event::TeamMemberRemoved(event) => return self.member_removed(&event.team_id, &event.account_id, version, stamp).await,
            Event::NoteShared(event) => return self.note_shared(&event.share, version, stamp).await,
            Event::NoteUnshared(event) => return self.note_unshared(&event.share_id, version, stamp).await,
            Event::TeamActionItemUpserted(event) => {
                let Some(mut state) = self.newer("team_item", &event.item.id, version).await? else { return Ok(Applied::Stale) };
                let row = RowWrite {
                    table: &TEAM_ACTION_ITEMS,
                    partition: vec![Val::text(&event.team_id), Val::text(event.item.status.as_str())],
                    clustering: vec![Val::Int(event.item.created_at.micros()), Val::text(&event.item.id)],
                    body: render(&views::TeamActionItemView::of(&event.item)),
                };
                state.rows = self.replace_rows(&state.rows, vec![row], stamp);
                state.v = version;
                state.deleted = false;
                self.save_entity("team_item", &event.item.id, state, stamp);
            }
            Event::TeamActionItemDeleted(event) => {
                let Some(mut state) = self.newer("team_item", &event.item_id, version).await? else { return Ok(Applied::Stale) };
                state.rows = self.replace_rows(&state.rows, Vec::new(), stamp);
                state.v = version;
                state.deleted = true;
                self.save_entity("team_item", &event.item_id, state, stamp);
            }
        }
        Ok(Applied::Applied)
    }

    fn write_token(&mut self, mut state: EntityState, token: TokenData, stamp: Stamp) {
        let mut rows = Vec::new();
        if let Some(sha) = &token.token_sha256 {
            let body = serde_json::json!({ "account_id": token.account_id, "token_id": token.token_id, "revoked": token.revoked }).to_string();
            rows.push(RowWrite { table: &TOKENS_BY_HASH, partition: vec![Val::text(sha)], clustering: vec![], body });
        }
        state.rows = self.replace_rows(&state.rows, rows, stamp);
        state.v = stamp.version as u64;
        state.data = serde_json::to_value(&token).ok();
        self.save_entity("token", &token.token_id, state, stamp);
    }

    /// A token.created behind a newer token.revoked is stale, but it is the first to
    /// name the token's hash: the token then reads as revoked ("After it is projected,
    /// the token answers 401 token_revoked"), whichever of the two came first.
    async fn stale_token_created(&mut self, token_id: &str, token_sha256: &str, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(state) = self.entity("token", token_id).await? else { return Ok(Applied::Stale) };
        let Some(known) = state.data.clone().and_then(|data| serde_json::from_value::<TokenData>(data).ok()) else { return Ok(Applied::Stale) };
        if !known.revoked || known.token_sha256.is_some() {
            return Ok(Applied::Stale);
        }
        let token = TokenData { token_sha256: Some(token_sha256.to_string()), ..known };
        let revoked_at = Stamp { version: state.v as i64, position: stamp.position };
        self.write_token(state, token, revoked_at);
        Ok(Applied::Applied)
    }

    /// A meeting.deleted at or below the meeting's version changes nothing of the
    /// meeting, but a delete still shadows what is at or below it ("also one that arrives
    /// after the delete"): a transcript at or below it goes, and later ones at or below
    /// it are stale, as in version order.
    async fn stale_meeting_delete(&mut self, meeting_id: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut meeting) = self.entity("meeting", meeting_id).await? else { return Ok(Applied::Stale) };
        if version <= meeting.last_delete {
            return Ok(Applied::Stale);
        }
        meeting.last_delete = version;
        self.save_entity("meeting", meeting_id, meeting, stamp);
        self.shadow_transcript(meeting_id, version, stamp).await?;
        Ok(Applied::Applied)
    }

    /// A meeting delete at `version` takes the transcript with it unless the transcript
    /// is newer than the delete.
    async fn shadow_transcript(&mut self, meeting_id: &str, version: u64, stamp: Stamp) -> Result<(), StoreError> {
        if let Some(mut transcript) = self.entity("transcript", meeting_id).await? {
            if transcript.v <= version && !transcript.rows.is_empty() {
                transcript.rows = self.replace_rows(&transcript.rows, Vec::new(), stamp);
                self.save_entity("transcript", meeting_id, transcript, stamp);
            }
        }
        Ok(())
    }

    // ---- teams and sharing -----------------------------------------------------

    /// The team, when it exists and is not deleted.
    async fn active_team(&mut self, team_id: &str) -> Result<Option<Team>, StoreError> {
        let Some(state) = self.entity("team", team_id).await? else { return Ok(None) };
        if state.deleted {
            return Ok(None);
        }
        Ok(state.data.and_then(|data| serde_json::from_value(data).ok()))
    }

    /// The team, when its members read its shares: it exists, is not deleted, and can
    /// collaborate ("when false, the team has nothing shared to read").
    async fn sharing_team(&mut self, team_id: &str) -> Result<Option<Team>, StoreError> {
        Ok(self.active_team(team_id).await?.filter(|team| team.can_collaborate))
    }

    /// The team's members (account id, role), whatever the team's state.
    async fn members(&self, team_id: &str) -> Result<Vec<(String, String)>, StoreError> {
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

    async fn team_share_ids(&self, team_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.scan_all(&TEAM_SHARES, &[Val::text(team_id)]).await?;
        Ok(rows.into_iter().filter_map(|(clustering, _)| Some(clustering.first()?.as_text()?.to_string())).collect())
    }

    /// Who sees the share, never the owner: "Shared with a team: `team` set, visible to
    /// the team's current members" (while the team exists and can collaborate);
    /// "Shared directly: `team` null, visible to `recipient_account_ids`".
    async fn audience(&mut self, share: &Share) -> Result<BTreeSet<String>, StoreError> {
        let mut audience: BTreeSet<String> = match &share.team {
            Some(team) if self.sharing_team(&team.id).await?.is_some() => self.members(&team.id).await?.into_iter().map(|(account, _)| account).collect(),
            Some(_) => BTreeSet::new(),
            None => share.recipient_account_ids.iter().map(|id| id.to_string()).collect(),
        };
        audience.remove(share.owner_account_id.as_str());
        Ok(audience)
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
    fn share_stamp(state: &mut EntityState, stamp: Stamp) -> Stamp {
        let position = stamp.position.max(state.clock.saturating_add(1));
        state.clock = position;
        Stamp { position, ..stamp }
    }

    /// The team's published shares, each with the stamp at which this team event writes
    /// its rows ([`Self::share_stamp`]; the share's clock moves on in its saved state).
    /// A `team_shares` row that a newer version of its share moved elsewhere is passed
    /// over.
    async fn team_shares(&mut self, team_id: &str, stamp: Stamp) -> Result<Vec<(Share, Stamp)>, StoreError> {
        let mut shares = Vec::new();
        for share_id in self.team_share_ids(team_id).await? {
            let Some(mut state) = self.entity("share", &share_id).await? else { continue };
            let Some(share) = published(&state).filter(|share| share.team.as_ref().is_some_and(|team| team.id == team_id)) else { continue };
            let share_stamp = Self::share_stamp(&mut state, stamp);
            self.save_entity("share", &share_id, state, share_stamp);
            shares.push((share, share_stamp));
        }
        Ok(shares)
    }

    fn grant(&mut self, account_id: &str, share: &Share, stamp: Stamp) {
        for row in share_rows(account_id, share) {
            self.put(row, stamp);
        }
    }

    fn withdraw(&mut self, account_id: &str, share: &Share, stamp: Stamp) {
        for row in share_rows(account_id, share) {
            let ts = stamp.for_table(row.table);
            self.delete(row.table, row.partition, row.clustering, ts);
        }
    }

    /// Rewrites the Team row of every member (name, plan, role, member count).
    async fn write_team_rows(&mut self, team: &Team, stamp: Stamp) -> Result<(), StoreError> {
        let members = self.members(&team.id).await?;
        let count = members.len() as i64;
        for (account, role) in &members {
            let body = render(&views::TeamRecord::of(team, role, count));
            self.put(RowWrite { table: &TEAMS_BY_ACCOUNT, partition: vec![Val::text(account)], clustering: vec![Val::text(&team.id)], body }, stamp);
        }
        Ok(())
    }

    async fn team_upserted(&mut self, team: &Team, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut state) = self.newer("team", &team.id, version).await? else { return Ok(Applied::Stale) };
        let was_active = state.v > 0 && !state.deleted;
        let was_sharing =
            was_active && state.data.as_ref().and_then(|data| serde_json::from_value::<Team>(data.clone()).ok()).is_some_and(|team| team.can_collaborate);
        state.v = version;
        state.deleted = false;
        state.data = serde_json::to_value(team).ok();
        self.save_entity("team", &team.id, state, stamp);
        match (was_sharing, team.can_collaborate) {
            // The team is back, new, or can collaborate again: its members see its shares.
            (false, true) => {
                let members = self.members(&team.id).await?;
                for (share, share_stamp) in self.team_shares(&team.id, stamp).await? {
                    for (account, _) in &members {
                        if *account != share.owner_account_id {
                            self.grant(account, &share, share_stamp);
                        }
                    }
                }
            }
            // It can no longer collaborate: nothing of it is shared to read any more.
            (true, false) => self.withdraw_team_shares(&team.id, stamp).await?,
            _ => {}
        }
        self.write_team_rows(team, stamp).await?;
        Ok(Applied::Applied)
    }

    /// Withdraws the team's shares from its members.
    async fn withdraw_team_shares(&mut self, team_id: &str, stamp: Stamp) -> Result<(), StoreError> {
        let members = self.members(team_id).await?;
        for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
            for (account, _) in &members {
                self.withdraw(account, &share, share_stamp);
            }
        }
        Ok(())
    }

    async fn team_deleted(&mut self, team_id: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut state) = self.newer("team", team_id, version).await? else { return Ok(Applied::Stale) };
        let was_active = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = true;
        state.data = None;
        self.save_entity("team", team_id, state, stamp);
        if was_active {
            self.withdraw_team_shares(team_id, stamp).await?;
        }
        let members = self.members(team_id).await?;
        // Memberships and team action items are gone; their versions are kept, so
        // only newer member and item events bring them back.
        for (account, _) in &members {
            let ts = stamp.for_table(&TEAMS_BY_ACCOUNT);
            self.delete(&TEAMS_BY_ACCOUNT, vec![Val::text(account)], vec![Val::text(team_id)], ts);
            let ts = stamp.for_table(&TEAM_MEMBERS);
            self.delete(&TEAM_MEMBERS, vec![Val::text(team_id)], vec![Val::text(account)], ts);
            let member_id = member_entity_id(team_id, account);
            if let Some(mut member) = self.entity("member", &member_id).await? {
                member.deleted = true;
                self.save_entity("member", &member_id, member, stamp);
            }
        }
        for status in recap_schemas::ActionItemStatus::ALL {
            let partition = vec![Val::text(team_id), Val::text(status.as_str())];
            for (clustering, _) in self.scan_all(&TEAM_ACTION_ITEMS, &partition).await? {
                let Some(item_id) = clustering.get(1).and_then(Val::as_text).map(str::to_string) else { continue };
                if let Some(mut item) = self.entity("team_item", &item_id).await? {
                    let item_stamp = Stamp { version: item.v as i64, position: stamp.position };
                    item.rows = self.replace_rows(&item.rows, Vec::new(), item_stamp);
                    item.deleted = true;
                    self.save_entity("team_item", &item_id, item, stamp);
                }
            }
        }
        Ok(Applied::Applied)
    }

    async fn member_upserted(&mut self, team_id: &str, account_id: &str, role: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let member_id = member_entity_id(team_id, account_id);
        let Some(mut state) = self.newer("member", &member_id, version).await? else { return Ok(Applied::Stale) };
        let was_member = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = false;
        self.save_entity("member", &member_id, state, stamp);
        let body = serde_json::json!({ "role": role }).to_string();
        self.put(RowWrite { table: &TEAM_MEMBERS, partition: vec![Val::text(team_id)], clustering: vec![Val::text(account_id)], body }, stamp);
        let Some(team) = self.active_team(team_id).await? else { return Ok(Applied::Applied) };
        if !was_member && team.can_collaborate {
            // A member who joins sees everything the team has, older shares included.
            for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
                if share.owner_account_id != account_id {
                    self.grant(account_id, &share, share_stamp);
                }
            }
        }
        self.write_team_rows(&team, stamp).await?;
        Ok(Applied::Applied)
    }

    async fn member_removed(&mut self, team_id: &str, account_id: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let member_id = member_entity_id(team_id, account_id);
        let Some(mut state) = self.newer("member", &member_id, version).await? else { return Ok(Applied::Stale) };
        let was_member = state.v > 0 && !state.deleted;
        state.v = version;
        state.deleted = true;
        self.save_entity("member", &member_id, state, stamp);
        if !was_member {
            return Ok(Applied::Applied);
        }
        let ts = stamp.for_table(&TEAM_MEMBERS);
        self.delete(&TEAM_MEMBERS, vec![Val::text(team_id)], vec![Val::text(account_id)], ts);
        let Some(team) = self.active_team(team_id).await? else { return Ok(Applied::Applied) };
        // "From then on the member sees none of the team's notes."
        for (share, share_stamp) in self.team_shares(team_id, stamp).await? {
            self.withdraw(account_id, &share, share_stamp);
        }
        let ts = stamp.for_table(&TEAMS_BY_ACCOUNT);
        self.delete(&TEAMS_BY_ACCOUNT, vec![Val::text(account_id)], vec![Val::text(team_id)], ts);
        self.write_team_rows(&team, stamp).await?;
        Ok(Applied::Applied)
    }

    async fn note_shared(&mut self, share: &Share, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut state) = self.newer("share", &share.id, version).await? else { return Ok(Applied::Stale) };
        let stamp = Self::share_stamp(&mut state, stamp);
        let previous = published(&state);
        let audience = self.audience(share).await?;
        if let Some(previous) = &previous {
            let before = self.audience(previous).await?;
            let same_keys = previous.published_at == share.published_at && words_of_share(previous) == words_of_share(share);
            for account in &before {
                if !(same_keys && audience.contains(account)) {
                    self.withdraw(account, previous, stamp);
                }
            }
            if previous.team.as_ref().map(|team| &team.id) != share.team.as_ref().map(|team| &team.id) {
                if let Some(team) = &previous.team {
                    let ts = stamp.for_table(&TEAM_SHARES);
                    self.delete(&TEAM_SHARES, vec![Val::text(&team.id)], vec![Val::text(&share.id)], ts);
                }
            }
        }
        for account in &audience {
            self.grant(account, share, stamp);
        }
        if let Some(team) = &share.team {
            self.put(
                RowWrite { table: &TEAM_SHARES, partition: vec![Val::text(&team.id)], clustering: vec![Val::text(&share.id)], body: String::new() },
                stamp,
            );
        }
        let record = RowWrite { table: &SHARES, partition: vec![Val::text(&share.id)], clustering: vec![], body: render(&views::ShareRecord::of(share)) };
        state.rows = self.replace_rows(&state.rows, vec![record], stamp);
        state.v = version;
        state.deleted = false;
        state.data = serde_json::to_value(share).ok();
        self.save_entity("share", &share.id, state, stamp);
        Ok(Applied::Applied)
    }

    async fn note_unshared(&mut self, share_id: &str, version: u64, stamp: Stamp) -> Result<Applied, StoreError> {
        let Some(mut state) = self.newer("share", share_id, version).await? else { return Ok(Applied::Stale) };
        let stamp = Self::share_stamp(&mut state, stamp);
        let previous = published(&state);
        if let Some(previous) = &previous {
            for account in self.audience(previous).await? {
                self.withdraw(&account, previous, stamp);
            }
            if let Some(team) = &previous.team {
                let ts = stamp.for_table(&TEAM_SHARES);
                self.delete(&TEAM_SHARES, vec![Val::text(&team.id)], vec![Val::text(share_id)], ts);
            }
        }
        state.rows = self.replace_rows(&state.rows, Vec::new(), stamp);
        state.v = version;
        state.deleted = true;
        state.data = None;
        self.save_entity("share", share_id, state, stamp);
        Ok(Applied::Applied)
    }
}

#[derive(Serialize, Deserialize)]
struct TokenData {
    account_id: String,
    token_id: String,
    token_sha256: Option<String>,
    revoked: bool,
}

/// The share a share entity holds, when it is published.
fn published(state: &EntityState) -> Option<Share> {
    if state.deleted {
        return None;
    }
    state.data.clone().and_then(|data| serde_json::from_value(data).ok())
}

fn member_entity_id(team_id: &str, account_id: &str) -> String {
    format!("{team_id}\u{1f}{account_id}")
}

/// Every row a meeting snapshot owns.
pub fn meeting_rows(account_id: &str, meeting: &Meeting) -> Vec<RowWrite> {
    let account = Val::text(account_id);
    let newest = vec![Val::Int(meeting.created_at.micros()), Val::text(&meeting.id)];
    let entry = render(&views::MeetingListEntry::of(meeting));
    let mut rows = vec![
        RowWrite { table: &MEETINGS_BY_ACCOUNT, partition: vec![account.clone()], clustering: newest.clone(), body: entry.clone() },
        RowWrite {
            table: &MEETING_DETAILS,
            partition: vec![account.clone(), Val::text(&meeting.id)],
            clustering: vec![],
            body: render(&views::MeetingDetail::of(meeting)),
        },
    ];
    if let Some(series_id) = &meeting.series_id {
        rows.push(RowWrite { table: &MEETINGS_BY_SERIES, partition: vec![account.clone(), Val::text(series_id)], clustering: newest.clone(), body: entry });
    }
    let mut searchable = words(&meeting.title);
    for summary in &meeting.summaries {
        searchable.extend(words(&summary.title));
        searchable.extend(words(&summary.text));
    }
    for word in searchable {
        rows.push(RowWrite { table: &MEETING_WORDS, partition: vec![account.clone(), Val::Text(word)], clustering: newest.clone(), body: String::new() });
    }
    for item in &meeting.action_items {
        rows.extend(action_item_rows(account_id, item, Some(meeting)));
    }
    rows
}

/// The list-form rows of one action item: by status, by assignee, by meeting.
pub fn action_item_rows(account_id: &str, item: &ActionItem, meeting: Option<&Meeting>) -> Vec<RowWrite> {
    let body = render(&views::ActionItemListEntry::of(item, meeting));
    let status = Val::text(item.status.as_str());
    let newest = vec![Val::Int(item.created_at.micros()), Val::text(&item.id)];
    let account = Val::text(account_id);
    let mut rows =
        vec![RowWrite { table: &ACTION_ITEMS_BY_STATUS, partition: vec![account.clone(), status.clone()], clustering: newest.clone(), body: body.clone() }];
    if let Some(assignee) = &item.assignee_human_id {
        rows.push(RowWrite {
            table: &ACTION_ITEMS_BY_ASSIGNEE,
            partition: vec![account.clone(), Val::text(assignee), status.clone()],
            clustering: newest.clone(),
            body: body.clone(),
        });
    }
    if let Some(meeting) = meeting {
        rows.push(RowWrite { table: &ACTION_ITEMS_BY_MEETING, partition: vec![account, Val::text(&meeting.id), status], clustering: newest, body });
    }
    rows
}

/// The transcript row (REST's transcript object plus the word count) and the word chunks.
pub fn transcript_rows(account_id: &str, meeting_id: &str, transcript: &recap_schemas::Transcript) -> Vec<RowWrite> {
    let partition = vec![Val::text(account_id), Val::text(meeting_id)];
    let words: &[recap_schemas::Word] = transcript.words.as_deref().unwrap_or_default();
    // Serialised straight from the event's types (no intermediate `Value` tree), in the
    // key order the stored rows have always had.
    #[derive(Serialize)]
    struct TranscriptBody<'a> {
        segments: &'a [recap_schemas::Segment],
        text: &'a str,
        word_count: usize,
    }
    let body = render(&TranscriptBody { segments: &transcript.segments, text: &transcript.text, word_count: words.len() });
    let mut rows = vec![RowWrite { table: &MEETING_TRANSCRIPTS, partition: partition.clone(), clustering: vec![], body }];
    for (index, chunk) in words.chunks(WORDS_PER_CHUNK).enumerate() {
        rows.push(RowWrite {
            table: &TRANSCRIPT_WORDS,
            partition: partition.clone(),
            clustering: vec![Val::Int(index as i64)],
            body: serde_json::to_string(chunk).unwrap_or_default(),
        });
    }
    rows
}

fn words_of_share(share: &Share) -> BTreeSet<String> {
    let mut found = words(&share.title);
    found.extend(words(&share.text));
    found
}

/// What one account's partitions hold of one share.
fn share_rows(account_id: &str, share: &Share) -> Vec<RowWrite> {
    let account = Val::text(account_id);
    let newest = vec![Val::Int(share.published_at.micros()), Val::text(&share.id)];
    let mut rows = vec![
        RowWrite {
            table: &SHARED_NOTES_BY_ACCOUNT,
            partition: vec![account.clone()],
            clustering: newest.clone(),
            body: render(&views::SharedNoteListEntry::of(share)),
        },
        RowWrite {
            table: &SHARED_NOTE_ACCESS,
            partition: vec![account.clone(), Val::text(&share.id)],
            clustering: vec![],
            body: serde_json::json!({ "published_at_us": share.published_at.micros() }).to_string(),
        },
    ];
    for word in words_of_share(share) {
        rows.push(RowWrite { table: &SHARED_NOTE_WORDS, partition: vec![account.clone(), Val::Text(word)], clustering: newest.clone(), body: String::new() });
    }
    rows
}
