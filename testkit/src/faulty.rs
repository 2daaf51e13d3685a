//! The one driver wrapper the suites and benches use: [`FaultyDriver`] answers like the
//! driver it wraps until a test tells it otherwise. It fails (Unavailable) or stalls the
//! tables named or every call, reports corruption on scans, counts gets, scans and
//! writes, records written batches and the partitions and ranges scanned, holds writes
//! behind a gate, hides or reports change
//! counts, reports a bound of its own, and forwards the trait's optional methods or
//! leaves them to the trait's default implementations. A fault reaches every method
//! that reaches the store, whichever of them a caller uses.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use recap_readmodel::projection::Frozen;
use recap_readmodel::table::{Table, Val};
use recap_readmodel::{BodiesPage, Driver, Mutation, NextChange, Row, ScanRange, StoreError};
use tokio::sync::watch;

/// How long a stalled call waits before it answers: longer than any test, so that only
/// the caller's own bound ends it.
const STALL: Duration = Duration::from_secs(3600);

/// Which calls a fault applies to.
#[derive(Clone, Debug, Default)]
struct Scope {
    everything: bool,
    tables: BTreeSet<&'static str>,
}

impl Scope {
    /// Whether a call naming `tables` (none: a call no table names, which only a fault
    /// on everything reaches) meets this fault.
    fn covers(&self, tables: &[&'static Table]) -> bool {
        self.everything || tables.iter().any(|table| self.tables.contains(table.name))
    }

    fn is_empty(&self) -> bool {
        !self.everything && self.tables.is_empty()
    }
}

#[derive(Clone, Debug, Default)]
struct Faults {
    unavailable: Scope,
    stalled: Scope,
    corrupt_scans: Scope,
    /// Calls refused as a misuse of the store (a defect of the caller).
    misused: Scope,
    /// How long every point read waits before it is made.
    slow_gets: Option<Duration>,
}

/// What every handle on one wrapped store shares: the store, its faults, its counts,
/// the recorded batches and the write gate.
struct Shared {
    inner: Arc<dyn Driver>,
    faults: Mutex<Faults>,
    /// Whether any fault is set: the calls of an untroubled store skip the lock.
    troubled: AtomicBool,
    gets: AtomicU64,
    scans: AtomicU64,
    writes: AtomicU64,
    recorded: Mutex<Option<Vec<Vec<Mutation>>>>,
    scanned: Mutex<Option<Vec<Scanned>>>,
    /// True while writes are held.
    held: watch::Sender<bool>,
    /// Writes that land before every later one fails (a process killed there).
    writes_until_crash: AtomicU64,
}

/// One scan of any kind, as it was asked for.
#[derive(Clone, Debug)]
pub struct Scanned {
    pub table: &'static Table,
    pub partition: Vec<Val>,
    pub range: ScanRange,
}

impl Scanned {
    /// Whether the clustering key `clustering` lies in the scanned range (a bound is a
    /// prefix of the key, as in CQL).
    pub fn covers(&self, clustering: &[Val]) -> bool {
        use std::ops::Bound;
        let prefix = |bound: &[Val]| &clustering[..bound.len().min(clustering.len())];
        let after_start = match &self.range.start {
            Bound::Unbounded => true,
            Bound::Included(bound) => prefix(bound) >= bound.as_slice(),
            Bound::Excluded(bound) => prefix(bound) > bound.as_slice(),
        };
        let before_end = match &self.range.end {
            Bound::Unbounded => true,
            Bound::Included(bound) => prefix(bound) <= bound.as_slice(),
            Bound::Excluded(bound) => prefix(bound) < bound.as_slice(),
        };
        after_start && before_end
    }
}

/// The kinds of call, for what a fault does to them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Get,
    Scan,
    Write,
    Ping,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Counts the call, holds it while writes are held, then applies the faults that
    /// cover the tables it names (a batch meets the faults of every table it writes).
    async fn enter(&self, call: Call, tables: &[&'static Table]) -> Result<(), StoreError> {
        match call {
            Call::Get => self.gets.fetch_add(1, Ordering::SeqCst),
            Call::Scan => self.scans.fetch_add(1, Ordering::SeqCst),
            Call::Write => self.writes.fetch_add(1, Ordering::SeqCst),
            Call::Ping => 0,
        };
        if call == Call::Write {
            self.held.subscribe().wait_for(|held| !*held).await.map_err(|_| StoreError::Unavailable("the write gate is gone".into()))?;
            // Counted above: the write numbered past the crash point never lands.
            if self.writes.load(Ordering::SeqCst) > self.writes_until_crash.load(Ordering::SeqCst) {
                return Err(StoreError::Unavailable("the process died here".into()));
            }
        }
        if !self.troubled.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (stalled, unavailable, corrupt, misused, slow) = {
            let faults = lock(&self.faults);
            (
                faults.stalled.covers(tables),
                faults.unavailable.covers(tables),
                call == Call::Scan && faults.corrupt_scans.covers(tables),
                faults.misused.covers(tables),
                faults.slow_gets.filter(|_| call == Call::Get),
            )
        };
        if let Some(delay) = slow {
            tokio::time::sleep(delay).await;
        }
        if stalled {
            tokio::time::sleep(STALL).await;
        }
        if unavailable {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        if corrupt {
            return Err(StoreError::Corrupt("row does not decode".into()));
        }
        if misused {
            return Err(StoreError::Misuse("a call the store refuses as a defect of its caller".into()));
        }
        Ok(())
    }

    fn record_scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange) {
        if let Some(scans) = lock(&self.scanned).as_mut() {
            scans.push(Scanned { table, partition: partition.to_vec(), range: range.clone() });
        }
    }

    fn record(&self, batch: impl FnOnce() -> Vec<Mutation>) {
        if let Some(batches) = lock(&self.recorded).as_mut() {
            batches.push(batch());
        }
    }

    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.enter(Call::Get, &[table]).await?;
        self.inner.get(table, partition, clustering).await
    }

    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        self.enter(Call::Get, &[table]).await?;
        self.inner.get_many(table, partition, keys).await
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.enter(Call::Scan, &[table]).await?;
        self.record_scan(table, partition, range);
        self.inner.scan(table, partition, range, limit).await
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        let tables: Vec<&'static Table> = mutations.iter().map(|mutation| mutation.table).collect();
        self.enter(Call::Write, &tables).await?;
        self.record(|| mutations.clone());
        self.inner.write(mutations).await
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.enter(Call::Write, &[table]).await?;
        self.inner.insert_if_absent(table, partition, clustering, body, expires_at).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.enter(Call::Ping, &[]).await?;
        self.inner.ping().await
    }

    async fn holds_rows(&self, table: &'static Table) -> Result<bool, StoreError> {
        self.enter(Call::Scan, &[table]).await?;
        self.inner.holds_rows(table).await
    }
}

/// A driver wrapping another (see the module doc). Cloning it, or [`FaultyDriver::with_timeout`],
/// gives another handle on the same store, faults and counts.
#[derive(Clone)]
pub struct FaultyDriver {
    shared: Arc<Shared>,
    timeout: Option<Duration>,
    reports_change_counts: bool,
    reports_atomic_writes: bool,
    trait_defaults: bool,
}

impl FaultyDriver {
    /// `inner`, untroubled: every call forwarded, change counts and bound its own.
    pub fn new(inner: Arc<dyn Driver>) -> FaultyDriver {
        let shared = Shared {
            inner,
            faults: Mutex::default(),
            troubled: AtomicBool::new(false),
            gets: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            recorded: Mutex::new(None),
            scanned: Mutex::new(None),
            held: watch::Sender::new(false),
            writes_until_crash: AtomicU64::new(u64::MAX),
        };
        FaultyDriver { shared: Arc::new(shared), timeout: None, reports_change_counts: true, reports_atomic_writes: true, trait_defaults: false }
    }

    /// Reports no change counts ([`Driver::change_count`]), as a store that other
    /// processes write: the token cache then keeps lookups by age, as in the
    /// distributed edition.
    pub fn hiding_change_counts(mut self) -> FaultyDriver {
        self.reports_change_counts = false;
        self
    }

    /// Reports its writes as not atomic ([`Driver::writes_atomically`]), as ScyllaDB's:
    /// a caller then writes a row that must follow another only once the other's write
    /// succeeded, which a fault on the later row's table shows.
    pub fn not_atomic(mut self) -> FaultyDriver {
        self.reports_atomic_writes = false;
        self
    }

    /// A handle on the same store, faults and counts that reports `timeout` as its bound
    /// ([`Driver::timeout`]).
    pub fn with_timeout(&self, timeout: Duration) -> FaultyDriver {
        FaultyDriver { timeout: Some(timeout), ..self.clone() }
    }

    /// Leaves `scan_bodies`, `scan_counted`, `count` and `write_frozen` to the trait's
    /// default implementations, which call the required methods, instead of forwarding
    /// them to the wrapped driver's own.
    pub fn with_trait_defaults(mut self) -> FaultyDriver {
        self.trait_defaults = true;
        self
    }

    /// The wrapped driver, as the projector writes it: no fault, count or gate.
    pub fn inner(&self) -> &Arc<dyn Driver> {
        &self.shared.inner
    }

    fn set_faults(&self, change: impl FnOnce(&mut Faults)) {
        let mut faults = lock(&self.shared.faults);
        change(&mut faults);
        let troubled = !(faults.unavailable.is_empty()
            && faults.stalled.is_empty()
            && faults.corrupt_scans.is_empty()
            && faults.misused.is_empty()
            && faults.slow_gets.is_none());
        self.shared.troubled.store(troubled, Ordering::SeqCst);
    }

    /// The next `writes` writes (plain or conditional) land and every later one fails,
    /// as the writes of a process killed at that instant: a test then stops the process
    /// where it is and starts another over the inner store.
    pub fn crash_after_writes(&self, writes: u64) {
        self.shared.writes_until_crash.store(self.shared.writes.load(Ordering::SeqCst).saturating_add(writes), Ordering::SeqCst);
    }

    /// Whether a write past the crash point was refused.
    pub fn crashed(&self) -> bool {
        self.shared.writes.load(Ordering::SeqCst) > self.shared.writes_until_crash.load(Ordering::SeqCst)
    }

    /// Every call, the readiness ping too, fails as an unreachable store does.
    pub fn fail_everything(&self) {
        self.set_faults(|faults| faults.unavailable.everything = true);
    }

    /// Every call naming `table` fails as an unreachable store does.
    pub fn fail_table(&self, table: &'static str) {
        self.set_faults(|faults| {
            faults.unavailable.tables.insert(table);
        });
    }

    /// Every call naming `table` is refused as a misuse ([`StoreError::Misuse`]), as
    /// the store refuses a call only a defect of its caller makes.
    pub fn misuse_table(&self, table: &'static str) {
        self.set_faults(|faults| {
            faults.misused.tables.insert(table);
        });
    }

    /// Every call, the readiness ping too, waits longer than any test before answering.
    pub fn stall_everything(&self) {
        self.set_faults(|faults| faults.stalled.everything = true);
    }

    /// Every call naming `table` waits longer than any test before answering.
    pub fn stall_table(&self, table: &'static str) {
        self.set_faults(|faults| {
            faults.stalled.tables.insert(table);
        });
    }

    /// Every point read waits `delay` before it is made, as a network store's take a
    /// round trip: lookups made at once then overlap.
    pub fn slow_gets(&self, delay: Duration) {
        self.set_faults(|faults| faults.slow_gets = Some(delay));
    }

    /// Every scan (of any kind) reports stored data that does not decode; point reads
    /// still answer, so a request gets past its token lookup and fails where it reads.
    pub fn corrupt_scans(&self) {
        self.set_faults(|faults| faults.corrupt_scans.everything = true);
    }

    /// Clears every fault.
    pub fn heal(&self) {
        self.set_faults(|faults| *faults = Faults::default());
    }

    /// Point reads ([`Driver::get`]) that reached this wrapper so far.
    pub fn gets(&self) -> u64 {
        self.shared.gets.load(Ordering::SeqCst)
    }

    /// Scans of any kind (`scan`, `scan_bodies`, `scan_counted`, `count`) started so far.
    pub fn scans(&self) -> u64 {
        self.shared.scans.load(Ordering::SeqCst)
    }

    /// Writes of any kind (`write`, `write_frozen`, `insert_if_absent`) started so far.
    pub fn writes(&self) -> u64 {
        self.shared.writes.load(Ordering::SeqCst)
    }

    /// Sets the counts of gets, scans and writes back to zero.
    pub fn reset_counts(&self) {
        for count in [&self.shared.gets, &self.shared.scans, &self.shared.writes] {
            count.store(0, Ordering::SeqCst);
        }
    }

    /// From now on, keeps every batch written (`write` and `write_frozen`).
    pub fn record_writes(&self) {
        lock(&self.shared.recorded).get_or_insert_with(Vec::new);
    }

    /// The batches recorded since [`FaultyDriver::record_writes`] or the last call, in order.
    pub fn take_recorded(&self) -> Vec<Vec<Mutation>> {
        lock(&self.shared.recorded).as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// From now on, keeps every scan of any kind (`scan`, `scan_bodies`, `scan_counted`,
    /// `count`): its table, partition and range.
    pub fn record_scans(&self) {
        lock(&self.shared.scanned).get_or_insert_with(Vec::new);
    }

    /// The scans recorded since [`FaultyDriver::record_scans`] or the last call, in order.
    pub fn take_scans(&self) -> Vec<Scanned> {
        lock(&self.shared.scanned).as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Writes of any kind wait from now on until [`FaultyDriver::release_writes`].
    pub fn hold_writes(&self) {
        self.shared.held.send_replace(true);
    }

    /// Lets held and later writes through.
    pub fn release_writes(&self) {
        self.shared.held.send_replace(false);
    }

    fn defaults(&self) -> TraitDefaults {
        TraitDefaults(self.shared.clone())
    }
}

#[async_trait]
impl Driver for FaultyDriver {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.shared.get(table, partition, clustering).await
    }

    /// One get, as one request (or each key a get of its own with the trait's default).
    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        if self.trait_defaults {
            return self.defaults().get_many(table, partition, keys).await;
        }
        self.shared.get_many(table, partition, keys).await
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.shared.scan(table, partition, range, limit).await
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        self.shared.write(mutations).await
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.shared.insert_if_absent(table, partition, clustering, body, expires_at).await
    }

    async fn write_frozen(&self, frozen: Arc<Frozen>) -> Result<(), StoreError> {
        if self.trait_defaults {
            return self.defaults().write_frozen(frozen).await;
        }
        let tables: Vec<&'static Table> = frozen.mutations().map(|mutation| mutation.table).collect();
        self.shared.enter(Call::Write, &tables).await?;
        self.shared.record(|| frozen.mutations().map(|mutation| mutation.to_owned()).collect());
        self.shared.inner.write_frozen(frozen).await
    }

    async fn scan_bodies(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        skip: usize,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<BodiesPage, StoreError> {
        if self.trait_defaults {
            return self.defaults().scan_bodies(table, partition, range, skip, limit, out).await;
        }
        self.shared.enter(Call::Scan, &[table]).await?;
        self.shared.record_scan(table, partition, range);
        self.shared.inner.scan_bodies(table, partition, range, skip, limit, out).await
    }

    async fn scan_counted(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<(Vec<Row>, usize), StoreError> {
        if self.trait_defaults {
            return self.defaults().scan_counted(table, partition, range, limit).await;
        }
        self.shared.enter(Call::Scan, &[table]).await?;
        self.shared.record_scan(table, partition, range);
        self.shared.inner.scan_counted(table, partition, range, limit).await
    }

    async fn count(&self, table: &'static Table, partition: &[Val], range: &ScanRange) -> Result<usize, StoreError> {
        if self.trait_defaults {
            return self.defaults().count(table, partition, range).await;
        }
        self.shared.enter(Call::Scan, &[table]).await?;
        self.shared.record_scan(table, partition, range);
        self.shared.inner.count(table, partition, range).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.shared.ping().await
    }

    async fn holds_rows(&self, table: &'static Table) -> Result<bool, StoreError> {
        self.shared.holds_rows(table).await
    }

    fn timeout(&self) -> Duration {
        self.timeout.unwrap_or_else(|| self.shared.inner.timeout())
    }

    fn change_count(&self, table: &'static Table) -> Option<u64> {
        self.reports_change_counts.then(|| self.shared.inner.change_count(table)).flatten()
    }

    fn next_change(&self, table: &'static Table) -> Option<NextChange<'_>> {
        self.reports_change_counts.then(|| self.shared.inner.next_change(table)).flatten()
    }

    fn writes_atomically(&self) -> bool {
        self.reports_atomic_writes && self.shared.inner.writes_atomically()
    }
}

/// The required methods only, through the shared faults and counts: the trait's default
/// implementations of the others run on it (see [`FaultyDriver::with_trait_defaults`]).
struct TraitDefaults(Arc<Shared>);

#[async_trait]
impl Driver for TraitDefaults {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.0.get(table, partition, clustering).await
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.0.scan(table, partition, range, limit).await
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        self.0.write(mutations).await
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        self.0.insert_if_absent(table, partition, clustering, body, expires_at).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.0.ping().await
    }
}
