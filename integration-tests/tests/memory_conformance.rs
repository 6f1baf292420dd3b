//! The conformance suite on the embedded backend, with tokio's clock paused.

use integration_tests::backend::MemoryBackend;

integration_tests::lease_suite!(#[tokio::test(start_paused = true)], MemoryBackend::new());
