//! The lock suite over the real CQL wire: the scylla cell and lease stores against the CQL
//! test server in Cassandra mode and in Scylla mode (real time), and against `SCYLLA_URI`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod cassandra_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_lock_backend::WireLockBackend;

    integration_tests::lock_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireLockBackend::start(Flavor::Cassandra).await);
}

mod scylla_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_lock_backend::WireLockBackend;

    integration_tests::lock_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireLockBackend::start(Flavor::Scylla).await);
}

mod real_cluster {
    use integration_tests::wire_lock_backend::RealClusterLocks;

    integration_tests::lock_suite!(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[ignore = "needs SCYLLA_URI=host:port of a ScyllaDB/Cassandra cluster"],
        RealClusterLocks::from_env().await.expect("SCYLLA_URI")
    );
}
