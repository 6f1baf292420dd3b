//! Runs the CQL test server as a process, accepting any statement it can parse, so programs
//! and the real-cluster suite can be pointed at it: `cargo run -p integration-tests --bin
//! cql-test-server -- [--scylla-mode]`, then use the address it prints.

use integration_tests::cql_server::{CqlTestServer, Flavor, ServerOptions};

#[tokio::main]
async fn main() {
    let flavor = if std::env::args().any(|a| a == "--scylla-mode") {
        Flavor::Scylla
    } else {
        Flavor::Cassandra
    };
    let server = CqlTestServer::start(ServerOptions {
        flavor,
        strict_for: None,
    })
    .await;
    println!("{}", server.address());
    let _ = tokio::signal::ctrl_c().await;
}
