//! The driver interface: what projection and query code need from a store, and nothing
//! more. Both drivers keep the same semantics: every write carries a timestamp, the
//! newest timestamp wins per row, a delete is a timestamped tombstone that shadows
//! older writes (and wins a tie, as in CQL), rows may expire (TTL), and a batch of
//! writes given to [`Driver::write`] is applied atomically by the embedded driver.
//! Tables declared [`Clock::FirstWriteWins`] are the exception: they are written only
//! by [`Driver::insert_if_absent`], where the first write of a key wins (see the rule
//! on [`Driver`]).

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::projection::Frozen;
use crate::table::{Clock, Table, Val};

/// Why a store call failed. `Unavailable` is transient (retry, or answer 503);
/// `Corrupt` means stored data could not be read back; `Misuse` means the call broke
/// the rule of the table it named (a plain write to a table written only
/// conditionally, or the reverse): a defect of the caller, refused before anything was
/// written, which no retry mends (every front door answers it as an internal error).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    #[error("store call refused: {0}")]
    Misuse(String),
}

/// Refuses a plain write (put or delete, [`Driver::write`]) to a table written only
/// conditionally. Every driver calls it on every mutation before writing any.
pub fn check_plain_write(table: &Table) -> Result<(), StoreError> {
    if table.clock == Clock::FirstWriteWins {
        return Err(StoreError::Misuse(format!("{} is written only by insert_if_absent, never by a plain write or delete", table.name)));
    }
    Ok(())
}

/// Refuses a conditional write ([`Driver::insert_if_absent`]) to a table not declared
/// [`Clock::FirstWriteWins`]. Every driver calls it before writing.
pub fn check_conditional_write(table: &Table) -> Result<(), StoreError> {
    if table.clock != Clock::FirstWriteWins {
        return Err(StoreError::Misuse(format!("{} is written by plain timestamped writes, never by insert_if_absent", table.name)));
    }
    Ok(())
}

/// What [`Driver::scan_bodies`] appended: how many bodies, the clustering key of the
/// last one, and whether a further row exists past them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodiesPage {
    pub count: usize,
    pub last_key: Option<Vec<Val>>,
    pub has_more: bool,
}

/// Builds the page [`Driver::scan_bodies`] returns from a partition's live rows, offered
/// in clustering order: the first `skip` are passed over, then up to `limit` bodies are
/// appended, and one more row offered says that a further one exists. For drivers that
/// override `scan_bodies` to copy bodies straight from storage, so that every driver
/// pages alike.
pub struct PageBuilder<'o> {
    out: &'o mut Vec<u8>,
    to_skip: usize,
    limit: usize,
    page: BodiesPage,
}

/// What [`PageBuilder::offer`] did with a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    Skipped,
    /// Its body was appended: the caller keeps its key, should it be the page's last.
    Appended,
    /// The page was already full: the row is the further one; stop reading.
    Full,
}

impl<'o> PageBuilder<'o> {
    pub fn new(out: &'o mut Vec<u8>, skip: usize, limit: usize) -> PageBuilder<'o> {
        PageBuilder { out, to_skip: skip, limit, page: BodiesPage { count: 0, last_key: None, has_more: false } }
    }

    pub fn offer(&mut self, body: &[u8]) -> Offered {
        if self.to_skip > 0 {
            self.to_skip -= 1;
            return Offered::Skipped;
        }
        if self.page.count == self.limit {
            self.page.has_more = true;
            return Offered::Full;
        }
        if self.page.count > 0 {
            self.out.push(b',');
        }
        self.out.extend_from_slice(body);
        self.page.count += 1;
        Offered::Appended
    }

    /// Rows still to offer before the page is settled: the rest of the skip and of the
    /// page, and the one that tells whether a further row exists.
    pub fn wanted(&self) -> usize {
        self.to_skip.saturating_add(self.limit - self.page.count).saturating_add(1)
    }

    /// Whether a row past the page was offered.
    pub fn has_more(&self) -> bool {
        self.page.has_more
    }

    /// The page, with the key of the last body appended (None when none was).
    pub fn finish(mut self, last_key: Option<Vec<Val>>) -> BodiesPage {
        self.page.last_key = last_key;
        self.page
    }
}

/// One row as read back: its clustering key, its body and its write timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub clustering: Vec<Val>,
    pub body: String,
    pub ts: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Write the row; `expires_at` is a wall-clock instant in microseconds (TTL).
    Put { body: String, expires_at: Option<i64> },
    /// A tombstone.
    Delete,
    /// Removes the row outright where the store can (the embedded driver keeps no
    /// tombstone, so its key is gone); a tombstone at `ts` where it cannot (CQL). Only
    /// for rows nothing older can be written to again once removed: a queue's rows,
    /// each key written once and removed once (`webhook_retries`, `message_outbox`
    /// behind its reader's position). A later write of the key, whatever its
    /// timestamp, lands on the embedded store.
    Purge,
}

impl Op {
    /// What the LWW rule of both drivers compares for this write at `ts`, the greater
    /// winning: the timestamp; on a tie a tombstone, then the greater body (CQL's rule for
    /// equal timestamps between cells without a TTL). Between expiring cells CQL prefers
    /// the later expiry before comparing values, which the embedded driver does not
    /// model: only the OAuth rows expire, each written at its own wall-clock instant,
    /// and nothing depends on how a tie between two of them falls (their single use is
    /// decided by a conditional write, [`Driver::insert_if_absent`], not by a tie).
    pub fn precedence(&self, ts: i64) -> (i64, bool, &[u8]) {
        match self {
            Op::Delete | Op::Purge => (ts, true, b""),
            Op::Put { body, .. } => (ts, false, body.as_bytes()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Mutation {
    pub table: &'static Table,
    pub partition: Vec<Val>,
    pub clustering: Vec<Val>,
    pub op: Op,
    pub ts: i64,
}

impl Mutation {
    pub fn as_ref(&self) -> MutationRef<'_> {
        MutationRef { table: self.table, partition: &self.partition, clustering: &self.clustering, op: &self.op, ts: self.ts }
    }
}

/// A [`Mutation`] borrowed from where it is kept (a frozen batch), for drivers that
/// write without owning it.
#[derive(Clone, Copy, Debug)]
pub struct MutationRef<'a> {
    pub table: &'static Table,
    pub partition: &'a [Val],
    pub clustering: &'a [Val],
    pub op: &'a Op,
    pub ts: i64,
}

impl MutationRef<'_> {
    /// The LWW rule of both drivers (see [`Op::precedence`]).
    pub fn supersedes(&self, ts: i64, tombstone: bool, body: &[u8]) -> bool {
        self.op.precedence(self.ts) > (ts, tombstone, body)
    }

    pub fn to_owned(&self) -> Mutation {
        Mutation { table: self.table, partition: self.partition.to_vec(), clustering: self.clustering.to_vec(), op: self.op.clone(), ts: self.ts }
    }
}

/// A clustering range in the table's clustering order: `start` is where a scan begins,
/// `end` where it stops. A bound may name a prefix of the clustering key.
#[derive(Clone, Debug)]
pub struct ScanRange {
    pub start: Bound<Vec<Val>>,
    pub end: Bound<Vec<Val>>,
}

impl ScanRange {
    pub fn all() -> ScanRange {
        ScanRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }

    /// Everything strictly after `key` in clustering order.
    pub fn after(key: Option<&[Val]>) -> ScanRange {
        ScanRange { start: key.map_or(Bound::Unbounded, |key| Bound::Excluded(key.to_vec())), end: Bound::Unbounded }
    }
}

/// Gets [`get_each`] has in flight at once.
const GET_MANY_AT_ONCE: usize = 32;

/// [`Driver::get_many`] by key, a few gets at once: its default, and what a driver
/// that reads some tables in one request does for the others.
pub async fn get_each<D: Driver + ?Sized>(driver: &D, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
    use futures::{StreamExt, TryStreamExt};
    let gets: Vec<_> = keys.iter().map(|key| driver.get(table, partition, key)).collect();
    futures::stream::iter(gets).buffered(GET_MANY_AT_ONCE).try_collect().await
}

/// A store of the read model's tables.
///
/// # Plain and conditional writes
///
/// A table is written one way only, as its [`Table::clock`] declares:
///
/// - tables with a timestamp clock ([`Clock::Version`], [`Clock::Position`],
///   [`Clock::Wall`]) only by [`Driver::write`] and [`Driver::write_frozen`], under the
///   last-write-wins rule;
/// - tables declared [`Clock::FirstWriteWins`] only by [`Driver::insert_if_absent`].
///
/// Every driver refuses the other kind with [`StoreError::Misuse`] before writing
/// anything ([`check_plain_write`], [`check_conditional_write`]). The two cannot share a
/// row: a conditional write is decided by the store (CQL: a lightweight transaction, a
/// Paxos round that takes its own timestamp and refuses `USING TIMESTAMP`), a plain
/// write by the timestamp it carries, so a plain write or a tombstone landing on a
/// conditionally written row would override the decision, or be overridden, depending
/// on clocks. Reads (`get`, `scan`, ...) serve both kinds of table.
#[async_trait]
pub trait Driver: Send + Sync + 'static {
    /// One row by its full key; None when absent, deleted or expired.
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError>;

    /// The body of [`Driver::get`]'s row: drivers that can read the body alone (without
    /// the row's write time or key) override this.
    async fn get_body(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<String>, StoreError> {
        Ok(self.get(table, partition, clustering).await?.map(|row| row.body))
    }

    /// The rows of one partition at each of `keys` (full clustering keys), in the
    /// order of `keys`: None where a row is absent, deleted or expired. Drivers that can
    /// read them in one request override this; by default they are read by key, a few
    /// at once.
    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        get_each(self, table, partition, keys).await
    }

    /// Up to `limit` live rows of one partition, in clustering order, within `range`.
    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError>;

    /// Applies mutations under the LWW rule. The embedded driver applies the whole
    /// batch atomically and durably; the ScyllaDB driver applies each idempotently.
    /// Refused ([`StoreError::Misuse`], nothing written) when one names a table written
    /// only conditionally.
    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError>;

    /// Writes one row only when its key holds no live row (none, or one that has
    /// expired), and tells whether this call wrote it (`true`) or found a live row and
    /// left it as it was (`false`). Of any number of calls for one key, on any number
    /// of processes, exactly one is told it wrote (until that row expires), and every
    /// later read returns that call's body. `expires_at` is a wall-clock instant in
    /// microseconds, after which the row reads as absent and may be written again.
    ///
    /// Only for tables declared [`Clock::FirstWriteWins`] (see the rule above; any other
    /// table is refused with [`StoreError::Misuse`]). Not idempotent: after an error the
    /// row may or may not have been written, and retrying could report a write of this
    /// very call as someone else's; callers treat an error as "not known to be won".
    /// The embedded driver decides inside its one write transaction; the ScyllaDB
    /// driver with a lightweight transaction (`INSERT ... IF NOT EXISTS`) at its serial
    /// consistency, and reads such tables at that serial consistency too.
    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError>;

    /// Writes the rows of a frozen batch (see [`crate::Batch::freeze`]) as one atomic
    /// write, like [`Driver::write`]. The batch stays readable (the next one reads it
    /// until this write lands), so drivers that can write borrowed rows override this to
    /// skip copying them.
    async fn write_frozen(&self, frozen: Arc<Frozen>) -> Result<(), StoreError> {
        self.write(frozen.mutations().map(|mutation| mutation.to_owned()).collect()).await
    }

    /// A page of bodies written straight into a response: the live rows of [`Driver::scan`]
    /// past the first `skip`, up to `limit`, their bodies appended to `out` separated by
    /// commas (the inside of a JSON array, as bodies are stored JSON), as the bytes they
    /// were written as (UTF-8: bodies are written as strings). Tells how many were
    /// appended, the clustering key of the last one (where a next page resumes) and
    /// whether a further row exists. Drivers that can copy bodies from storage without
    /// materialising rows override this.
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
        let rows = self.scan(table, partition, range, builder.wanted()).await?;
        let mut last = None;
        for row in &rows {
            match builder.offer(row.body.as_bytes()) {
                Offered::Skipped => {}
                Offered::Appended => last = Some(row),
                Offered::Full => break,
            }
        }
        Ok(builder.finish(last.map(|row| row.clustering.clone())))
    }

    /// The first `limit` live rows of [`Driver::scan`] and how many live rows `range`
    /// holds in all (a search page and its total). Drivers that can do both in one pass
    /// override this.
    async fn scan_counted(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        let total = self.count(table, partition, range).await?;
        Ok((self.scan(table, partition, range, limit).await?, total))
    }

    /// How many live rows of one partition lie within `range`. Drivers that can count
    /// without materialising rows override this.
    async fn count(&self, table: &'static Table, partition: &[Val], range: &ScanRange) -> Result<usize, StoreError> {
        Ok(self.scan(table, partition, range, usize::MAX).await?.len())
    }

    /// Answers when the store can serve (readiness).
    async fn ping(&self) -> Result<(), StoreError>;

    /// Whether `table` may hold a live row in any partition: false only when the driver
    /// looked and found none. A look at the table's first rows, for a decision taken
    /// once (an upgrade's fallback to a table written before), not for a request's path.
    /// Drivers that cannot look say true.
    async fn holds_rows(&self, _table: &'static Table) -> Result<bool, StoreError> {
        Ok(true)
    }

    /// Whether [`Driver::write`] lands a batch all or nothing, so that rows whose order
    /// matters may share one write (the embedded driver: one transaction). False where
    /// the rows of one write land concurrently (ScyllaDB): a row that must not land
    /// before another is written only after the other's write succeeded.
    fn writes_atomically(&self) -> bool {
        false
    }

    /// The bound every call of this driver honours.
    fn timeout(&self) -> Duration {
        Duration::from_secs(2)
    }

    /// How many committed writes have touched `table` so far, for a driver that sees
    /// every write to its store (the embedded one: one process owns the data dir): a
    /// value read from the table before this count was taken is still current while the
    /// count is unchanged. None for a store that other processes write too (ScyllaDB),
    /// where only an age can bound how stale a kept value is.
    fn change_count(&self, _table: &'static Table) -> Option<u64> {
        None
    }

    /// A future that resolves at the first committed write to `table` after this call,
    /// for a driver that sees every write ([`Driver::change_count`]), so that a reader
    /// tailing a table waits for its next write instead of polling it. Taken before the
    /// table is read, it misses no write that lands after the read. None for a store
    /// that other processes write too.
    fn next_change(&self, _table: &'static Table) -> Option<NextChange<'_>> {
        None
    }
}

/// What [`Driver::next_change`] gives: resolves at a table's next committed write.
pub type NextChange<'a> = futures::future::BoxFuture<'a, ()>;

/// Wall-clock microseconds, for TTL checks.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|elapsed| elapsed.as_micros() as i64).unwrap_or_default()
}
