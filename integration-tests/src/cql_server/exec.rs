//! Executing statements: reads, writes, LWTs and conditional batches, with Cassandra's rules.

use scylla_cql::frame::response::error::DbError;

use super::engine::{Cell, DbErr, Engine, Liveness, Row, Table};
use super::lwt::{Check, Cond, Effect, Mutation, check};
use super::parser::{Condition, Conditions, Statement, Term, Using};
use super::values::{CqlType, Value};

/// Longest TTL Cassandra accepts.
const MAX_TTL: i64 = 630_720_000;

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
    /// Runs one statement.
    pub fn execute(&mut self, statement: &Statement, bound: &Bound) -> Result<Outcome, DbErr> {
        match statement {
            Statement::Select {
                selectors,
                table,
                relations,
            } => self.select(selectors, table, relations, bound),
            Statement::CreateKeyspace {
                name,
                if_not_exists,
                replication,
            } => {
                if self.keyspaces.contains(name) {
                    return if *if_not_exists {
                        Ok(Outcome::Void)
                    } else {
                        Err(already_exists(name, ""))
                    };
                }
                if !replication.iter().any(|(k, _)| k == "class") {
                    return Err(DbErr {
                        error: DbError::ConfigError,
                        message: "Missing replication strategy class".into(),
                    });
                }
                self.add_keyspace(name, replication.clone());
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
                default_ttl,
            } => {
                let ks = table
                    .keyspace
                    .clone()
                    .ok_or_else(|| DbErr::invalid("No keyspace has been specified"))?;
                if !self.keyspaces.contains(&ks) {
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
                if !columns.iter().all(|(n, _)| seen.insert(n)) || !seen.contains(partition_key) {
                    return Err(DbErr::invalid(
                        "duplicate columns, or no definition for the key",
                    ));
                }
                self.tables.insert(
                    key,
                    Table {
                        columns: columns.clone(),
                        partition_key: partition_key.clone(),
                        default_ttl: *default_ttl,
                        rows: Default::default(),
                        system: false,
                    },
                );
                Ok(Outcome::SchemaChange {
                    target: "TABLE",
                    keyspace: ks,
                    name: Some(table.table.clone()),
                })
            }
            Statement::Use(ks) if self.keyspaces.contains(ks) => {
                Ok(Outcome::SetKeyspace(ks.clone()))
            }
            Statement::Use(ks) => Err(DbErr::invalid(format!("Keyspace '{ks}' does not exist"))),
            modification => self.batch(&[(modification, bound)], false),
        }
    }

    /// Runs modifications atomically; `is_batch` shapes the LWT result as Cassandra does.
    pub fn batch(
        &mut self,
        statements: &[(&Statement, &Bound)],
        is_batch: bool,
    ) -> Result<Outcome, DbErr> {
        let mutations = statements
            .iter()
            .map(|(s, b)| self.resolve(s, b))
            .collect::<Result<Vec<_>, _>>()?;
        let conditional = mutations.iter().any(|m| !matches!(m.check, Check::None));
        if !conditional {
            if mutations.iter().any(|m| m.custom_timestamp) {
                return Err(DbErr::invalid(
                    "USING TIMESTAMP is not supported by the CQL test server",
                ));
            }
            let ts = self.next_timestamp();
            for m in &mutations {
                self.apply(m, ts);
            }
            return Ok(Outcome::Void);
        }
        if mutations.iter().any(|m| m.custom_timestamp) {
            let what = if is_batch {
                "conditional BATCH"
            } else {
                "conditional updates"
            };
            return Err(DbErr::invalid(format!(
                "Cannot provide custom timestamp for {what}"
            )));
        }
        let (table, pk) = (mutations[0].table.clone(), mutations[0].pk.clone());
        if mutations.iter().any(|m| m.table != table) {
            return Err(DbErr::invalid(
                "Batch with conditions cannot span multiple tables",
            ));
        }
        if mutations.iter().any(|m| m.pk != pk) {
            return Err(DbErr::invalid(
                "Batch with conditions cannot span multiple partitions",
            ));
        }
        let old = self.live_row(&table, &pk);
        let mut applied = true;
        for m in &mutations {
            applied &= check(&m.check, old.as_ref())?;
        }
        let result = self.cas_result(&table, &pk, applied, old.as_ref(), &mutations, is_batch)?;
        if applied {
            let ts = self.next_timestamp();
            for m in &mutations {
                self.apply(m, ts);
            }
        }
        Ok(Outcome::Rows(result))
    }

    fn resolve(&self, statement: &Statement, bound: &Bound) -> Result<Mutation, DbErr> {
        let (table_ref, relations, conditions, using) = match statement {
            Statement::Update {
                table,
                relations,
                conditions,
                using,
                ..
            } => (table, relations.as_slice(), conditions, using),
            Statement::Delete {
                table,
                relations,
                conditions,
                using,
                ..
            } => (table, relations.as_slice(), conditions, using),
            Statement::Insert {
                table,
                conditions,
                using,
                ..
            } => (table, &[][..], conditions, using),
            other => return Err(DbErr::invalid(format!("not a modification: {other:?}"))),
        };
        let key = self.table_key(table_ref)?;
        let table = self.table(&key)?;
        if table.system {
            return Err(DbErr {
                error: DbError::Unauthorized,
                message: format!("{} is a system table", key.1),
            });
        }
        let pk_type = table.column_type(&table.partition_key)?.clone();
        let pk_term = match statement {
            Statement::Insert { assignments, .. } => assignments
                .iter()
                .find(|(c, _)| *c == table.partition_key)
                .map(|(_, t)| t),
            _ => {
                if let Some((c, _)) = relations.iter().find(|(c, _)| *c != table.partition_key) {
                    return Err(DbErr::invalid(format!(
                        "Non PRIMARY KEY columns found in where clause: {c}"
                    )));
                }
                relations.first().map(|(_, t)| t)
            }
        };
        let pk_term = pk_term.ok_or_else(|| {
            DbErr::invalid(format!(
                "Missing mandatory PRIMARY KEY part {}",
                table.partition_key
            ))
        })?;
        let pk = eval(pk_term, &pk_type, bound)?;
        if pk == Value::Null {
            return Err(DbErr::invalid("Invalid null value for partition key"));
        }
        let ttl = self.ttl(using, bound)?;
        let effect = match statement {
            Statement::Update { assignments, .. } | Statement::Insert { assignments, .. } => {
                let mut cells = Vec::new();
                for (col, term) in assignments {
                    if *col == table.partition_key {
                        if matches!(statement, Statement::Update { .. }) {
                            return Err(DbErr::invalid(format!(
                                "PRIMARY KEY part {col} found in SET part"
                            )));
                        }
                        continue;
                    }
                    cells.push((col.clone(), eval(term, table.column_type(col)?, bound)?));
                }
                Effect::Set {
                    cells,
                    marker: matches!(statement, Statement::Insert { .. }),
                    ttl,
                }
            }
            Statement::Delete { columns, .. } if columns.is_empty() => Effect::DeleteRow,
            Statement::Delete { columns, .. } => {
                for c in columns {
                    table.column_type(c)?;
                    if *c == table.partition_key {
                        return Err(DbErr::invalid(format!(
                            "Invalid identifier {c} for deletion (should not be a PRIMARY KEY part)"
                        )));
                    }
                }
                Effect::DeleteColumns(columns.clone())
            }
            _ => unreachable!("filtered above"),
        };
        let check = match conditions {
            Conditions::None => Check::None,
            Conditions::Exists => Check::Exists,
            Conditions::NotExists => Check::NotExists,
            Conditions::Columns(conds) => Check::Columns(
                conds
                    .iter()
                    .map(|c| match c {
                        Condition::Compare(col, op, term) => Ok(Cond::Compare(
                            col.clone(),
                            *op,
                            eval(term, table.column_type(col)?, bound)?,
                        )),
                        Condition::In(col, terms) => {
                            let ty = table.column_type(col)?;
                            Ok(Cond::In(
                                col.clone(),
                                terms
                                    .iter()
                                    .map(|t| eval(t, ty, bound))
                                    .collect::<Result<_, _>>()?,
                            ))
                        }
                    })
                    .collect::<Result<_, DbErr>>()?,
            ),
        };
        Ok(Mutation {
            table: key,
            pk,
            effect,
            check,
            custom_timestamp: using.timestamp.is_some(),
        })
    }

    fn ttl(&self, using: &Using, bound: &Bound) -> Result<Option<i64>, DbErr> {
        let Some(term) = &using.ttl else {
            return Ok(None);
        };
        match eval(term, &CqlType::Int, bound)? {
            Value::Int(t) if t < 0 => Err(DbErr::invalid(format!(
                "A TTL must be greater or equal to 0, but was {t}"
            ))),
            Value::Int(t) if i64::from(t) > MAX_TTL => Err(DbErr::invalid(format!(
                "ttl is too large. requested ({t}) maximum ({MAX_TTL})"
            ))),
            Value::Int(t) => Ok(Some(i64::from(t))),
            _ => Err(DbErr::invalid("Invalid null value of TTL")),
        }
    }

    fn apply(&mut self, m: &Mutation, timestamp: i64) {
        let now = self.clock.now_secs();
        let Some(table) = self.tables.get_mut(&m.table) else {
            return;
        };
        let key = m.pk.key_bytes();
        match &m.effect {
            Effect::DeleteRow => {
                table.rows.remove(&key);
            }
            Effect::DeleteColumns(cols) => {
                if let Some((_, row)) = table.rows.get_mut(&key) {
                    for c in cols {
                        row.cells.remove(c);
                    }
                }
            }
            Effect::Set { cells, marker, ttl } => {
                // An explicit TTL of 0 means "no TTL", overriding the table's default.
                let ttl = ttl.unwrap_or(i64::from(table.default_ttl));
                let live = Liveness {
                    timestamp,
                    expires_at_sec: (ttl > 0).then_some(now + ttl),
                };
                let (_, row) = table
                    .rows
                    .entry(key)
                    .or_insert_with(|| (m.pk.clone(), Row::default()));
                if *marker {
                    row.marker = Some(live);
                }
                for (col, value) in cells {
                    if *value == Value::Null {
                        row.cells.remove(col);
                    } else {
                        row.cells.insert(
                            col.clone(),
                            Cell {
                                value: value.clone(),
                                live,
                            },
                        );
                    }
                }
            }
        }
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
