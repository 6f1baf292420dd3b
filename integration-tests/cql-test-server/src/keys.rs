//! `WHERE` clauses on the primary key: which partitions, and which slice of clustering keys.

use super::engine::{Bound as SliceBound, Component, DbErr, Slice, Table};
use super::exec::{Bound, eval};
use super::parser::{Op, Relation};
use super::values::Value;

/// What a `WHERE` clause selects.
#[derive(Debug, Clone)]
pub struct Where {
    /// Partition keys (several for `IN`); `None`: every partition.
    pub partitions: Option<Vec<Value>>,
    /// Clustering columns fixed by `=`, in order.
    pub prefix: Vec<Component>,
    /// The clustering keys selected, in table order.
    pub slice: Slice,
    /// A range relation was given on a clustering column.
    pub has_range: bool,
}

impl Where {
    /// Whether the clause names one whole row.
    pub fn is_full_row(&self, table: &Table) -> bool {
        !self.has_range && self.prefix.len() == table.clustering.len()
    }
}

/// Reads a `WHERE` clause; `is_read` selects the messages of a `SELECT`.
pub fn restrict(
    table: &Table,
    relations: &[Relation],
    bound: &Bound,
    is_read: bool,
) -> Result<Where, DbErr> {
    let mut partitions = None;
    for r in relations {
        table.column_type(&r.column)?;
        if !table.is_key(&r.column) {
            return Err(DbErr::invalid(if is_read {
                "Cannot execute this query as it might involve data filtering and thus may have unpredictable performance. If you want to execute this query despite the performance unpredictability, use ALLOW FILTERING".to_owned()
            } else {
                format!(
                    "Non PRIMARY KEY columns found in where clause: {}",
                    r.column
                )
            }));
        }
        if r.column == table.partition_key {
            if r.op != Op::Eq || (r.is_in && !is_read) {
                return Err(DbErr::invalid(format!(
                    "Only EQ and IN relation are supported on the partition key (unless you use the token() function); IN only in SELECT: {}",
                    r.column
                )));
            }
            let ty = table.column_type(&r.column)?;
            let keys = r
                .terms
                .iter()
                .map(|t| eval(t, ty, bound))
                .collect::<Result<Vec<_>, _>>()?;
            if keys.contains(&Value::Null) {
                return Err(DbErr::invalid("Invalid null value for partition key"));
            }
            partitions = Some(keys);
        }
    }
    let mut prefix = Vec::new();
    let (mut lower, mut upper) = (None, None);
    let mut range_col: Option<&str> = None;
    for (col, desc) in &table.clustering {
        let rels: Vec<&Relation> = relations.iter().filter(|r| r.column == *col).collect();
        if rels.is_empty() {
            break;
        }
        if let Some(prev) = range_col {
            return Err(DbErr::invalid(format!(
                "Clustering column \"{col}\" cannot be restricted (preceding column \"{prev}\" is restricted by a non-EQ relation)"
            )));
        }
        let ty = table.column_type(col)?;
        for r in rels {
            if r.is_in {
                return Err(DbErr::invalid(
                    "IN on clustering columns is not supported by the CQL test server",
                ));
            }
            let v = eval(&r.terms[0], ty, bound)?;
            if v == Value::Null {
                return Err(DbErr::invalid(format!(
                    "Invalid null value in condition for column {col}"
                )));
            }
            let comp = Component {
                value: v,
                desc: *desc,
            };
            match r.op {
                Op::Eq => prefix.push(comp),
                Op::Gt | Op::Gte => {
                    lower = Some((comp, r.op == Op::Gte));
                    range_col = Some(col);
                }
                Op::Lt | Op::Lte => {
                    upper = Some((comp, r.op == Op::Lte));
                    range_col = Some(col);
                }
                Op::Neq => return Err(DbErr::invalid("Unsupported \"!=\" relation")),
            }
        }
    }
    let restricted = relations
        .iter()
        .filter(|r| table.clustering.iter().any(|(c, _)| *c == r.column))
        .count();
    let used = prefix.len() + usize::from(lower.is_some()) + usize::from(upper.is_some());
    if restricted != used {
        return Err(DbErr::invalid(
            "PRIMARY KEY column cannot be restricted as a preceding column is not restricted (or is restricted twice)",
        ));
    }
    if partitions.is_none() && (restricted > 0 || !is_read) {
        return Err(DbErr::invalid(format!(
            "Missing mandatory PRIMARY KEY part {}",
            table.partition_key
        )));
    }
    let end_of = |b: Option<(Component, bool)>| match b {
        None if prefix.is_empty() => SliceBound::Unbounded,
        None => SliceBound::Inclusive(prefix.clone()),
        Some((c, inclusive)) => {
            let mut p = prefix.clone();
            p.push(c);
            if inclusive {
                SliceBound::Inclusive(p)
            } else {
                SliceBound::Exclusive(p)
            }
        }
    };
    let has_range = range_col.is_some();
    let desc = lower
        .as_ref()
        .or(upper.as_ref())
        .is_some_and(|(c, _)| c.desc);
    let (start, end) = if desc {
        (end_of(upper), end_of(lower))
    } else {
        (end_of(lower), end_of(upper))
    };
    Ok(Where {
        partitions,
        prefix,
        slice: Slice { start, end },
        has_range,
    })
}
