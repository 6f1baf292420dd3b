//! Runs the CQL test server as a process, accepting any statement it can parse, so programs
//! and the real-cluster suite can be pointed at it:
//! `cargo run -p cql-test-server -- [--scylla-mode] [--tombstone-warn N] [--tombstone-fail N]`,
//! then use the address it prints.

use cql_test_server::{CqlTestServer, Flavor, ServerOptions};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let number = |flag: &str| -> Option<u64> {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1)?.parse().ok()
    };
    let flavor = if args.iter().any(|a| a == "--scylla-mode") {
        Flavor::Scylla
    } else {
        Flavor::Cassandra
    };
    let mut options = ServerOptions::lenient(flavor);
    if let Some(n) = number("--tombstone-warn") {
        options.tombstone_warn_threshold = n;
    }
    if let Some(n) = number("--tombstone-fail") {
        options.tombstone_failure_threshold = n;
    }
    let server = CqlTestServer::start(options).await;
    println!("{}", server.address());
    let _ = tokio::signal::ctrl_c().await;
    let stats = server.tombstones();
    eprintln!(
        "tombstones scanned: total {}, max per read {}, {} warnings",
        stats.total,
        stats.max,
        stats.warnings.len()
    );
}
