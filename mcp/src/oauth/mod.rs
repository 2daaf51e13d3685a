//! The OAuth 2.1 authorization server that issues `svc_oat_` tokens for the MCP
//! endpoint: discovery metadata, dynamic registration, client metadata documents
//! (`cimd.rs`), the authorization page (where the
//! user proves identity with a personal access token), the token and revocation
//! endpoints. Its state (clients, codes, grants, tokens) lives in the store, as the read
//! model's OAuth records and operations (`recap_readmodel::oauth`), so any pod serves
//! any step.

pub mod authorize;
pub mod cimd;
pub mod error;
pub mod metadata;
pub mod page;
pub mod register;
pub mod secrets;
pub mod token;
