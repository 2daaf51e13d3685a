//! The embedded driver: every table in one redb file of the data dir.
//!
//! Why redb: the read model is many small ordered range scans (one partition, newest
//! first) and point reads, served while one writer applies batches. redb is a copy-on-
//! write B-tree with MVCC: readers never wait for the writer, a commit is atomic and
//! durable (so the log position is committed in the same write as its rows), and it is
//! pure Rust (fast to build, no C++ toolchain). fjall (an LSM tree) writes faster but
//! needs its own compaction tuning and gives no simpler atomicity across partitions;
//! rocksdb does both well but costs a long C++ build and much memory for a small
//! embedded process.
//!
//! Keys: table id, partition columns, clustering columns (order-preserving encoding,
//! see `table.rs`). Values: write timestamp, tombstone flag, expiry, body.

use std::ops::{Bound, ControlFlow};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use redb::{Database, ReadOnlyTable, ReadableDatabase, TableDefinition};

use crate::driver::{now_micros, BodiesPage, Driver, Mutation, Offered, Op, PageBuilder, Row, ScanRange, StoreError};
use crate::table::{append_clustering, decode_clustering, partition_prefix, prefix_successor, Table, Val};

const ROWS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows");

const HEADER: usize = 8 + 1 + 8;
const NO_EXPIRY: i64 = i64::MAX;

#[derive(Clone)]
pub struct EmbeddedDriver {
    database: Arc<Database>,
    snapshot: Arc<Snapshot>,
}

/// The read snapshot every read shares until the next commit. Opening a read
/// transaction and its table costs more than reading a page of rows, so reads reuse one
/// until a write commits; the commit bumps `epoch` before `write` returns, so no read
/// that starts after a commit (after the projector publishes its position, say) sees
/// older data. Long-lived snapshots would pin freed pages; this one lives only until
/// the next commit.
/// The rows table of one read transaction.
type RowsTable = ReadOnlyTable<&'static [u8], &'static [u8]>;

#[derive(Default)]
struct Snapshot {
    epoch: AtomicU64,
    current: RwLock<Option<(u64, Arc<RowsTable>)>>,
}

fn storage(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

struct Stored<'a> {
    ts: i64,
    tombstone: bool,
    expires_at: i64,
    body: &'a [u8],
}

fn decode_value(bytes: &[u8]) -> Result<Stored<'_>, StoreError> {
    if bytes.len() < HEADER {
        return Err(StoreError::Corrupt("row value shorter than its header".into()));
    }
    let ts = i64::from_be_bytes(bytes[0..8].try_into().map_err(|_| StoreError::Corrupt("ts".into()))?);
    let expires_at = i64::from_be_bytes(bytes[9..17].try_into().map_err(|_| StoreError::Corrupt("expiry".into()))?);
    Ok(Stored { ts, tombstone: bytes[8] == 1, expires_at, body: &bytes[HEADER..] })
}

fn encode_value(ts: i64, op: &Op) -> Vec<u8> {
    let (tombstone, expires_at, body) = match op {
        Op::Put { body, expires_at } => (0u8, expires_at.unwrap_or(NO_EXPIRY), body.as_bytes()),
        Op::Delete => (1u8, NO_EXPIRY, &b""[..]),
    };
    let mut value = Vec::with_capacity(HEADER + body.len());
    value.extend_from_slice(&ts.to_be_bytes());
    value.push(tombstone);
    value.extend_from_slice(&expires_at.to_be_bytes());
    value.extend_from_slice(body);
    value
}

fn row_key(table: &Table, partition: &[Val], clustering: &[Val]) -> Vec<u8> {
    let mut key = partition_prefix(table, partition);
    append_clustering(&mut key, table, clustering);
    key
}

/// The clustering values of a key's clustering part.
fn clustering_of(table: &Table, bytes: &[u8]) -> Result<Vec<Val>, StoreError> {
    decode_clustering(table, bytes).ok_or_else(|| StoreError::Corrupt(format!("bad key in {}", table.name)))
}

/// A live row as read back, from the clustering part of its key and its stored value.
fn row_of(table: &Table, clustering: &[u8], stored: &Stored<'_>) -> Result<Row, StoreError> {
    Ok(Row { clustering: clustering_of(table, clustering)?, body: body_of(table, stored)?.to_owned(), ts: stored.ts })
}

fn body_of<'a>(table: &Table, stored: &Stored<'a>) -> Result<&'a str, StoreError> {
    std::str::from_utf8(stored.body).map_err(|_| StoreError::Corrupt(format!("body in {} is not UTF-8", table.name)))
}

impl EmbeddedDriver {
    /// Opens (or creates) the store file.
    pub fn open(path: &Path) -> Result<EmbeddedDriver, StoreError> {
        let mut builder = Database::builder();
        // The page cache is the bulk of resident memory; 64 MiB keeps the demo world
        // and the hot partitions of much larger ones in memory.
        builder.set_cache_size(64 << 20);
        let database = builder.create(path).map_err(storage)?;
        let write = database.begin_write().map_err(storage)?;
        write.open_table(ROWS).map_err(storage)?;
        write.commit().map_err(storage)?;
        Ok(EmbeddedDriver { database: Arc::new(database), snapshot: Arc::new(Snapshot::default()) })
    }

    /// The table as of the last commit (see [`Snapshot`]).
    fn rows(&self) -> Result<Arc<RowsTable>, StoreError> {
        let epoch = self.snapshot.epoch.load(Ordering::Acquire);
        if let Ok(current) = self.snapshot.current.read() {
            if let Some((cached, rows)) = current.as_ref() {
                if *cached == epoch {
                    return Ok(rows.clone());
                }
            }
        }
        let rows = Arc::new(self.database.begin_read().map_err(storage)?.open_table(ROWS).map_err(storage)?);
        if let Ok(mut current) = self.snapshot.current.write() {
            // Another reader may have opened a newer one meanwhile: keep the newest.
            if current.as_ref().is_none_or(|(cached, _)| *cached <= epoch) {
                *current = Some((epoch, rows.clone()));
            }
        }
        Ok(rows)
    }

    /// Hands the live rows (neither deleted nor expired) of one partition within
    /// `range` to `visit` in clustering order, each with the clustering part of its key,
    /// until `visit` breaks.
    fn visit_live(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        mut visit: impl FnMut(&[u8], &Stored<'_>) -> Result<ControlFlow<()>, StoreError>,
    ) -> Result<(), StoreError> {
        let Some((start, end)) = byte_range(table, partition, range) else { return Ok(()) };
        let prefix_len = partition_prefix(table, partition).len();
        let rows = self.rows()?;
        let now = now_micros();
        let iterator = match &end {
            Some(end) => rows.range::<&[u8]>(start.as_slice()..end.as_slice()),
            None => rows.range::<&[u8]>(start.as_slice()..),
        }
        .map_err(storage)?;
        for entry in iterator {
            let (key, value) = entry.map_err(storage)?;
            let stored = decode_value(value.value())?;
            if stored.tombstone || stored.expires_at <= now {
                continue;
            }
            if visit(&key.value()[prefix_len..], &stored)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn write_sync(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        let write = self.database.begin_write().map_err(storage)?;
        {
            let mut rows = write.open_table(ROWS).map_err(storage)?;
            for mutation in &mutations {
                let key = row_key(mutation.table, &mutation.partition, &mutation.clustering);
                let value = encode_value(mutation.ts, &mutation.op);
                // Insert first and put the old value back in the rare case it wins: one
                // B-tree walk for the common case instead of a read and a write.
                let previous = rows.insert(key.as_slice(), value.as_slice()).map_err(storage)?.map(|old| old.value().to_vec());
                if let Some(previous) = previous {
                    let stored = decode_value(&previous)?;
                    if !mutation.supersedes(stored.ts, stored.tombstone, stored.body) {
                        rows.insert(key.as_slice(), previous.as_slice()).map_err(storage)?;
                    }
                }
            }
        }
        write.commit().map_err(storage)?;
        self.snapshot.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

/// The byte range of a clustering range within one partition: (start, end exclusive),
/// None when the range is empty.
fn byte_range(table: &Table, partition: &[Val], range: &ScanRange) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let prefix = partition_prefix(table, partition);
    let with = |clustering: &[Val]| {
        let mut key = prefix.clone();
        append_clustering(&mut key, table, clustering);
        key
    };
    let start = match &range.start {
        Bound::Unbounded => prefix.clone(),
        Bound::Included(clustering) => with(clustering),
        Bound::Excluded(clustering) => prefix_successor(&with(clustering))?,
    };
    let end = match &range.end {
        Bound::Unbounded => prefix_successor(&prefix),
        Bound::Included(clustering) => prefix_successor(&with(clustering)),
        Bound::Excluded(clustering) => Some(with(clustering)),
    };
    Some((start, end))
}

#[async_trait]
impl Driver for EmbeddedDriver {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        let rows = self.rows()?;
        let key = row_key(table, partition, clustering);
        let Some(value) = rows.get(key.as_slice()).map_err(storage)? else {
            return Ok(None);
        };
        let stored = decode_value(value.value())?;
        if stored.tombstone || stored.expires_at <= now_micros() {
            return Ok(None);
        }
        Ok(Some(Row { clustering: clustering.to_vec(), body: body_of(table, &stored)?.to_owned(), ts: stored.ts }))
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        let mut found = Vec::with_capacity(limit.min(256));
        if limit == 0 {
            return Ok(found);
        }
        self.visit_live(table, partition, range, |clustering, stored| {
            found.push(row_of(table, clustering, stored)?);
            Ok(if found.len() >= limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
        })?;
        Ok(found)
    }

    /// One pass: rows for the first `limit`, a count for all.
    async fn scan_counted(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        let (mut found, mut total) = (Vec::with_capacity(limit.min(256)), 0);
        self.visit_live(table, partition, range, |clustering, stored| {
            if found.len() < limit {
                found.push(row_of(table, clustering, stored)?);
            }
            total += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        Ok((found, total))
    }

    /// Without a row per body: bodies are copied from the page cache into `out` as they
    /// are (written from strings, so UTF-8), and only the last key is decoded.
    async fn scan_bodies(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        skip: usize,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<BodiesPage, StoreError> {
        let mut builder = PageBuilder::new(out, skip, limit);
        let mut last_key: Option<Vec<u8>> = None;
        self.visit_live(table, partition, range, |clustering, stored| {
            Ok(match builder.offer(stored.body) {
                Offered::Skipped => ControlFlow::Continue(()),
                Offered::Appended => {
                    let key = last_key.get_or_insert_with(Vec::new);
                    key.clear();
                    key.extend_from_slice(clustering);
                    ControlFlow::Continue(())
                }
                Offered::Full => ControlFlow::Break(()),
            })
        })?;
        let last_key = last_key.map(|key| clustering_of(table, &key)).transpose()?;
        Ok(builder.finish(last_key))
    }

    /// Counts live rows without decoding keys or copying bodies (search totals).
    async fn count(&self, table: &'static Table, partition: &[Val], range: &ScanRange) -> Result<usize, StoreError> {
        let mut count = 0;
        self.visit_live(table, partition, range, |_, _| {
            count += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(count)
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        let driver = self.clone();
        tokio::task::spawn_blocking(move || driver.write_sync(mutations))
            .await
            .map_err(|error| StoreError::Unavailable(format!("write task failed: {error}")))?
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.database.begin_read().map(|_| ()).map_err(storage)
    }
}
