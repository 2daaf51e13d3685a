//! Stores for the suites that run against either driver. With `RECAP_TEST_STORE=scylla`
//! (and `RECAP_SCYLLA_NODES`, as `make up` writes it) each caller gets a keyspace of its
//! own on the real cluster, emptied for it; otherwise an embedded store at the path it
//! names. Keyspaces are kept and reused, emptied, by the next run: their names carry the
//! suite, a hash of the schema and a slot number, so a run adds none unless the schema
//! changed, and two suites never share one (two runs of one suite at once on the same
//! cluster would).

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

/// Whether this run's suites use the real cluster (`RECAP_TEST_STORE=scylla`).
fn wants_scylla() -> bool {
    std::env::var("RECAP_TEST_STORE").is_ok_and(|store| store == "scylla")
}

/// A test's store: while it lives, a keyspace of the real cluster is its alone.
pub struct TestStore {
    pub driver: Arc<dyn Driver>,
    _lease: Option<Lease>,
}

/// A keyspace name held by one caller.
struct Lease(String);

impl Drop for Lease {
    fn drop(&mut self) {
        FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(std::mem::take(&mut self.0));
    }
}

/// An empty store for one test of `suite` (lowercase letters, digits and `_`): a leased
/// keyspace with `RECAP_TEST_STORE=scylla`, else an embedded store at `embedded_path`.
pub async fn test_store(suite: &str, embedded_path: &Path) -> Result<TestStore, StoreError> {
    if !wants_scylla() {
        return Ok(TestStore { driver: Arc::new(EmbeddedDriver::open(embedded_path)?), _lease: None });
    }
    let nodes: Vec<String> = std::env::var("RECAP_SCYLLA_NODES")
        .map_err(|_| StoreError::Unavailable("RECAP_SCYLLA_NODES is not set (run `make up`)".into()))?
        .split(',')
        .map(str::to_string)
        .collect();
    let timeout = Duration::from_secs(10);
    let free = FREE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).pop();
    let lease = match free {
        Some(keyspace) => Lease(keyspace),
        None => {
            let schema = cql_schema();
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            schema.hash(&mut hasher);
            let keyspace = format!("recap_t_{suite}_{:08x}_{}", hasher.finish() as u32, NEXT_SLOT.fetch_add(1, Ordering::Relaxed));
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
    Ok(TestStore { driver: Arc::new(driver), _lease: Some(lease) })
}
