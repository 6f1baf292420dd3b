//! One bucket of the embedded store's order index: last-write-wins rows, row tombstones and
//! range tombstones, walked and counted as Cassandra walks and counts them for its
//! tombstone thresholds.

use std::collections::BTreeMap;
use std::ops::Bound;

use super::tables::{Cell, scan, write};
use crate::item::IndexEntry;

/// A range deletion: every row with `after < seq < before` written at or below `ts` is gone.
#[derive(Debug, Clone)]
struct RangeDeletion {
    after: String,
    before: String,
    ts: i64,
}

impl RangeDeletion {
    fn covers(&self, seq: &str) -> bool {
        self.after.as_str() < seq && seq < self.before.as_str()
    }
}

/// One index partition.
#[derive(Debug, Default)]
pub(super) struct IndexBucket {
    rows: BTreeMap<String, Cell<IndexEntry>>,
    ranges: Vec<RangeDeletion>,
}

/// What a range deletion did.
pub(super) struct RangeDeleted {
    /// Live rows it deleted: a scanner that range-deletes only what it found dead never
    /// deletes one, so tests assert this stays zero.
    pub(super) live: u64,
}

impl IndexBucket {
    /// Writes `value` (a tombstone when `None`) at `seq` unless a later write or a covering
    /// range deletion at or above `ts` is there.
    pub(super) fn write(&mut self, seq: String, value: Option<IndexEntry>, ts: i64) {
        if self.ranges.iter().any(|r| r.ts >= ts && r.covers(&seq)) {
            return;
        }
        write(&mut self.rows, seq, value, ts);
    }

    /// Deletes `after < seq < before` at `ts`: the rows it shadows go (a storage engine
    /// merges them away), and ranges it covers are merged into it, as Cassandra merges range
    /// tombstones, so a walk meets one.
    pub(super) fn delete_range(&mut self, after: &str, before: &str, ts: i64) -> RangeDeleted {
        let mut live = 0;
        if after >= before {
            return RangeDeleted { live };
        }
        let range = (Bound::Excluded(after), Bound::Excluded(before));
        let shadowed: Vec<String> = self
            .rows
            .range::<str, _>(range)
            .filter(|(_, cell)| cell.ts <= ts)
            .map(|(seq, cell)| {
                live += u64::from(cell.value.is_some());
                seq.clone()
            })
            .collect();
        for seq in shadowed {
            self.rows.remove(&seq);
        }
        self.ranges
            .retain(|r| !(r.ts <= ts && after <= r.after.as_str() && r.before.as_str() <= before));
        self.ranges.push(RangeDeletion {
            after: after.to_owned(),
            before: before.to_owned(),
            ts,
        });
        RangeDeleted { live }
    }

    /// Up to `limit` live entries with `after < seq < before`, and the tombstones walked:
    /// each row tombstone passed, and two markers for each range deletion the walk entered.
    pub(super) fn scan(
        &self,
        after: &str,
        before: Option<&str>,
        limit: usize,
    ) -> (Vec<IndexEntry>, u64) {
        let (live, mut tombstones) = scan(&self.rows, after, before, limit);
        // Where the walk stopped: past the last live entry only if it hit the limit.
        let stopped_at = (live.len() >= limit).then(|| live.last().map(|e| e.seq.as_str()));
        for r in &self.ranges {
            let overlaps = r.before.as_str() > after && before.is_none_or(|b| r.after.as_str() < b);
            let entered = match stopped_at {
                Some(Some(last)) => r.after.as_str() < last,
                Some(None) => false,
                None => true,
            };
            tombstones += 2 * u64::from(overlaps && entered);
        }
        (live, tombstones)
    }
}
