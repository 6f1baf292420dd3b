//! The lock suite on the embedded stores, with tokio's clock paused.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use integration_tests::conformance::lock::MemoryLockBackend;

integration_tests::lock_suite!(#[tokio::test(start_paused = true)], MemoryLockBackend::new());
