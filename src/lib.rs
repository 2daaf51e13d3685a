//! The roles of the `recap` binary as library functions, so that tests and benchmarks
//! start them exactly as the binary does: `serve` (the embedded edition), the
//! operations listener (`admin`) and the demo world (`demo`).

pub mod admin;
pub mod demo;
pub mod serve;
