//! Preparing statements and reading LWT answers: shared by every scylla-backed store of the
//! workspace (leases here, the work queue in its own crate).

use std::collections::HashMap;
use std::sync::Arc;

use scylla::client::session::Session;
use scylla::policies::load_balancing::LoadBalancingPolicy;
use scylla::policies::retry::FallthroughRetryPolicy;
use scylla::response::query_result::QueryResult;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};

use super::rotation::Rotation;
use super::schema::ScyllaOptions;
use super::suspects::AvoidSuspects;
use crate::error::StoreError;

/// Which coordinators LWTs (and LWT batches) are sent to.
///
/// The driver's default policy sends an LWT it knows as such (ScyllaDB marks them when
/// preparing) to the first replica of its token, every time, to spare Paxos contention
/// between coordinators. When that replica freezes, every LWT on the partition (each
/// renewal, each retry of it) waits on it until its timeout, and the holder runs out of
/// time. This library sends a renewal again after a timeout, and that only helps if the new
/// request can reach another coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LwtRouting {
    /// A strict rotation over every node the driver knows, not token-aware (the default):
    /// each new LWT of the store goes to the next node, so a retry after a timeout goes
    /// elsewhere. One rotation per prepared statement, so a holder's successive renewals
    /// visit the nodes in turn. A
    /// coordinator that is not a replica costs one hop more; Paxos contention depends on
    /// the concurrent proposals per partition, which are rare for a lease (one holder
    /// renewing, candidates only when it looks free). Multi-DC clusters should prefer
    /// [`LwtRouting::RoundRobinInDatacenter`]. A coordinator that just left a request
    /// unanswered (cut by the request timeout) goes after the other nodes of its data centre
    /// for a while (see [`super::suspects`]).
    #[default]
    RoundRobin,
    /// The same rotation over the nodes of this data centre, then the others.
    RoundRobinInDatacenter(String),
    /// The policy of the session's execution profile as it is (token-aware, LWTs pinned to
    /// the first replica with the driver's default policy; suspect coordinators not avoided).
    Session,
}

impl LwtRouting {
    pub(crate) fn policy(&self) -> Option<Arc<dyn LoadBalancingPolicy>> {
        match self {
            LwtRouting::RoundRobin => Some(Arc::new(Rotation::new(None))),
            LwtRouting::RoundRobinInDatacenter(dc) => {
                Some(Arc::new(Rotation::new(Some(dc.clone()))))
            }
            LwtRouting::Session => None,
        }
    }
}

/// What a prepared statement is, which decides its consistency and retry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A conditional write: Paxos at the serial level, commit at the consistency level,
    /// non-idempotent and never retried by the driver (a lost answer is resolved by a read).
    Lwt,
    /// A linearizable read at the serial level (SERIAL / LOCAL_SERIAL).
    SerialRead,
    /// A plain read at the consistency level: a hint, never the basis of a decision.
    Read,
}

/// Prepares `template` (rendered with `options`) with the settings `kind` calls for.
///
/// # Errors
/// [`StoreError::Rejected`] when the server refuses to prepare it (bad statement, missing
/// table, no connection): nothing was executed.
///
/// # Cancel safety
/// Cancel-safe: preparing changes no data; a dropped call only leaves the statement
/// prepared on some nodes.
pub async fn prepare(
    session: &Session,
    options: &ScyllaOptions,
    template: &str,
    kind: Kind,
) -> Result<PreparedStatement, StoreError> {
    // The rendered text in the message: it names the keyspace and table actually asked for.
    let text = options.render(template);
    let mut statement = session
        .prepare(text.clone())
        .await
        .map_err(|e| StoreError::Rejected(format!("preparing {text}: {e}")))?;
    match kind {
        Kind::Lwt => {
            statement.set_consistency(options.consistency);
            statement.set_serial_consistency(Some(options.serial_consistency));
            statement.set_is_idempotent(false);
            statement.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy)));
            statement.set_load_balancing_policy(options.lwt_routing.policy());
        }
        Kind::SerialRead => {
            statement.set_consistency(serial_read_level(options.serial_consistency));
            statement.set_is_idempotent(true);
            statement.set_load_balancing_policy(Some(read_routing(session)));
        }
        Kind::Read => {
            statement.set_consistency(options.consistency);
            statement.set_is_idempotent(true);
            statement.set_load_balancing_policy(Some(read_routing(session)));
        }
    }
    statement.set_request_timeout(options.request_timeout);
    Ok(statement)
}

/// A logged batch of LWT statements (one partition; conditions on any of them), with the
/// same settings as [`Kind::Lwt`].
pub fn lwt_batch(
    options: &ScyllaOptions,
    statements: impl IntoIterator<Item = PreparedStatement>,
) -> Batch {
    let mut batch = Batch::new(BatchType::Logged);
    for statement in statements {
        batch.append_statement(statement);
    }
    batch.set_consistency(options.consistency);
    batch.set_serial_consistency(Some(options.serial_consistency));
    batch.set_is_idempotent(false);
    batch.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy)));
    batch.set_load_balancing_policy(options.lwt_routing.policy());
    batch.set_request_timeout(options.request_timeout);
    batch
}

/// An unlogged batch of plain writes to one partition (atomic and isolated there, with no
/// batch log), with the settings of plain statements: each carries its own client
/// timestamp, so the batch is idempotent and may be retried.
pub fn plain_batch(
    session: &Session,
    options: &ScyllaOptions,
    statements: impl IntoIterator<Item = PreparedStatement>,
) -> Batch {
    let mut batch = Batch::new(BatchType::Unlogged);
    for statement in statements {
        batch.append_statement(statement);
    }
    batch.set_consistency(options.consistency);
    batch.set_is_idempotent(true);
    batch.set_load_balancing_policy(Some(read_routing(session)));
    batch.set_request_timeout(options.request_timeout);
    batch
}

/// The policy of reads: the session's own, with coordinators that just left a request
/// unanswered moved after the others of their data centre (see [`super::suspects`]).
pub(crate) fn read_routing(session: &Session) -> Arc<dyn LoadBalancingPolicy> {
    let inner = session
        .get_default_execution_profile_handle()
        .to_profile()
        .get_load_balancing_policy()
        .clone();
    Arc::new(AvoidSuspects::new(inner))
}

fn serial_read_level(serial: SerialConsistency) -> Consistency {
    match serial {
        SerialConsistency::Serial => Consistency::Serial,
        SerialConsistency::LocalSerial => Consistency::LocalSerial,
    }
}

/// The first row of an LWT result: `[applied]` plus whatever columns the server returned
/// (Cassandra: the conditioned columns when not applied; Scylla: the old row, always).
pub struct LwtRow {
    /// Whether the condition held and the write applied.
    pub applied: bool,
    /// The other columns returned, by name; nulls left out.
    pub columns: HashMap<String, CqlValue>,
}

impl LwtRow {
    /// Reads the first row of an LWT answer.
    pub fn parse(result: QueryResult) -> Result<Self, StoreError> {
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Unknown(format!("LWT answered without rows: {e}")))?;
        let names: Vec<String> = rows
            .column_specs()
            .iter()
            .map(|c| c.name().to_owned())
            .collect();
        let row: Row = rows
            .first_row()
            .map_err(|e| StoreError::Unknown(format!("unreadable LWT row: {e}")))?;
        let mut columns: HashMap<String, CqlValue> = names
            .into_iter()
            .zip(row.columns)
            .filter_map(|(name, value)| value.map(|v| (name, v)))
            .collect();
        let applied = match columns.remove("[applied]") {
            Some(CqlValue::Boolean(applied)) => applied,
            other => {
                return Err(StoreError::Unknown(format!(
                    "no [applied] column: {other:?}"
                )));
            }
        };
        Ok(LwtRow { applied, columns })
    }

    /// A text column.
    pub fn text(&self, name: &str) -> Option<String> {
        match self.columns.get(name) {
            Some(CqlValue::Text(s) | CqlValue::Ascii(s)) => Some(s.clone()),
            _ => None,
        }
    }

    /// A bigint column.
    pub fn bigint(&self, name: &str) -> Option<i64> {
        match self.columns.get(name) {
            Some(CqlValue::BigInt(v)) => Some(*v),
            _ => None,
        }
    }

    /// An int column.
    pub fn int(&self, name: &str) -> Option<i32> {
        match self.columns.get(name) {
            Some(CqlValue::Int(v)) => Some(*v),
            _ => None,
        }
    }
}
