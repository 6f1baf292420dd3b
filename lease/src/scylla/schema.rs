//! Where the lease table lives, and how to create it.

use scylla::client::session::Session;
use scylla::statement::{Consistency, SerialConsistency};
use tracing::warn;

use super::cql;
use super::statement::LwtRouting;
use crate::error::{InvalidArgument, StoreError};

/// Keyspace replication for [`ScyllaOptions::create_schema`](super::ScyllaOptions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// `SimpleStrategy` with one replication factor (single data centre, development).
    Simple(u32),
    /// `NetworkTopologyStrategy` with a factor per data centre.
    NetworkTopology(Vec<(String, u32)>),
}

impl Replication {
    /// The CQL map literal.
    pub fn to_cql(&self) -> Result<String, InvalidArgument> {
        match self {
            Replication::Simple(0) => Err(invalid("replication", "factor must be at least 1")),
            Replication::Simple(rf) => Ok(format!(
                "{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"
            )),
            Replication::NetworkTopology(dcs) => {
                if dcs.is_empty() {
                    return Err(invalid("replication", "no data centre given"));
                }
                let mut out = String::from("{'class': 'NetworkTopologyStrategy'");
                for (dc, rf) in dcs {
                    if dc.is_empty()
                        || !dc
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                    {
                        return Err(invalid("replication", "bad data centre name"));
                    }
                    out.push_str(&format!(", '{dc}': {rf}"));
                }
                out.push('}');
                Ok(out)
            }
        }
    }
}

/// What the waiting line's table adds to the lease table's name.
pub const WAITING_SUFFIX: &str = "_waiting";

/// Table location and consistency levels of the scylla backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScyllaOptions {
    /// Keyspace name (unquoted identifier: letters, digits, `_`; up to 48 characters).
    pub keyspace: String,
    /// Table name (same rules).
    pub table: String,
    /// Replication used when the schema helper creates the keyspace.
    pub replication: Replication,
    /// Consistency of the commit phase of LWTs and of plain reads (the followers' and
    /// observers' polls). Default `QUORUM`: a poll in any data centre then sees every
    /// committed claim, at the price of a cross-DC round trip per poll. A level that does
    /// not overlap every commit (`LOCAL_QUORUM` with `SERIAL`, or `ONE`, `LOCAL_ONE`, `TWO`,
    /// `THREE`, `ANY`) keeps the guarantees (decisions are made by LWTs and SERIAL reads) but
    /// makes polls stale: a follower may go on seeing a resigned leader until that claim's
    /// TTL runs out (failover after resignation up to a TTL), and observers report changes
    /// late. It is accepted with a warning; see [`ScyllaOptions::polls_may_lag`]. `ANY` is
    /// refused: it cannot read, and every primitive reads.
    ///
    /// Plain-cell tables (the fair, bakery and shadow locks, the queue's bakery claims and the
    /// leases' waiting line; see [`ScyllaOptions::cells_in`]) have no fencing token, so their
    /// exclusion needs every read to meet every write of every contender: with `SERIAL` they
    /// use `QUORUM` for `LOCAL_QUORUM` and `ONE` (one node, the single-node case) for
    /// `LOCAL_ONE`; with `LOCAL_SERIAL` the whole scope is one data centre and the level is
    /// kept.
    pub consistency: Consistency,
    /// Consistency of the Paxos phase of LWTs and of linearizable reads. Default `SERIAL`:
    /// one Paxos across all data centres, so there is one leader and one token sequence per
    /// name, at the price of a cross-DC round trip per LWT. `LOCAL_SERIAL` runs a separate
    /// Paxos in each data centre (two leaders, colliding tokens when clients in two DCs use
    /// the same name); it is refused unless [`ScyllaOptions::per_datacenter_paxos`] is set.
    pub serial_consistency: SerialConsistency,
    /// Explicit opt-in to `LOCAL_SERIAL`: for names used from one data centre only (or a
    /// single-DC cluster). See [`ScyllaOptions::per_datacenter`]. Meaningless with `SERIAL`
    /// (one Paxos across all data centres), so that combination is refused.
    pub per_datacenter_paxos: bool,
    /// Driver-side timeout of one request; expiry of an LWT leaves its outcome unknown and is
    /// resolved by a read-back. `None` keeps the session's (the driver's default is 30 s).
    /// The lease layer bounds every request anyway, by a timeout derived from the lease
    /// timing ([`crate::Timing::effective_request_timeout`]), so this only matters
    /// when it is shorter.
    pub request_timeout: Option<std::time::Duration>,
    /// Which coordinators LWTs are sent to. Default [`LwtRouting::RoundRobin`].
    pub lwt_routing: LwtRouting,
}

impl Default for ScyllaOptions {
    fn default() -> Self {
        ScyllaOptions {
            keyspace: "coordination".into(),
            table: "leases".into(),
            replication: Replication::Simple(3),
            consistency: Consistency::Quorum,
            serial_consistency: SerialConsistency::Serial,
            per_datacenter_paxos: false,
            request_timeout: None,
            lwt_routing: LwtRouting::RoundRobin,
        }
    }
}

impl ScyllaOptions {
    /// Opts into per-data-centre Paxos: `LOCAL_SERIAL` for LWTs and linearizable reads and
    /// `LOCAL_QUORUM` for commits and polls. Every guarantee then holds only among clients of
    /// one data centre: use it only when each name is used from a single data centre.
    pub fn per_datacenter(self) -> Self {
        ScyllaOptions {
            consistency: Consistency::LocalQuorum,
            serial_consistency: SerialConsistency::LocalSerial,
            per_datacenter_paxos: true,
            ..self
        }
    }

    /// Checks the identifiers and levels. `LOCAL_SERIAL` without
    /// [`ScyllaOptions::per_datacenter_paxos`] is refused: a per-DC scope is never silent;
    /// `per_datacenter_paxos` with `SERIAL` is refused as meaningless (it would suggest a
    /// scope that is not the one in use). `ANY` and the serial levels are refused for
    /// `consistency`. Levels that make polls stale
    /// ([`ScyllaOptions::polls_may_lag`]) are accepted with a warning.
    ///
    /// # Errors
    /// [`InvalidArgument::Invalid`] naming the offending field.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        check_identifier("keyspace", &self.keyspace)?;
        check_identifier("table", &self.table)?;
        if self.per_datacenter_paxos && self.serial_consistency == SerialConsistency::Serial {
            return Err(invalid(
                "per_datacenter_paxos",
                "set with SERIAL, which runs one Paxos across all data centres; use \
                 ScyllaOptions::per_datacenter (LOCAL_SERIAL) or leave it unset",
            ));
        }
        if self.serial_consistency == SerialConsistency::LocalSerial {
            if !self.per_datacenter_paxos {
                return Err(invalid(
                    "serial_consistency",
                    "LOCAL_SERIAL runs one Paxos per data centre (two leaders across DCs); \
                     set per_datacenter_paxos (ScyllaOptions::per_datacenter) to accept that",
                ));
            }
            warn!(
                keyspace = %self.keyspace,
                "per-datacenter Paxos (LOCAL_SERIAL): guarantees hold within one data centre only"
            );
        }
        if matches!(
            self.consistency,
            Consistency::Serial | Consistency::LocalSerial
        ) {
            return Err(invalid(
                "consistency",
                "must be a regular level; serial levels go in serial_consistency",
            ));
        }
        if self.consistency == Consistency::Any {
            return Err(invalid(
                "consistency",
                "ANY cannot read, and every primitive reads; use QUORUM (the default)",
            ));
        }
        if self.polls_may_lag() {
            warn!(
                keyspace = %self.keyspace,
                consistency = ?self.consistency,
                serial_consistency = ?self.serial_consistency,
                "plain reads at this level may miss committed claims: polls can be stale \
                 (failover after a resignation may take up to a TTL); use QUORUM \
                 (LOCAL_QUORUM with LOCAL_SERIAL)"
            );
        }
        Ok(())
    }

    /// Whether a plain read at [`ScyllaOptions::consistency`] may miss a claim committed at
    /// that level within the Paxos scope: with `SERIAL`, any level short of `QUORUM`,
    /// `EACH_QUORUM` or `ALL` (a `LOCAL_QUORUM` commit in one data centre is invisible to a
    /// `LOCAL_QUORUM` read in another); with `LOCAL_SERIAL`, any level short of
    /// `LOCAL_QUORUM`. Safety does not depend on polls (every decision is an LWT or a SERIAL
    /// read), but stale polls delay failover (up to a TTL after a resignation) and observers.
    pub fn polls_may_lag(&self) -> bool {
        let spans_every_dc = matches!(
            self.consistency,
            Consistency::Quorum | Consistency::EachQuorum | Consistency::All
        );
        match self.serial_consistency {
            SerialConsistency::Serial => !spans_every_dc,
            SerialConsistency::LocalSerial => {
                !(spans_every_dc || self.consistency == Consistency::LocalQuorum)
            }
        }
    }

    /// A statement template with this keyspace and table.
    pub fn render(&self, template: &str) -> String {
        cql::render(template, &self.keyspace, &self.table)
    }

    /// Creates the keyspace (with `replication`), the lease table and its waiting line's
    /// table (see [`ScyllaOptions::waiting_line`]) if they are missing.
    ///
    /// # Errors
    ///
    /// [`SchemaError::InvalidArgument`] for bad options (nothing is sent);
    /// [`SchemaError::Store`] when the cluster refuses or fails a statement, including a
    /// ScyllaDB that refuses `tablets = {'enabled': false}` for another reason than not
    /// knowing the option.
    ///
    /// # Cancel safety
    ///
    /// Every statement is idempotent (`IF NOT EXISTS`): a cancelled call can be repeated.
    pub async fn create_schema(&self, session: &Session) -> Result<(), SchemaError> {
        for table in self.tables() {
            table.create(session).await?;
        }
        Ok(())
    }

    /// The tables [`ScyllaOptions::create_schema`] creates: the lease table, then its waiting
    /// line's.
    pub fn tables(&self) -> Vec<TableSchema> {
        vec![
            TableSchema {
                location: self.clone(),
                template: cql::CREATE_TABLE,
            },
            TableSchema {
                location: self.waiting_line().location,
                template: crate::cells::scylla::CREATE_TABLE,
            },
        ]
    }

    /// Where the lease table's waiting line lives: plain cells in `<table>_waiting`, beside
    /// the lease table (see [`ScyllaOptions::cells_in`] for the level).
    pub fn waiting_line(&self) -> crate::cells::scylla::CellOptions {
        self.cells_in(format!("{}{WAITING_SUFFIX}", self.table))
    }

    /// Plain cells in `table`, in this keyspace, with this routing and replication, read and
    /// written at [`ScyllaOptions::cells_consistency`].
    pub fn cells_in(&self, table: impl Into<String>) -> crate::cells::scylla::CellOptions {
        crate::cells::scylla::CellOptions {
            location: ScyllaOptions {
                table: table.into(),
                ..self.clone()
            },
            consistency: self.cells_consistency(),
        }
    }

    /// The level plain cells are read and written at, from [`ScyllaOptions::consistency`].
    /// Cells carry no fencing token, so a lock on them excludes only if every read meets every
    /// write of every contender, across the Paxos scope: with `SERIAL`, `LOCAL_QUORUM`
    /// becomes `QUORUM` and `LOCAL_ONE` becomes `ONE` (one node: the single-node case);
    /// with `LOCAL_SERIAL` the scope is one data centre and local levels stay. `ANY`, which
    /// cannot read, becomes `ONE`; every other level is kept.
    pub fn cells_consistency(&self) -> Consistency {
        let cluster_wide = self.serial_consistency == SerialConsistency::Serial;
        match self.consistency {
            Consistency::Any => Consistency::One,
            Consistency::LocalQuorum if cluster_wide => Consistency::Quorum,
            Consistency::LocalOne if cluster_wide => Consistency::One,
            level => level,
        }
    }
}

/// Creating the schema failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SchemaError {
    /// Bad options; nothing was sent.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyspace refuses LWTs: it uses ScyllaDB tablets, which ScyllaDB 6.0 to 2025.3 do
    /// not support with LWTs. Recreate it with `tablets = {'enabled': false}` (what
    /// [`ScyllaOptions::create_schema`] does) or upgrade to ScyllaDB 2025.4 or later.
    #[error(
        "keyspace {keyspace} uses ScyllaDB tablets and this ScyllaDB refuses LWTs on them ({message}); recreate it with tablets = {{'enabled': false}} or upgrade to ScyllaDB 2025.4+"
    )]
    LwtsRejectedByTablets {
        /// The keyspace.
        keyspace: String,
        /// The server's answer to a probing SERIAL read.
        message: String,
    },
}

fn check_identifier(field: &'static str, name: &str) -> Result<(), InvalidArgument> {
    if name.is_empty() {
        return Err(InvalidArgument::Empty { field });
    }
    if name.len() > 48 {
        return Err(InvalidArgument::TooLong {
            field,
            len: name.len(),
            max: 48,
        });
    }
    let mut chars = name.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(invalid(field, "use a letter, then letters, digits or '_'"));
    }
    Ok(())
}

fn invalid(field: &'static str, reason: &str) -> InvalidArgument {
    InvalidArgument::Invalid {
        field,
        reason: reason.to_owned(),
    }
}

mod create;
pub use create::TableSchema;

#[cfg(test)]
mod tests;
