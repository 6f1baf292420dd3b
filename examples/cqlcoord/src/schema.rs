//! `schema create` and `schema print`.

use cql_lease::cells::scylla::ScyllaCellStore;
use cql_lease::scylla::{Replication, TableSchema, cql};
use cql_workqueue::scylla::ScyllaQueueStore;

use crate::cli::{Connection, SchemaCommand};
use crate::connect::parse_replication;
use crate::error::CliError;

/// Every table the commands use, from the library's own lists (so `schema print`, `schema
/// create` and its "ready" line name what the library creates): the leases' tables, the lock
/// cells', the queue's.
///
/// # Errors
/// Bad flags (exit 2).
fn tables(connection: &Connection, replication: Replication) -> Result<Vec<TableSchema>, CliError> {
    let leases = connection.lease_options(replication.clone())?;
    let cells = connection.cell_options(replication.clone())?;
    let queue = connection.queue_options(replication)?;
    let mut tables = leases.tables();
    tables.push(ScyllaCellStore::table(&cells));
    tables.extend(ScyllaQueueStore::tables(&queue));
    Ok(tables)
}

/// `schema create --replication REPLICATION`: creates the keyspace and every table; returns
/// the line saying so.
///
/// # Errors
/// Bad flags (exit 2), or the cluster refused (exit 1).
pub async fn create(connection: &Connection, replication: &str) -> Result<String, CliError> {
    let tables = tables(connection, parse_replication(replication)?)?;
    let session = connection.session().await?;
    // The library's helper turns tablets off on ScyllaDB (LWTs need it before 2025.4) and
    // refuses to go on if the cluster will not.
    for table in &tables {
        table.create(&session).await?;
    }
    let names: Vec<String> = tables.iter().map(TableSchema::name).collect();
    Ok(format!(
        "keyspace {} ready: tables {}",
        connection.keyspace,
        names.join(", ")
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
            let keyspace = connection
                .lease_options(replication.clone())?
                .render(cql::CREATE_KEYSPACE)
                .replace(cql::REPLICATION, &replication.to_cql()?);
            println!(
                "-- On ScyllaDB 6.0 and later `schema create` appends{}",
                cql::WITHOUT_TABLETS
            );
            println!("-- (LWTs are refused on tablets before ScyllaDB 2025.4); not on Cassandra.");
            println!("{keyspace};");
            for table in tables(connection, replication)? {
                println!("{};", table.statement());
            }
        }
    }
    Ok(0)
}
