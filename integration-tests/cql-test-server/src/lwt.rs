//! What makes a write lightweight: resolved mutations, their conditions, and the
//! `[applied]` row they answer with.

use super::engine::{Clustering, DbErr, Engine, Flavor, Row, Slice};
use super::exec::Rows;
use super::parser::Op;
use super::values::{CqlType, Value};

pub(super) enum Cond {
    Compare(String, Op, Value),
    In(String, Vec<Value>),
}

pub(super) enum Effect {
    Set {
        cells: Vec<(String, Value)>,
        marker: bool,
        ttl: Option<i64>,
    },
    DeleteColumns(Vec<String>),
    /// The whole place (row, range or partition).
    Delete,
}

/// Where a mutation lands in its partition.
pub(super) enum Place {
    Row(Clustering),
    Range(Slice),
    Partition,
    Statics,
}

pub(super) enum Check {
    None,
    Exists,
    NotExists,
    Columns(Vec<Cond>),
}

/// A modification with its values resolved.
pub(super) struct Mutation {
    pub table: (String, String),
    pub pk: Value,
    pub place: Place,
    pub effect: Effect,
    pub check: Check,
    /// `USING TIMESTAMP`
    pub timestamp: Option<i64>,
}

impl Engine {
    /// The `[applied]` row. Cassandra: `[applied]` alone when applied or when the row is
    /// missing, else the conditioned columns (all columns for `IF NOT EXISTS`, plus the key
    /// in a batch). Scylla: those columns always, with the old values.
    pub(super) fn cas_result(
        &self,
        first: &Mutation,
        applied: bool,
        old: Option<&Row>,
        mutations: &[Mutation],
        is_batch: bool,
    ) -> Result<Rows, DbErr> {
        let key = &first.table;
        let pk = &first.pk;
        let table = self.table(key)?;
        let mut columns: Vec<(String, CqlType)> = vec![("[applied]".into(), CqlType::Boolean)];
        let mut values = vec![Value::Bool(applied)];
        let show = match self.flavor {
            Flavor::Cassandra => !applied && old.is_some(),
            Flavor::Scylla => true,
        };
        if show {
            let mut names: Vec<String> = Vec::new();
            if is_batch {
                names.push(table.partition_key.clone());
                names.extend(table.clustering.iter().map(|(c, _)| c.clone()));
            }
            for m in mutations {
                match &m.check {
                    Check::NotExists => names.extend(table.wildcard().into_iter().map(|(n, _)| n)),
                    Check::Columns(conds) => names.extend(conds.iter().map(|c| match c {
                        Cond::Compare(col, ..) | Cond::In(col, _) => col.clone(),
                    })),
                    Check::None | Check::Exists => {}
                }
            }
            let mut seen = std::collections::HashSet::new();
            names.retain(|n| seen.insert(n.clone()));
            for name in names {
                let clustering_at = table.clustering.iter().position(|(c, _)| *c == name);
                let value = if name == table.partition_key {
                    if old.is_some() {
                        pk.clone()
                    } else {
                        Value::Null
                    }
                } else if let Some(i) = clustering_at {
                    match (&first.place, old) {
                        (Place::Row(ck), Some(_)) => {
                            ck.0.get(i).map_or(Value::Null, |c| c.value.clone())
                        }
                        _ => Value::Null,
                    }
                } else {
                    old.and_then(|r| r.cells.get(&name))
                        .and_then(|c| c.value.clone())
                        .unwrap_or(Value::Null)
                };
                columns.push((name.clone(), table.column_type(&name)?.clone()));
                values.push(value);
            }
        }
        Ok(Rows {
            keyspace: key.0.clone(),
            table: key.1.clone(),
            columns,
            rows: vec![values],
            paging_state: None,
        })
    }
}

pub(super) fn check(check: &Check, row: Option<&Row>) -> Result<bool, DbErr> {
    Ok(match check {
        Check::None => true,
        Check::Exists => row.is_some(),
        Check::NotExists => row.is_none(),
        Check::Columns(conds) => {
            let stored = |col: &str| {
                row.and_then(|r| r.cells.get(col))
                    .and_then(|c| c.value.as_ref())
            };
            let mut all = true;
            for c in conds {
                all &= match c {
                    Cond::Compare(col, op, value) => compare(*op, value, stored(col))?,
                    Cond::In(col, values) => {
                        let mut any = false;
                        for v in values {
                            any |= compare(Op::Eq, v, stored(col))?;
                        }
                        any
                    }
                };
            }
            all
        }
    })
}

/// Cassandra's condition semantics: a null condition value only works with `=` / `!=`; a
/// missing stored value satisfies only `!=`.
fn compare(op: Op, value: &Value, stored: Option<&Value>) -> Result<bool, DbErr> {
    if *value == Value::Null {
        return match op {
            Op::Eq => Ok(stored.is_none()),
            Op::Neq => Ok(stored.is_some()),
            _ => Err(DbErr::invalid(format!(
                "Invalid comparison with null for operator \"{op:?}\""
            ))),
        };
    }
    let Some(stored) = stored else {
        return Ok(op == Op::Neq);
    };
    let ord = stored
        .compare(value)
        .ok_or_else(|| DbErr::invalid("type mismatch in condition"))?;
    use std::cmp::Ordering::*;
    Ok(match op {
        Op::Eq => ord == Equal,
        Op::Neq => ord != Equal,
        Op::Lt => ord == Less,
        Op::Lte => ord != Greater,
        Op::Gt => ord == Greater,
        Op::Gte => ord != Less,
    })
}
