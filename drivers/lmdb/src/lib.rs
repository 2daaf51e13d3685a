//! The embedded driver: every table in one LMDB file of the data dir.
//!
//! Why LMDB (through `heed`): the read model is many small ordered range scans (one
//! partition, newest first) and point reads, served while one writer applies batches.
//! LMDB is a copy-on-write B-tree in a memory map with MVCC: readers never wait for the
//! writer and read rows in place, without copying or reference counting per row; a
//! commit is atomic and durable (so the log position is committed in the same write as
//! its rows). Scanning 50 rows costs about a microsecond, a quarter of what redb (a
//! pure-Rust B-tree of the same design, used before) needs to hand out each row through
//! reference-counted page guards. fjall (an LSM tree) writes faster but needs its own
//! compaction tuning; rocksdb costs a long C++ build and much memory for a small
//! embedded process. LMDB is a small C library, built by `lmdb-master-sys` with cc.
//!
//! Keys: table id, partition columns, clustering columns (the read model's
//! order-preserving encoding, `recap_readmodel::keys`), within LMDB's key size (about
//! 2 KB, built with `longer-keys`; event identifiers are at most 256 bytes, see
//! `recap-schemas`, so every table's keys fit).
//! Values: write timestamp, tombstone flag, expiry, body.
//!
//! A conditional insert ([`Driver::insert_if_absent`]) looks at the row and writes it in
//! one write transaction: LMDB has one writer at a time, so of racing inserts the first
//! to take the write lock writes and the others find its row.
//!
//! Expired rows are never read, but they stay in the file until
//! [`EmbeddedDriver::remove_expired`] removes them (the embedded edition runs it in the
//! background, as ScyllaDB drops expired cells at compaction): without it the feed, the
//! attempts and OAuth's codes and tokens would take ever more room, and scans would step
//! over ever more of them.

use std::ops::{Bound, ControlFlow};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions};
use recap_readmodel::driver::{
    check_conditional_write, check_plain_write, now_micros, BodiesPage, Driver, Mutation, MutationRef, NextChange, Offered, Op, PageBuilder, Row, ScanRange,
    StoreError,
};
use recap_readmodel::keys::{append_clustering, decode_clustering, partition_prefix, prefix_successor};
use recap_readmodel::table::{Table, Val};
use recap_readmodel::Frozen;
use tokio::sync::Notify;

const HEADER: usize = 8 + 1 + 8;
const NO_EXPIRY: i64 = i64::MAX;

/// The address space the store's memory map reserves, and so the most it can hold.
/// Only the pages written take disk space or memory.
const MAP_BYTES: usize = 256 << 30;

#[derive(Clone)]
pub struct EmbeddedDriver {
    env: Env,
    rows: Database<Bytes, Bytes>,
    /// The store file, locked (flock) for as long as the driver lives: LMDB lets several
    /// processes share a store, and one data dir has one owner.
    _owner: Arc<std::fs::File>,
    /// Committed writes per table id: every write goes through this driver, since it
    /// owns the store.
    changes: Arc<Changes>,
}

/// Per table id, the committed writes ([`Driver::change_count`]) and the readers waiting
/// for the next one ([`Driver::next_change`]).
struct Changes {
    counts: [AtomicU64; 256],
    written: [Notify; 256],
}

impl Changes {
    fn new() -> Changes {
        Changes { counts: std::array::from_fn(|_| AtomicU64::new(0)), written: std::array::from_fn(|_| Notify::new()) }
    }

    /// Counts a committed write to table `id` and wakes whoever waits for one.
    fn committed(&self, id: usize) {
        self.counts[id].fetch_add(1, Ordering::Release);
        self.written[id].notify_waiters();
    }
}

/// Dead rows [`Driver::holds_rows`] steps over before it gives up and says true.
const HOLDS_ROWS_STEPS: usize = 10_000;

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
        Op::Delete | Op::Purge => (1u8, NO_EXPIRY, &b""[..]),
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

/// The row stored at `clustering` as a read returns it: None when deleted or expired.
fn live_row(table: &Table, clustering: &[Val], value: &[u8], now: i64) -> Result<Option<Row>, StoreError> {
    let stored = decode_value(value)?;
    if stored.tombstone || stored.expires_at <= now {
        return Ok(None);
    }
    Ok(Some(Row { clustering: clustering.to_vec(), body: body_of(table, &stored)?.to_owned(), ts: stored.ts }))
}

fn body_of<'a>(table: &Table, stored: &Stored<'a>) -> Result<&'a str, StoreError> {
    std::str::from_utf8(stored.body).map_err(|_| StoreError::Corrupt(format!("body in {} is not UTF-8", table.name)))
}

/// What one step of [`EmbeddedDriver::remove_expired`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub scanned: usize,
    pub removed: usize,
    /// The last key looked at, which the next step starts after; `None` once the step
    /// reached the store's end.
    pub next: Option<Vec<u8>>,
}

impl EmbeddedDriver {
    /// Removes the expired rows among the next `rows` rows of the store after `after`
    /// (from its start when `None`): read without holding the writer, then removed in one
    /// write transaction, each unless it was written again meanwhile. Tombstones stay
    /// (they shadow older writes). Blocking: run it on a blocking thread.
    pub fn remove_expired(&self, after: Option<&[u8]>, rows: usize) -> Result<Swept, StoreError> {
        let now = now_micros();
        let expired_at = |stored: &Stored<'_>| !stored.tombstone && stored.expires_at <= now;
        let mut swept = Swept::default();
        let mut expired = Vec::new();
        {
            let read = self.env.read_txn().map_err(storage)?;
            let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (after.map_or(Bound::Unbounded, Bound::Excluded), Bound::Unbounded);
            for entry in self.rows.range(&read, &bounds).map_err(storage)? {
                let (key, value) = entry.map_err(storage)?;
                swept.scanned += 1;
                if expired_at(&decode_value(value)?) {
                    expired.push(key.to_vec());
                }
                if swept.scanned == rows {
                    swept.next = Some(key.to_vec());
                    break;
                }
            }
        }
        if expired.is_empty() {
            return Ok(swept);
        }
        let mut write = self.env.write_txn().map_err(storage)?;
        for key in &expired {
            let still = match self.rows.get(&write, key).map_err(storage)? {
                Some(value) => expired_at(&decode_value(value)?),
                None => false,
            };
            if still {
                self.rows.delete(&mut write, key).map_err(storage)?;
                swept.removed += 1;
            }
        }
        write.commit().map_err(storage)?;
        Ok(swept)
    }

    /// How many rows the file holds, tombstones and expired rows included.
    #[cfg(test)]
    fn stored_rows(&self) -> Result<u64, StoreError> {
        let read = self.env.read_txn().map_err(storage)?;
        self.rows.len(&read).map_err(storage)
    }

    /// Opens (or creates) the store file (and its lock file, `<path>-lock`).
    pub fn open(path: &Path) -> Result<EmbeddedDriver, StoreError> {
        // LMDB takes an empty file for a new store.
        let owner = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).map_err(storage)?;
        owner.try_lock().map_err(|error| match error {
            std::fs::TryLockError::WouldBlock => StoreError::Unavailable(format!("{} is in use by another process", path.display())),
            std::fs::TryLockError::Error(error) => storage(error),
        })?;
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_BYTES).max_dbs(1);
        // SAFETY: LMDB maps the file into memory, so it must not be changed other than
        // through LMDB while mapped. The file belongs to this data dir and is written only
        // through this environment (heed refuses to open one path twice in a process);
        // other processes that open it go through LMDB and its lock file too.
        let env = unsafe {
            options.flags(EnvFlags::NO_SUB_DIR);
            options.open(path)
        }
        .map_err(storage)?;
        // Reader slots left by a process that died mid-read would pin old pages.
        env.clear_stale_readers().map_err(storage)?;
        let mut write = env.write_txn().map_err(storage)?;
        let rows = env.create_database(&mut write, None).map_err(storage)?;
        write.commit().map_err(storage)?;
        Ok(EmbeddedDriver { env, rows, _owner: Arc::new(owner), changes: Arc::new(Changes::new()) })
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
        let read = self.env.read_txn().map_err(storage)?;
        let now = now_micros();
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(start.as_slice()), end.as_deref().map_or(Bound::Unbounded, Bound::Excluded));
        for entry in self.rows.range(&read, &bounds).map_err(storage)? {
            let (key, value) = entry.map_err(storage)?;
            let stored = decode_value(value)?;
            if stored.tombstone || stored.expires_at <= now {
                continue;
            }
            if visit(&key[prefix_len..], &stored)?.is_break() {
                break;
            }
        }
        Ok(())
    }

    fn write_sync<'a>(&self, mutations: impl Iterator<Item = MutationRef<'a>>) -> Result<(), StoreError> {
        let mut write = self.env.write_txn().map_err(storage)?;
        let mut touched = [false; 256];
        for mutation in mutations {
            // Returning drops the transaction uncommitted: nothing of the batch is written.
            check_plain_write(mutation.table)?;
            touched[usize::from(mutation.table.id)] = true;
            let key = row_key(mutation.table, mutation.partition, mutation.clustering);
            if *mutation.op == Op::Purge {
                // Gone outright: no tombstone stays for scans to step over.
                self.rows.delete(&mut write, &key).map_err(storage)?;
                continue;
            }
            let value = encode_value(mutation.ts, mutation.op);
            // A new row is inserted in the same B-tree walk that finds it absent; an
            // existing one comes back from that walk and is replaced only if it loses.
            let Some(previous) = self.rows.get_or_put(&mut write, &key, &value).map_err(storage)? else { continue };
            let stored = decode_value(previous)?;
            if mutation.supersedes(stored.ts, stored.tombstone, stored.body) {
                self.rows.put(&mut write, &key, &value).map_err(storage)?;
            }
        }
        write.commit().map_err(storage)?;
        // Counted once committed: a reader that sees the new count reads the new rows.
        for (id, _) in touched.iter().enumerate().filter(|(_, touched)| **touched) {
            self.changes.committed(id);
        }
        Ok(())
    }

    /// Writes `value` at `key` unless a live row is there, in one write transaction;
    /// whether it wrote.
    fn insert_if_absent_sync(&self, table: &'static Table, key: &[u8], value: &[u8]) -> Result<bool, StoreError> {
        let mut write = self.env.write_txn().map_err(storage)?;
        let live = match self.rows.get(&write, key).map_err(storage)? {
            Some(previous) => {
                let stored = decode_value(previous)?;
                !stored.tombstone && stored.expires_at > now_micros()
            }
            None => false,
        };
        if live {
            // Dropped uncommitted: nothing written.
            return Ok(false);
        }
        self.rows.put(&mut write, key, value).map_err(storage)?;
        write.commit().map_err(storage)?;
        self.changes.committed(usize::from(table.id));
        Ok(true)
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
        let read = self.env.read_txn().map_err(storage)?;
        let key = row_key(table, partition, clustering);
        let Some(value) = self.rows.get(&read, &key).map_err(storage)? else {
            return Ok(None);
        };
        live_row(table, clustering, value, now_micros())
    }

    /// In one read transaction.
    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        let read = self.env.read_txn().map_err(storage)?;
        let now = now_micros();
        let mut key_bytes = partition_prefix(table, partition);
        let prefix_len = key_bytes.len();
        let mut found = Vec::with_capacity(keys.len());
        for clustering in keys {
            key_bytes.truncate(prefix_len);
            append_clustering(&mut key_bytes, table, clustering);
            let row = match self.rows.get(&read, &key_bytes).map_err(storage)? {
                Some(value) => live_row(table, clustering, value, now)?,
                None => None,
            };
            found.push(row);
        }
        Ok(found)
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

    /// Without a row per body: bodies are copied from the memory map into `out` as they
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
        tokio::task::spawn_blocking(move || driver.write_sync(mutations.iter().map(Mutation::as_ref)))
            .await
            .map_err(|error| StoreError::Unavailable(format!("write task failed: {error}")))?
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        check_conditional_write(table)?;
        let (key, value) = (row_key(table, partition, clustering), encode_value(now_micros(), &Op::Put { body: body.to_string(), expires_at }));
        let driver = self.clone();
        tokio::task::spawn_blocking(move || driver.insert_if_absent_sync(table, &key, &value))
            .await
            .map_err(|error| StoreError::Unavailable(format!("write task failed: {error}")))?
    }

    /// Writes the frozen rows where they are, without copying them into mutations.
    async fn write_frozen(&self, frozen: Arc<Frozen>) -> Result<(), StoreError> {
        let driver = self.clone();
        tokio::task::spawn_blocking(move || driver.write_sync(frozen.mutations()))
            .await
            .map_err(|error| StoreError::Unavailable(format!("write task failed: {error}")))?
    }

    /// Steps over at most [`HOLDS_ROWS_STEPS`] dead rows (tombstones, expired rows)
    /// before saying true.
    async fn holds_rows(&self, table: &'static Table) -> Result<bool, StoreError> {
        let read = self.env.read_txn().map_err(storage)?;
        let (start, end) = ([table.id], table.id.checked_add(1).map(|next| [next]));
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (Bound::Included(&start[..]), end.as_ref().map_or(Bound::Unbounded, |end| Bound::Excluded(&end[..])));
        let now = now_micros();
        for (step, entry) in self.rows.range(&read, &bounds).map_err(storage)?.enumerate() {
            let (_, value) = entry.map_err(storage)?;
            let stored = decode_value(value)?;
            if step >= HOLDS_ROWS_STEPS || (!stored.tombstone && stored.expires_at > now) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.env.read_txn().map(|_| ()).map_err(storage)
    }

    fn change_count(&self, table: &'static Table) -> Option<u64> {
        Some(self.changes.counts[usize::from(table.id)].load(Ordering::Acquire))
    }

    fn next_change(&self, table: &'static Table) -> Option<NextChange<'_>> {
        // Created here, not when first polled: it hears every write from now on.
        let written = self.changes.written[usize::from(table.id)].notified();
        Some(Box::pin(written))
    }

    /// One write transaction a batch.
    fn writes_atomically(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recap_readmodel::tables::{FEED, MEETINGS_BY_ACCOUNT};

    fn put(table: &'static Table, account: &str, key: i64, expires_at: Option<i64>, ts: i64) -> Mutation {
        Mutation {
            table,
            partition: vec![Val::text(account)],
            clustering: vec![Val::Int(key), Val::text("m")][..table.clustering.len()].to_vec(),
            op: Op::Put { body: "{}".into(), expires_at },
            ts,
        }
    }

    // Expired rows leave the file, step by step through the whole store; live rows,
    // rows that never expire and tombstones stay; a row written again since it expired
    // is a live row.
    #[tokio::test]
    async fn removing_expired_rows_keeps_live_rows_and_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let driver = EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap();
        let soon = now_micros() + 50_000;
        let later = now_micros() + 3_600_000_000;
        let mut rows: Vec<Mutation> = (1..=7).map(|seq| put(&FEED, "acc_a", seq, Some(soon), seq)).collect();
        rows.extend((8..=9).map(|seq| put(&FEED, "acc_a", seq, Some(later), seq)));
        rows.push(put(&MEETINGS_BY_ACCOUNT, "acc_a", 1, None, 1));
        rows.push(Mutation { op: Op::Delete, ..put(&MEETINGS_BY_ACCOUNT, "acc_a", 2, None, 1) });
        driver.write(rows).await.unwrap();
        assert_eq!(driver.stored_rows().unwrap(), 11);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // Written again, live: stays.
        driver.write(vec![put(&FEED, "acc_a", 7, Some(later), 70)]).await.unwrap();
        let (mut after, mut removed, mut steps) = (None, 0, 0);
        loop {
            let swept = driver.remove_expired(after.as_deref(), 3).unwrap();
            removed += swept.removed;
            steps += 1;
            match swept.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!((removed, steps), (6, 4));
        assert_eq!(driver.stored_rows().unwrap(), 5);
        let live: Vec<i64> =
            driver.scan(&FEED, &[Val::text("acc_a")], &ScanRange::all(), 100).await.unwrap().iter().filter_map(|row| row.clustering[0].as_int()).collect();
        assert_eq!(live, [7, 8, 9]);
        // The tombstone still shadows an older write.
        driver.write(vec![put(&MEETINGS_BY_ACCOUNT, "acc_a", 2, None, 0)]).await.unwrap();
        assert_eq!(driver.scan(&MEETINGS_BY_ACCOUNT, &[Val::text("acc_a")], &ScanRange::all(), 100).await.unwrap().len(), 1);
    }
}
