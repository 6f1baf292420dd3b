//! Plain cells on ScyllaDB / Cassandra: one table, no LWT, client timestamps on every write.
//!
//! # Layout
//!
//! ```text
//! CREATE TABLE lock_cells (
//!     part  text,   -- partition key: "<row>|<lock name>", one partition per row of a lock
//!     cell  text,   -- clustering key: cells come back sorted by name
//!     value bigint,
//!     PRIMARY KEY (part, cell)
//! ) WITH gc_grace_seconds = 3600
//! ```
//!
//! The row name comes first and never contains `|`, so the key is unambiguous whatever the
//! lock name holds. (One text column rather than a composite key keeps the statements
//! simple; the partitioning is the same.)
//!
//! # Assumptions about a real cluster, written down
//!
//! - Reads and writes use the same [`Consistency`] (QUORUM by default; LOCAL_QUORUM for
//!   locks that only need to exclude within one data centre; ONE only when every contender
//!   talks to the same single node). With QUORUM, a read that starts after a write
//!   completed sees it: the locks' proofs need exactly that and nothing more.
//! - Every write carries `USING TIMESTAMP` from [`super::ClientClock`]: strictly increasing
//!   per process, so a contender's delete supersedes its own earlier (even late) writes.
//!   Timestamps of *different* processes are never compared by the algorithms.
//! - TTLs are counted by each replica's wall clock, in whole seconds; the lock holder
//!   stops `1 s + max_clock_skew` before its TTL (see [`crate::Timing::renew_deadline`]).
//!   Clocks of the database nodes must agree within `max_clock_skew`.
//! - Tombstones: every lock cell carries a TTL, so a tombstone need only outlive the TTL of
//!   the cell it deletes; `gc_grace_seconds` is one hour (an hour of deleted queue entries
//!   is the most a read could meet). The algorithms reuse cell names per contender (bakery,
//!   main and shadow rows) so most deletes are overwritten, and the fair lock starts its
//!   queue reads at the head it saw last instead of at the start of the partition.
//! - No LWT touches this table.
//! - Statements are idempotent (same cell, same timestamp), so the driver may retry them,
//!   and so may [`super::durable::Durable`], which does after a request timeout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::statement::Consistency;
use scylla::statement::prepared::PreparedStatement;
use tracing::instrument;

use super::{Cell, CellRef, CellStore};
use crate::error::StoreError;
use crate::scylla::{Replication, ScyllaOptions, classify};

/// The `CREATE TABLE` of the cell store (a template with `{keyspace}` and `{table}`).
pub const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS {keyspace}.{table} (part text, cell text, value bigint, PRIMARY KEY (part, cell)) WITH gc_grace_seconds = 3600";
/// Writes one cell with a TTL (0 means none) and a client timestamp.
pub const WRITE: &str = "INSERT INTO {keyspace}.{table} (part, cell, value) VALUES (?, ?, ?) USING TTL ? AND TIMESTAMP ?";
/// Deletes one cell with a client timestamp.
pub const DELETE: &str =
    "DELETE FROM {keyspace}.{table} USING TIMESTAMP ? WHERE part = ? AND cell = ?";
/// Cells of a row from a name on, in clustering order.
pub const READ_ROW: &str =
    "SELECT cell, value FROM {keyspace}.{table} WHERE part = ? AND cell >= ? LIMIT ?";
/// One cell.
pub const READ_CELL: &str = "SELECT value FROM {keyspace}.{table} WHERE part = ? AND cell = ?";

/// Where the cell table lives and the consistency level of every statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellOptions {
    /// Keyspace and table (and replication for the schema helper); its LWT levels are
    /// unused here. Its [`ScyllaOptions::lwt_routing`] also routes the cell writes and
    /// deletes (a write sent again after a timeout must reach another coordinator); reads
    /// use the session's policy.
    pub location: ScyllaOptions,
    /// Level of every read and write. Default QUORUM.
    pub consistency: Consistency,
}

impl Default for CellOptions {
    fn default() -> Self {
        CellOptions {
            location: ScyllaOptions {
                table: "lock_cells".into(),
                replication: Replication::Simple(3),
                ..ScyllaOptions::default()
            },
            consistency: Consistency::Quorum,
        }
    }
}

/// The cell store on a `scylla` session; statements prepared once in [`Self::new`].
pub struct ScyllaCellStore {
    session: Arc<Session>,
    write: PreparedStatement,
    delete: PreparedStatement,
    read_row: PreparedStatement,
    read_cell: PreparedStatement,
}

impl std::fmt::Debug for ScyllaCellStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScyllaCellStore").finish_non_exhaustive()
    }
}

impl ScyllaCellStore {
    /// Creates the keyspace and table if missing.
    ///
    /// # Errors
    /// Bad identifiers, or the store's refusal.
    ///
    /// # Cancel safety
    /// Schema statements are idempotent (`IF NOT EXISTS`); run it again.
    pub async fn create_schema(
        session: &Session,
        options: &CellOptions,
    ) -> Result<(), crate::scylla::SchemaError> {
        Self::table(options).create(session).await
    }

    /// The table [`ScyllaCellStore::create_schema`] creates.
    pub fn table(options: &CellOptions) -> crate::scylla::TableSchema {
        crate::scylla::TableSchema {
            location: options.location.clone(),
            template: CREATE_TABLE,
        }
    }

    /// Prepares the statements against an existing table.
    ///
    /// # Errors
    /// Bad options, or the store refused to prepare.
    ///
    /// # Cancel safety
    /// Cancel safe (nothing is written).
    pub async fn new(
        session: Arc<Session>,
        options: CellOptions,
    ) -> Result<Self, crate::scylla::SchemaError> {
        options.location.validate()?;
        if matches!(
            options.consistency,
            Consistency::Serial | Consistency::LocalSerial
        ) {
            return Err(crate::InvalidArgument::Invalid {
                field: "consistency",
                reason: "plain cells take a regular level".into(),
            }
            .into());
        }
        if options.consistency == Consistency::Any {
            return Err(crate::InvalidArgument::Invalid {
                field: "consistency",
                reason: "ANY cannot read, and every cell lock reads".into(),
            }
            .into());
        }
        // Writes and deletes rotate over the coordinators as LWTs do (`lwt_routing`): one
        // sent again after a timeout must reach another node, where the driver's default
        // policy picks a random replica, the frozen one again one time in N. Reads keep the
        // session's policy (and its speculative execution), suspect coordinators moved back.
        let prepare = |template: &'static str, rotate: bool| {
            let session = Arc::clone(&session);
            let text = options.location.render(template);
            let options = options.clone();
            async move {
                let mut statement = session
                    .prepare(text.clone())
                    .await
                    .map_err(|e| StoreError::Rejected(format!("preparing {text}: {e}")))?;
                statement.set_consistency(options.consistency);
                statement.set_is_idempotent(true);
                statement.set_request_timeout(options.location.request_timeout);
                statement.set_load_balancing_policy(if rotate {
                    options.location.lwt_routing.policy()
                } else {
                    Some(crate::scylla::read_routing(&session))
                });
                Ok::<_, StoreError>(statement)
            }
        };
        Ok(ScyllaCellStore {
            write: prepare(WRITE, true).await?,
            delete: prepare(DELETE, true).await?,
            read_row: prepare(READ_ROW, false).await?,
            read_cell: prepare(READ_CELL, false).await?,
            session,
        })
    }
}

/// The partition key of a lock's row.
fn partition(row: &str, lock: &str) -> String {
    format!("{row}|{lock}")
}

fn ttl_secs(ttl: Option<Duration>) -> i32 {
    ttl.map(|ttl| {
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        i32::try_from(secs.max(1)).unwrap_or(i32::MAX)
    })
    .unwrap_or(0)
}

#[async_trait]
impl CellStore for ScyllaCellStore {
    #[instrument(level = "debug", skip(self))]
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        self.session
            .execute_unpaged(
                &self.write,
                (
                    partition(at.row, at.lock),
                    at.cell,
                    value,
                    ttl_secs(ttl),
                    timestamp,
                ),
            )
            .await
            .map(|_| ())
            .map_err(|e| classify(e, true))
    }

    #[instrument(level = "debug", skip(self))]
    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        self.session
            .execute_unpaged(
                &self.delete,
                (timestamp, partition(at.row, at.lock), at.cell),
            )
            .await
            .map(|_| ())
            .map_err(|e| classify(e, true))
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        let result = self
            .session
            .execute_unpaged(&self.read_row, (partition(row, lock), from, limit))
            .await
            .map_err(|e| classify(e, false))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unavailable(format!("read without rows: {e}")))?;
        let mut out = Vec::new();
        for row in rows
            .rows::<(String, i64)>()
            .map_err(|e| StoreError::Unavailable(format!("bad row type: {e}")))?
        {
            let (name, value) =
                row.map_err(|e| StoreError::Unavailable(format!("bad row: {e}")))?;
            out.push(Cell { name, value });
        }
        Ok(out)
    }

    #[instrument(level = "debug", skip(self))]
    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.read_cell, (partition(at.row, at.lock), at.cell))
            .await
            .map_err(|e| classify(e, false))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unavailable(format!("read without rows: {e}")))?;
        rows.maybe_first_row::<(i64,)>()
            .map(|row| row.map(|(v,)| v))
            .map_err(|e| StoreError::Unavailable(format!("bad row: {e}")))
    }
}
