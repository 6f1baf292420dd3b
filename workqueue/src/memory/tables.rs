//! The embedded store's tables: item rows with TTL'd claims, and last-write-wins cells for
//! the index, the cursor and dead letters, with deletions kept as tombstones.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use tokio::time::Instant;

use super::index::IndexBucket;
use crate::item::{ItemId, ItemKey, StoredItem};

#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) item: StoredItem,
    pub(super) claim_expires_at: Option<Instant>,
    /// When the `done` state cell's TTL runs out (the row and its attempt number stay).
    pub(super) done_expires_at: Option<Instant>,
}

impl Row {
    pub(super) fn current(&mut self, now: Instant) -> &StoredItem {
        if self.claim_expires_at.is_some_and(|at| at <= now) {
            self.item.claim = None;
            self.claim_expires_at = None;
        }
        &self.item
    }

    /// Whether the state cell is gone: a `done` marker whose TTL ran out.
    pub(super) fn state_expired(&self, now: Instant) -> bool {
        self.item.state == crate::item::JobState::Done
            && self.done_expires_at.is_some_and(|at| at <= now)
    }

    pub(super) fn held_by(&mut self, now: Instant, claim_id: &str) -> bool {
        self.current(now).claim.as_deref() == Some(claim_id)
    }
}

/// A plain-written cell: the write with the highest client timestamp wins; `None` is a
/// tombstone.
#[derive(Debug, Clone)]
pub(super) struct Cell<T> {
    pub(super) ts: i64,
    pub(super) value: Option<T>,
}

/// Writes `value` (or a tombstone) into `map[key]` unless a later write is there.
pub(super) fn write<K: Ord, T>(map: &mut BTreeMap<K, Cell<T>>, key: K, value: Option<T>, ts: i64) {
    match map.get_mut(&key) {
        Some(cell) if cell.ts > ts => {}
        Some(cell) => *cell = Cell { ts, value },
        None => {
            map.insert(key, Cell { ts, value });
        }
    }
}

/// Up to `limit` live values after `after`, and how many tombstones were passed over.
pub(super) fn scan<T: Clone>(
    map: &BTreeMap<String, Cell<T>>,
    after: &str,
    before: Option<&str>,
    limit: usize,
) -> (Vec<T>, u64) {
    let mut live = Vec::new();
    let mut tombstones = 0;
    let end = before.map_or(Bound::Unbounded, Bound::Excluded);
    if before.is_some_and(|b| b <= after) {
        return (live, 0);
    }
    let range = map.range::<str, _>((Bound::Excluded(after), end));
    for (_, cell) in range {
        if live.len() >= limit {
            break;
        }
        match &cell.value {
            Some(v) => live.push(v.clone()),
            None => tombstones += 1,
        }
    }
    (live, tombstones)
}

#[derive(Debug, Default)]
pub(super) struct Tables {
    pub(super) items: HashMap<(String, ItemId), Row>,
    pub(super) index: HashMap<(String, i64), IndexBucket>,
    pub(super) cursors: HashMap<String, i64>,
    pub(super) dead: HashMap<String, BTreeMap<String, Cell<ItemId>>>,
    /// Index buckets far ahead, with when their record expires (a TTL'd row).
    pub(super) buckets: HashMap<String, BTreeMap<i64, Instant>>,
}

impl Tables {
    pub(super) fn row(&mut self, key: &ItemKey) -> Option<&mut Row> {
        self.items.get_mut(&(key.partition.clone(), key.id.clone()))
    }

    /// Up to `limit` unexpired bucket records above `after`.
    pub(super) fn live_buckets(
        &self,
        queue: &str,
        after: i64,
        limit: usize,
        now: Instant,
    ) -> Vec<i64> {
        self.buckets
            .get(queue)
            .map(|expires| {
                expires
                    .range(after.saturating_add(1)..)
                    .filter(|(_, at)| **at > now)
                    .map(|(bucket, _)| *bucket)
                    .take(limit)
                    .collect()
            })
            .unwrap_or_default()
    }
}
