//! The token cache over the embedded store, which sees every write: a hot token costs
//! no store read, and a revocation or plan change is still seen on the next request.
//! (The age bound that applies where the store is shared is tested by the REST and MCP
//! suites, whose test drivers do not report changes.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use recap_access::{AuthError, TokenCache};
use recap_lmdb::EmbeddedDriver;
use recap_readmodel::table::Table;
use recap_readmodel::{Batch, Driver, Mutation, ReadModel, Row, ScanRange, StoreError, Val};
use recap_schemas::build::{Epoch, Events};
use recap_schemas::Envelope;

/// Every event and time here is on 2026-01-01 (UTC).
const EVENTS: Events = Events::new(Epoch::from_unix_seconds(1_767_225_600));

const TOKEN: &str = "svc_pat_token_cache_test_0000000000";

/// The embedded driver, counting the point reads that reach it.
struct Counting {
    inner: Arc<dyn Driver>,
    gets: AtomicUsize,
}

#[async_trait]
impl Driver for Counting {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(table, partition, clustering).await
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        self.inner.scan(table, partition, range, limit).await
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
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
        self.inner.insert_if_absent(table, partition, clustering, body, expires_at).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    fn change_count(&self, table: &'static Table) -> Option<u64> {
        self.inner.change_count(table)
    }
}

struct World {
    _dir: tempfile::TempDir,
    driver: Arc<Counting>,
    readmodel: ReadModel,
    position: i64,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let embedded: Arc<dyn Driver> = Arc::new(EmbeddedDriver::open(&dir.path().join("store.lmdb")).unwrap());
        let driver = Arc::new(Counting { inner: embedded, gets: AtomicUsize::new(0) });
        let readmodel = ReadModel::new(driver.clone());
        let mut world = World { _dir: dir, driver, readmodel, position: 0 };
        world.apply(EVENTS.account("acc").plan("flow", None, EVENTS.minute(0))).await;
        world.apply(EVENTS.token_created("acc", "tok", recap_access::token_sha256(TOKEN)).name("script")).await;
        world
    }

    async fn apply(&mut self, event: impl Into<Envelope>) {
        self.position += 1;
        let envelope = event.into();
        let driver: Arc<dyn Driver> = self.driver.clone();
        let mut batch = Batch::new(driver.clone());
        batch.apply(&envelope, self.position).await.unwrap();
        driver.write(batch.into_mutations()).await.unwrap();
        // The projection's own reads are not the lookups'.
        self.driver.gets.store(0, Ordering::SeqCst);
    }

    fn reads(&self) -> usize {
        self.driver.gets.swap(0, Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_hot_token_costs_no_store_read_until_a_token_or_account_row_changes() {
    // Authentication 5 (a revoked token "stops working on the next request") and 8
    // ("the plan is checked on every request") hold with lookups kept.
    let mut world = World::new().await;
    // No age bound at all: the store's own change count decides.
    let cache = TokenCache::new(Duration::ZERO);
    assert_eq!(cache.authenticate(&world.readmodel, TOKEN).await.unwrap().account_id, "acc");
    assert_eq!(world.reads(), 2, "the first lookup reads the token and the account");
    for _ in 0..3 {
        assert_eq!(cache.authenticate(&world.readmodel, TOKEN).await.unwrap().token_id, "tok");
    }
    assert_eq!(world.reads(), 0, "later lookups are kept");

    // A write to another table keeps them.
    world.apply(EVENTS.meeting("acc", "mtg_1").title("Sync").ended_at(EVENTS.minute(30)).note(EVENTS.note("n1").text("Agenda"))).await;
    cache.authenticate(&world.readmodel, TOKEN).await.unwrap();
    assert_eq!(world.reads(), 0, "a meeting write leaves token lookups current");

    // A plan change is seen on the next lookup.
    world.apply(EVENTS.account("acc").plan("enterprise", None, EVENTS.minute(0)).version(2)).await;
    let caller = cache.authenticate(&world.readmodel, TOKEN).await.unwrap();
    assert_eq!(caller.account.plan.map(|plan| plan.tier), Some("enterprise".to_string()));
    assert_eq!(world.reads(), 2);

    // So is a revocation, and the refusal is not kept.
    world.apply(EVENTS.token_revoked("acc", "tok").revoked_at(EVENTS.minute(24 * 60)).version(2)).await;
    assert_eq!(cache.authenticate(&world.readmodel, TOKEN).await, Err(AuthError::TokenRevoked));
    assert_eq!(cache.authenticate(&world.readmodel, TOKEN).await, Err(AuthError::TokenRevoked));
    assert_eq!(world.reads(), 2, "each refused lookup reads the token again");
}

#[tokio::test]
async fn a_token_created_after_a_refusal_works_at_once() {
    let mut world = World::new().await;
    let cache = TokenCache::new(Duration::ZERO);
    let fresh = "svc_pat_created_after_a_refusal_00000000";
    assert_eq!(cache.authenticate(&world.readmodel, fresh).await, Err(AuthError::Unauthorized));
    world.apply(EVENTS.token_created("acc", "tok2", recap_access::token_sha256(fresh)).name("script")).await;
    assert_eq!(cache.authenticate(&world.readmodel, fresh).await.unwrap().token_id, "tok2");
}
