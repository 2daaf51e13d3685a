//! The webhooks runtime: reads the message log (the embedded outbox or the
//! `recap.messages.v1` topic), appends each message to its account's feed and schedules
//! one delivery per endpoint that wants it, then delivers them, signed the Standard
//! Webhooks way, retried with backoff for about three days, durably (`docs/webhooks.md`).
//!
//! - [`signing`]: the Standard Webhooks headers;
//! - [`target`] and [`client`]: where a delivery may go and the client that enforces it;
//! - [`ingest`], [`outbox`], [`kafka`]: from the message log to the feed and the queue;
//! - [`handoff`]: the first attempts the ingest hands the deliverer in memory;
//! - [`deliver`], [`recorder`] and [`schedule`]: the attempts, their group-committed
//!   records, their retry schedule and clock;
//! - [`shards`]: the shards delivered and where their scans of the retry queue start;
//! - [`metrics`]: what the runtime reports; [`runtime`]: all of it as the binary runs it.

pub mod client;
pub mod deliver;
pub mod handoff;
pub mod ingest;
pub mod kafka;
pub mod metrics;
pub mod outbox;
pub mod recorder;
pub mod runtime;
pub mod schedule;
pub mod shards;
pub mod signing;
pub mod target;

pub use client::{ClientConfig, SafeClient, SendError};
pub use deliver::{Deliverer, DelivererConfig, Shards};
pub use handoff::{Handoff, Ledger};
pub use metrics::Stats;
pub use runtime::Runtime;
pub use schedule::{Clock, ManualClock, RetrySchedule, SystemClock};
