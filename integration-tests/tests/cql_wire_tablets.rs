//! ScyllaDB tablets over the wire: the schema helper creates a keyspace whose LWTs work, and
//! a store on a tablets keyspace fails at construction with a typed error naming the cause.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;

use cql_lease::scylla::{Replication, SchemaError, ScyllaLeaseStore, ScyllaOptions};
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use cql_workqueue::scylla::ScyllaQueueStore;
use integration_tests::wire_backend::{register_lease, register_queue, test_options};

fn network_options(keyspace: &str) -> ScyllaOptions {
    ScyllaOptions {
        replication: Replication::NetworkTopology(vec![("datacenter1".into(), 1)]),
        ..test_options(keyspace, "leases")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tablets_keyspace_is_refused_when_the_store_is_built() {
    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Scylla))
        .await
        .expect("server");
    register_lease(&server, "tab", "leases");
    register_queue(&server, "tab", "items");
    let session = Arc::new(server.session().await);
    // Created by hand, as an operator on ScyllaDB 6.0-2025.3 would: tablets by default.
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS tab WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
        "CREATE TABLE IF NOT EXISTS tab.leases (name text PRIMARY KEY, holder text, owner text, value text, lease_ttl int, fence bigint)",
    ] {
        session.query_unpaged(ddl, ()).await.expect(ddl);
    }
    let options = network_options("tab");
    match ScyllaLeaseStore::new(Arc::clone(&session), options.clone()).await {
        Err(SchemaError::LwtsRejectedByTablets { keyspace, message }) => {
            assert_eq!(keyspace, "tab");
            assert!(
                message.contains("LWT is not yet supported with tablets"),
                "{message}"
            );
        }
        other => panic!("a tablets keyspace must be refused: {other:?}"),
    }
    let queue_options = ScyllaOptions {
        table: "items".into(),
        ..options
    };
    ScyllaQueueStore::create_schema(&session, &queue_options)
        .await
        .expect("table");
    assert!(matches!(
        ScyllaQueueStore::new(Arc::clone(&session), queue_options).await,
        Err(SchemaError::LwtsRejectedByTablets { .. })
    ));
    assert!(server.refused().is_empty(), "{:?}", server.refused());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_helper_turns_tablets_off_on_scylla_only() {
    for flavor in [Flavor::Scylla, Flavor::Cassandra] {
        let server = CqlTestServer::start(ServerOptions::strict(flavor))
            .await
            .expect("server");
        register_lease(&server, "ks", "leases");
        let session = Arc::new(server.session().await);
        let options = network_options("ks");
        options.create_schema(&session).await.expect("schema");
        let store = ScyllaLeaseStore::new(Arc::clone(&session), options)
            .await
            .expect("LWTs work");
        let client = cql_lease::LeaseClient::new(Arc::new(store), cql_lease::Timing::default())
            .expect("client");
        let lease = client
            .try_acquire("x", "alice", None)
            .await
            .expect("acquire");
        assert!(
            matches!(lease, cql_lease::TryAcquire::Acquired(_)),
            "{flavor:?}"
        );
        let sent_tablets = server.executed().iter().any(|s| s.contains("tablets ="));
        assert_eq!(sent_tablets, flavor == Flavor::Scylla, "{flavor:?}");
        assert!(server.refused().is_empty(), "{:?}", server.refused());
    }
}

/// ScyllaDB 2025.4+ accepts LWTs on tablets: the stores are built on a tablets keyspace,
/// after a probing SERIAL read on a real (non-empty) key, and work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tablets_keyspace_that_accepts_lwts_is_used() {
    let server =
        CqlTestServer::start(ServerOptions::strict(Flavor::Scylla).with_lwt_on_tablets(true))
            .await
            .expect("server");
    register_lease(&server, "tab", "leases");
    register_queue(&server, "tab", "items");
    let session = Arc::new(server.session().await);
    for ddl in [
        "CREATE KEYSPACE IF NOT EXISTS tab WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
        "CREATE TABLE IF NOT EXISTS tab.leases (name text PRIMARY KEY, holder text, owner text, value text, lease_ttl int, fence bigint)",
        "CREATE TABLE IF NOT EXISTS tab.leases_waiting (part text, cell text, value bigint, PRIMARY KEY (part, cell)) WITH gc_grace_seconds = 3600",
    ] {
        session.query_unpaged(ddl, ()).await.expect(ddl);
    }
    let options = network_options("tab");
    let store = ScyllaLeaseStore::new(Arc::clone(&session), options.clone())
        .await
        .expect("LWTs accepted on tablets");
    let probe = (
        "tab".to_owned(),
        "leases".to_owned(),
        cql_lease::scylla::PROBE_KEY.to_owned(),
    );
    assert_eq!(
        server.paxos().rounds.get(&probe),
        Some(&1),
        "{:?}",
        server.paxos()
    );
    let client =
        cql_lease::LeaseClient::new(Arc::new(store), cql_lease::Timing::default()).expect("client");
    let lease = client
        .try_acquire("x", "alice", None)
        .await
        .expect("acquire");
    assert!(matches!(lease, cql_lease::TryAcquire::Acquired(_)));
    let queue_options = ScyllaOptions {
        table: "items".into(),
        ..options
    };
    ScyllaQueueStore::create_schema(&session, &queue_options)
        .await
        .expect("table");
    ScyllaQueueStore::new(Arc::clone(&session), queue_options)
        .await
        .expect("queue store on tablets");
    assert!(server.refused().is_empty(), "{:?}", server.refused());
}

/// ScyllaDB 6.0-2025.3 on a tablets keyspace: the LWT claim mode is refused at once (store
/// construction, or the first LWT of a store built without the check), while the bakery
/// mode enqueues, claims, heartbeats, fails, retries and completes without a single Paxos
/// round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bakery_mode_runs_on_tablets_without_any_lwt() {
    use cql_workqueue::{ClaimMode, QueueConfig, QueueError, WorkQueue};
    use integration_tests::conformance::queue::queue_config;

    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Scylla))
        .await
        .expect("server");
    register_lease(&server, "tab", "leases"); // registers the keyspace statement
    register_queue(&server, "tab", "items");
    let session = Arc::new(server.session().await);
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS tab WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1}",
            (),
        )
        .await
        .expect("keyspace");
    let options = ScyllaOptions {
        table: "items".into(),
        ..network_options("tab")
    };
    ScyllaQueueStore::create_schema(&session, &options)
        .await
        .expect("tables");
    assert!(matches!(
        ScyllaQueueStore::new(Arc::clone(&session), options.clone()).await,
        Err(SchemaError::LwtsRejectedByTablets { .. })
    ));
    let store = Arc::new(
        ScyllaQueueStore::new_lwt_free(Arc::clone(&session), options)
            .await
            .expect("store"),
    );
    // The LWT mode on it fails clearly at its first LWT.
    let lwt = WorkQueue::new(store.clone(), "jobs", queue_config()).expect("queue");
    match lwt.enqueue("x").await {
        Err(QueueError::Store { source, .. }) => assert!(
            source
                .to_string()
                .contains("LWT is not yet supported with tablets"),
            "{source}"
        ),
        other => panic!("an LWT on tablets must fail: {other:?}"),
    }
    let before = server.paxos().total_rounds();

    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let q = WorkQueue::new(store, "jobs", config).expect("bakery queue");
    for n in 0..4 {
        q.enqueue(&format!("job {n}")).await.expect("enqueue");
    }
    let first = claim_soon_on(&q).await;
    assert_eq!(first.attempt(), 1);
    // Held across heartbeats (a TTL's worth: the number's cell is rewritten, not expired).
    let writes = server.calls("cells.write");
    tokio::time::sleep(queue_config().timing.lease_duration).await;
    assert!(first.is_held() && server.calls("cells.write") > writes);
    first.fail("once").await.expect("fail");
    let mut done = 0;
    let mut tokens = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while done < 4 && tokio::time::Instant::now() < deadline {
        match q.claim("w").await.expect("claim") {
            Some(job) => {
                tokens.push((job.id().clone(), job.attempt()));
                job.complete().await.expect("complete");
                done += 1;
            }
            None => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    assert_eq!(done, 4, "{tokens:?}");
    // The failed item came back with the next token.
    assert!(
        tokens.iter().any(|(_, attempt)| *attempt == 2),
        "{tokens:?}"
    );
    assert_eq!(
        server.paxos().total_rounds(),
        before,
        "the bakery mode sent an LWT: {:?}",
        server.paxos()
    );
    assert!(server.calls("cells.write") > 0 && server.calls("queue.plain_write") > 0);
    assert!(server.refused().is_empty(), "{:?}", server.refused());
}

async fn claim_soon_on(q: &cql_workqueue::WorkQueue) -> cql_workqueue::Job {
    for _ in 0..100 {
        if let Some(job) = q.claim("w").await.expect("claim") {
            return job;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("nothing to claim");
}

/// The bakery mode's item rows and claim cells carry its fencing, so with `LOCAL_QUORUM`
/// (and the default `SERIAL`) they are read and written at `QUORUM`: a read in one data
/// centre meets a write made in another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bakery_mode_reads_and_writes_its_rows_across_data_centres() {
    use cql_workqueue::{ClaimMode, QueueConfig, WorkQueue};
    use integration_tests::conformance::queue::queue_config;
    use scylla::statement::Consistency;

    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Cassandra))
        .await
        .expect("server");
    register_lease(&server, "dcs", "leases");
    register_queue(&server, "dcs", "items");
    let session = Arc::new(server.session().await);
    let options = ScyllaOptions {
        table: "items".into(),
        consistency: Consistency::LocalQuorum,
        ..network_options("dcs")
    };
    ScyllaQueueStore::create_schema(&session, &options)
        .await
        .expect("tables");
    let store = Arc::new(
        ScyllaQueueStore::new_lwt_free(Arc::clone(&session), options)
            .await
            .expect("store"),
    );
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let q = WorkQueue::new(store, "jobs", config).expect("bakery queue");
    q.enqueue("job").await.expect("enqueue");
    let job = claim_soon_on(&q).await;
    job.complete().await.expect("complete");
    // Schema statements aside (their level does not matter).
    let fenced: Vec<_> = server
        .consistencies()
        .into_iter()
        .filter(|c| !c.statement.starts_with("CREATE"))
        .filter(|c| {
            c.statement.contains("dcs.items_plain") || c.statement.contains("dcs.items_cells")
        })
        .collect();
    assert!(fenced.len() >= 3, "{fenced:?}");
    for used in fenced {
        assert_eq!(
            format!("{:?}", used.consistency),
            format!("{:?}", Consistency::Quorum),
            "{}",
            used.statement
        );
    }
}
