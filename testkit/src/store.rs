//! A store per test, on either driver: an embedded store at a path of the caller's, or a
//! keyspace of its own on the real Cassandra (`RECAP_SCYLLA_NODES`, as `make up` writes
//! it), emptied for it. Keyspaces are kept and reused, emptied, by the next run: their
//! names carry the pool, a hash of the schema and a slot number, so a run adds none
//! unless the schema changed. Two processes leasing from one pool at once on the same
//! cluster would share keyspaces: suites run one test binary at a time.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use recap_lmdb::EmbeddedDriver;
use recap_readmodel::tables::cql_schema;
use recap_readmodel::{Driver, StoreError};
use recap_scylla::{Consistency, MigrateError, ScyllaConfig, ScyllaDriver};

/// Keyspaces this process has migrated and nobody holds.
static FREE: Mutex<Vec<String>> = Mutex::new(Vec::new());
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// A test's store: while it lives, a keyspace of the real cluster is its alone.
pub struct TestStore {
    pub driver: Arc<dyn Driver>,
    lease: Option<Lease>,
}

/// A keyspace name held by one caller.
struct Lease(String);

impl Drop for Lease {
    fn drop(&mut self) {
        FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(std::mem::take(&mut self.0));
    }
}

impl TestStore {
    /// An embedded store at `path`.
    pub fn embedded(path: &Path) -> Result<TestStore, StoreError> {
        Ok(TestStore { driver: Arc::new(EmbeddedDriver::open(path)?), lease: None })
    }

    /// An empty keyspace of the real Cassandra, leased from `pool` (lowercase letters,
    /// digits and `_`) until the store is dropped.
    pub async fn leased(pool: &str) -> Result<TestStore, StoreError> {
        lease(pool).await
    }

    /// Whether this is a leased keyspace of the real Cassandra.
    pub fn isleased(&self) -> bool {
        self.lease.is_some()
    }
}

async fn lease(pool: &str) -> Result<TestStore, StoreError> {
    let nodes: Vec<String> = std::env::var("RECAP_SCYLLA_NODES")
        .map_err(|_| StoreError::Unavailable("RECAP_SCYLLA_NODES is not set (run `make up`)".into()))?
        .split(',')
        .map(str::to_string)
        .collect();
    let timeout = Duration::from_secs(10);
    let prefix = format!("recap_t_{pool}_");
    let free = {
        let mut free = FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        free.iter().position(|keyspace| keyspace.starts_with(&prefix)).map(|index| free.swap_remove(index))
    };
    let lease = match free {
        Some(keyspace) => Lease(keyspace),
        None => {
            let schema = cql_schema();
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            schema.hash(&mut hasher);
            let keyspace = format!("{prefix}{:08x}_{}", hasher.finish() as u32, NEXT_SLOT.fetch_add(1, Ordering::Relaxed));
            ScyllaDriver::migrate(&nodes, &keyspace, "{'class': 'SimpleStrategy', 'replication_factor': 1}", recap_readmodel::tables::ALL, timeout)
                .await
                .map_err(|error| match error {
                    MigrateError::Store(error) => error,
                    incompatible => StoreError::Corrupt(incompatible.to_string()),
                })?;
            Lease(keyspace)
        }
    };
    let config = ScyllaConfig { nodes, keyspace: lease.0.clone(), consistency: Consistency::LocalQuorum, timeout, write_concurrency: 64 };
    let driver = ScyllaDriver::connect(config).await?;
    driver.truncate_all().await?;
    Ok(TestStore { driver: Arc::new(driver), lease: Some(lease) })
}
