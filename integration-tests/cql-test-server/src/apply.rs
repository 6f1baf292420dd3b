//! Applying a resolved mutation with Cassandra's rules: last write wins per cell (ties as
//! the flavor breaks them), and deletions of rows, ranges and partitions that shadow older writes.

use super::engine::{Cell, Deletion, Engine, Flavor, Liveness, Partition, RangeTombstone, Row};
use super::lwt::{Effect, Mutation, Place};
use super::values::Value;

impl Engine {
    pub(super) fn apply(&mut self, m: &Mutation, timestamp: i64) {
        let now = self.clock.now_secs();
        let flavor = self.flavor;
        let Some(table) = self.tables.get_mut(&m.table) else {
            return;
        };
        let default_ttl = i64::from(table.default_ttl);
        let columns = table.clustering.len();
        let statics = table.statics.clone();
        let partition = table
            .partitions
            .entry(m.pk.key_bytes())
            .or_insert_with(|| Partition::new(m.pk.clone()));
        let deletion = Deletion {
            timestamp,
            at_sec: now,
        };
        let tombstone = Cell {
            value: None,
            live: Liveness {
                timestamp,
                expires_at_sec: Some(now),
            },
        };
        // What a purge may drop one day (see `tombstone::purge`).
        match &m.effect {
            Effect::Delete | Effect::DeleteColumns(_) => partition.dies_at(now),
            Effect::Set { cells, ttl, .. } => {
                let ttl = ttl.unwrap_or(default_ttl);
                if ttl > 0 {
                    partition.dies_at(now + ttl);
                }
                if cells.iter().any(|(_, value)| *value == Value::Null) {
                    partition.dies_at(now);
                }
            }
        }
        match (&m.effect, &m.place) {
            (Effect::Delete, Place::Partition) => {
                if partition.deletion.is_none_or(|d| d.timestamp < timestamp) {
                    partition.deletion = Some(deletion);
                }
                partition.statics.shadow(timestamp);
                for row in partition.rows.values_mut() {
                    row.shadow(timestamp);
                }
            }
            (Effect::Delete, Place::Range(slice)) => {
                // Cassandra merges range tombstones: one that a newer one covers is no
                // longer met by reads (nor counted towards the tombstone thresholds).
                partition
                    .ranges
                    .retain(|r| !(r.deletion.timestamp <= timestamp && slice.covers(&r.slice)));
                partition.ranges.push(RangeTombstone {
                    slice: slice.clone(),
                    deletion,
                });
                if let Some(range) = super::clustering::seek_bounds(slice, columns) {
                    for (ck, row) in partition.rows.range_mut(range) {
                        if slice.contains(ck) {
                            row.shadow(timestamp);
                        }
                    }
                }
            }
            (Effect::Delete, place) => {
                let row = row_at(partition, place);
                if row.deletion.is_none_or(|d| d.timestamp < timestamp) {
                    row.deletion = Some(deletion);
                }
                row.shadow(timestamp);
            }
            (Effect::DeleteColumns(cols), place) => {
                for c in cols {
                    let row = if statics.contains(c) {
                        &mut partition.statics
                    } else {
                        row_at(partition, place)
                    };
                    row.merge(c, tombstone.clone(), flavor);
                }
            }
            (Effect::Set { cells, marker, ttl }, place) => {
                // An explicit TTL of 0 means "no TTL", overriding the table's default.
                let ttl = ttl.unwrap_or(default_ttl);
                let live = Liveness {
                    timestamp,
                    expires_at_sec: (ttl > 0).then_some(now + ttl),
                };
                if *marker && let Place::Row(_) = place {
                    let row = row_at(partition, place);
                    if row.marker.is_none_or(|old| old.timestamp <= timestamp) {
                        row.marker = Some(live);
                    }
                }
                for (col, value) in cells {
                    // Writing null is deleting: a cell tombstone.
                    let cell = if *value == Value::Null {
                        tombstone.clone()
                    } else {
                        Cell {
                            value: Some(value.clone()),
                            live,
                        }
                    };
                    let row = if statics.contains(col) {
                        &mut partition.statics
                    } else {
                        row_at(partition, place)
                    };
                    row.merge(col, cell, flavor);
                }
            }
        }
    }
}

fn row_at<'p>(partition: &'p mut Partition, place: &Place) -> &'p mut Row {
    match place {
        Place::Row(ck) => partition.rows.entry(ck.clone()).or_default(),
        _ => &mut partition.statics,
    }
}

impl Row {
    /// Stores `cell` in `column` unless the stored one wins over it.
    fn merge(&mut self, column: &str, cell: Cell, flavor: Flavor) {
        match self.cells.get(column) {
            Some(old) if old.wins_over(&cell, flavor) => {}
            _ => {
                self.cells.insert(column.to_owned(), cell);
            }
        }
    }

    /// Drops what a deletion at `timestamp` shadows for good.
    pub(super) fn shadow(&mut self, timestamp: i64) {
        self.cells.retain(|_, c| c.live.timestamp > timestamp);
        if self.marker.is_some_and(|m| m.timestamp <= timestamp) {
            self.marker = None;
        }
    }
}
