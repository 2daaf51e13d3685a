//! Conformance of the REST router to `docs/rest.md`, rule by rule: each test is
//! named after the rule it checks and quotes it. The router runs over a temporary
//! embedded store seeded through the real projection; every response any test
//! receives is also checked against `schemas/openapi.json` and for CORS headers.

mod common;
mod conventions;
mod errors;
mod generated;
mod limits;
mod openapi;
mod pagination;
mod resources;

/// Where worlds run: in this process. The distributed run of this suite
/// (`tests/rest_router.rs` at the workspace root) starts a cluster here instead.
mod edition {
    pub fn start(_config: &recap_query_api::RestConfig) -> Option<crate::common::Edition> {
        None
    }
}
