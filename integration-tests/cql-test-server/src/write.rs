//! Writes: resolving a modification to a mutation, and applying it with Cassandra's
//! last-write-wins rules (tombstones included).

use scylla_cql::frame::response::error::DbError;

use super::engine::{Clustering, DbErr, Engine, Row};
use super::exec::contention_timeout;
use super::exec::{Bound, Outcome, Request, eval};
use super::keys::restrict;
use super::lwt::{Check, Cond, Effect, Mutation, Place, check};
use super::parser::{Condition, Conditions, Relation, Statement, Using};
use super::values::{CqlType, Value};

/// Longest TTL Cassandra accepts.
const MAX_TTL: i64 = 630_720_000;

/// Modifications resolved and checked: plain writes, or one conditional round.
pub(super) enum WritePlan {
    /// No condition: written at once.
    Plain(Vec<Mutation>),
    /// Conditions: one Paxos operation on one partition.
    Cas {
        mutations: Vec<Mutation>,
        table: (String, String),
        pk: Value,
    },
}

impl Engine {
    /// Resolves modifications and checks what a coordinator refuses before any Paxos round:
    /// custom timestamps on conditions, conditions spanning tables or partitions, LWTs on a
    /// tablets keyspace (ScyllaDB before 2025.4).
    pub(super) fn plan_writes(
        &self,
        statements: &[(&Statement, &Bound)],
        is_batch: bool,
    ) -> Result<WritePlan, DbErr> {
        let mutations = statements
            .iter()
            .map(|(s, b)| self.resolve(s, b))
            .collect::<Result<Vec<_>, _>>()?;
        let conditional = mutations.iter().any(|m| !matches!(m.check, Check::None));
        if !conditional {
            return Ok(WritePlan::Plain(mutations));
        }
        if mutations.iter().any(|m| m.timestamp.is_some()) {
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
        self.check_lwt_allowed(&table)?;
        Ok(WritePlan::Cas {
            mutations,
            table,
            pk,
        })
    }

    /// Runs modifications atomically; `is_batch` shapes the LWT result as Cassandra does.
    pub fn batch(
        &mut self,
        statements: &[(&Statement, &Bound)],
        is_batch: bool,
        request: &Request,
    ) -> Result<Outcome, DbErr> {
        let (mutations, table, pk) = match self.plan_writes(statements, is_batch)? {
            WritePlan::Plain(mutations) => {
                let server_ts = self.next_timestamp();
                for m in &mutations {
                    let partition = (m.table.0.clone(), m.table.1.clone(), m.pk.display());
                    *self.plain_writes.entry(partition).or_default() += 1;
                    self.apply(m, m.timestamp.or(request.timestamp).unwrap_or(server_ts));
                }
                return Ok(Outcome::Void);
            }
            WritePlan::Cas {
                mutations,
                table,
                pk,
            } => (mutations, table, pk),
        };
        let late_timeout = self.paxos_round(&table, &pk, request)?;
        let mut applied = true;
        let mut olds = Vec::with_capacity(mutations.len());
        for m in &mutations {
            let old = self.old_row(m);
            applied &= check(&m.check, old.as_ref())?;
            olds.push(old);
        }
        let result = self.cas_result(&mutations, &olds, applied, is_batch)?;
        if applied {
            let ts = self.next_timestamp();
            for m in &mutations {
                self.apply(m, ts);
            }
        }
        match late_timeout {
            Some(timeout) => Err(timeout),
            None => Ok(Outcome::Rows(result)),
        }
    }

    /// LWTs and SERIAL reads are refused on a tablets keyspace (ScyllaDB 6.0 to 2025.3).
    pub(super) fn check_lwt_allowed(&self, table: &(String, String)) -> Result<(), DbErr> {
        let tablets = self.keyspaces.get(&table.0).is_some_and(|k| k.tablets);
        if tablets && !self.options.lwt_on_tablets {
            return Err(DbErr::invalid(format!(
                "LWT is not yet supported with tablets (keyspace {})",
                table.0
            )));
        }
        Ok(())
    }

    /// Counts the Paxos operation of a request run at once, and times it out past the
    /// contention budget. A request whose rounds the contention model already ran
    /// (`paxos_settled`) is not counted again. A timed-out round is an error; with
    /// `cas_timeout_applies` it is returned as `Ok(Some(timeout))` instead, for the caller
    /// to apply the round and then answer with it (an unknown outcome).
    pub(super) fn paxos_round(
        &mut self,
        table: &(String, String),
        pk: &Value,
        request: &Request,
    ) -> Result<Option<DbErr>, DbErr> {
        if request.paxos_settled {
            return Ok(None);
        }
        let partition = (table.0.clone(), table.1.clone(), pk.display());
        let others = if self.options.paxos_contention {
            // Answered at once (an injected fault's execution): one round, uncontended, that
            // still pre-empts the rounds in flight.
            self.paxos.at_once(&partition)
        } else {
            self.paxos.begin(partition, self.options.paxos_round)
        };
        let Some(budget) = self.options.cas_contention_budget else {
            return Ok(None);
        };
        if others < budget as usize {
            return Ok(None);
        }
        self.paxos.timed_out();
        let timeout = contention_timeout(request, others);
        if self.options.cas_timeout_applies {
            Ok(Some(timeout))
        } else {
            Err(timeout)
        }
    }

    /// What a condition of `m` is checked against: its live row with the live static cells.
    fn old_row(&self, m: &Mutation) -> Option<Row> {
        let now = self.clock.now_secs();
        let partition = self
            .tables
            .get(&m.table)?
            .partitions
            .get(&m.pk.key_bytes())?;
        let statics = partition.live_statics(now);
        let row = match &m.place {
            Place::Row(ck) => partition.live_row(ck, now),
            _ => None,
        };
        match (row, statics) {
            (Some(mut r), Some(s)) => {
                r.cells.extend(s.cells);
                Some(r)
            }
            (r, s) => r.or(s),
        }
    }

    fn resolve(&self, statement: &Statement, bound: &Bound) -> Result<Mutation, DbErr> {
        let (table_ref, relations, conditions, using) = match statement {
            Statement::Update {
                table,
                relations,
                conditions,
                using,
                ..
            }
            | Statement::Delete {
                table,
                relations,
                conditions,
                using,
                ..
            } => (table, relations.clone(), conditions, using),
            Statement::Insert {
                table,
                conditions,
                using,
                assignments,
            } => (
                table,
                assignments
                    .iter()
                    .map(|(c, t)| Relation {
                        column: c.clone(),
                        op: super::parser::Op::Eq,
                        terms: vec![t.clone()],
                        is_in: false,
                    })
                    .collect(),
                conditions,
                using,
            ),
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
        let key_relations: Vec<Relation> = relations
            .iter()
            .filter(|r| !matches!(statement, Statement::Insert { .. }) || table.is_key(&r.column))
            .cloned()
            .collect();
        let place_of = restrict(table, &key_relations, bound, false)?;
        let pk = place_of
            .partitions
            .as_ref()
            .and_then(|p| p.first().cloned())
            .ok_or_else(|| DbErr::invalid("Missing mandatory PRIMARY KEY part"))?;
        let ck = Clustering(place_of.prefix.clone());
        let ttl = self.ttl(using, bound)?;
        let timestamp = match &using.timestamp {
            None => None,
            Some(t) => match eval(t, &CqlType::BigInt, bound)? {
                Value::BigInt(ts) => Some(ts),
                _ => return Err(DbErr::invalid("Invalid null value of timestamp")),
            },
        };
        let full_row = place_of.is_full_row(table);
        let (effect, place) = match statement {
            Statement::Update { assignments, .. } | Statement::Insert { assignments, .. } => {
                let mut cells = Vec::new();
                for (col, term) in assignments {
                    if table.is_key(col) {
                        if matches!(statement, Statement::Update { .. }) {
                            return Err(DbErr::invalid(format!(
                                "PRIMARY KEY part {col} found in SET part"
                            )));
                        }
                        continue;
                    }
                    cells.push((col.clone(), eval(term, table.column_type(col)?, bound)?));
                }
                let only_statics = cells.iter().all(|(c, _)| table.statics.contains(c))
                    && !table.statics.is_empty();
                let place = if full_row {
                    Place::Row(ck)
                } else if only_statics && place_of.prefix.is_empty() && !place_of.has_range {
                    Place::Statics
                } else {
                    let missing = &table.clustering[place_of
                        .prefix
                        .len()
                        .min(table.clustering.len().saturating_sub(1))]
                    .0;
                    return Err(DbErr::invalid(format!(
                        "Missing mandatory PRIMARY KEY part {missing}"
                    )));
                };
                let marker = matches!(statement, Statement::Insert { .. });
                (Effect::Set { cells, marker, ttl }, place)
            }
            Statement::Delete { columns, .. } if columns.is_empty() => {
                let place = if full_row {
                    Place::Row(ck)
                } else if place_of.prefix.is_empty() && !place_of.has_range {
                    Place::Partition
                } else {
                    Place::Range(place_of.slice.clone())
                };
                (Effect::Delete, place)
            }
            Statement::Delete { columns, .. } => {
                for c in columns {
                    table.column_type(c)?;
                    if table.is_key(c) {
                        return Err(DbErr::invalid(format!(
                            "Invalid identifier {c} for deletion (should not be a PRIMARY KEY part)"
                        )));
                    }
                }
                let all_static = columns.iter().all(|c| table.statics.contains(c));
                let place = if full_row {
                    Place::Row(ck)
                } else if all_static && place_of.prefix.is_empty() && !place_of.has_range {
                    Place::Statics
                } else {
                    return Err(DbErr::invalid(
                        "Range deletions are not supported for specific columns",
                    ));
                };
                (Effect::DeleteColumns(columns.clone()), place)
            }
            _ => return Err(DbErr::invalid("not a modification")),
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
        if !matches!(check, Check::None) && matches!(place, Place::Range(_)) {
            return Err(DbErr::invalid(
                "DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF conditions",
            ));
        }
        Ok(Mutation {
            table: key,
            pk,
            place,
            effect,
            check,
            timestamp,
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
}
