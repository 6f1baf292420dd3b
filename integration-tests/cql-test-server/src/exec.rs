//! Executing statements: dispatch, schema changes, and evaluating terms.

use scylla_cql::Consistency;
use scylla_cql::frame::response::error::{DbError, WriteType};
use scylla_cql::frame::types::SerialConsistency;

use super::engine::{DbErr, Engine, Flavor, Table};
use super::parser::{Conditions, Statement, Term};
use super::stats::PartitionId;
use super::values::{CqlType, Value};
use super::write::WritePlan;

/// Rows of a result.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// Keyspace of the columns.
    pub keyspace: String,
    /// Table of the columns.
    pub table: String,
    /// Column names and types.
    pub columns: Vec<(String, CqlType)>,
    /// Values.
    pub rows: Vec<Vec<Value>>,
    /// Where the next page starts, when there is one.
    pub paging_state: Option<Vec<u8>>,
    /// Warnings for the client (sent in the response frame, as Cassandra does).
    pub warnings: Vec<String>,
}

/// What a statement returns.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Nothing.
    Void,
    /// Rows (a SELECT, or an LWT's `[applied]` row).
    Rows(Rows),
    /// A schema change.
    SchemaChange {
        /// `KEYSPACE` or `TABLE`.
        target: &'static str,
        /// Keyspace.
        keyspace: String,
        /// Table, for tables.
        name: Option<String>,
    },
    /// `USE`
    SetKeyspace(String),
}

/// Bound values of one statement (`None`: null).
pub type Bound = [Option<Vec<u8>>];

/// How a request asks for its statement to run.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The statement text, for messages (shared, not copied per request).
    pub text: std::sync::Arc<str>,
    /// Sent at `SERIAL` / `LOCAL_SERIAL` (a read is then a Paxos round).
    pub serial_read: bool,
    /// Rows per page (`None` or negative: all).
    pub page_size: Option<i32>,
    /// Where to resume.
    pub paging_state: Option<Vec<u8>>,
    /// The request's default timestamp (client-side timestamps).
    pub timestamp: Option<i64>,
    /// The request's consistency.
    pub consistency: Consistency,
    /// The request's serial consistency (`None`: `SERIAL`).
    pub serial: Option<SerialConsistency>,
    /// The Paxos contention model already ran this request's rounds and won one: the engine
    /// applies it without counting another operation.
    pub paxos_settled: bool,
}

impl Request {
    /// The level of the request's Paxos phase, as error answers carry it.
    pub fn paxos_consistency(&self) -> Consistency {
        match (self.serial_read, self.serial) {
            (true, _) => self.consistency,
            (false, Some(SerialConsistency::LocalSerial)) => Consistency::LocalSerial,
            (false, _) => Consistency::Serial,
        }
    }
}

/// The answer to a Paxos operation that ran out of contention time, as a Cassandra 4.0
/// coordinator words it: a CAS `WriteTimeout` at the Paxos level for a write (its outcome is
/// unknown to the client), a `ReadTimeout` at the request's level for a SERIAL read.
pub(super) fn contention_timeout(request: &Request, contentions: usize) -> DbErr {
    if request.serial_read {
        DbErr {
            error: DbError::ReadTimeout {
                consistency: request.consistency,
                received: 0,
                required: 1,
                data_present: false,
            },
            message: "Operation timed out - received only 0 responses.".into(),
        }
    } else {
        DbErr {
            error: DbError::WriteTimeout {
                consistency: request.paxos_consistency(),
                received: 0,
                required: 1,
                write_type: WriteType::Cas,
            },
            message: format!("CAS operation timed out - encountered contentions: {contentions}"),
        }
    }
}

pub(super) fn eval(term: &Term, ty: &CqlType, bound: &Bound) -> Result<Value, DbErr> {
    Ok(match term {
        Term::Marker(i) => match bound.get(*i) {
            None => return Err(DbErr::invalid(format!("missing value for bind marker {i}"))),
            Some(None) => Value::Null,
            Some(Some(bytes)) => Value::decode(ty, bytes).map_err(DbErr::invalid)?,
        },
        Term::Null => Value::Null,
        Term::Bool(b) if *ty == CqlType::Boolean => Value::Bool(*b),
        Term::Str(s) if matches!(ty, CqlType::Text | CqlType::Ascii) => Value::Text(s.clone()),
        Term::Num(n) if *ty == CqlType::Int => Value::Int(
            n.parse()
                .map_err(|_| DbErr::invalid(format!("invalid int {n}")))?,
        ),
        Term::Num(n) if matches!(ty, CqlType::BigInt | CqlType::Timestamp) => Value::BigInt(
            n.parse()
                .map_err(|_| DbErr::invalid(format!("invalid bigint {n}")))?,
        ),
        other => {
            return Err(DbErr::invalid(format!(
                "Invalid literal {other:?} for type {ty:?}"
            )));
        }
    })
}

impl Engine {
    /// The partition whose Paxos rounds a request runs, when it is an LWT (a conditional
    /// modification or batch) or a SERIAL read; `None` for anything else. Fails as the
    /// request would, for the errors a coordinator answers before any round.
    pub fn paxos_target(
        &self,
        statements: &[(&Statement, &Bound)],
        is_batch: bool,
        request: &Request,
    ) -> Result<Option<PartitionId>, DbErr> {
        let partition = |table: (String, String), pk: &Value| (table.0, table.1, pk.display());
        match statements {
            [(select @ Statement::Select { .. }, bound)] if !is_batch => {
                if !request.serial_read {
                    return Ok(None);
                }
                let (plan, serial) = self.plan_select(select, bound, request)?;
                Ok(serial.map(|pk| partition(plan.table().clone(), &pk)))
            }
            [
                (Statement::Insert { .. } | Statement::Update { .. } | Statement::Delete { .. }, _),
                ..,
            ]
            | [_, _, ..] => {
                // Plain writes are resolved once, when they run.
                if !statements.iter().any(|(s, _)| is_conditional(s)) {
                    return Ok(None);
                }
                match self.plan_writes(statements, is_batch)? {
                    WritePlan::Plain(_) => Ok(None),
                    WritePlan::Cas { table, pk, .. } => Ok(Some(partition(table, &pk))),
                }
            }
            _ => Ok(None),
        }
    }

    /// Runs one statement.
    pub fn execute(
        &mut self,
        statement: &Statement,
        bound: &Bound,
        request: &Request,
    ) -> Result<Outcome, DbErr> {
        match statement {
            Statement::Select { .. } => self.select(statement, bound, request),
            Statement::CreateKeyspace {
                name,
                if_not_exists,
                replication,
                tablets,
            } => {
                if self.keyspaces.contains_key(name) {
                    return if *if_not_exists {
                        Ok(Outcome::Void)
                    } else {
                        Err(already_exists(name, ""))
                    };
                }
                let Some(class) = replication.iter().find(|(k, _)| k == "class") else {
                    return Err(DbErr {
                        error: DbError::ConfigError,
                        message: "Missing replication strategy class".into(),
                    });
                };
                let network = class.1.ends_with("NetworkTopologyStrategy");
                let tablets = match (self.flavor, tablets) {
                    (Flavor::Cassandra, Some(_)) => {
                        return Err(DbErr::syntax("Unknown property 'tablets'"));
                    }
                    (Flavor::Cassandra, None) => false,
                    (Flavor::Scylla, Some(true)) if !network => {
                        return Err(DbErr {
                            error: DbError::ConfigError,
                            message: "Tablets are only supported with NetworkTopologyStrategy"
                                .into(),
                        });
                    }
                    // ScyllaDB 6.0 to 2025.3: tablets by default where the strategy allows.
                    (Flavor::Scylla, t) => t.unwrap_or(network),
                };
                self.add_keyspace(name, replication.clone(), tablets);
                Ok(Outcome::SchemaChange {
                    target: "KEYSPACE",
                    keyspace: name.clone(),
                    name: None,
                })
            }
            Statement::CreateTable {
                table,
                if_not_exists,
                columns,
                partition_key,
                clustering,
                statics,
                default_ttl,
                gc_grace,
            } => {
                let ks = table
                    .keyspace
                    .clone()
                    .ok_or_else(|| DbErr::invalid("No keyspace has been specified"))?;
                if !self.keyspaces.contains_key(&ks) {
                    return Err(DbErr::invalid(format!("Keyspace '{ks}' doesn't exist")));
                }
                let key = (ks.clone(), table.table.clone());
                if self.tables.contains_key(&key) {
                    return if *if_not_exists {
                        Ok(Outcome::Void)
                    } else {
                        Err(already_exists(&ks, &table.table))
                    };
                }
                let mut seen = std::collections::HashSet::new();
                let keys_defined = std::iter::once(partition_key)
                    .chain(clustering.iter().map(|(c, _)| c))
                    .all(|k| columns.iter().any(|(n, _)| n == k));
                if !columns.iter().all(|(n, _)| seen.insert(n)) || !keys_defined {
                    return Err(DbErr::invalid(
                        "duplicate columns, or no definition for a key column",
                    ));
                }
                if !statics.is_empty() && clustering.is_empty() {
                    return Err(DbErr::invalid(
                        "Static columns are only useful (and thus allowed) if the table has at least one clustering column",
                    ));
                }
                self.tables.insert(
                    key,
                    Table {
                        columns: columns.clone(),
                        partition_key: partition_key.clone(),
                        clustering: clustering.clone(),
                        statics: statics.iter().cloned().collect(),
                        default_ttl: *default_ttl,
                        gc_grace: gc_grace.unwrap_or(self.options.gc_grace_seconds),
                        partitions: Default::default(),
                        system: false,
                    },
                );
                Ok(Outcome::SchemaChange {
                    target: "TABLE",
                    keyspace: ks,
                    name: Some(table.table.clone()),
                })
            }
            Statement::Use(ks) if self.keyspaces.contains_key(ks) => {
                Ok(Outcome::SetKeyspace(ks.clone()))
            }
            Statement::Use(ks) => Err(DbErr::invalid(format!("Keyspace '{ks}' does not exist"))),
            modification => self.batch(&[(modification, bound)], false, request),
        }
    }
}

/// Whether a statement carries an `IF` condition.
fn is_conditional(statement: &Statement) -> bool {
    match statement {
        Statement::Insert { conditions, .. }
        | Statement::Update { conditions, .. }
        | Statement::Delete { conditions, .. } => !matches!(conditions, Conditions::None),
        _ => false,
    }
}

fn already_exists(keyspace: &str, table: &str) -> DbErr {
    let what = if table.is_empty() {
        format!("keyspace {keyspace}")
    } else {
        format!("table {keyspace}.{table}")
    };
    DbErr {
        error: DbError::AlreadyExists {
            keyspace: keyspace.into(),
            table: table.into(),
        },
        message: format!("Cannot add existing {what}"),
    }
}
