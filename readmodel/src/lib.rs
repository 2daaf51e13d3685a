//! The read model: its tables (defined once, `tables.rs`), the projection that turns
//! events into row writes (`projection/`), the queries that turn a request into a page
//! of rows (`queries.rs`), the MCP server's OAuth state as records and operations
//! (`oauth.rs`), and the [`Driver`] trait they run on. Projection, query and OAuth code
//! see only that trait, so both editions keep the same semantics.
//!
//! The drivers live in crates of their own, so that the front doors compile no store
//! client: `recap-lmdb` (the embedded edition, in the data dir) and `recap-scylla`
//! (ScyllaDB, or Cassandra standing in for it). What they need from here is public and
//! documented for them: the [`Driver`] trait and its rules (`driver.rs`: mutations,
//! [`PageBuilder`], [`driver::check_plain_write`], [`driver::check_conditional_write`]),
//! the table catalog and its CQL (`table.rs`, `tables.rs`), the order-preserving byte
//! keys of ordered key-value stores (`keys.rs`) and the rows of a frozen batch
//! ([`Frozen::mutations`]).

pub mod driver;
pub mod instrumented;
pub mod keys;
pub mod messages;
pub mod net;
pub mod oauth;
pub mod projection;
pub mod queries;
pub mod table;
pub mod tables;
pub mod views;
pub mod webhooks;
pub mod words;

pub use driver::{BodiesPage, Driver, Mutation, MutationRef, NextChange, Offered, Op, PageBuilder, Row, ScanRange, StoreError};
pub use instrumented::Instrumented;
pub use projection::{Applied, Batch, Frozen};
pub use queries::{AccountRecord, ActionItemFilter, MeetingFilter, Page, ReadModel, TokenRecord, TranscriptRecord};
pub use table::Val;
