//! The batch: the row writes of many events, kept in key order until they are committed
//! as one atomic write together with the stream position, and read back through a
//! read-your-writes overlay (the batch's own writes, then those of the previous batch
//! still being written, then the store). It implements the storage side of the
//! contract's "nothing is lost and nothing counts twice": a batch leaves exactly the rows
//! that applying its events one at a time would, each row stamped with the timestamp
//! its table's clock gives (the entity's version, or the event's stream position), so
//! newest-timestamp-wins in the store decides as the projection did.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use recap_schemas::Timestamp;

use crate::driver::{Driver, Mutation, MutationRef, Op, ScanRange, StoreError};
use crate::messages::AccountMessage;
use crate::table::{Clock, Table, Val};
use crate::tables::{by_id, ENTITIES, MESSAGE_OUTBOX, POSITIONS, TEAM_MEMBERS};

/// The outbox's one partition: the embedded log's messages, in order.
pub const OUTBOX_SOURCE: &str = "log";

use super::entities::EntityStates;
use super::rows::{RowKey, RowWrite};

/// The timestamps of the event being applied.
#[derive(Clone, Copy)]
pub(super) struct Stamp {
    pub(super) version: i64,
    pub(super) position: i64,
}

impl Stamp {
    pub(super) fn for_table(self, table: &Table) -> i64 {
        match table.clock {
            Clock::Version => self.version,
            Clock::Position => self.position,
            Clock::Wall | Clock::FirstWriteWins => crate::driver::now_micros(),
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

type PendingRows = BTreeMap<(u8, Vec<Val>), BTreeMap<Vec<Val>, Pending>>;

/// Writes of a batch of events, readable before they are committed.
pub struct Batch {
    pub(super) driver: Arc<dyn Driver>,
    pending: PendingRows,
    pub(super) entities: EntityStates,
    writes: usize,
    /// The events applied so far: the one being applied, while it is.
    events: u64,
    /// The previous batch, while its write is still in flight: read through it.
    pub(super) base: Option<Arc<Frozen>>,
    /// The event being applied: what its messages are derived from.
    pub(super) source: Source,
    /// The messages the batch's events announce, in the order they were applied.
    pub(super) messages: Vec<AccountMessage>,
}

/// The envelope fields a message takes from the event that caused it.
#[derive(Clone, Debug)]
pub(super) struct Source {
    pub(super) event_id: String,
    pub(super) occurred_at: Timestamp,
}

/// A batch whose rows are being written: what the next batch reads before the store.
pub struct Frozen {
    pending: PendingRows,
    pub(super) entities: EntityStates,
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
        Batch {
            driver,
            pending: BTreeMap::new(),
            entities: BTreeMap::new(),
            writes: 0,
            events: 0,
            base: None,
            source: Source { event_id: String::new(), occurred_at: Timestamp(0) },
            messages: Vec::new(),
        }
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

    /// The messages the events applied so far announce, in order; the batch keeps none
    /// after this. Taken before [`Batch::freeze`], and published only once the batch's
    /// rows are written (`docs/webhooks.md`).
    pub fn take_messages(&mut self) -> Vec<AccountMessage> {
        std::mem::take(&mut self.messages)
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

    /// Writes a message to the embedded edition's outbox at `seq`, in the same commit as
    /// the batch's rows (`tables::MESSAGE_OUTBOX`: partition `"log"`, write time = seq).
    pub fn put_outbox_message(&mut self, seq: i64, message: &AccountMessage) {
        // A message holds strings, numbers, booleans and objects only.
        let body = serde_json::to_string(message).unwrap_or_default();
        self.put_raw(&MESSAGE_OUTBOX, vec![Val::text(OUTBOX_SOURCE)], vec![Val::Int(seq)], body, seq);
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
    /// every row the reads serve, then the projection's own state: the entities' states
    /// and the teams' member rows (which no read serves: a team delete finds the members
    /// it ends in them). Should the second step fail (or the process die between the
    /// two), that state is as it was, so applying the same events again recomputes and
    /// rewrites the same rows, with the same timestamps, and announces the same
    /// messages. A state written ahead of its rows would instead make those events
    /// stale, and rows that failed would never be written; member rows removed ahead of
    /// the states would leave a team delete applied again with no member to tell.
    pub fn into_mutation_steps(self) -> (Vec<Mutation>, Vec<Mutation>) {
        self.into_mutations().into_iter().partition(|mutation| mutation.table.id != ENTITIES.id && mutation.table.id != TEAM_MEMBERS.id)
    }

    /// Starts applying the next event: writes from here on belong to it.
    pub(super) fn begin_event(&mut self, source: Source) {
        self.events += 1;
        self.source = source;
    }

    /// The overlays a read looks through, newest first: this batch's writes, then the
    /// previous batch's.
    fn layers(&self) -> impl Iterator<Item = &PendingRows> {
        std::iter::once(&self.pending).chain(self.base.as_ref().map(|base| &base.pending))
    }

    /// Whether this batch or the previous one writes a row in the partition: reads of it
    /// go through the overlay.
    pub(super) fn overlay_writes(&self, table: &Table, partition: Vec<Val>) -> bool {
        let key = (table.id, partition);
        self.layers().any(|layer| layer.contains_key(&key))
    }

    // ---- reads through the overlay ---------------------------------------------

    pub(super) async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<String>, StoreError> {
        let key = (table.id, partition.to_vec());
        for layer in self.layers() {
            if let Some(pending) = layer.get(&key).and_then(|rows| rows.get(clustering)) {
                return Ok(match &pending.op {
                    Op::Put { body, .. } => Some(body.clone()),
                    Op::Delete | Op::Purge => None,
                });
            }
        }
        Ok(self.driver.get(table, partition, clustering).await?.map(|row| row.body))
    }

    pub(super) async fn scan_all(&self, table: &'static Table, partition: &[Val]) -> Result<Vec<(Vec<Val>, String)>, StoreError> {
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
                    Op::Delete | Op::Purge => rows.remove(clustering),
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

    pub(super) fn put_raw(&mut self, table: &'static Table, partition: Vec<Val>, clustering: Vec<Val>, body: String, ts: i64) {
        self.record(table, partition, clustering, Op::Put { body, expires_at: None }, ts);
    }

    pub(super) fn put(&mut self, row: RowWrite, stamp: Stamp) {
        let ts = stamp.for_table(row.table);
        self.put_raw(row.table, row.partition, row.clustering, row.body, ts);
    }

    /// Deletes a row at the timestamp its table's clock gives.
    pub(super) fn delete(&mut self, table: &'static Table, partition: Vec<Val>, clustering: Vec<Val>, stamp: Stamp) {
        let ts = stamp.for_table(table);
        self.record(table, partition, clustering, Op::Delete, ts);
    }

    fn delete_key(&mut self, key: &RowKey, stamp: Stamp) {
        if let Some(table) = by_id(key.0) {
            self.delete(table, key.1.clone(), key.2.clone(), stamp);
        }
    }

    /// Makes the entity own exactly `rows`: deletes what it owned and no longer does.
    pub(super) fn replace_rows(&mut self, old: &[RowKey], new: Vec<RowWrite>, stamp: Stamp) -> Vec<RowKey> {
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
}
