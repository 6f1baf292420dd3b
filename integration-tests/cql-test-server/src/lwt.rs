//! What makes a write lightweight: resolved mutations, their conditions, and the
//! `[applied]` row they answer with.

use super::engine::{Clustering, DbErr, Engine, Flavor, Row, Slice, Table};
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
    /// The `[applied]` rows of a conditional statement or batch, shaped as each database
    /// returns them. Columns: the primary key in a batch, then the conditioned columns (all
    /// columns for `IF NOT EXISTS`, and in Scylla mode for `IF EXISTS` too).
    /// Cassandra: `[applied]` alone when applied or when no conditioned row exists, else one
    /// row per existing conditioned row. ScyllaDB: always the old values, one row per
    /// statement of a batch.
    pub(super) fn cas_result(
        &self,
        mutations: &[Mutation],
        olds: &[Option<Row>],
        applied: bool,
        is_batch: bool,
    ) -> Result<Rows, DbErr> {
        let first = &mutations[0];
        let table = self.table(&first.table)?;
        let mut names: Vec<String> = Vec::new();
        if is_batch {
            names.push(table.partition_key.clone());
            names.extend(table.clustering.iter().map(|(c, _)| c.clone()));
        }
        for m in mutations {
            match &m.check {
                Check::NotExists => names.extend(table.wildcard().into_iter().map(|(n, _)| n)),
                Check::Exists if self.flavor == Flavor::Scylla => {
                    names.extend(table.wildcard().into_iter().map(|(n, _)| n));
                }
                Check::Columns(conds) => names.extend(conds.iter().map(|c| match c {
                    Cond::Compare(col, ..) | Cond::In(col, _) => col.clone(),
                })),
                Check::None | Check::Exists => {}
            }
        }
        let mut seen = std::collections::HashSet::new();
        names.retain(|n| seen.insert(n.clone()));
        let shown: Vec<(&Mutation, Option<&Row>)> = match self.flavor {
            Flavor::Cassandra if applied => Vec::new(),
            Flavor::Cassandra => {
                let mut places = Vec::new();
                mutations
                    .iter()
                    .zip(olds)
                    .filter(|(m, old)| !matches!(m.check, Check::None) && old.is_some())
                    .filter(|(m, _)| {
                        let place = row_key(&m.place);
                        let new = !places.contains(&place);
                        places.push(place);
                        new
                    })
                    .map(|(m, old)| (m, old.as_ref()))
                    .collect()
            }
            Flavor::Scylla if is_batch => mutations
                .iter()
                .zip(olds.iter().map(Option::as_ref))
                .collect(),
            Flavor::Scylla => vec![(first, olds[0].as_ref())],
        };
        let mut columns: Vec<(String, CqlType)> = vec![("[applied]".into(), CqlType::Boolean)];
        if shown.is_empty() {
            return Ok(Rows {
                keyspace: first.table.0.clone(),
                table: first.table.1.clone(),
                columns,
                rows: vec![vec![Value::Bool(applied)]],
                paging_state: None,
                warnings: Vec::new(),
            });
        }
        for name in &names {
            columns.push((name.clone(), table.column_type(name)?.clone()));
        }
        let rows = shown
            .into_iter()
            .map(|(m, old)| {
                let mut values = vec![Value::Bool(applied)];
                values.extend(names.iter().map(|name| old_value(table, name, m, old)));
                values
            })
            .collect();
        Ok(Rows {
            keyspace: first.table.0.clone(),
            table: first.table.1.clone(),
            columns,
            rows,
            paging_state: None,
            warnings: Vec::new(),
        })
    }
}

/// Which row of the partition a mutation conditions (`None`: the static row).
fn row_key(place: &Place) -> Option<Clustering> {
    match place {
        Place::Row(ck) => Some(ck.clone()),
        _ => None,
    }
}

/// The old value of `name` in the row `m` conditions (null when that row does not exist).
fn old_value(table: &Table, name: &str, m: &Mutation, old: Option<&Row>) -> Value {
    if old.is_none() {
        return Value::Null;
    }
    if name == table.partition_key {
        return m.pk.clone();
    }
    if let Some(i) = table.clustering.iter().position(|(c, _)| c == name) {
        return match &m.place {
            Place::Row(ck) => ck.0.get(i).map_or(Value::Null, |c| c.value.clone()),
            _ => Value::Null,
        };
    }
    old.and_then(|r| r.cells.get(name))
        .and_then(|c| c.value.clone())
        .unwrap_or(Value::Null)
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
