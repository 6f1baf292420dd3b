//! A server on a thread of its own (`ServerOptions::with_own_thread`) serves while its
//! caller's runtime is blocked, and its node faults still work.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_test_server::{CqlTestServer, Flavor, NodeFault, ServerOptions};

/// Runs `f` on a runtime of another thread and waits for it, blocking the caller's thread
/// (and so, in a current-thread test, every task of the caller's runtime).
fn on_another_thread<T: Send + 'static>(
    f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>> + Send + 'static,
) -> T {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f())
    })
    .join()
    .unwrap()
}

#[tokio::test]
async fn serves_while_the_callers_runtime_is_blocked() {
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra).with_own_thread())
        .await
        .expect("server");
    let address = server.address();
    // This test's runtime has one thread, blocked in `join` below: a server whose tasks ran
    // on it could not answer, and the connect would time out.
    let answered = on_another_thread(move || {
        Box::pin(async move {
            let mut builder = scylla::client::session_builder::SessionBuilder::new();
            builder = builder
                .known_node_addr(address)
                // Both off, as `CqlTestServer::session` sets them: the driver warns about
                // one without the other, and the other test here checks for warnings.
                .fetch_schema_metadata(false)
                .fetch_full_schema_metadata(false);
            let session = tokio::time::timeout(Duration::from_secs(10), builder.build()).await;
            let Ok(Ok(session)) = session else {
                return false;
            };
            session
                .query_unpaged("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", ())
                .await
                .is_ok()
        })
    });
    assert!(
        answered,
        "the server did not answer while the caller was blocked"
    );
    assert!(server.requests_on(0) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_node_on_its_own_thread_listens_again_when_healed() {
    let server = CqlTestServer::start(ServerOptions::lenient(Flavor::Cassandra).with_own_thread())
        .await
        .expect("server");
    let address = server.address();
    server.node_fault(0, NodeFault::Down);
    assert!(tokio::net::TcpStream::connect(address).await.is_err());
    server.heal(0);
    let session = server.session().await;
    session
        .query_unpaged("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}", ())
        .await
        .expect("a healed node answers");
    drop(session);
    drop(server);
    // Dropped, the server's thread has ended: its port is closed when `drop` returns.
    assert!(
        tokio::net::TcpStream::connect(address).await.is_err(),
        "the dropped server still listens"
    );
}
