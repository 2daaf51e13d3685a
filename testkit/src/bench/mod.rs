//! What the benches share: children that end with the bench, the open-loop generators'
//! HTTP/1.1 client side, and summaries.

pub mod child;
pub mod http_client;
pub mod stats;
