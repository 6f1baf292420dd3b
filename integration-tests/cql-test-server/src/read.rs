//! `SELECT`: slices of clustering keys in either order, `IN`, `LIMIT`, paging, and
//! tombstones counted as Cassandra counts them, with its warn and failure thresholds.

use scylla_cql::Consistency;
use scylla_cql::frame::response::error::DbError;

use super::engine::{
    Bound as SliceBound, Cell, Clustering, DbErr, Engine, Partition, Row, Slice, Table,
};
use super::exec::{Bound, Outcome, Request, Rows, eval};
use super::keys::restrict;
use super::paging::{decode_clustering, decode_position, encode_position};
use super::parser::{Selector, Statement};
use super::query::select_columns;
use super::values::{CqlType, Value};

impl Engine {
    pub(super) fn select(
        &mut self,
        statement: &Statement,
        bound: &Bound,
        request: &Request,
    ) -> Result<Outcome, DbErr> {
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
        let now = self.clock.now_secs();
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
        let mut keys: Vec<Vec<u8>> = match &w.partitions {
            Some(values) => values.iter().map(Value::key_bytes).collect(),
            None => table.partitions.keys().cloned().collect(),
        };
        keys.sort();
        keys.dedup();
        if request.serial_read {
            let [only] = keys.as_slice() else {
                return Err(DbErr::invalid(
                    "SERIAL/LOCAL_SERIAL consistency may only be requested for one partition at a time",
                ));
            };
            let pk = table
                .partitions
                .get(only)
                .map(|p| p.key.clone())
                .or_else(|| w.partitions.as_ref().and_then(|p| p.first().cloned()))
                .unwrap_or(Value::Null);
            self.paxos_round(&key, &pk)?;
        }
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
        self.record_read(&request.text, tombstones, live)?;
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
        }))
    }

    /// Records a read's tombstones; past the failure threshold the read fails as Cassandra
    /// fails it (`ReadFailure`), past the warning threshold a warning is recorded.
    fn record_read(&mut self, text: &str, tombstones: u64, live: u64) -> Result<(), DbErr> {
        let stats = &mut self.tombstone_stats;
        stats.reads.push((text.to_owned(), tombstones, live));
        stats.max = stats.max.max(tombstones);
        stats.total += tombstones;
        if tombstones > self.options.tombstone_failure_threshold {
            stats.failures += 1;
            return Err(DbErr {
                error: DbError::ReadFailure {
                    consistency: Consistency::One,
                    received: 0,
                    required: 1,
                    numfailures: 1,
                    data_present: false,
                },
                message: format!(
                    "Operation failed - received 0 responses and 1 failures: READ_TOO_MANY_TOMBSTONES (scanned over {} tombstones during query '{text}'; query aborted)",
                    self.options.tombstone_failure_threshold
                ),
            });
        }
        if tombstones > self.options.tombstone_warn_threshold {
            stats.warnings.push(format!(
                "Read {live} live rows and {tombstones} tombstone cells for query {text} (see tombstone_warn_threshold)"
            ));
        }
        Ok(())
    }

    /// Drops what is older than `gc_grace_seconds` in the partitions a read visits.
    fn purge(&mut self, key: &(String, String), partitions: &[Vec<u8>], now: i64) {
        let Some(table) = self.tables.get_mut(key) else {
            return;
        };
        let grace = table.gc_grace;
        let expired = |at: i64| at.saturating_add(grace) <= now;
        for pk in partitions {
            let Some(p) = table.partitions.get_mut(pk) else {
                continue;
            };
            if p.deletion.is_some_and(|d| expired(d.at_sec)) {
                p.deletion = None;
            }
            p.ranges.retain(|r| !expired(r.deletion.at_sec));
            for row in std::iter::once(&mut p.statics).chain(p.rows.values_mut()) {
                if let Some(d) = row.deletion
                    && expired(d.at_sec)
                {
                    row.deletion = None;
                }
                row.cells
                    .retain(|_, c| c.dead_since(now).is_none_or(|at| !expired(at)));
            }
            p.rows
                .retain(|_, r| r.deletion.is_some() || r.marker.is_some() || !r.cells.is_empty());
        }
    }
}

/// One read's walk over partitions.
struct Walk<'a> {
    table: &'a Table,
    now: i64,
    slice: &'a Slice,
    reversed: bool,
    tombstones: u64,
    fail_over: u64,
    rows: Vec<Vec<Value>>,
    last: Option<(Vec<u8>, Option<Clustering>)>,
}

impl Walk<'_> {
    /// Walks one partition; returns whether `full` stopped it.
    fn partition(
        &mut self,
        pk: &[u8],
        p: &Partition,
        after: Option<&Clustering>,
        wants_statics: bool,
        selectors: &[Selector],
        full: impl Fn(usize) -> bool,
    ) -> bool {
        if p.deletion.is_some() {
            self.tombstones += 1;
        }
        let statics = p.live_statics(self.now);
        self.count_dead(&p.statics, p.deletion.map_or(i64::MIN, |d| d.timestamp));
        // Range tombstones are met where they start in the walk's direction; each is an
        // open and a close marker, as Cassandra counts them.
        let mut ranges: Vec<&_> = p
            .ranges
            .iter()
            .filter(|r| overlaps(&r.slice, self.slice))
            .collect();
        let iter: Box<dyn Iterator<Item = (&Clustering, &Row)>> = if self.reversed {
            Box::new(p.rows.iter().rev())
        } else {
            Box::new(p.rows.iter())
        };
        let mut any_row = false;
        for (ck, row) in iter {
            if !self.slice.contains(ck) {
                continue;
            }
            if let Some(a) = after {
                let past = if self.reversed { ck < a } else { ck > a };
                if !past {
                    continue;
                }
            }
            let reversed = self.reversed;
            ranges.retain(|r| {
                let met = if reversed {
                    before_end(ck, &r.slice.end)
                } else {
                    after_start(ck, &r.slice.start)
                };
                if met {
                    self.tombstones += 2;
                }
                !met
            });
            let shadow = p.shadow(ck, Some(row));
            let dead = self.count_dead(row, shadow);
            let live = row.live(self.now, shadow);
            if live.is_none() && dead == 0 && row.deletion.is_some() {
                self.tombstones += 1;
            }
            if self.tombstones > self.fail_over {
                return true;
            }
            if let Some(live) = live {
                any_row = true;
                self.rows.push(self.project(
                    selectors,
                    &p.key,
                    Some(ck),
                    Some(&live),
                    statics.as_ref(),
                ));
                self.last = Some((pk.to_vec(), Some(ck.clone())));
                if full(self.rows.len()) {
                    return true;
                }
            }
        }
        self.tombstones += 2 * ranges.len() as u64;
        if !any_row && after.is_none() && wants_statics && statics.is_some() {
            self.rows
                .push(self.project(selectors, &p.key, None, None, statics.as_ref()));
            self.last = Some((pk.to_vec(), None));
            if full(self.rows.len()) {
                return true;
            }
        }
        false
    }

    /// Counts a row's deleted and expired cells not shadowed by a deletion.
    fn count_dead(&mut self, row: &Row, shadow: i64) -> u64 {
        let dead = row
            .cells
            .values()
            .filter(|c| c.live.timestamp > shadow && c.dead_since(self.now).is_some())
            .count() as u64;
        self.tombstones += dead;
        dead
    }

    fn project(
        &self,
        selectors: &[Selector],
        pk: &Value,
        ck: Option<&Clustering>,
        row: Option<&Row>,
        statics: Option<&Row>,
    ) -> Vec<Value> {
        let t = self.table;
        let cell = |c: &str| -> Option<&Cell> {
            if t.statics.contains(c) {
                statics.and_then(|s| s.cells.get(c))
            } else {
                row.and_then(|r| r.cells.get(c))
            }
        };
        selectors
            .iter()
            .map(|s| match s {
                Selector::Column(c) if *c == t.partition_key => pk.clone(),
                Selector::Column(c) => {
                    if let Some(i) = t.clustering.iter().position(|(n, _)| n == c) {
                        return ck
                            .and_then(|k| k.0.get(i))
                            .map_or(Value::Null, |v| v.value.clone());
                    }
                    cell(c).and_then(|c| c.value.clone()).unwrap_or(Value::Null)
                }
                Selector::Ttl(c) => cell(c)
                    .and_then(|c| c.live.expires_at_sec)
                    .map_or(Value::Null, |at| {
                        Value::Int(i32::try_from(at - self.now).unwrap_or(i32::MAX))
                    }),
                Selector::WriteTime(c) => {
                    cell(c).map_or(Value::Null, |c| Value::BigInt(c.live.timestamp))
                }
            })
            .collect()
    }
}

fn after_start(ck: &Clustering, start: &SliceBound) -> bool {
    Slice {
        start: start.clone(),
        end: SliceBound::Unbounded,
    }
    .contains(ck)
}

fn before_end(ck: &Clustering, end: &SliceBound) -> bool {
    Slice {
        start: SliceBound::Unbounded,
        end: end.clone(),
    }
    .contains(ck)
}

/// Whether two slices share a key (bounds compared as prefixes).
fn overlaps(a: &Slice, b: &Slice) -> bool {
    let starts_before_end = |s: &SliceBound, e: &SliceBound| match (s, e) {
        (SliceBound::Unbounded, _) | (_, SliceBound::Unbounded) => true,
        (SliceBound::Inclusive(x), SliceBound::Inclusive(y)) => {
            super::engine::compare_prefix(x, y).is_le()
        }
        (
            SliceBound::Inclusive(x) | SliceBound::Exclusive(x),
            SliceBound::Inclusive(y) | SliceBound::Exclusive(y),
        ) => super::engine::compare_prefix(x, y).is_lt(),
    };
    starts_before_end(&a.start, &b.end) && starts_before_end(&b.start, &a.end)
}
