//! The webhooks runtime: reads the message log (the embedded outbox or the
//! `recap.messages.v1` topic), appends each message to its account's feed and schedules
//! one delivery per endpoint that wants it, then delivers them, signed the Standard
//! Webhooks way, retried with backoff for about three days, durably (`docs/webhooks.md`).

pub mod client;
pub mod signing;
pub mod target;
