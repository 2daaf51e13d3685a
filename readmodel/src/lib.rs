//! The read model: its tables (defined once, `tables.rs`), the projection that turns
//! events into row writes (`projection/`), the queries that turn a request into a page
//! of rows (`queries.rs`), and the drivers they run on: `embedded` (LMDB, in the data
//! dir) and `scylla` (ScyllaDB, or Cassandra standing in for it) in the distributed edition. Projection and query code see only
//! the [`Driver`] trait, so both editions keep the same semantics.

pub mod driver;
pub mod embedded;
pub mod instrumented;
pub mod projection;
pub mod queries;
pub mod scylla;
pub mod snapshot;
pub mod table;
pub mod tables;
pub mod testing;
pub mod views;
pub mod words;

pub use driver::{BodiesPage, Driver, Mutation, MutationRef, Op, Row, ScanRange, StoreError};
pub use embedded::EmbeddedDriver;
pub use instrumented::Instrumented;
pub use projection::{Applied, Batch, Frozen};
pub use queries::{AccountRecord, ActionItemFilter, MeetingFilter, Page, ReadModel, TokenRecord, TranscriptRecord};
pub use scylla::{ScyllaConfig, ScyllaDriver};
pub use table::Val;
