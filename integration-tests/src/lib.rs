//! Cross-backend conformance suites and a history checker.
//!
//! The suites in [`conformance`] are written once against [`backend::Backend`] and run on the
//! embedded stores and, over the CQL wire, on the scylla backends: against the
//! `cql-test-server` crate (which [`wire_backend`] teaches every backend statement, with a
//! label per operation) and against a real cluster named by `SCYLLA_URI`.

// A test-support crate: a panic here is a failing test, which is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod backend;
pub mod conformance;
pub mod golden;
pub use cql_test_server::driver_log;
pub mod history;
pub mod namespaced;
pub mod tweaked;
pub mod wire_backend;
pub mod wire_lock_backend;
