//! The real-cluster mode's own promises, shown on the CQL test server run as a node that
//! accepts any statement (as `cargo run -p cql-test-server` does): a shared cluster gets one
//! keyspace and a fixed set of tables however many tests run, and tests on those shared
//! tables never meet.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::collections::BTreeSet;

use cql_lease::lock::{FairLock, Lock};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use integration_tests::conformance::{lease_basic, lock, queue};
use integration_tests::wire_backend::RealCluster;
use integration_tests::wire_lock_backend::RealClusterLocks;

async fn node() -> (CqlTestServer, String) {
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra))
        .await
        .expect("CQL test server");
    let uri = server.address().to_string();
    (server, uri)
}

/// Many backends (each test makes one) create the keyspace and each of the fixed tables once,
/// and nothing more: the statements a test run sends to the schema do not grow with the
/// number of tests or runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tests_share_one_fixed_set_of_tables() {
    let (server, uri) = node().await;
    for _ in 0..3 {
        RealClusterLocks::on(RealCluster::connect_to(&uri).await).await;
    }
    let received = server.received();
    let creates: Vec<&String> = received
        .iter()
        .filter(|s| s.to_uppercase().starts_with("CREATE TABLE"))
        .collect();
    let tables: BTreeSet<&str> = creates
        .iter()
        .filter_map(|s| s.split_whitespace().nth(5))
        .collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        [
            "cql_lease_tests.leases",
            "cql_lease_tests.leases_waiting",
            "cql_lease_tests.lock_cells",
            "cql_lease_tests.work_items",
            "cql_lease_tests.work_items_buckets",
            "cql_lease_tests.work_items_cells",
            "cql_lease_tests.work_items_cursor",
            "cql_lease_tests.work_items_dead",
            "cql_lease_tests.work_items_index",
            "cql_lease_tests.work_items_plain",
        ],
        "{creates:#?}"
    );
    let keyspaces = received
        .iter()
        .filter(|s| s.to_uppercase().starts_with("CREATE KEYSPACE"))
        .count();
    assert_eq!(keyspaces, 1, "{received:#?}");
}

/// Two tests that use the same lease, queue and lock names at the same time on the shared
/// tables each see only their own: both pass, and neither's lock is held for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tests_on_shared_tables_never_meet() {
    let (_server, uri) = node().await;
    let (a, b) = (
        RealCluster::connect_to(&uri).await,
        RealCluster::connect_to(&uri).await,
    );
    tokio::join!(
        lease_basic::acquire_hold_release(&a),
        lease_basic::acquire_hold_release(&b)
    );
    tokio::join!(
        queue::items_are_claimed_oldest_first(&a),
        queue::items_are_claimed_oldest_first(&b)
    );
    let (a, b) = (RealClusterLocks::on(a).await, RealClusterLocks::on(b).await);
    let options = lock::lock_options();
    let lock_a = FairLock::new(lock::LockBackend::cells(&a), options).unwrap();
    let lock_b = FairLock::new(lock::LockBackend::cells(&b), options).unwrap();
    let held = lock_a.try_lock("shared-name").await.unwrap().expect("free");
    let other = lock_b.try_lock("shared-name").await.unwrap();
    assert!(other.is_some(), "the other test's lock of the same name");
    held.release().await.unwrap();
    other.unwrap().release().await.unwrap();
}
