//! Conformance of the REST router to `docs/rest.md`, rule by rule: each test is
//! named after the rule it checks and quotes it. Each test's world is the kit's, on the
//! edition `RECAP_TEST_WORLD` chooses (the router in process over a temporary embedded
//! store by default, over a Cassandra keyspace, or a cluster of processes), seeded
//! through the real projection; every response any test receives is also checked
//! against `schemas/openapi.json` and for CORS headers.

mod common;
mod conventions;
mod errors;
mod feed;
mod generated;
mod limits;
mod openapi;
mod pagination;
mod resources;
