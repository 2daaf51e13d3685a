//! The in-process world: the REST and MCP routers in this process over a store of the
//! test's own (an embedded store, or a leased Cassandra keyspace), seen through one
//! [`FaultyDriver`], with the controls only a world in process has: the limiter's clock,
//! the MCP router's clock, store faults and counts, the store itself, a limiter of the
//! test's making.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use recap_access::{InProcessLimiter, Limiter, ManualClock, Plans};
use recap_readmodel::{Batch, Driver, ReadModel};
use recap_schemas::{Envelope, Timestamp};
use tower::ServiceExt;

use super::{Answer, Door, Edition, Settings, World};
use crate::faulty::FaultyDriver;
use crate::store::TestStore;

/// The bound the REST router's store reports as its own: the trait's default, what the
/// embedded driver reports.
pub const REST_STORE_BOUND: Duration = Duration::from_secs(2);

/// The bound the MCP router's store reports as its own: other than the REST router's,
/// so that a test of a configured bound can tell the two apart, and long enough for a
/// busy Cassandra's conditional writes (an OAuth step), which the tests do not time.
pub const MCP_STORE_BOUND: Duration = Duration::from_secs(3);

/// Keyspaces of the Cassandra edition's worlds are leased from this pool.
const KEYSPACE_POOL: &str = "world";

/// Makes the REST router's limiter from the world's limiter clock and its store.
pub type LimiterFactory = Box<dyn FnOnce(ManualClock, FaultyDriver) -> Arc<dyn Limiter> + Send>;

/// How an [`InProcess`] world is built (see [`InProcess::builder`]).
pub struct InProcessBuilder {
    settings: Settings,
    cassandra: bool,
    limiter: Option<LimiterFactory>,
    reports_change_counts: bool,
}

impl InProcessBuilder {
    /// Over an embedded store whatever `RECAP_TEST_WORLD` says.
    pub fn embedded(mut self) -> InProcessBuilder {
        self.cassandra = false;
        self
    }

    /// The REST router asks the limiter `limiter` makes instead of an in-process limiter
    /// on the world's clock.
    pub fn limiter(mut self, limiter: impl FnOnce(ManualClock, FaultyDriver) -> Arc<dyn Limiter> + Send + 'static) -> InProcessBuilder {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// The store reports its change counts, as the embedded edition's own store does
    /// (token lookups are then kept until a token or account row changes). By default it
    /// reports none, as a store other processes write: lookups are kept by age, as in
    /// the distributed edition.
    pub fn reporting_change_counts(mut self) -> InProcessBuilder {
        self.reports_change_counts = true;
        self
    }

    pub async fn start(self) -> InProcess {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (store, edition) = match self.cassandra {
            true => (TestStore::leased(KEYSPACE_POOL).await.expect("a keyspace of the real Cassandra (`make up`)"), Edition::Cassandra),
            false => (TestStore::embedded(&dir.path().join("store.lmdb")).expect("an embedded store"), Edition::InProcess),
        };
        let mut faulty = FaultyDriver::new(store.driver.clone());
        if !self.reports_change_counts {
            faulty = faulty.hiding_change_counts();
        }
        let rest_store = faulty.with_timeout(REST_STORE_BOUND);
        let mcp_store = faulty.with_timeout(MCP_STORE_BOUND);
        let rest_readmodel = ReadModel::new(Arc::new(rest_store.clone()));
        let mcp_readmodel = ReadModel::new(Arc::new(mcp_store));

        let limiter_clock = ManualClock::at(Timestamp::parse(crate::fixtures::rest::NOW).expect("an instant"));
        let limiter = match self.limiter {
            Some(make) => make(limiter_clock.clone(), rest_store.clone()),
            None => Arc::new(InProcessLimiter::new(Arc::new(limiter_clock.clone()))),
        };
        let cursor_secret = b"test cursor secret, 32 bytes long!".to_vec();
        let rest_state = recap_query_api::RestState::new(rest_readmodel.clone(), Plans::default(), limiter, cursor_secret, &self.settings.rest);

        let mcp_clock_offset = Arc::new(AtomicI64::new(0));
        let offset = mcp_clock_offset.clone();
        let mcp_clock: recap_mcp::Clock = Arc::new(move || recap_readmodel::driver::now_micros() + offset.load(Ordering::SeqCst));
        let mcp_state = recap_mcp::McpState::with_clock(mcp_readmodel.clone(), Plans::default(), &self.settings.mcp, mcp_clock);

        InProcess {
            edition,
            store: rest_store,
            rest_readmodel,
            mcp_readmodel,
            rest: recap_query_api::router(rest_state),
            mcp: recap_mcp::router(mcp_state),
            limiter_clock,
            mcp_clock_offset,
            position: AtomicI64::new(0),
            _store: store,
            _dir: dir,
        }
    }
}

/// The routers in this process (see the module doc).
pub struct InProcess {
    edition: Edition,
    store: FaultyDriver,
    rest_readmodel: ReadModel,
    mcp_readmodel: ReadModel,
    rest: axum::Router,
    mcp: axum::Router,
    limiter_clock: ManualClock,
    mcp_clock_offset: Arc<AtomicI64>,
    position: AtomicI64,
    _store: TestStore,
    _dir: tempfile::TempDir,
}

impl InProcess {
    /// A world with `settings` over the store `RECAP_TEST_WORLD` implies: a Cassandra
    /// keyspace when it says `cassandra`, else an embedded store.
    pub fn builder(settings: Settings) -> InProcessBuilder {
        InProcessBuilder { settings, cassandra: Edition::from_env() == Edition::Cassandra, limiter: None, reports_change_counts: false }
    }

    pub async fn start(settings: Settings) -> InProcess {
        InProcess::builder(settings).start().await
    }

    /// The store as the routers see it: its faults and counts. (Events fed to the
    /// world reach the store past it: no fault, count or gate.)
    pub fn store(&self) -> &FaultyDriver {
        &self.store
    }

    /// The read model a door's router reads (its store reports that door's bound).
    pub fn readmodel(&self, door: Door) -> &ReadModel {
        match door {
            Door::Rest => &self.rest_readmodel,
            Door::Mcp => &self.mcp_readmodel,
        }
    }

    /// The clock of the REST router's limiter (unless the test made its own limiter),
    /// at first [`crate::fixtures::rest::NOW`].
    pub fn limiter_clock(&self) -> &ManualClock {
        &self.limiter_clock
    }

    /// Moves the wall clock the MCP router sees (OAuth codes and tokens age by it).
    pub fn advance_mcp_clock(&self, by: Duration) {
        self.mcp_clock_offset.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
    }
}

#[async_trait]
impl World for InProcess {
    fn edition(&self) -> Edition {
        self.edition
    }

    /// One batch through the real projection, written to the store past the faults.
    async fn feed(&self, events: &[Envelope]) {
        let driver: Arc<dyn Driver> = self.store.inner().clone();
        let mut batch = Batch::new(driver.clone());
        for envelope in events {
            let position = self.position.fetch_add(1, Ordering::SeqCst) + 1;
            batch.apply(envelope, position).await.unwrap_or_else(|error| panic!("projecting {}: {error}", envelope.to_line()));
        }
        driver.write(batch.into_mutations()).await.expect("writing the projected events");
    }

    async fn answer(&self, door: Door, request: Request<Body>) -> Answer {
        let router = match door {
            Door::Rest => self.rest.clone(),
            Door::Mcp => self.mcp.clone(),
        };
        let response = router.oneshot(request).await.expect("routers never fail");
        let (parts, body) = response.into_parts();
        Answer { status: parts.status, headers: parts.headers, body: body.collect().await.expect("the response body").to_bytes().to_vec() }
    }
}
