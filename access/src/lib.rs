//! Who may read what, and how much: bearer tokens (hashing and lookup), plans and the
//! features they include, and the per-minute limit and billing-period quota behind one
//! [`limits::Limiter`] trait (in process here; the distributed edition's Redis limiter
//! is the `recap-redis` crate).
//! REST and MCP both go through here, so they agree on every decision.

pub mod auth;
pub mod cursor;
pub mod limits;
pub mod plans;
pub mod request_id;
pub mod telemetry;

pub use auth::{authenticate_pat, token_sha256, AuthError, Caller, TokenCache, PAT_PREFIX};
pub use limits::{
    billing_period, Clock, Decision, InProcessLimiter, Limiter, LimiterError, Limits, ManualClock, Period, PeriodCount, SystemClock, Usage, Verdict,
};
pub use plans::{check_plan, Feature, PlanConfig, PlanError, Plans};
