//! A store per test, on either driver: an embedded store at a path of the caller's, or a
//! keyspace of its own on the real Cassandra (`RECAP_SCYLLA_NODES`, as `make up` writes
//! it), emptied for it. Keyspaces are kept and reused, emptied, by later tests and runs:
//! creating a keyspace's tables takes Cassandra tens of seconds on a busy machine, and
//! dropping one as long again, where emptying one takes a second or two. Their names
//! carry the pool, a hash of the schema and a slot number, so a run adds none unless the
//! schema changed (and then the first lease drops the pool's keyspaces of other schemas).
//! A slot is held by one process at a time, through a lock file under the system's
//! temporary directory, so test binaries running at once on one cluster never share a
//! keyspace; the lock goes with the process, however it ends.

use std::collections::HashSet;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::tables::cql_schema;
use recap_readmodel::{Driver, StoreError};
use recap_scylla::{Consistency, MigrateError, ScyllaCluster, ScyllaConfig, ScyllaDriver};

/// Replication of every test keyspace (one node).
const REPLICATION: &str = "{'class': 'SimpleStrategy', 'replication_factor': 1}";

/// Keyspaces this process holds the slot of and nobody leases.
static FREE: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
/// Pools whose keyspaces of other schemas this process dropped already.
static SWEPT: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// A keyspace whose slot this process holds: `lock` is locked while the file is open.
struct Slot {
    keyspace: String,
    _lock: File,
}

/// A keyspace of the real Cassandra, migrated and emptied, held by one caller until
/// dropped (it then goes back to the process's free slots).
pub struct KeyspaceLease(Option<Slot>);

impl KeyspaceLease {
    pub fn name(&self) -> &str {
        self.0.as_ref().map_or("", |slot| slot.keyspace.as_str())
    }
}

impl Drop for KeyspaceLease {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(slot);
        }
    }
}

/// A test's store: while it lives, a keyspace of the real cluster is its alone.
pub struct TestStore {
    pub driver: Arc<dyn Driver>,
    lease: Option<KeyspaceLease>,
}

impl TestStore {
    /// An embedded store at `path`.
    pub fn embedded(path: &Path) -> Result<TestStore, StoreError> {
        Ok(TestStore { driver: Arc::new(EmbeddedDriver::open(path)?), lease: None })
    }

    /// An empty keyspace of the real Cassandra, leased from `pool` (lowercase letters,
    /// digits and `_`) until the store is dropped.
    pub async fn leased(pool: &str) -> Result<TestStore, StoreError> {
        let (lease, driver) = lease(pool, cluster()?).await?;
        Ok(TestStore { driver: Arc::new(driver), lease: Some(lease) })
    }

    /// Whether this is a leased keyspace of the real Cassandra.
    pub fn isleased(&self) -> bool {
        self.lease.is_some()
    }
}

/// An empty keyspace of the real Cassandra for processes of the test's making (a
/// cluster's roles), leased from `pool` until the lease is dropped: drop it only once
/// nothing writes to the keyspace any more.
pub async fn lease_keyspace(pool: &str, cluster: ScyllaCluster) -> Result<KeyspaceLease, StoreError> {
    lease(pool, cluster).await.map(|(lease, _)| lease)
}

/// The store `make up` started, with its login.
fn cluster() -> Result<ScyllaCluster, StoreError> {
    if std::env::var_os("RECAP_SCYLLA_NODES").is_none() {
        return Err(StoreError::Unavailable("RECAP_SCYLLA_NODES is not set (run `make up`)".into()));
    }
    Ok(crate::cluster::Engines::from_env().scylla())
}

async fn lease(pool: &str, cluster: ScyllaCluster) -> Result<(KeyspaceLease, ScyllaDriver), StoreError> {
    let timeout = Duration::from_secs(10);
    let prefix = format!("recap_t_{pool}_");
    let schema = {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        cql_schema().hash(&mut hasher);
        format!("{:08x}", hasher.finish() as u32)
    };
    let free = {
        let mut free = FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        free.iter().position(|slot| slot.keyspace.starts_with(&prefix)).map(|index| free.swap_remove(index))
    };
    let slot = match free {
        Some(slot) => slot,
        None => {
            drop_other_schemas(&cluster, &prefix, &schema, timeout).await;
            let slot = claim_slot(&format!("{prefix}{schema}_"))?;
            ScyllaDriver::migrate(&cluster, &slot.keyspace, REPLICATION, recap_readmodel::tables::ALL, timeout).await.map_err(|error| match error {
                MigrateError::Store(error) => error,
                incompatible => StoreError::Corrupt(incompatible.to_string()),
            })?;
            slot
        }
    };
    let lease = KeyspaceLease(Some(slot));
    let config = ScyllaConfig { cluster, keyspace: lease.name().to_string(), consistency: Consistency::LocalQuorum, timeout, write_concurrency: 64 };
    let driver = ScyllaDriver::connect(config).await?;
    driver.truncate_all().await?;
    Ok((lease, driver))
}

/// The lowest slot `<stem><n>` no other process holds, locked for this one.
fn claim_slot(stem: &str) -> Result<Slot, StoreError> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).map_err(|error| StoreError::Unavailable(format!("creating {}: {error}", dir.display())))?;
    for number in 0.. {
        let keyspace = format!("{stem}{number}");
        let path = dir.join(format!("{keyspace}.lock"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|error| StoreError::Unavailable(format!("opening {}: {error}", path.display())))?;
        match file.try_lock() {
            Ok(()) => return Ok(Slot { keyspace, _lock: file }),
            Err(std::fs::TryLockError::WouldBlock) => continue,
            Err(std::fs::TryLockError::Error(error)) => return Err(StoreError::Unavailable(format!("locking {}: {error}", path.display()))),
        }
    }
    unreachable!("slot numbers are unbounded")
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("recap-test-keyspaces")
}

/// Drops, once per pool and process, the pool's keyspaces made for another schema (an
/// earlier build's) whose slot no process holds. Best effort: a failure leaves them.
async fn drop_other_schemas(cluster: &ScyllaCluster, prefix: &str, schema: &str, timeout: Duration) {
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if !swept.get_or_insert_with(HashSet::new).insert(prefix.to_string()) {
            return;
        }
    }
    let Ok(keyspaces) = ScyllaDriver::keyspaces(cluster, timeout).await else { return };
    for keyspace in keyspaces.into_iter().filter(|name| name.starts_with(prefix) && !name[prefix.len()..].starts_with(schema)) {
        let Ok(file) = File::options().create(true).truncate(false).write(true).open(lock_dir().join(format!("{keyspace}.lock"))) else { continue };
        // Held by a running process of an earlier build: its keyspace stays.
        if file.try_lock().is_ok() {
            if let Err(error) = ScyllaDriver::drop_keyspace(cluster, &keyspace, timeout).await {
                eprintln!("could not drop the stale test keyspace {keyspace}: {error}");
            }
        }
    }
}
