//! Cross-backend conformance suite, history checker, and the CQL test server.
//!
//! The suite in [`conformance`] is written once against [`backend::Backend`] and run on the
//! embedded store and, over the CQL wire, on the scylla backend.

// A test-support crate: a panic here is a failing test, which is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod backend;
pub mod conformance;
pub use cql_test_server::driver_log;
pub mod history;
pub mod wire_backend;
pub mod wire_lock_backend;
