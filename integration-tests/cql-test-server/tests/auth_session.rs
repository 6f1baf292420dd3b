//! The harness session on a server with password authentication. (Not in `connect.rs`:
//! that binary asserts the driver logged no warning at all, and warnings are collected per
//! process.)

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use cql_test_server::driver_log;
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};

/// With password authentication on, `session()` logs in with the server's credentials (and
/// the driver, warned of nothing, serves queries on every connection it opened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_harness_session_logs_in_on_a_server_with_authentication() {
    driver_log::install();
    let server = CqlTestServer::start(
        ServerOptions::lenient(Flavor::Cassandra).with_password_auth("ops", "s3cret"),
    )
    .await
    .expect("server");
    let session = server.session().await;
    session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .expect("a query after logging in");
}
