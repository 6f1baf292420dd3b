//! Opening the stores on the connection's session.

use std::sync::Arc;

use scylla::statement::Consistency;

use cql_lease::LeaseStore;
use cql_lease::cells::CellStore;
use cql_lease::cells::scylla::ScyllaCellStore;
use cql_lease::scylla::{Replication, SchemaError, ScyllaLeaseStore};
use cql_workqueue::scylla::ScyllaQueueStore;
use cql_workqueue::store::QueueStore;

use crate::cli::Connection;
use crate::error::CliError;

/// Replication is only used by `schema create`; the other commands open existing tables.
const UNUSED: Replication = Replication::Simple(1);

/// A missing keyspace or table shows up as a statement the server refuses to prepare: name
/// them, and the command that creates them.
fn opening<'a>(
    what: &'a str,
    keyspace: &'a str,
    table: &'a str,
) -> impl Fn(SchemaError) -> CliError + 'a {
    move |e| match e {
        SchemaError::Store(e @ cql_lease::StoreError::Rejected(_)) => CliError::store(format!(
            "cannot use the {what} table {keyspace}.{table} (missing keyspace or table?): {e}; \
             to create them run `cqlcoord --keyspace {keyspace} schema create --replication \
             simple:RF` (or DC:RF,...)"
        )),
        SchemaError::Store(e) => CliError::store(format!(
            "cannot use the {what} table {keyspace}.{table}: {e}"
        )),
        other => CliError::from(other),
    }
}

/// The lease store (leases, elections, the lease lock).
///
/// # Errors
/// Bad flags, no connection, missing tables.
pub async fn leases(connection: &Connection) -> Result<Arc<dyn LeaseStore>, CliError> {
    let options = connection.lease_options(UNUSED)?;
    let session = connection.session().await?;
    let (keyspace, table) = (options.keyspace.clone(), options.table.clone());
    let store = ScyllaLeaseStore::new(session, options)
        .await
        .map_err(opening("lease", &keyspace, &table))?;
    Ok(Arc::new(store))
}

/// The plain-cell store (fair and bakery locks).
///
/// # Errors
/// As [`leases`].
pub async fn cells(connection: &Connection) -> Result<Arc<dyn CellStore>, CliError> {
    let options = connection.cell_options(UNUSED)?;
    // These locks are safe only while every read meets every completed write (libQtCassandra's
    // ONE for processes on one node is no case for an operator's tool).
    if !matches!(
        options.consistency,
        Consistency::Quorum | Consistency::LocalQuorum | Consistency::EachQuorum | Consistency::All
    ) {
        return Err(CliError::usage(format!(
            "--consistency {:?} is too weak for the fair and bakery locks: their reads must meet \
             every completed write (use quorum, local-quorum, each-quorum or all)",
            options.consistency
        )));
    }
    let session = connection.session().await?;
    let (keyspace, table) = (
        options.location.keyspace.clone(),
        options.location.table.clone(),
    );
    let store = ScyllaCellStore::new(session, options)
        .await
        .map_err(opening("lock cell", &keyspace, &table))?;
    Ok(Arc::new(store))
}

/// The work-queue store.
///
/// # Errors
/// As [`leases`].
pub async fn queue(connection: &Connection) -> Result<Arc<dyn QueueStore>, CliError> {
    let options = connection.queue_options(UNUSED)?;
    let session = connection.session().await?;
    let (keyspace, table) = (options.keyspace.clone(), options.table.clone());
    let store = ScyllaQueueStore::new(session, options)
        .await
        .map_err(opening("work-queue", &keyspace, &table))?;
    Ok(Arc::new(store))
}
