//! What recap's test suites and benches share, and only they (a dev-dependency, never
//! shipped): one way to build a test world and its events.
//!
//! - [`world`]: the [`World`](world::World) every router suite runs against, on the
//!   edition `RECAP_TEST_WORLD` chooses (in process, Cassandra, cluster), and the
//!   in-process world with its controls;
//! - [`faulty`]: the one fault-injecting, counting, recording driver wrapper;
//! - [`events`] and [`fixtures`]: typed events (`recap_schemas::build`) and the suites'
//!   standard worlds;
//! - [`cluster`], [`server`], [`process`]: the distributed edition as processes, the
//!   black-box harness around `recap serve`, and running the `recap` binary;
//! - [`store`], [`snapshot`], [`otel`], [`bench`]: a store per test, snapshots of a read
//!   model's answers, a real OpenTelemetry Collector, the benches' shared parts;
//! - [`stream`], [`soak`]: the distributed suites' event stream of every kind over six
//!   accounts with its comparison against the reference fold, and the soak behind the
//!   short test and the bench;
//! - [`webhooks`]: an account's feed, endpoints and attempts written straight into a
//!   world's store.

pub mod bench;
pub mod cluster;
pub mod events;
pub mod faulty;
pub mod fixtures;
pub mod otel;
pub mod process;
pub mod receiver;
pub mod server;
pub mod snapshot;
pub mod soak;
pub mod store;
pub mod stream;
pub mod webhooks;
pub mod world;

pub use faulty::FaultyDriver;
pub use world::{world, Door, Edition, InProcess, Settings, World};
