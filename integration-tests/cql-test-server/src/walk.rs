//! One read's walk over the rows of its partitions: live rows projected, tombstones counted
//! as Cassandra counts them for its thresholds.

use super::clustering::seek_bounds;
use super::engine::{Bound as SliceBound, Cell, Clustering, Partition, Row, Slice, Table};
use super::parser::Selector;
use super::values::Value;

/// One read's walk over partitions.
pub(super) struct Walk<'a> {
    pub table: &'a Table,
    pub now: i64,
    pub slice: &'a Slice,
    pub reversed: bool,
    /// Tombstones walked so far.
    pub tombstones: u64,
    /// Stop walking past this many tombstones (the read fails).
    pub fail_over: u64,
    /// Rows produced.
    pub rows: Vec<Vec<Value>>,
    /// Where the last row came from (for the paging state).
    pub last: Option<(Vec<u8>, Option<Clustering>)>,
}

impl Walk<'_> {
    /// Walks one partition; returns whether `full` stopped it.
    pub fn partition(
        &mut self,
        pk: &[u8],
        p: &Partition,
        after: Option<&Clustering>,
        wants_statics: bool,
        selectors: &[Selector],
        full: impl Fn(usize) -> bool,
    ) -> bool {
        // A partition tombstone is not counted (Cassandra counts rows and markers only);
        // what it shadows is merged away, so older row and range deletions are not either.
        let partition_deleted = p.deletion.map_or(i64::MIN, |d| d.timestamp);
        let statics = p.live_statics(self.now);
        self.count_dead(&p.statics, partition_deleted);
        // Range tombstones are met where they start in the walk's direction; each is an
        // open and a close marker, as Cassandra counts them.
        let overlapping: Vec<&_> = p
            .ranges
            .iter()
            .filter(|r| overlaps(&r.slice, self.slice))
            .collect();
        let mut ranges: Vec<&_> = overlapping
            .iter()
            .copied()
            .filter(|r| r.deletion.timestamp > partition_deleted)
            .collect();
        let iter: Box<dyn Iterator<Item = (&Clustering, &Row)>> = match self.seek(p) {
            None => Box::new(std::iter::empty()),
            Some(rows) if self.reversed => Box::new(rows.rev()),
            Some(rows) => Box::new(rows),
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
            // Only the range tombstones overlapping the read can cover its rows.
            let shadow_above = p.shadow_among(&overlapping, ck, None);
            let shadow = row
                .deletion
                .map_or(shadow_above, |d| d.timestamp.max(shadow_above));
            let dead = self.count_dead(row, shadow);
            let live = row.live(self.now, shadow);
            let row_deletion_counts = row.deletion.is_some_and(|d| d.timestamp > shadow_above);
            if live.is_none() && dead == 0 && row_deletion_counts {
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

    /// The partition's rows from where the slice starts to where it ends, as a storage
    /// engine seeks them: rows outside the slice are never visited (nor counted), so a read
    /// costs what it returns and the tombstones inside its slice, not the whole partition.
    /// Only bounds on every clustering column are used to seek (a prefix bound compares equal
    /// to many keys); the walk still checks each row against the slice.
    fn seek<'p>(
        &self,
        p: &'p Partition,
    ) -> Option<std::collections::btree_map::Range<'p, Clustering, Row>> {
        seek_bounds(self.slice, self.table.clustering.len()).map(|range| p.rows.range(range))
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
