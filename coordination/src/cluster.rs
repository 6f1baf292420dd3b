//! The cluster backend: the same [`Backend`] on a ScyllaDB or Cassandra session.

use std::sync::Arc;

use cql_lease::cells::scylla::{CellOptions, ScyllaCellStore};
use cql_lease::scylla::{SchemaError, ScyllaLeaseStore, ScyllaOptions, TableSchema};
use cql_workqueue::scylla::{DEFAULT_TABLE, ScyllaQueueStore};
use scylla::client::session::Session;
use tracing::debug;

use crate::{Backend, Stores};

/// The table of the plain-cell locks.
pub const CELL_TABLE: &str = "lock_cells";

/// Where each store lives, from one set of options: the leases in `options.table`, the
/// queues in [`DEFAULT_TABLE`] (and its companions), the lock cells in [`CELL_TABLE`], all in
/// `options.keyspace`, with its consistency levels, routing and replication. The lock cells
/// are read and written at the level the leases' waiting line uses
/// ([`ScyllaOptions::cells_in`]): they have no fencing token, so with `SERIAL` a
/// `LOCAL_QUORUM` deployment reads and writes them at `QUORUM`, lest two data centres both
/// enter.
fn layouts(options: &ScyllaOptions) -> (ScyllaOptions, ScyllaOptions, CellOptions) {
    let queues = ScyllaOptions {
        table: DEFAULT_TABLE.into(),
        ..options.clone()
    };
    (options.clone(), queues, options.cells_in(CELL_TABLE))
}

impl Backend {
    /// Creates the keyspace and every table the primitives use, where missing (`CREATE ...
    /// IF NOT EXISTS`, so it may run at every start): the leases' table and its waiting line,
    /// the queue's tables, the lock cells' table (see [`Backend::connect`] for the layout).
    ///
    /// # Errors
    /// [`SchemaError`]: bad options, or the cluster's refusal.
    ///
    /// # Cancel safety
    /// Every statement is idempotent: run it again.
    pub async fn create_schema(
        session: &Session,
        options: &ScyllaOptions,
    ) -> Result<(), SchemaError> {
        debug!(keyspace = %options.keyspace, "creating the coordination schema");
        for table in Backend::tables(options) {
            table.create(session).await?;
        }
        Ok(())
    }

    /// The tables [`Backend::create_schema`] creates, in order: the leases' (and their waiting
    /// line's), the queue's, the lock cells'.
    pub fn tables(options: &ScyllaOptions) -> Vec<TableSchema> {
        let (leases, queues, cells) = layouts(options);
        let mut tables = leases.tables();
        tables.extend(ScyllaQueueStore::tables(&queues));
        tables.push(ScyllaCellStore::table(&cells));
        tables
    }

    /// The cluster backend on `session`, with existing tables: the leases in
    /// `options.table` (default `leases`), the queues in `work_items` and its companions, the
    /// lock cells in `lock_cells`, all in `options.keyspace` and at `options.consistency`
    /// (for the lock cells `LOCAL_QUORUM` becomes `QUORUM` and `LOCAL_ONE` becomes `ONE`
    /// unless the serial level is `LOCAL_SERIAL`; see [`ScyllaOptions::cells_consistency`]).
    /// Prepares every statement once.
    ///
    /// # Errors
    /// [`SchemaError`]: bad options, a missing keyspace or table (run
    /// [`Backend::create_schema`]), or a tablets keyspace that refuses LWTs.
    ///
    /// # Cancel safety
    /// Nothing is written; run it again.
    pub async fn connect(
        session: Arc<Session>,
        options: ScyllaOptions,
    ) -> Result<Self, SchemaError> {
        let (leases, queues, cells) = layouts(&options);
        debug!(keyspace = %options.keyspace, "opening the coordination stores");
        let stores = Stores {
            leases: Arc::new(ScyllaLeaseStore::new(Arc::clone(&session), leases).await?),
            queues: Arc::new(ScyllaQueueStore::new(Arc::clone(&session), queues).await?),
            cells: Arc::new(ScyllaCellStore::new(session, cells).await?),
        };
        Ok(Backend::from_stores(stores, "cluster"))
    }
}

#[cfg(test)]
mod tests {
    use scylla::statement::Consistency;

    use super::*;

    /// The lock cells take the chosen level widened to the whole cluster (`LOCAL_QUORUM` is
    /// read and written at `QUORUM`), as the leases' waiting line does, in the chosen keyspace.
    #[test]
    fn the_lock_cells_take_the_chosen_consistency_across_the_cluster() {
        for (chosen, cells) in [
            (Consistency::Quorum, Consistency::Quorum),
            (Consistency::LocalQuorum, Consistency::Quorum),
            (Consistency::LocalOne, Consistency::One),
            (Consistency::EachQuorum, Consistency::EachQuorum),
            (Consistency::All, Consistency::All),
            (Consistency::Any, Consistency::One),
        ] {
            let options = ScyllaOptions {
                keyspace: "ops".into(),
                consistency: chosen,
                ..ScyllaOptions::default()
            };
            let (leases, queues, lock_cells) = layouts(&options);
            assert_eq!(lock_cells.consistency, cells, "{chosen:?}");
            assert_eq!(lock_cells.consistency, options.waiting_line().consistency);
            assert_eq!(lock_cells.location.table, CELL_TABLE);
            assert_eq!(lock_cells.location.keyspace, "ops");
            assert_eq!(queues.consistency, chosen);
            assert_eq!(leases, options);
        }
    }

    /// The schema helper names every table of the layout: leases, waiting line, the queue's
    /// seven and the lock cells.
    #[test]
    fn the_schema_names_every_table() {
        let names: Vec<String> = Backend::tables(&ScyllaOptions::default())
            .iter()
            .map(TableSchema::name)
            .collect();
        assert_eq!(
            names,
            [
                "leases",
                "leases_waiting",
                "work_items_plain",
                "work_items",
                "work_items_index",
                "work_items_cursor",
                "work_items_dead",
                "work_items_buckets",
                "work_items_cells",
                "lock_cells",
            ]
        );
    }
}
