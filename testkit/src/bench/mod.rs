//! What the benches share: children that end with the bench, the open-loop generators'
//! HTTP/1.1 client side, the webhooks benches' receiver, and summaries.

pub mod child;
pub mod http_client;
pub mod receiver;
pub mod stats;
