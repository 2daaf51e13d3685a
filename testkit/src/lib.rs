//! What recap's test suites share, and only they (a dev-dependency, never shipped):
//! [`store`] gives each test a store of its own on either driver, [`snapshot`] writes
//! every answer a read model gives as one text, so two read models can be compared.

pub mod snapshot;
pub mod store;
