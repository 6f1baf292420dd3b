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
    let server = CqlTestServer::start(ServerOptions::strict(Flavor::Scylla)).await;
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
        let server = CqlTestServer::start(ServerOptions::strict(flavor)).await;
        register_lease(&server, "ks", "leases");
        let session = Arc::new(server.session().await);
        let options = network_options("ks");
        options.create_schema(&session).await.expect("schema");
        let store = ScyllaLeaseStore::new(Arc::clone(&session), options)
            .await
            .expect("LWTs work");
        let client =
            cql_lease::LeaseClient::new(Arc::new(store), cql_lease::LeaseConfig::default())
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
