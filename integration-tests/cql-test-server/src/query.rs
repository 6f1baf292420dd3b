//! Reads (`SELECT`) and the metadata a `PREPARE` answers with.

use std::collections::HashMap;

use super::engine::{DbErr, Engine, Table};
use super::exec::Rows;
use super::parser::{Condition, Conditions, Selector, Statement, Term};
use super::values::CqlType;

/// Column names and types.
pub type Columns = Vec<(String, CqlType)>;

/// What a `PREPARE` answers: the bind markers, which of them bind the partition key, and the
/// result columns of a `SELECT`.
#[derive(Debug, Clone)]
pub struct BindSpecs {
    /// Marker names and types, in marker order.
    pub markers: Columns,
    /// Indexes of the markers that bind the partition key.
    pub pk_indexes: Vec<u16>,
    /// Result columns of a `SELECT` (no rows).
    pub result: Option<Rows>,
}

impl Engine {
    /// Bind-marker names and types of a statement, the indexes of markers that bind the
    /// partition key, and the result columns of a SELECT.
    pub fn bind_specs(&self, statement: &Statement) -> Result<BindSpecs, DbErr> {
        let mut markers: HashMap<usize, (String, CqlType)> = HashMap::new();
        let mut pk_markers = Vec::new();
        let (table_ref, using) = match statement {
            Statement::Select { table, .. } => (table, None),
            Statement::Update { table, using, .. }
            | Statement::Insert { table, using, .. }
            | Statement::Delete { table, using, .. } => (table, Some(using)),
            _ => {
                return Ok(BindSpecs {
                    markers: Vec::new(),
                    pk_indexes: Vec::new(),
                    result: None,
                });
            }
        };
        let key = self.table_key(table_ref)?;
        let table = self.table(&key)?;
        let mut note = |term: &Term, name: &str, ty: CqlType, is_pk: bool| {
            if let Term::Marker(i) = term {
                markers.insert(*i, (name.to_owned(), ty));
                if is_pk {
                    pk_markers.push(*i as u16);
                }
            }
        };
        if let Some(using) = using {
            if let Some(t) = &using.ttl {
                note(t, "[ttl]", CqlType::Int, false);
            }
            if let Some(t) = &using.timestamp {
                note(t, "[timestamp]", CqlType::BigInt, false);
            }
        }
        let relation_terms = |rels: &[super::parser::Relation]| -> Vec<(String, Term)> {
            rels.iter()
                .flat_map(|r| r.terms.iter().map(|t| (r.column.clone(), t.clone())))
                .collect()
        };
        let mut pairs: Vec<(String, Term)> = match statement {
            Statement::Select { relations, .. } | Statement::Delete { relations, .. } => {
                relation_terms(relations)
            }
            Statement::Update {
                assignments,
                relations,
                ..
            } => {
                let mut v = assignments.clone();
                v.extend(relation_terms(relations));
                v
            }
            Statement::Insert { assignments, .. } => assignments.clone(),
            _ => Vec::new(),
        };
        if let Statement::Select {
            limit: Some(limit), ..
        } = statement
        {
            pairs.push(("[limit]".into(), limit.clone()));
        }
        for (col, term) in &pairs {
            let ty = if col == "[limit]" {
                CqlType::Int
            } else {
                table.column_type(col)?.clone()
            };
            note(term, col, ty, *col == table.partition_key);
        }
        if let Statement::Update {
            conditions: Conditions::Columns(c),
            ..
        }
        | Statement::Delete {
            conditions: Conditions::Columns(c),
            ..
        } = statement
        {
            for cond in c {
                match cond {
                    Condition::Compare(col, _, term) => {
                        note(term, col, table.column_type(col)?.clone(), false)
                    }
                    Condition::In(col, terms) => {
                        for term in terms {
                            note(term, col, table.column_type(col)?.clone(), false);
                        }
                    }
                }
            }
        }
        let mut specs = Vec::new();
        for i in 0..markers.len() {
            specs.push(
                markers
                    .remove(&i)
                    .ok_or_else(|| DbErr::syntax("bind markers out of order"))?,
            );
        }
        let result = match statement {
            Statement::Select { selectors, .. } => Some(Rows {
                keyspace: key.0.clone(),
                table: key.1.clone(),
                columns: select_columns(table, selectors)?.1,
                rows: Vec::new(),
                paging_state: None,
            }),
            _ => None,
        };
        Ok(BindSpecs {
            markers: specs,
            pk_indexes: pk_markers,
            result,
        })
    }
}

/// The selectors (`*` expanded) and the result columns they produce.
pub(super) fn select_columns(
    table: &Table,
    selectors: &[Selector],
) -> Result<(Vec<Selector>, Columns), DbErr> {
    let selectors: Vec<Selector> = if selectors.is_empty() {
        table
            .wildcard()
            .into_iter()
            .map(|(n, _)| Selector::Column(n))
            .collect()
    } else {
        selectors.to_vec()
    };
    let mut columns = Vec::new();
    for s in &selectors {
        columns.push(match s {
            Selector::Column(c) => (c.clone(), table.column_type(c)?.clone()),
            Selector::Ttl(c) => {
                table.column_type(c)?;
                (format!("ttl({c})"), CqlType::Int)
            }
            Selector::WriteTime(c) => {
                table.column_type(c)?;
                (format!("writetime({c})"), CqlType::BigInt)
            }
        });
    }
    Ok((selectors, columns))
}
