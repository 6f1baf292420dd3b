//! `cqlcoord dev`: the bundled CQL test server with the schema created, to try the CLI with
//! no database.

use cql_test_server::{CqlTestServer, Flavor, ServerOptions};

use crate::child::shutdown_on_signals;
use crate::cli::Connection;
use crate::error::CliError;

/// Starts the server (lenient: it accepts any statement it can parse), creates the keyspace
/// and tables of `connection` there with replication factor 1, prints the environment to use
/// on stdout, and serves until SIGINT/SIGTERM (then exit 0).
///
/// # Errors
/// The server could not start, or the schema could not be created (exit 1).
pub async fn run(connection: &Connection, scylla_mode: bool) -> Result<i32, CliError> {
    let flavor = if scylla_mode {
        Flavor::Scylla
    } else {
        Flavor::Cassandra
    };
    let server = CqlTestServer::start(ServerOptions::lenient(flavor))
        .await
        .map_err(|e| CliError::store(format!("starting the CQL test server: {e}")))?;
    let address = server.address().to_string();
    let local = Connection {
        hosts: vec![address.clone()],
        user: None,
        password: None,
        tls_ca: None,
        tls_cert: None,
        tls_key: None,
        local_dc: None,
        ..connection.clone()
    };
    // The schema's own line goes to stderr: stdout is the environment, for `eval`.
    let created = crate::schema::create(&local, "simple:1").await?;
    eprintln!("cqlcoord: {created}");
    println!("export CQLCOORD_HOSTS={address}");
    if local.keyspace != "coordination" {
        println!("export CQLCOORD_KEYSPACE={}", local.keyspace);
    }
    eprintln!(
        "cqlcoord: CQL test server ({}) serving on {address} until interrupted; in another \
         shell run the export line above, then e.g. `cqlcoord lock demo` or `cqlcoord elect \
         demo --candidate me`",
        if scylla_mode {
            "ScyllaDB mode"
        } else {
            "Cassandra mode"
        }
    );
    let shutdown = shutdown_on_signals()?;
    shutdown.cancelled().await;
    drop(server);
    Ok(0)
}
