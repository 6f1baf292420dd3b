//! The lock suite over the real CQL wire: the scylla cell and lease stores against the CQL
//! test server in Cassandra mode (all of it) and in Scylla mode (what the flavour changes),
//! in real time, and against `SCYLLA_URI` (ignored unless asked for: `-- --include-ignored`).

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod cassandra_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_lock_backend::WireLockBackend;

    integration_tests::lock_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireLockBackend::start(Flavor::Cassandra).await);
}

/// In Scylla mode only what the flavour changes: the lease lock's LWT answers (ScyllaDB's
/// result rows), and every algorithm under contention. The plain-cell statements are served
/// identically in both modes, and the full suite runs in Cassandra mode.
mod scylla_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_lock_backend::WireLockBackend;

    integration_tests::lock_suite!(@cases
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[allow(unused_attributes)],
        WireLockBackend::start(Flavor::Scylla).await,
        exclusive_under_contention [Bakery, Fair, Shadow, Lease],
        crashed_holder_frees_within_ttl [Lease],
        loss_is_signalled_before_anyone_enters [Lease],
        timeout_is_a_typed_error [Lease],
        try_lock_answers_at_once_when_held [Lease],
        drop_releases [Lease],
    );
}

mod real_cluster {
    use integration_tests::wire_lock_backend::RealClusterLocks;

    // Scenarios that inject faults into the stores are not generated here (`portable:`).
    integration_tests::lock_suite!(portable:
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[ignore = "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored"],
        RealClusterLocks::from_env().await
    );
}
