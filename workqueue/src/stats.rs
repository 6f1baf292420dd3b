//! Reading the whole index, for tools: queue statistics and the list of live items.

use std::collections::HashMap;
use std::time::Duration;

use crate::deadletter::store_error;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, ItemId, JobState, StoredItem};
use crate::queue::WorkQueue;

/// A snapshot of a queue, from its whole index and its dead letters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Items a worker may claim now.
    pub available: u64,
    /// Items waiting for their `run_at` (delayed or retrying), however far ahead.
    pub scheduled: u64,
    /// Items claimed, or whose lapsed claim is due for a look.
    pub running: u64,
    /// Dead letters.
    pub dead: u64,
    /// How long the oldest available item has waited (by its enqueuer's clock).
    pub oldest_available_age: Option<Duration>,
}

impl QueueStats {
    /// The counts of `entries` (live index entries, as [`QueueStore::scan_index`] returns
    /// them) at `now` (wall-clock micros), each item counted once, by its newest entry; `dead`
    /// is left 0. For tools that read the index themselves, e.g. only part of it.
    ///
    /// [`QueueStore::scan_index`]: crate::store::QueueStore::scan_index
    pub fn from_entries(entries: impl IntoIterator<Item = IndexEntry>, now: i64) -> QueueStats {
        let mut stats = QueueStats::default();
        // Per item, the newest entry: the highest attempt number, a run entry on a tie (a
        // claim's check entry carries its new number; a reschedule's run entry the same).
        let mut items: HashMap<ItemId, IndexEntry> = HashMap::new();
        for entry in entries {
            let rank = |e: &IndexEntry| (e.attempt, e.kind == EntryKind::Run, -e.pos);
            if items
                .get(&entry.id)
                .is_none_or(|kept| rank(&entry) > rank(kept))
            {
                items.insert(entry.id.clone(), entry);
            }
        }
        let mut oldest: Option<i64> = None;
        for entry in items.into_values() {
            match entry.kind {
                EntryKind::Check => stats.running += 1,
                EntryKind::Run if entry.immediate || entry.pos <= now => {
                    stats.available += 1;
                    oldest = Some(oldest.map_or(entry.pos, |o| o.min(entry.pos)));
                }
                EntryKind::Run => stats.scheduled += 1,
            }
        }
        stats.oldest_available_age = oldest
            .map(|pos| Duration::from_micros(u64::try_from(now.saturating_sub(pos)).unwrap_or(0)));
        stats
    }
}

impl WorkQueue {
    /// Every live index entry from the cursor on, in position order.
    /// Entries below the cursor are dead by construction.
    pub(crate) async fn live_entries(&self) -> Result<Vec<IndexEntry>, QueueError> {
        let cursor = self.read_cursor().await?;
        Ok(self.read_index_in_order(cursor).await?.entries)
    }

    /// Items by state and the oldest available item's age, every state counted however far
    /// ahead its items are scheduled. An item with two entries (one being replaced by the
    /// other) counts once, by its newer entry.
    ///
    /// Cost: one cursor read, the index as [`WorkQueue::read_index`] reads it, and the
    /// dead-letter list (paged by `scan_limit`): no item reads, no LWTs. Where tombstones are
    /// dense, from `cursor_lag + 1 s` behind the clock to a claim TTL plus the lag ahead of
    /// it, the index is read in slices of 100 ms of positions, so that no read walks more
    /// than about 1,000 of them: about 200 reads at the defaults, most finding nothing. Then
    /// one read per bucket from the cursor's up to that stretch, one bucket-directory read
    /// plus one per bucket further ahead that holds entries, and one more per `scan_limit`
    /// live entries.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Reads only: safe to drop.
    pub async fn stats(&self) -> Result<QueueStats, QueueError> {
        let entries = self.live_entries().await?;
        let mut stats = QueueStats::from_entries(entries, self.now());
        stats.dead = self.dead_letter_ids().await?.len() as u64;
        self.record_stats(&stats);
        Ok(stats)
    }

    /// Every item not done that the index or the dead letters reach (oldest position first),
    /// however far ahead: for tools and tests, not for the hot path (one item read each).
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Reads only: safe to drop.
    pub async fn items(&self) -> Result<Vec<StoredItem>, QueueError> {
        let mut ids: Vec<ItemId> = self
            .live_entries()
            .await?
            .into_iter()
            .map(|e| e.id)
            .collect();
        ids.extend(self.dead_letter_ids().await?);
        let mut seen = std::collections::HashSet::new();
        let mut items = Vec::new();
        for id in ids {
            if !seen.insert(id.clone()) {
                continue;
            }
            let item = self
                .store
                .peek(&self.key(id))
                .await
                .map_err(store_error("read item"))?;
            if let Some(item) = item.filter(|i| i.state != JobState::Done) {
                items.push(item);
            }
        }
        Ok(items)
    }
}
