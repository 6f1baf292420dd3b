//! The work queue's statements on the strict CQL test server: each one is known and
//! exercised by a plain workload, and a statement altered without teaching the server is
//! refused, naming it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::scylla::cql;
use integration_tests::backend::Backend;
use integration_tests::conformance::queue::queue;
use integration_tests::wire_backend::{WireBackend, register_queue};
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_queue_statement_is_known_and_exercised() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let q = queue(&b, "all");
    q.enqueue("one").await.expect("enqueue");
    q.enqueue("two").await.expect("enqueue");
    // A lost claim answer is resolved by a SERIAL read.
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let job = q.claim("w").await.expect("claim").expect("item");
    // Held past a renew interval: heartbeats.
    tokio::time::sleep(Duration::from_millis(900)).await;
    job.fail("boom").await.expect("fail");
    // A claim dropped after it was sent is undone.
    b.inject_queue(
        Some(QueueOp::Claim),
        Fault::Latency(Duration::from_millis(1500)),
        Times::Next(1),
    );
    let dropped = tokio::time::timeout(Duration::from_millis(700), q.claim("w")).await;
    assert!(dropped.is_err(), "the slow claim should have been cut off");
    tokio::time::sleep(Duration::from_millis(2000)).await;
    // Undone after its late answer, not left claimed for a TTL.
    let items = q.items().await.expect("items");
    assert!(
        items.iter().all(|i| i.claim.is_none() && i.attempt <= 1),
        "a dropped claim was left behind: {items:#?}"
    );
    let job = q.claim("w").await.expect("claim").expect("item");
    job.complete().await.expect("complete");
    q.items().await.expect("items");
    b.after_scenario();
    let executed = b.server.executed();
    for template in cql::ALL {
        let text = cql_lease::scylla::cql::render(template, "coordination", "work_items");
        assert!(
            executed.contains(&text),
            "queue statement never executed: {template}\nexecuted: {executed:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_queue_statement_is_refused_by_name() {
    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Cassandra))
        .await
        .expect("server");
    register_queue(&server, "coordination", "work_items");
    let session = server.session().await;
    let altered = cql_lease::scylla::cql::render(cql::SCAN, "coordination", "work_items")
        .replace("id > ?", "id >= ?");
    match session.prepare(altered.clone()).await {
        Err(e) => assert!(e.to_string().contains(&altered), "{e}"),
        Ok(_) => panic!("an altered statement must be refused"),
    }
    let refused = server.refused();
    assert!(
        !refused.is_empty() && refused.iter().all(|r| *r == altered),
        "{refused:?}"
    );
    match session.query_unpaged(altered.clone(), ("p", "x", 1)).await {
        Err(ExecutionError::LastAttemptError(RequestAttemptError::DbError(
            DbError::Invalid,
            m,
        ))) => {
            assert!(m.contains(&altered), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

/// Every LWT of a queue shard (enqueue, claim, complete) is a Paxos round of that one
/// partition: the server counts them per partition, and with rounds long enough to overlap,
/// each one after the first contends with the previous ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_is_one_partition_of_paxos_rounds() {
    use std::sync::Arc;

    use cql_workqueue::scylla::ScyllaQueueStore;
    use cql_workqueue::{QueueConfig, WorkQueue};
    use integration_tests::wire_backend::{register_lease, test_options};

    let server = CqlTestServer::start(
        ServerOptions::strict(Flavor::Cassandra).with_paxos_round(Duration::from_secs(3600)),
    )
    .await
    .expect("server");
    register_lease(&server, "coordination", "leases");
    register_queue(&server, "coordination", "work_items");
    let session = Arc::new(server.session().await);
    let options = test_options("coordination", "work_items");
    ScyllaQueueStore::create_schema(&session, &options)
        .await
        .expect("table");
    let store = ScyllaQueueStore::new(session, options)
        .await
        .expect("store");
    let config = QueueConfig {
        shards: 1,
        ..integration_tests::conformance::queue::queue_config()
    };
    let q = WorkQueue::new(Arc::new(store), "hot", config).expect("queue");
    for n in 0..3 {
        q.enqueue(&format!("job {n}")).await.expect("enqueue");
    }
    for _ in 0..3 {
        let job = q.claim("w").await.expect("claim").expect("item");
        job.complete().await.expect("complete");
    }
    let paxos = server.paxos();
    let shard = (
        "coordination".to_owned(),
        "work_items".to_owned(),
        "hot/0".to_owned(),
    );
    assert_eq!(paxos.rounds.get(&shard), Some(&9), "{paxos:?}");
    assert_eq!(paxos.contended.get(&shard), Some(&8), "{paxos:?}");
    assert_eq!(
        paxos.rounds.len(),
        1,
        "no other partition saw a round: {paxos:?}"
    );
    // The three completed items are row tombstones the next scan walks.
    assert!(q.claim("w").await.expect("claim").is_none());
    assert_eq!(server.tombstones().last(), Some(3));
}
