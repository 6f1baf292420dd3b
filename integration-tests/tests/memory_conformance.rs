//! The conformance suite on the embedded backend, with tokio's clock paused.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use integration_tests::backend::MemoryBackend;

integration_tests::lease_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
integration_tests::queue_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());

/// Only the embedded backend can fail a request before it is sent (see the scenario).
#[tokio::test(start_paused = true)]
async fn never_sent_errors_are_not_read_back() {
    let backend = MemoryBackend::new();
    integration_tests::conformance::hardening::never_sent_errors_are_not_read_back(&backend).await;
    integration_tests::backend::Backend::after_scenario(&backend);
}
