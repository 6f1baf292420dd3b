//! One backend handle serves every primitive: `Backend::create_schema` makes the fixed set
//! of tables and `Backend::connect` opens them, on the CQL test server (run as a node that
//! accepts any statement, as `cargo run -p cql-test-server` does) and on the cluster named by
//! `SCYLLA_URI`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cql_coordination::Backend;
use cql_coordination::election::Election;
use cql_coordination::lease::lock::{FairLock, LeaseLock, Lock, LockOptions};
use cql_coordination::lease::scylla::{Replication, ScyllaOptions};
use cql_coordination::lease::{LeaseClient, Timing};
use cql_coordination::workqueue::{NewItem, QueueConfig, WorkQueue};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use futures::StreamExt;
use integration_tests::wire_backend::NEEDS_SCYLLA_URI;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

async fn session(uri: &str) -> Arc<Session> {
    Arc::new(
        SessionBuilder::new()
            .known_node(uri)
            .build()
            .await
            .expect("session"),
    )
}

fn options(keyspace: &str) -> ScyllaOptions {
    ScyllaOptions {
        keyspace: keyspace.into(),
        replication: Replication::Simple(1),
        request_timeout: Some(Duration::from_secs(8)),
        ..ScyllaOptions::default()
    }
}

/// A lease, an election, a lease lock, a fair lock and a queue, each used once through one
/// backend.
async fn every_primitive_works_through(backend: &Backend) {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let timing = Timing {
        lease_duration: Duration::from_secs(5),
        renew_period: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
        ..Timing::default()
    };
    let client = LeaseClient::new(backend.leases(), timing).expect("client");
    let lease = client
        .acquire(
            &format!("lease-{run}"),
            "a",
            None,
            Some(Duration::from_secs(10)),
        )
        .await
        .expect("lease");
    lease.release().await.expect("release");

    let lock = LeaseLock::new(client.clone(), "a").expect("lease lock");
    let guard = lock
        .lock(&format!("lock-{run}"), Some(Duration::from_secs(10)))
        .await
        .expect("lease lock");
    assert!(guard.token().is_some());
    guard.release().await.expect("unlock");

    let options = LockOptions {
        timing,
        ..LockOptions::default()
    };
    let fair = FairLock::new(backend.cells(), options).expect("fair lock");
    let guard = fair
        .lock(&format!("fair-{run}"), Some(Duration::from_secs(10)))
        .await
        .expect("fair lock");
    guard.release().await.expect("unlock");

    let election =
        Election::new(backend.leases(), format!("election-{run}"), timing).expect("election");
    let mut campaign = election.campaign("a", None).expect("campaign");
    let event = tokio::time::timeout(Duration::from_secs(10), campaign.next())
        .await
        .expect("elected in time");
    assert!(
        matches!(
            event,
            Some(cql_coordination::election::ElectionEvent::Elected { .. })
        ),
        "{event:?}"
    );
    campaign.resign().await.expect("resign");

    let queue = WorkQueue::new(
        backend.queues(),
        &format!("q-{run}"),
        QueueConfig::default(),
    )
    .expect("queue");
    queue
        .enqueue_item(NewItem::text("job"))
        .await
        .expect("enqueue");
    let job = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(job) = queue.claim("w").await.expect("claim") {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("claimed in time");
    job.complete().await.expect("complete");
}

/// The embedded backend serves every primitive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_backend_serves_every_primitive() {
    every_primitive_works_through(&Backend::embedded()).await;
}

/// `create_schema` creates the keyspace and the fixed set of tables (leases and their line,
/// the queue's, the lock cells'), `connect` opens them, and every primitive then works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_backend_creates_the_fixed_tables_and_serves_every_primitive() {
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra))
        .await
        .expect("CQL test server");
    let session = session(&server.address().to_string()).await;
    let options = options("coordination");
    Backend::create_schema(&session, &options)
        .await
        .expect("schema");
    let tables: BTreeSet<String> = server
        .received()
        .iter()
        .filter(|s| s.to_uppercase().starts_with("CREATE TABLE"))
        .filter_map(|s| s.split_whitespace().nth(5).map(str::to_owned))
        .collect();
    assert_eq!(
        tables.into_iter().collect::<Vec<_>>(),
        [
            "coordination.leases",
            "coordination.leases_waiting",
            "coordination.lock_cells",
            "coordination.work_items",
            "coordination.work_items_buckets",
            "coordination.work_items_cells",
            "coordination.work_items_cursor",
            "coordination.work_items_dead",
            "coordination.work_items_index",
            "coordination.work_items_plain",
        ]
    );
    let backend = Backend::connect(session, options).await.expect("connect");
    every_primitive_works_through(&backend).await;
}

/// `connect` on a keyspace without the tables is a schema error, before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_without_the_schema_is_an_error() {
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra))
        .await
        .expect("CQL test server");
    let session = session(&server.address().to_string()).await;
    assert!(Backend::connect(session, options("missing")).await.is_err());
}

/// The same on a real cluster, in the real-cluster runs' keyspace and fixed tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set SCYLLA_URI=host:port and pass --include-ignored"]
async fn a_real_cluster_backend_serves_every_primitive() {
    let uri = std::env::var("SCYLLA_URI").expect(NEEDS_SCYLLA_URI);
    let session = session(&uri).await;
    let options = options("cql_lease_tests");
    Backend::create_schema(&session, &options)
        .await
        .expect("schema");
    let backend = Backend::connect(session, options).await.expect("connect");
    every_primitive_works_through(&backend).await;
}
