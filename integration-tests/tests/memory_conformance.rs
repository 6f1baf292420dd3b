//! The conformance suite on the embedded backend, with tokio's clock paused.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use integration_tests::backend::MemoryBackend;

integration_tests::lease_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
integration_tests::queue_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
