//! The consume loop over the embedded log: read a batch of lines after the committed
//! position, decode, apply through one read-model [`Batch`], and commit the rows with
//! the new position (and the batch's counters) in one atomic write. `kill -9` at any
//! instant therefore loses nothing and applies nothing twice: either the whole batch
//! and its position are in the store, or neither is and the batch is read again.
//!
//! Batches are pipelined: the next batch is projected while the previous one is being
//! written (reading the previous batch's rows from its frozen overlay), and written only
//! once the previous write has completed, so writes stay ordered and single.
//!
//! The messages a batch announces are written to the outbox (`message_outbox`) in that
//! same commit, numbered on from the committed [`Progress::messages`]: a batch read again
//! after a crash writes the same messages at the same seqs.
//!
//! Invalid events of known types are appended to the dead-letter file (and synced)
//! before the commit that moves past them. After a crash between the two, the same
//! lines are read again; dead letters at or below the file's last offset are not
//! written twice.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use recap_readmodel::{Applied, Batch, Driver, Frozen, StoreError, Val};
use recap_schemas::{DecodeError, Envelope};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::Instrument;

use crate::log::{EventLog, LogLine};

/// The source name of the embedded log in `projector_positions`.
pub const LOG_SOURCE: &str = "log";

/// Counters of the projector, committed with the position (exact across crashes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Byte offset of the next line to apply.
    pub position: u64,
    /// Events that changed the read model.
    pub applied: u64,
    /// Events at or below their entity's version (duplicates, replays, stale).
    pub stale: u64,
    /// Events of types this version does not know.
    pub skipped_unknown: u64,
    /// Invalid events written to the dead-letter file.
    pub dead_lettered: u64,
    /// Messages written to the outbox: the seq of the last one (seqs start at 1). A
    /// replayed batch starts from the committed count, so its messages get the same seqs.
    #[serde(default)]
    pub messages: u64,
}

/// Live counters for metrics and tests; the committed [`Progress`] is the truth.
#[derive(Debug, Default)]
pub struct Stats {
    pub position: AtomicU64,
    pub applied: AtomicU64,
    pub stale: AtomicU64,
    pub skipped_unknown: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub messages: AtomicU64,
    /// Micros since epoch of the newest applied event's occurred_at (freshness).
    pub newest_occurred_at_us: AtomicU64,
    /// Kafka: messages received and then dropped unapplied because their partition was
    /// revoked (its next holder applies them from the committed offset).
    pub fenced: AtomicU64,
    /// Kafka: events not yet applied per `topic/partition`.
    pub partition_lag: std::sync::Mutex<std::collections::BTreeMap<String, i64>>,
}

impl Stats {
    fn publish(&self, progress: &Progress) {
        self.position.store(progress.position, Ordering::Relaxed);
        self.applied.store(progress.applied, Ordering::Relaxed);
        self.stale.store(progress.stale, Ordering::Relaxed);
        self.skipped_unknown.store(progress.skipped_unknown, Ordering::Relaxed);
        self.dead_lettered.store(progress.dead_lettered, Ordering::Relaxed);
        self.messages.store(progress.messages, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Progress {
        Progress {
            position: self.position.load(Ordering::Relaxed),
            applied: self.applied.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
            skipped_unknown: self.skipped_unknown.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
        }
    }
}

/// One dead letter, one JSON line of `deadletter.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The stream: the embedded log has one topic and one partition.
    pub topic: String,
    pub partition: u32,
    /// Byte offset of the line in the log.
    pub offset: u64,
    pub reason: String,
    /// The line as it was in the log (as text: bytes that are not UTF-8 are shown as
    /// U+FFFD here, and kept in `raw_base64`).
    pub raw: String,
    /// The line's exact bytes, base64, when they are not UTF-8 (a line cut short by an
    /// appender that was killed mid-character), so that nothing of it is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_base64: Option<String>,
}

impl DeadLetter {
    /// The letter of an event's exact `bytes`: as text, and also as base64 when they are
    /// not UTF-8.
    pub fn of(topic: String, partition: u32, offset: u64, reason: String, bytes: &[u8]) -> DeadLetter {
        DeadLetter {
            topic,
            partition,
            offset,
            reason,
            raw: String::from_utf8_lossy(bytes).into_owned(),
            raw_base64: std::str::from_utf8(bytes).is_err().then(|| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)),
        }
    }

    /// The event's exact bytes, as they were in the stream.
    pub fn bytes(&self) -> Vec<u8> {
        self.raw_base64
            .as_deref()
            .and_then(|encoded| base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded).ok())
            .unwrap_or_else(|| self.raw.clone().into_bytes())
    }
}

/// The letters of a dead-letter file, oldest first (none when there is no file). A line
/// that is not a letter (the end of a write a crash cut short, or the last line while a
/// write is under way) is an `Err` naming its line number, and the letters after it are
/// read on.
pub fn read_dead_letters(path: &Path) -> std::io::Result<Vec<Result<DeadLetter, String>>> {
    let content = match std::fs::read(path) {
        Ok(content) => content,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut letters = Vec::new();
    let mut lines = content.split(|&byte| byte == b'\n').enumerate().peekable();
    while let Some((index, line)) = lines.next() {
        if line.is_empty() {
            continue;
        }
        let ended = lines.peek().is_some();
        letters.push(serde_json::from_slice::<DeadLetter>(line).map_err(|error| match ended {
            true => format!("line {} is not a dead letter ({error})", index + 1),
            false => format!("line {} is not ended: a letter being written, or one a crash cut short", index + 1),
        }));
    }
    Ok(letters)
}

/// Tuning of the embedded consume loop.
#[derive(Clone, Debug)]
pub struct LoopConfig {
    pub max_batch_lines: usize,
    pub max_batch_bytes: usize,
    /// How often an idle projector looks for new lines.
    pub idle_poll: Duration,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig { max_batch_lines: 2_000, max_batch_bytes: 2 << 20, idle_poll: Duration::from_millis(5) }
    }
}

/// Why the projector stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectorError {
    #[error("reading the event log: {0}")]
    Log(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A batch being written while the next one is projected.
struct InFlight {
    write: tokio::task::JoinHandle<Result<(), StoreError>>,
    frozen: Arc<Frozen>,
    progress: Progress,
    newest_occurred_at: i64,
}

/// Where the consume loop stands: what the store has committed, and how far batches
/// have been projected (one batch further while its write is in flight).
struct Pipeline {
    committed: Progress,
    projected: Progress,
    in_flight: Option<InFlight>,
    dead_letters_until: Option<u64>,
}

pub struct EmbeddedProjector {
    driver: Arc<dyn Driver>,
    log: EventLog,
    dead_letter_path: PathBuf,
    config: LoopConfig,
    stats: Arc<Stats>,
}

/// The committed progress of the embedded log (zero when nothing was applied yet).
pub async fn committed_progress(driver: &dyn Driver) -> Result<Progress, StoreError> {
    let row = driver.get(&recap_readmodel::tables::POSITIONS, &[Val::text(LOG_SOURCE)], &[]).await?;
    match row {
        Some(row) => serde_json::from_str(&row.body).map_err(|error| StoreError::Corrupt(format!("projector position: {error}"))),
        None => Ok(Progress::default()),
    }
}

/// Whether `file` is not empty and its last byte is not a line's end.
fn ends_mid_line(file: &mut std::fs::File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The highest log offset already in the dead-letter file.
fn last_dead_letter_offset(path: &Path) -> std::io::Result<Option<u64>> {
    Ok(read_dead_letters(path)?.into_iter().rev().find_map(Result::ok).map(|letter| letter.offset))
}

impl EmbeddedProjector {
    pub fn new(driver: Arc<dyn Driver>, log: EventLog, dead_letter_path: PathBuf, config: LoopConfig) -> EmbeddedProjector {
        EmbeddedProjector { driver, log, dead_letter_path, config, stats: Arc::new(Stats::default()) }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    async fn start(&self) -> Result<Pipeline, ProjectorError> {
        let committed = committed_progress(self.driver.as_ref()).await?;
        self.stats.publish(&committed);
        let dead_letters_until = last_dead_letter_offset(&self.dead_letter_path)?;
        Ok(Pipeline { committed, projected: committed, in_flight: None, dead_letters_until })
    }

    /// Applies everything in the log, then returns (tests and benchmarks).
    pub async fn drain(&self) -> Result<Progress, ProjectorError> {
        let mut pipeline = self.start().await?;
        while self.step(&mut pipeline).await? {}
        self.settle(&mut pipeline).await?;
        Ok(pipeline.committed)
    }

    /// Tails the log until `shutdown` turns true, then returns after committing the
    /// batch in hand. Store errors are retried with backoff without advancing.
    pub async fn run(&self, mut shutdown: watch::Receiver<bool>) -> Result<Progress, ProjectorError> {
        let mut pipeline = self.start().await?;
        let mut backoff = Duration::from_millis(50);
        loop {
            if *shutdown.borrow() {
                self.settle(&mut pipeline).await?;
                return Ok(pipeline.committed);
            }
            match self.step(&mut pipeline).await {
                Ok(true) => backoff = Duration::from_millis(50),
                Ok(false) => {
                    tokio::select! {
                        _ = tokio::time::sleep(self.config.idle_poll) => {}
                        _ = shutdown.changed() => {}
                    }
                }
                Err(ProjectorError::Store(StoreError::Unavailable(reason))) => {
                    tracing::warn!(%reason, backoff_ms = backoff.as_millis() as u64, "store unavailable, retrying from the committed position");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    // The failed write may or may not have landed: start over from
                    // what the store says is committed.
                    if let Ok(restarted) = self.start().await {
                        pipeline = restarted;
                    }
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Waits for the batch in flight and publishes what it committed.
    async fn settle(&self, pipeline: &mut Pipeline) -> Result<(), ProjectorError> {
        let Some(in_flight) = pipeline.in_flight.take() else { return Ok(()) };
        let written = in_flight.write.await.map_err(|error| StoreError::Unavailable(format!("write task failed: {error}")));
        if let Err(error) = written.and_then(|result| result) {
            pipeline.projected = pipeline.committed;
            return Err(error.into());
        }
        pipeline.committed = in_flight.progress;
        self.stats.publish(&pipeline.committed);
        if in_flight.newest_occurred_at > 0 {
            self.stats.newest_occurred_at_us.fetch_max(in_flight.newest_occurred_at as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Projects one batch while the previous one is being written, then writes it.
    /// Returns whether there was anything to apply.
    async fn step(&self, pipeline: &mut Pipeline) -> Result<bool, ProjectorError> {
        let log = self.log.clone();
        let (position, max_lines, max_bytes) = (pipeline.projected.position, self.config.max_batch_lines, self.config.max_batch_bytes);
        let lines: Vec<LogLine> = tokio::task::spawn_blocking(move || log.read_from(position, max_lines, max_bytes))
            .await
            .map_err(|error| std::io::Error::other(error.to_string()))??;
        let Some(last) = lines.last() else {
            self.settle(pipeline).await?;
            return Ok(false);
        };
        // The batch's span lasts until its write lands (the spawned write holds it).
        let span = tracing::info_span!(
            "projector.batch",
            otel.kind = "consumer",
            messaging.system = "recap.log",
            messaging.destination.partition.id = "0",
            recap.offset.first = lines.first().map_or(0, |line| line.offset as i64),
            recap.offset.last = last.offset as i64,
            messaging.batch.message_count = lines.len() as i64,
        );
        self.project(pipeline, lines).instrument(span).await
    }

    async fn project(&self, pipeline: &mut Pipeline, lines: Vec<LogLine>) -> Result<bool, ProjectorError> {
        let Some(last) = lines.last() else { return Ok(false) };
        let mut next = pipeline.projected;
        next.position = last.end;
        let mut batch = match &pipeline.in_flight {
            Some(in_flight) => Batch::on_top_of(self.driver.clone(), in_flight.frozen.clone()),
            None => Batch::new(self.driver.clone()),
        };
        let mut letters = Vec::new();
        let mut newest_occurred_at = 0i64;
        for line in &lines {
            match Envelope::decode(&line.bytes) {
                Ok(envelope) => {
                    // Positions are byte offsets, so they only grow: the LWW clock of
                    // rows derived from several entities.
                    match batch.apply(&envelope, line.end as i64).await? {
                        Applied::Applied => next.applied += 1,
                        Applied::Stale => next.stale += 1,
                    }
                    newest_occurred_at = newest_occurred_at.max(envelope.occurred_at.micros());
                }
                Err(DecodeError::UnknownType(event_type)) => {
                    tracing::debug!(offset = line.offset, %event_type, "skipping an event of an unknown type");
                    next.skipped_unknown += 1;
                }
                Err(DecodeError::Invalid(reason)) => {
                    tracing::warn!(offset = line.offset, %reason, "dead-lettering an invalid event");
                    next.dead_lettered += 1;
                    if pipeline.dead_letters_until.is_none_or(|until| line.offset > until) {
                        letters.push(DeadLetter::of("log".into(), 0, line.offset, reason, &line.bytes));
                    }
                }
            }
        }
        // One writer at a time, in order: the previous batch lands before this one's
        // dead letters and rows.
        self.settle(pipeline).await?;
        if let Some(last_letter) = letters.last() {
            let until = last_letter.offset;
            self.write_dead_letters(letters).await?;
            pipeline.dead_letters_until = Some(until);
        }
        // The messages the batch announces, numbered on from the last committed one,
        // in the same commit as the rows they announce.
        for message in batch.take_messages() {
            next.messages += 1;
            batch.put_outbox_message(next.messages as i64, &message);
        }
        let body = serde_json::to_string(&next).map_err(|error| StoreError::Corrupt(error.to_string()))?;
        batch.set_position_body(LOG_SOURCE, next.position as i64, body);
        let frozen = batch.freeze();
        let (driver, rows) = (self.driver.clone(), frozen.clone());
        let write = tokio::spawn(async move { driver.write_frozen(rows).await }.in_current_span());
        pipeline.in_flight = Some(InFlight { write, frozen, progress: next, newest_occurred_at });
        pipeline.projected = next;
        Ok(true)
    }

    async fn write_dead_letters(&self, letters: Vec<DeadLetter>) -> Result<(), ProjectorError> {
        let path = self.dead_letter_path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let mut file = std::fs::OpenOptions::new().create(true).append(true).read(true).open(&path)?;
            let mut out = Vec::new();
            // A write a crash cut short left a line without its end: the letters start on
            // a line of their own, not glued to it (where no reader would find them).
            if ends_mid_line(&mut file)? {
                out.push(b'\n');
            }
            for letter in &letters {
                serde_json::to_writer(&mut out, letter).map_err(std::io::Error::other)?;
                out.push(b'\n');
            }
            file.write_all(&out)?;
            file.sync_data()
        })
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))??;
        Ok(())
    }
}
