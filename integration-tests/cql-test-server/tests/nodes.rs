//! A cluster of nodes over one store: the driver discovers every node and spreads requests,
//! and a fault can freeze, slow down or take down one node until it is healed.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use cql_test_server::{CqlTestServer, Flavor, NodeFault, ServerOptions};
use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::policies::load_balancing::{NodeIdentifier, SingleTargetLoadBalancingPolicy};
use scylla::statement::unprepared::Statement;

use common::{run, setup};

const NODES: usize = 3;

async fn cluster() -> (CqlTestServer, Session) {
    let (server, session) = setup(
        ServerOptions::lenient(Flavor::Cassandra).with_nodes(NODES),
        &["CREATE TABLE ks.t (k text PRIMARY KEY, v text)"],
    )
    .await;
    run(&session, "INSERT INTO ks.t (k, v) VALUES ('k', 'x')").await;
    (server, session)
}

/// Reads the row through `node` only, within `timeout`.
async fn read_on(
    session: &Session,
    node: SocketAddr,
    timeout: Duration,
) -> Result<Option<String>, ExecutionError> {
    let mut statement = Statement::new("SELECT v FROM ks.t WHERE k = 'k'");
    statement.set_load_balancing_policy(Some(SingleTargetLoadBalancingPolicy::new(
        NodeIdentifier::NodeAddress(node),
        None,
    )));
    statement.set_request_timeout(Some(timeout));
    let rows = session.query_unpaged(statement, ()).await?;
    let rows = rows.into_rows_result().expect("rows");
    Ok(rows.first_row::<(String,)>().ok().map(|(v,)| v))
}

fn is_timeout(result: &Result<Option<String>, ExecutionError>) -> bool {
    matches!(result, Err(ExecutionError::RequestTimeout(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_sees_every_node_and_spreads_requests_over_one_store() {
    let (server, session) = cluster().await;
    let mut seen: Vec<SocketAddr> = session
        .get_cluster_state()
        .get_nodes_info()
        .iter()
        .map(|n| SocketAddr::new(n.address.ip(), n.address.port()))
        .collect();
    seen.sort();
    let mut expected = server.addresses().to_vec();
    expected.sort();
    assert_eq!(seen, expected);
    let before: Vec<u64> = (0..NODES).map(|i| server.requests_on(i)).collect();
    for _ in 0..30 {
        run(&session, "SELECT v FROM ks.t WHERE k = 'k'").await;
    }
    for (node, before) in before.iter().enumerate() {
        assert!(
            server.requests_on(node) > *before,
            "no request reached node {node}"
        );
    }
    // Every node answers from the same store.
    for address in server.addresses() {
        let v = read_on(&session, *address, Duration::from_secs(5)).await;
        assert_eq!(v.expect("read"), Some("x".to_owned()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_node_never_answers_until_it_is_healed() {
    let (server, session) = cluster().await;
    let frozen = server.addresses()[1];
    let short = Duration::from_millis(300);
    server.node_fault(1, NodeFault::Freeze);
    assert!(is_timeout(&read_on(&session, frozen, short).await));
    // The others answer meanwhile.
    let other = read_on(&session, server.addresses()[0], Duration::from_secs(5)).await;
    assert_eq!(other.expect("read"), Some("x".to_owned()));
    server.heal(1);
    let back = read_on(&session, frozen, Duration::from_secs(5)).await;
    assert_eq!(back.expect("read"), Some("x".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_node_answers_late() {
    let (server, session) = cluster().await;
    let slow = server.addresses()[2];
    server.node_fault(2, NodeFault::Slow(Duration::from_millis(600)));
    assert!(is_timeout(
        &read_on(&session, slow, Duration::from_millis(200)).await
    ));
    let late = read_on(&session, slow, Duration::from_secs(5)).await;
    assert_eq!(late.expect("read"), Some("x".to_owned()));
    server.heal(2);
    // Healed, it answers well within the delay it had.
    let mut answered = false;
    for _ in 0..20 {
        if read_on(&session, slow, Duration::from_millis(300))
            .await
            .is_ok()
        {
            answered = true;
            break;
        }
    }
    assert!(answered, "the healed node never answered within 300 ms");
}

/// A down node refuses TCP connections (nothing listens on its address), and its open
/// connections are closed; healed, it listens on the same address again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_node_refuses_connections_and_listens_again_when_healed() {
    use tokio::io::AsyncReadExt;
    let (server, _session) = cluster().await;
    let down = server.addresses()[1];
    let mut open = tokio::net::TcpStream::connect(down).await.expect("connect");
    server.node_fault(1, NodeFault::Down);
    let refused = tokio::net::TcpStream::connect(down).await;
    assert_eq!(
        refused.as_ref().map_err(std::io::Error::kind).err(),
        Some(std::io::ErrorKind::ConnectionRefused),
        "a down node must refuse connections: {refused:?}"
    );
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), open.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "a connection open before the node went down must be closed: {closed:?}"
    );
    // Another node still listens.
    tokio::net::TcpStream::connect(server.addresses()[2])
        .await
        .expect("a live node accepts");
    server.heal(1);
    tokio::net::TcpStream::connect(down)
        .await
        .expect("a healed node accepts on the same address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_node_refuses_requests_and_comes_back() {
    let (server, session) = cluster().await;
    let down = server.addresses()[1];
    server.node_fault(1, NodeFault::Down);
    let refused = read_on(&session, down, Duration::from_secs(5)).await;
    assert!(
        refused.is_err() && !is_timeout(&refused),
        "a down node must fail requests at once, not answer or hang: {refused:?}"
    );
    let other = read_on(&session, server.addresses()[2], Duration::from_secs(5)).await;
    assert_eq!(other.expect("read"), Some("x".to_owned()));
    server.heal(1);
    // The driver reconnects in the background.
    let mut back = None;
    for _ in 0..100 {
        if let Ok(v) = read_on(&session, down, Duration::from_secs(1)).await {
            back = Some(v);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(back, Some(Some("x".to_owned())));
}
