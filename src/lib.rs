//! The roles of the `recap` binary as library functions, so that tests and benchmarks
//! start them exactly as the binary does: `serve` (the embedded edition), the
//! operations listener (`admin`), the demo world (`demo`) and the roles of the
//! distributed edition (`distributed`), the webhooks runtime's task and role
//! (`webhooks`), the HTTP front every listener runs (`http`), the traces, metrics and
//! logs every role reports (`telemetry`), plus the command line that selects them
//! (`cli`).

pub mod admin;
pub mod cli;
pub mod demo;
pub mod distributed;
pub mod http;
pub mod listen;
pub mod serve;
pub mod telemetry;
pub mod webhooks;

/// glibc's allocator spends much of a request's time in malloc/free consolidation under
/// this workload (many short-lived strings); mimalloc's thread-local free lists do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
