//! The driver connects to the CQL test server and works without logging a single warning.
//! (Its own test binary: warnings are collected per process.)

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use cql_test_server::driver_log;
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_connects_and_queries_without_warnings() {
    driver_log::install();
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra))
        .await
        .expect("server");
    let session = server.session().await;
    session
        .query_unpaged("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", ())
        .await
        .expect("create keyspace");
    session
        .query_unpaged("CREATE TABLE ks.t (k text PRIMARY KEY, v text)", ())
        .await
        .expect("create table");
    let insert = session
        .prepare("UPDATE ks.t SET v = ? WHERE k = ? IF v = null")
        .await
        .expect("prepare");
    session
        .execute_unpaged(&insert, ("x", "k"))
        .await
        .expect("execute");
    let rows = session
        .query_unpaged("SELECT v FROM ks.t WHERE k = 'k'", ())
        .await
        .expect("select")
        .into_rows_result()
        .expect("rows");
    assert_eq!(
        rows.first_row::<(String,)>().expect("row"),
        ("x".to_owned(),)
    );
    let cluster = session.get_cluster_state();
    let nodes: Vec<_> = cluster.get_nodes_info().iter().map(|n| n.address).collect();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].ip(), server.address().ip());
    assert_eq!(driver_log::warnings(), Vec::<String>::new());
}
