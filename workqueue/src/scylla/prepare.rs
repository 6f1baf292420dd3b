//! Setting the scylla backend up: the schema, and every statement prepared once.

use std::sync::Arc;

use cql_lease::scylla::{
    Kind, PROBE_KEY, SchemaError, ScyllaOptions, TableSchema, check_lwt_support, lwt_batch,
    plain_batch, prepare,
};
use scylla::client::session::Session;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;

use super::plain::ScyllaPlainItems;
use super::{ScyllaQueueStore, cql};
use crate::bakery::BakeryParts;
use cql_lease::cells::scylla::{CellOptions, ScyllaCellStore};

/// The bakery mode's cells: `{table}_cells`, at a level whose reads meet every contender's
/// writes ([`ScyllaOptions::cells_in`]), since a bakery claim has no fencing token.
fn cell_options(options: &ScyllaOptions) -> CellOptions {
    options.cells_in(format!("{}_cells", options.table))
}

/// The prepared statements, one per template in [`cql`].
pub(super) struct Statements {
    pub(super) enqueue: PreparedStatement,
    pub(super) revive: PreparedStatement,
    pub(super) claim: Batch,
    pub(super) heartbeat: PreparedStatement,
    pub(super) complete: PreparedStatement,
    pub(super) reschedule: PreparedStatement,
    pub(super) snooze: PreparedStatement,
    pub(super) unclaim: PreparedStatement,
    pub(super) requeue: PreparedStatement,
    pub(super) purge: PreparedStatement,
    pub(super) seal_absent: PreparedStatement,
    pub(super) seal_done: PreparedStatement,
    pub(super) seal_discarded: PreparedStatement,
    pub(super) read: PreparedStatement,
    pub(super) peek: PreparedStatement,
    pub(super) put_entry: PreparedStatement,
    pub(super) delete_entry: PreparedStatement,
    pub(super) delete_range: PreparedStatement,
    pub(super) move_entry: Batch,
    pub(super) scan_index: PreparedStatement,
    pub(super) read_cursor: PreparedStatement,
    pub(super) advance_cursor: PreparedStatement,
    pub(super) put_bucket: PreparedStatement,
    pub(super) list_buckets: PreparedStatement,
    pub(super) put_dead: PreparedStatement,
    pub(super) delete_dead: PreparedStatement,
    pub(super) list_dead: PreparedStatement,
}

impl ScyllaQueueStore {
    /// Creates the keyspace and the queue tables named by `options` if missing (the list is
    /// [`ScyllaQueueStore::tables`]).
    ///
    /// # Errors
    ///
    /// [`SchemaError`] when the options are bad or the store refuses.
    pub async fn create_schema(
        session: &Session,
        options: &ScyllaOptions,
    ) -> Result<(), SchemaError> {
        for table in Self::tables(options) {
            table.create(session).await?;
        }
        Ok(())
    }

    /// The tables [`ScyllaQueueStore::create_schema`] creates, in order: the LWT-free mode's
    /// items, the items, the index, the cursor, the dead letters, the bucket directory and the
    /// LWT-free mode's claim cells.
    pub fn tables(options: &ScyllaOptions) -> Vec<TableSchema> {
        let mut tables: Vec<TableSchema> = [
            cql::CREATE_PLAIN,
            cql::CREATE_ITEMS,
            cql::CREATE_INDEX,
            cql::CREATE_CURSOR,
            cql::CREATE_DEAD,
            cql::CREATE_BUCKETS,
        ]
        .into_iter()
        .map(|template| TableSchema {
            location: options.clone(),
            template,
        })
        .collect();
        tables.push(ScyllaCellStore::table(&cell_options(options)));
        tables
    }

    /// Prepares the statements of the LWT-free claim mode ([`crate::ClaimMode::Bakery`])
    /// without checking that the keyspace accepts LWTs: for a ScyllaDB tablets keyspace (6.0
    /// to 2025.3) or a store without LWTs. A queue in the LWT mode on such a store fails at
    /// its first LWT; build it with [`ScyllaQueueStore::new`] to be told at construction.
    ///
    /// # Errors
    ///
    /// [`SchemaError::InvalidArgument`] for bad options; [`SchemaError::Store`] when a
    /// statement cannot be prepared.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only prepares.
    pub async fn new_lwt_free(
        session: Arc<Session>,
        options: ScyllaOptions,
    ) -> Result<Self, SchemaError> {
        Self::build(session, options, false).await
    }

    /// Prepares every statement against the existing tables and checks that the keyspace
    /// accepts LWTs.
    ///
    /// # Errors
    ///
    /// [`SchemaError::InvalidArgument`] for bad options; [`SchemaError::Store`] when a
    /// statement cannot be prepared; [`SchemaError::LwtsRejectedByTablets`] when the keyspace
    /// uses ScyllaDB tablets on a version that refuses LWTs on them (6.0 to 2025.3).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only prepares and reads.
    pub async fn new(session: Arc<Session>, options: ScyllaOptions) -> Result<Self, SchemaError> {
        Self::build(session, options, true).await
    }

    async fn build(
        session: Arc<Session>,
        options: ScyllaOptions,
        check_lwts: bool,
    ) -> Result<Self, SchemaError> {
        options.validate()?;
        let p = |template: &'static str, kind: Kind| prepare(&session, &options, template, kind);
        let read = p(cql::READ, Kind::SerialRead).await?;
        if check_lwts {
            check_lwt_support(&session, &options, || async {
                session
                    .execute_unpaged(&read, (PROBE_KEY,))
                    .await
                    .map(|_| ())
            })
            .await?;
        }
        let bakery = BakeryParts {
            items: Arc::new(ScyllaPlainItems::new(Arc::clone(&session), &options).await?),
            cells: Arc::new(
                ScyllaCellStore::new(Arc::clone(&session), cell_options(&options)).await?,
            ),
        };
        let claim = lwt_batch(
            &options,
            [
                p(cql::CLAIM_LEASE, Kind::Lwt).await?,
                p(cql::CLAIM_MARK, Kind::Lwt).await?,
            ],
        );
        // Plain writes carry explicit client timestamps, so sending one twice is harmless:
        // they take the idempotent settings of a plain read.
        let plain = Kind::Read;
        let put_entry = p(cql::PUT_ENTRY, plain).await?;
        let delete_entry = p(cql::DELETE_ENTRY, plain).await?;
        let move_entry = plain_batch(
            &session,
            &options,
            [put_entry.clone(), delete_entry.clone()],
        );
        let s = Statements {
            enqueue: p(cql::ENQUEUE, Kind::Lwt).await?,
            revive: p(cql::REVIVE, Kind::Lwt).await?,
            claim,
            heartbeat: p(cql::HEARTBEAT, Kind::Lwt).await?,
            complete: p(cql::COMPLETE, Kind::Lwt).await?,
            reschedule: p(cql::RESCHEDULE, Kind::Lwt).await?,
            snooze: p(cql::SNOOZE, Kind::Lwt).await?,
            unclaim: p(cql::UNCLAIM, Kind::Lwt).await?,
            requeue: p(cql::REQUEUE, Kind::Lwt).await?,
            purge: p(cql::PURGE, Kind::Lwt).await?,
            seal_absent: p(cql::SEAL_ABSENT, Kind::Lwt).await?,
            seal_done: p(cql::SEAL_DONE, Kind::Lwt).await?,
            seal_discarded: p(cql::SEAL_DISCARDED, Kind::Lwt).await?,
            read,
            peek: p(cql::READ, Kind::Read).await?,
            put_entry,
            delete_entry,
            delete_range: p(cql::DELETE_RANGE, plain).await?,
            move_entry,
            scan_index: p(cql::SCAN_INDEX, Kind::Read).await?,
            read_cursor: p(cql::READ_CURSOR, Kind::Read).await?,
            advance_cursor: p(cql::ADVANCE_CURSOR, plain).await?,
            put_bucket: p(cql::PUT_BUCKET, plain).await?,
            list_buckets: p(cql::LIST_BUCKETS, Kind::Read).await?,
            put_dead: p(cql::PUT_DEAD, plain).await?,
            delete_dead: p(cql::DELETE_DEAD, plain).await?,
            list_dead: p(cql::LIST_DEAD, Kind::Read).await?,
        };
        Ok(ScyllaQueueStore { session, s, bakery })
    }
}
