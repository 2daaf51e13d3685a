//! The embedded edition's message log reader: tails the `message_outbox` table the
//! projector writes (partition `"log"`, one row per message, seq 1, 2, 3…), hands each
//! batch to [`crate::ingest`], and commits its position (`projector_positions`, source
//! `"webhooks"`) as the first attempts of the messages it read settle
//! ([`crate::handoff::Ledger`]), together with the removal of the outbox rows the
//! position passed (gone outright from the embedded store: nothing reads behind the
//! position). The outbox is the queue of first attempts: a crash reads every message
//! after the position again (the same feed rows, and the first attempts made again),
//! and the outbox holds only what the position has not passed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use recap_readmodel::tables::{MESSAGE_OUTBOX, POSITIONS};
use recap_readmodel::webhooks::WebhookStore;
use recap_readmodel::{Driver, Mutation, Op, ScanRange, StoreError, Val};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::deliver::Shards;
use crate::handoff::Handoff;
use crate::ingest::{ingest, LogMessage};
use crate::metrics::Stats;
use crate::schedule::Clock;

/// The outbox partition the projector writes.
pub const OUTBOX_SOURCE: &str = "log";
/// The source name of this reader's position in `projector_positions`.
pub const POSITION_SOURCE: &str = "webhooks";
/// The shard of every delivery in the embedded edition (one process delivers them all).
pub const EMBEDDED_SHARD: &str = "0";

/// Settings of the outbox reader.
#[derive(Clone, Debug)]
pub struct OutboxConfig {
    /// Messages per batch, at most.
    pub batch: usize,
    /// How often the outbox is looked at when it had nothing new, where the store does
    /// not tell of its writes ([`Driver::next_change`]); where it does, a write to the
    /// outbox wakes the reader at once.
    pub poll: Duration,
    /// How often the position is committed, at most, while it moves.
    pub commit_every: Duration,
}

impl Default for OutboxConfig {
    fn default() -> OutboxConfig {
        OutboxConfig { batch: 500, poll: Duration::from_millis(50), commit_every: Duration::from_millis(100) }
    }
}

#[derive(Serialize, Deserialize)]
struct Position {
    seq: i64,
}

/// The outbox reader of the embedded edition.
pub struct OutboxReader {
    pub driver: Arc<dyn Driver>,
    pub store: WebhookStore,
    pub clock: Arc<dyn Clock>,
    pub stats: Arc<Stats>,
    /// Where each batch's first attempts go to the deliverer, and their ledger.
    pub handoff: Handoff,
    /// The deliverer's shards.
    pub shards: Shards,
    pub config: OutboxConfig,
}

/// What the reader has read and not yet passed with its committed position.
#[derive(Default)]
pub struct Cursor {
    /// The position committed.
    pub committed: i64,
    /// The last seq read and ingested.
    pub read: i64,
    /// The seqs of the outbox rows read after the committed position.
    behind: VecDeque<i64>,
    last_commit: Option<Instant>,
}

impl OutboxReader {
    /// The last seq whose first attempts are all settled; 0 before the first.
    pub async fn position(&self) -> Result<i64, StoreError> {
        let Some(row) = self.driver.get(&POSITIONS, &[Val::text(POSITION_SOURCE)], &[]).await? else { return Ok(0) };
        let position: Position = serde_json::from_str(&row.body).map_err(|error| StoreError::Corrupt(format!("webhooks position: {error}")))?;
        Ok(position.seq)
    }

    /// Reads and ingests one batch after what `cursor` read; whether it read anything.
    pub async fn step(&self, cursor: &mut Cursor) -> Result<bool, StoreError> {
        let after = [Val::Int(cursor.read)];
        let rows = self.driver.scan(&MESSAGE_OUTBOX, &[Val::text(OUTBOX_SOURCE)], &ScanRange::after(Some(&after)), self.config.batch).await?;
        let Some(last) = rows.last().and_then(|row| row.clustering.first()).and_then(Val::as_int) else { return Ok(false) };
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(seq) = row.clustering.first().and_then(Val::as_int) else { continue };
            cursor.behind.push_back(seq);
            match LogMessage::decode(seq, EMBEDDED_SHARD, &row.body) {
                Ok(message) => batch.push(message),
                // Only a defect writes such a row; holding every later message back for
                // it would stop every account's feed.
                Err(error) => tracing::error!(seq, %error, "outbox row is not a message; skipped"),
            }
        }
        ingest(&self.store, &batch, self.clock.now_micros(), &self.stats, &self.shards, &self.handoff).await?;
        self.handoff.ledger().read_to(EMBEDDED_SHARD, last);
        cursor.read = last;
        Ok(true)
    }

    /// Commits the position the ledger allows, with the removal of the outbox rows it
    /// passes, when it moved and `force` is set or the last commit is old enough.
    pub async fn commit(&self, cursor: &mut Cursor, force: bool) -> Result<(), StoreError> {
        let Some(position) = self.handoff.ledger().position(EMBEDDED_SHARD) else { return Ok(()) };
        if position <= cursor.committed || (!force && cursor.last_commit.is_some_and(|at| at.elapsed() < self.config.commit_every)) {
            return Ok(());
        }
        let passed: Vec<i64> = cursor.behind.iter().copied().take_while(|seq| *seq <= position).collect();
        let mut rows = vec![Mutation {
            table: &POSITIONS,
            partition: vec![Val::text(POSITION_SOURCE)],
            clustering: vec![],
            op: Op::Put { body: serde_json::json!({ "seq": position }).to_string(), expires_at: None },
            ts: position,
        }];
        rows.extend(passed.iter().map(|seq| Mutation {
            table: &MESSAGE_OUTBOX,
            partition: vec![Val::text(OUTBOX_SOURCE)],
            clustering: vec![Val::Int(*seq)],
            op: Op::Purge,
            ts: *seq,
        }));
        // The removals only once the position is written where writes are not atomic:
        // an outbox row is never gone while the position is still behind it.
        if self.store.writes_atomically() {
            self.driver.write(rows).await?;
        } else {
            let removals = rows.split_off(1);
            self.driver.write(rows).await?;
            self.driver.write(removals).await?;
        }
        cursor.behind.drain(..passed.len());
        cursor.committed = position;
        cursor.last_commit = Some(Instant::now());
        Ok(())
    }

    /// Tails the outbox until `stop` turns true. Store errors are retried with backoff.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut cursor = None::<Cursor>;
        let mut backoff = Duration::from_millis(100);
        let mut seen_changes = None;
        while !*stop.borrow() {
            // Taken before the outbox is read: a message written after the read wakes
            // the wait below.
            let written = self.driver.next_change(&MESSAGE_OUTBOX);
            let changes = self.driver.change_count(&MESSAGE_OUTBOX);
            let result = match cursor.as_mut() {
                None => self.position().await.map(|position| {
                    cursor = Some(Cursor { committed: position, read: position, ..Cursor::default() });
                    true
                }),
                // Nothing written to the outbox since the last empty read.
                Some(_) if changes.is_some() && changes == seen_changes => Ok(false),
                Some(cursor) => self.step(cursor).await.inspect(|read| {
                    if !read {
                        seen_changes = changes;
                    }
                }),
            };
            let result = match (result, cursor.as_mut()) {
                (Ok(read), Some(cursor)) => self.commit(cursor, !read).await.map(|()| read),
                (result, _) => result,
            };
            let idle = match result {
                Ok(read) => {
                    backoff = Duration::from_millis(100);
                    !read
                }
                Err(error) => {
                    tracing::warn!(%error, "reading the message outbox failed; retrying");
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
            };
            if idle {
                let written = async {
                    match written {
                        Some(written) => written.await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(self.config.poll) => {}
                    () = written => {}
                    _ = stop.changed() => {}
                }
            }
        }
        // What settled before the stop, the attempts in flight included, is not read again.
        self.handoff.delivering_has_ended().await;
        if let Some(cursor) = cursor.as_mut() {
            if let Err(error) = self.commit(cursor, true).await {
                tracing::warn!(%error, "committing the webhooks position at stop failed; the next start reads more again");
            }
        }
    }
}
