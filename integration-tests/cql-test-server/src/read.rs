//! `SELECT`: slices of clustering keys in either order, `IN`, `LIMIT`, paging; the walk
//! itself is in `walk`, the tombstone thresholds in `tombstone`.

use super::engine::{DbErr, Engine};
use super::exec::{Bound, Outcome, Request, Rows, eval};
use super::keys::{Where, restrict};
use super::paging::{decode_clustering, decode_position, encode_position};
use super::parser::Statement;
use super::query::select_columns;
use super::values::{CqlType, Value};
use super::walk::Walk;

/// A `SELECT` checked and resolved: what it reads, before anything is read.
pub(super) struct SelectPlan {
    key: (String, String),
    limit: Option<i32>,
    restriction: Where,
    reversed: bool,
    /// Encoded keys of the partitions read, sorted, each once.
    keys: Vec<Vec<u8>>,
}

impl SelectPlan {
    /// The table read.
    pub(super) fn table(&self) -> &(String, String) {
        &self.key
    }
}

impl Engine {
    /// Checks a `SELECT` and resolves what it reads; for a SERIAL read also its one
    /// partition (the errors a coordinator answers before any Paxos round).
    pub(super) fn plan_select(
        &self,
        statement: &Statement,
        bound: &Bound,
        request: &Request,
    ) -> Result<(SelectPlan, Option<Value>), DbErr> {
        let Statement::Select {
            selectors,
            table: table_ref,
            relations,
            order_desc,
            limit,
        } = statement
        else {
            return Err(DbErr::invalid("not a SELECT"));
        };
        let key = self.table_key(table_ref)?;
        let limit = match limit {
            None => None,
            Some(term) => match eval(term, &CqlType::Int, bound)? {
                Value::Int(n) if n > 0 => Some(n),
                _ => return Err(DbErr::invalid("LIMIT must be strictly positive")),
            },
        };
        let table = self.table(&key)?;
        let w = restrict(table, relations, bound, true)?;
        let reversed = match (order_desc, table.clustering.first()) {
            (None, _) => false,
            (Some(_), None) => {
                return Err(DbErr::invalid(
                    "Order by is currently only supported on the clustered columns of the PRIMARY KEY",
                ));
            }
            (Some(_), _) if w.partitions.is_none() => {
                return Err(DbErr::invalid(
                    "ORDER BY is only supported when the partition key is restricted by an EQ or an IN.",
                ));
            }
            (Some(desc), Some((_, declared))) => desc != declared,
        };
        select_columns(table, selectors)?;
        let mut keys: Vec<Vec<u8>> = match &w.partitions {
            Some(values) => values.iter().map(Value::key_bytes).collect(),
            None => table.partitions.keys().cloned().collect(),
        };
        keys.sort();
        keys.dedup();
        let serial = if request.serial_read {
            let [only] = keys.as_slice() else {
                return Err(DbErr::invalid(
                    "SERIAL/LOCAL_SERIAL consistency may only be requested for one partition at a time",
                ));
            };
            self.check_lwt_allowed(&key)?;
            Some(
                table
                    .partitions
                    .get(only)
                    .map(|p| p.key.clone())
                    .or_else(|| w.partitions.as_ref().and_then(|p| p.first().cloned()))
                    .unwrap_or(Value::Null),
            )
        } else {
            None
        };
        let plan = SelectPlan {
            key,
            limit,
            restriction: w,
            reversed,
            keys,
        };
        Ok((plan, serial))
    }

    pub(super) fn select(
        &mut self,
        statement: &Statement,
        bound: &Bound,
        request: &Request,
    ) -> Result<Outcome, DbErr> {
        let Statement::Select { selectors, .. } = statement else {
            return Err(DbErr::invalid("not a SELECT"));
        };
        let (plan, serial) = self.plan_select(statement, bound, request)?;
        let SelectPlan {
            key,
            limit,
            restriction: w,
            reversed,
            keys,
        } = plan;
        if let Some(pk) = serial
            && let Some(timeout) = self.paxos_round(&key, &pk, request)?
        {
            return Err(timeout);
        }
        let now = self.clock.now_secs();
        self.purge(&key, &keys, now);
        let table = self.table(&key)?;
        let (selectors, columns) = select_columns(table, selectors)?;
        let position = request
            .paging_state
            .as_deref()
            .map(decode_position)
            .transpose()?;
        let remaining = match &position {
            Some(p) => p.remaining,
            None => limit,
        };
        let page = request.page_size.filter(|n| *n > 0);
        let mut walk = Walk {
            table,
            now,
            slice: &w.slice,
            reversed,
            tombstones: 0,
            fail_over: self.options.tombstone_failure_threshold,
            rows: Vec::new(),
            last: None,
        };
        let mut stopped = false;
        for pk in &keys {
            if let Some(p) = &position
                && *pk < p.partition
            {
                continue;
            }
            let Some(partition) = table.partitions.get(pk) else {
                continue;
            };
            let after = position
                .as_ref()
                .filter(|p| p.partition == *pk)
                .map(|p| p.after.clone());
            if after == Some(None) {
                continue; // That partition's static-only row was the end of the last page.
            }
            let after = after
                .flatten()
                .map(|a| decode_clustering(table, &a))
                .transpose()?;
            let wants_statics = w.prefix.is_empty() && !w.has_range;
            stopped = walk.partition(
                pk,
                partition,
                after.as_ref(),
                wants_statics,
                &selectors,
                |emitted| {
                    remaining.is_some_and(|r| emitted >= r as usize)
                        || page.is_some_and(|p| emitted >= p as usize)
                },
            );
            if walk.tombstones > self.options.tombstone_failure_threshold {
                break;
            }
            if stopped {
                break;
            }
        }
        let (tombstones, live) = (walk.tombstones, walk.rows.len() as u64);
        let (rows, last) = (walk.rows, walk.last);
        let warning = self.record_read(request, tombstones, live)?;
        let emitted = rows.len();
        let remaining = remaining.map(|r| r - emitted as i32);
        let more = stopped && remaining.is_none_or(|r| r > 0) && page.is_some();
        let paging_state = match (more, last) {
            (true, Some((pk, ck))) => Some(encode_position(remaining, &pk, ck.as_ref())),
            _ => None,
        };
        Ok(Outcome::Rows(Rows {
            keyspace: key.0,
            table: key.1,
            columns,
            rows,
            paging_state,
            warnings: warning.into_iter().collect(),
        }))
    }
}
