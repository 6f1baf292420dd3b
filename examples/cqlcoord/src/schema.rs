//! `schema create` and `schema print`.

use cql_lease::cells::scylla::{CREATE_TABLE as CELLS_TABLE, ScyllaCellStore};
use cql_lease::scylla::cql;
use cql_workqueue::scylla::ScyllaQueueStore;
use cql_workqueue::scylla::cql as queue_cql;

use crate::cli::{Connection, SchemaCommand};
use crate::connect::parse_replication;
use crate::error::CliError;

/// `schema create --replication REPLICATION`: creates the keyspace and every table; returns
/// the line saying so.
///
/// # Errors
/// Bad flags (exit 2), or the cluster refused (exit 1).
pub async fn create(connection: &Connection, replication: &str) -> Result<String, CliError> {
    let replication = parse_replication(replication)?;
    let leases = connection.lease_options(replication.clone())?;
    let cells = connection.cell_options(replication.clone())?;
    let queue = connection.queue_options(replication)?;
    let session = connection.session().await?;
    // The library's helper turns tablets off on ScyllaDB (LWTs need it before 2025.4) and
    // refuses to go on if the cluster will not.
    leases.create_schema(&session).await?;
    ScyllaCellStore::create_schema(&session, &cells).await?;
    ScyllaQueueStore::create_schema(&session, &queue).await?;
    Ok(format!(
        "keyspace {} ready: tables {}, {}, {}, {t}, {t}_index, {t}_cursor, {t}_dead",
        leases.keyspace,
        leases.table,
        leases.waiting_line().location.table,
        cells.location.table,
        t = queue.table
    ))
}

/// Runs a `schema` command.
///
/// # Errors
/// Bad flags (exit 2), or the cluster refused (exit 1).
pub async fn run(connection: &Connection, command: SchemaCommand) -> Result<i32, CliError> {
    match command {
        SchemaCommand::Create { replication } => {
            println!("{}", create(connection, &replication).await?);
        }
        SchemaCommand::Print { replication } => {
            let replication = parse_replication(&replication)?;
            let leases = connection.lease_options(replication.clone())?;
            let keyspace = leases
                .render(cql::CREATE_KEYSPACE)
                .replace(cql::REPLICATION, &replication.to_cql()?);
            println!(
                "-- On ScyllaDB 6.0 and later `schema create` appends{}",
                cql::WITHOUT_TABLETS
            );
            println!("-- (LWTs are refused on tablets before ScyllaDB 2025.4); not on Cassandra.");
            println!("{keyspace};");
            println!("{};", leases.render(cql::CREATE_TABLE));
            // The leases' waiting line: plain cells, as the lock cells.
            println!("{};", leases.waiting_line().location.render(CELLS_TABLE));
            let cells = connection.cell_options(replication.clone())?;
            println!("{};", cells.location.render(CELLS_TABLE));
            let queue = connection.queue_options(replication)?;
            for table in [
                queue_cql::CREATE_ITEMS,
                queue_cql::CREATE_INDEX,
                queue_cql::CREATE_CURSOR,
                queue_cql::CREATE_DEAD,
            ] {
                println!("{};", queue.render(table));
            }
        }
    }
    Ok(0)
}
