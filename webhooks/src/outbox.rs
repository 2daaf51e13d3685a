//! The embedded edition's message log reader: tails the `message_outbox` table the
//! projector writes (partition `"log"`, one row per message, seq 1, 2, 3…), hands each
//! batch to [`crate::ingest`], and commits its position (`projector_positions`, source
//! `"webhooks"`) together with the removal of the outbox rows it consumed, in the write
//! of the batch's feed heads (the embedded store writes it atomically). A crash before
//! that write replays the batch (same rows again); after it, nothing is read twice and
//! the outbox does not grow.

use std::sync::Arc;
use std::time::Duration;

use recap_readmodel::tables::{MESSAGE_OUTBOX, POSITIONS};
use recap_readmodel::webhooks::{decode_account_message, WebhookStore};
use recap_readmodel::{Driver, Mutation, Op, ScanRange, StoreError, Val};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::deliver::Shards;
use crate::handoff::Handoff;
use crate::ingest::{ingest_and_commit, LogMessage};
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
    /// How often the outbox is looked at when it had nothing new.
    pub poll: Duration,
}

impl Default for OutboxConfig {
    fn default() -> OutboxConfig {
        OutboxConfig { batch: 500, poll: Duration::from_millis(50) }
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
    /// Where each batch's first attempts go to the deliverer.
    pub handoff: Handoff,
    /// The deliverer's shards, whose scan marks the deliveries written lower.
    pub shards: Shards,
    pub config: OutboxConfig,
}

impl OutboxReader {
    /// The last seq consumed; 0 before the first.
    pub async fn position(&self) -> Result<i64, StoreError> {
        let Some(row) = self.driver.get(&POSITIONS, &[Val::text(POSITION_SOURCE)], &[]).await? else { return Ok(0) };
        let position: Position = serde_json::from_str(&row.body).map_err(|error| StoreError::Corrupt(format!("webhooks position: {error}")))?;
        Ok(position.seq)
    }

    /// Reads and consumes one batch after `position`; returns the new position.
    pub async fn step(&self, position: i64) -> Result<i64, StoreError> {
        let after = [Val::Int(position)];
        let rows = self.driver.scan(&MESSAGE_OUTBOX, &[Val::text(OUTBOX_SOURCE)], &ScanRange::after(Some(&after)), self.config.batch).await?;
        let Some(last) = rows.last().and_then(|row| row.clustering.first()).and_then(Val::as_int) else { return Ok(position) };
        let mut batch = Vec::with_capacity(rows.len());
        for row in &rows {
            let Some(seq) = row.clustering.first().and_then(Val::as_int) else { continue };
            match decode_account_message(&row.body) {
                Ok(message) => batch.push(LogMessage { seq, shard: EMBEDDED_SHARD.to_owned(), message }),
                // Only a defect writes such a row; holding every later message back for
                // it would stop every account's feed.
                Err(error) => tracing::error!(seq, %error, "outbox row is not a message; skipped"),
            }
        }
        let mut commit = vec![Mutation {
            table: &POSITIONS,
            partition: vec![Val::text(POSITION_SOURCE)],
            clustering: vec![],
            op: Op::Put { body: serde_json::json!({ "seq": last }).to_string(), expires_at: None },
            ts: last,
        }];
        for row in &rows {
            // A tombstone wins over the row at the same timestamp (its seq).
            let ts = row.clustering.first().and_then(Val::as_int).unwrap_or(last);
            commit.push(Mutation { table: &MESSAGE_OUTBOX, partition: vec![Val::text(OUTBOX_SOURCE)], clustering: row.clustering.clone(), op: Op::Delete, ts });
        }
        // With the batch's heads: the position never gets ahead of what it covers.
        ingest_and_commit(&self.store, &batch, self.clock.now_micros(), &self.stats, &self.shards, &self.handoff, commit).await?;
        Ok(last)
    }

    /// Tails the outbox until `stop` turns true. Store errors are retried with backoff.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut position = None;
        let mut backoff = Duration::from_millis(100);
        let mut seen_changes = None;
        while !*stop.borrow() {
            let changes = self.driver.change_count(&MESSAGE_OUTBOX);
            let result = match position {
                None => self.position().await.map(Some),
                // Nothing written to the outbox since the last empty read.
                Some(_) if changes.is_some() && changes == seen_changes => Ok(position),
                Some(at) => self.step(at).await.map(|next| {
                    if next == at {
                        seen_changes = changes;
                    }
                    Some(next)
                }),
            };
            let idle = match result {
                Ok(next) => {
                    let idle = next == position;
                    position = next;
                    backoff = Duration::from_millis(100);
                    idle
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
                tokio::select! {
                    _ = tokio::time::sleep(self.config.poll) => {}
                    _ = stop.changed() => {}
                }
            }
        }
    }
}
