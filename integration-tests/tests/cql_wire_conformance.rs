//! The conformance suites (leases, elections, work queue) on the scylla backend over the
//! real CQL wire: against the CQL test server in Cassandra mode and in Scylla mode, and
//! against `SCYLLA_URI` (ignored unless asked for: `-- --include-ignored`).

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod cassandra_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_backend::WireBackend;

    integration_tests::lease_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start(Flavor::Cassandra).await);
    mod queue {
        use super::*;
        integration_tests::queue_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start(Flavor::Cassandra).await);
    }
    mod queue_bakery {
        use super::*;
        integration_tests::queue_suite!(bakery: #[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start_bakery(Flavor::Cassandra).await);
    }
}

mod scylla_mode {
    use cql_test_server::Flavor;
    use integration_tests::wire_backend::WireBackend;

    integration_tests::lease_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start(Flavor::Scylla).await);
    mod queue {
        use super::*;
        integration_tests::queue_suite!(#[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start(Flavor::Scylla).await);
    }
    mod queue_bakery {
        use super::*;
        integration_tests::queue_suite!(bakery: #[tokio::test(flavor = "multi_thread", worker_threads = 2)], WireBackend::start_bakery(Flavor::Scylla).await);
    }
}

mod real_cluster {
    use integration_tests::wire_backend::RealCluster;

    // Scenarios that need fault injection are not generated here (`portable:`).
    integration_tests::lease_suite!(portable:
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored"],
        RealCluster::from_env().await
    );
    mod queue {
        use super::*;
        integration_tests::queue_suite!(portable:
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[ignore = "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored"],
            RealCluster::from_env().await
        );
    }
}
