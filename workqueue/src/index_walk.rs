//! Reading every live index entry for tools (statistics, the item list, dashboards) with no
//! read walking more tombstones than the scanners' reads do (see `dispatch::ledger`).
//!
//! Tombstones are dense around now. Just behind it (`cursor_lag` + `BLIND_EXTRA`) lie the
//! entries claimed since the fleet's rescans last range-deleted what died; ahead of it, up to
//! a claim TTL plus the lag, lie the check entries of finished jobs, one per job, which no
//! rescan reaches before they come due. There reads span at most `BLIND_SLICE` of
//! positions, as a scanner's blind slices do and on their assumption (at most 10,000 index
//! writes a second, so at most 1,000 entries ever written into one slice). Elsewhere reads
//! are paged by `scan_limit` live entries: behind, the fleet's rescans range-deleted the dead
//! stretches between them; further ahead lie delayed items, rarely deleted before they come
//! due.

use crate::config::micros;
use crate::deadletter::store_error;
use crate::dispatch::{BLIND_EXTRA, BLIND_SLICE};
use crate::error::QueueError;
use crate::item::IndexEntry;
use crate::queue::WorkQueue;

/// Live index entries read with a bound on requests ([`WorkQueue::read_index`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexRead {
    /// The live entries read, oldest position first.
    pub entries: Vec<IndexEntry>,
    /// Whether every live entry from the cursor on was read: false when the bound on
    /// requests stopped the reading (the entries are then a part of them).
    pub complete: bool,
    /// Requests sent: index reads and bucket-directory reads.
    pub requests: usize,
}

/// The positions `[from, to)` where tombstones are dense, read in slices.
#[derive(Debug, Clone, Copy)]
struct Dense {
    from: i64,
    to: i64,
}

impl Dense {
    /// Around `now`, for `queue`'s settings (see the module doc): rescans range-delete only
    /// below their clock minus the lag, and may not have run for a second more; check
    /// entries lie a claim TTL ahead of their claimer's clock, which may be ahead by the
    /// skew (within the lag).
    fn around(queue: &WorkQueue, now: i64) -> Dense {
        let lag = micros(queue.config.cursor_lag());
        let ttl = micros(queue.config.timing.store_ttl());
        Dense {
            from: now.saturating_sub(lag + micros(BLIND_EXTRA)),
            to: now.saturating_add(ttl + lag),
        }
    }

    /// Where a read starting at position `pos` ends, at most at `end`: a slice of at most
    /// `BLIND_SLICE` in the dense stretch, or up to its start before it.
    fn read_end(&self, pos: i64, end: i64) -> i64 {
        if pos < self.from {
            end.min(self.from)
        } else if pos < self.to {
            end.min(self.to).min(pos.saturating_add(BLIND_SLICE))
        } else {
            end
        }
    }
}

/// In which order a walk reads the buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Walking {
    /// Where new items and running jobs are first (the current and next buckets), then far
    /// ahead, then a backlog: what a bounded number of requests should show.
    NearFirst,
    /// In position order. An item a claim moves forward (its check entry placed ahead
    /// before the entry it was found by goes) is read at least once.
    InOrder,
    /// In position order, stopping at the first live entry.
    FirstOnly,
}

/// One walk of the index: what it read so far, and the requests it may still send.
struct Walk<'a> {
    queue: &'a WorkQueue,
    cursor: i64,
    dense: Dense,
    requests_left: usize,
    /// Stop at the first live entry: the question is only whether there is one.
    first_only: bool,
    read: IndexRead,
}

impl Walk<'_> {
    /// One more request, unless the bound is reached (then the read is incomplete).
    fn spend(&mut self) -> bool {
        if self.requests_left == 0 {
            self.read.complete = false;
            return false;
        }
        self.requests_left -= 1;
        self.read.requests += 1;
        true
    }

    /// Reads `buckets` in order; false when the bound stopped it.
    async fn buckets(
        &mut self,
        buckets: impl IntoIterator<Item = i64>,
    ) -> Result<bool, QueueError> {
        for bucket in buckets {
            if !self.bucket(bucket).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Reads `bucket` from the cursor on, in slices where it meets the dense stretch; false
    /// when the bound stopped it.
    async fn bucket(&mut self, bucket: i64) -> Result<bool, QueueError> {
        let width = self.queue.config.bucket_micros();
        let (start, end) = (
            bucket.saturating_mul(width),
            (bucket + 1).saturating_mul(width),
        );
        let mut pos = start.max(self.cursor);
        let mut after = if pos > start {
            IndexEntry::seq_floor(pos)
        } else {
            String::new()
        };
        while pos < end {
            let stop = self.dense.read_end(pos, end);
            let before = if stop < end {
                IndexEntry::seq_floor(stop)
            } else {
                "~".to_owned()
            };
            if !self.pages(bucket, after, &before).await? {
                return Ok(false);
            }
            (pos, after) = (stop, before);
        }
        Ok(true)
    }

    /// Reads `after < seq < before` of `bucket`, page after page of `scan_limit` live
    /// entries; false when the bound stopped it.
    async fn pages(
        &mut self,
        bucket: i64,
        mut after: String,
        before: &str,
    ) -> Result<bool, QueueError> {
        let limit = self.queue.config.scan_limit;
        loop {
            if !self.spend() {
                return Ok(false);
            }
            let page = self
                .queue
                .store
                .scan_index(self.queue.name(), bucket, &after, before, limit)
                .await
                .map_err(store_error("scan index"))?;
            let full = page.len() == limit as usize;
            if let Some(last) = page.last() {
                after = last.seq.clone();
            }
            self.read.entries.extend(page);
            if self.first_only && !self.read.entries.is_empty() {
                return Ok(false);
            }
            if !full {
                return Ok(true);
            }
        }
    }

    /// The buckets after `after` that the bucket directory records, as many as the bound
    /// lets it read.
    async fn far_buckets(&mut self, mut after: i64) -> Result<Vec<i64>, QueueError> {
        let limit = self.queue.config.scan_limit;
        let mut far = Vec::new();
        while self.spend() {
            let page = self
                .queue
                .store
                .list_buckets(self.queue.name(), after, limit)
                .await
                .map_err(store_error("list index buckets"))?;
            let full = page.len() == limit as usize;
            after = page.last().copied().unwrap_or(after);
            far.extend(page);
            if !full {
                break;
            }
        }
        Ok(far)
    }
}

impl WorkQueue {
    /// The live index entries from position `cursor` on (the queue's cursor, below which
    /// every entry is dead), with at most `max_requests` requests: first the current and
    /// next buckets (where new items and running jobs' check entries go), then the buckets
    /// further ahead the bucket directory records (delayed items), then the buckets from
    /// the cursor's on (a backlog). No read walks more tombstones than the scanners' reads
    /// (see the tombstone bound in the queue's docs): where they are dense, from
    /// `cursor_lag + 1 s` behind the clock to a claim TTL plus the lag ahead of it, reads
    /// span 100 ms of positions; elsewhere they are paged by `scan_limit` live entries.
    ///
    /// Cost: one read per 100 ms of that stretch (200 at the defaults, one more where a
    /// bucket starts in it), one per bucket from the cursor's to the next and per far bucket
    /// holding entries, one more per `scan_limit` live entries, and one bucket-directory
    /// read per `scan_limit` far buckets.
    ///
    /// # Errors
    ///
    /// [`QueueError::Store`] when a read fails.
    ///
    /// # Cancel safety
    ///
    /// Reads only: safe to drop.
    pub async fn read_index(
        &self,
        cursor: i64,
        max_requests: usize,
    ) -> Result<IndexRead, QueueError> {
        self.walk_index(cursor, max_requests, Walking::NearFirst)
            .await
    }

    /// Every live index entry from `cursor` on, read in position order (see
    /// [`Walking::InOrder`]).
    pub(crate) async fn read_index_in_order(&self, cursor: i64) -> Result<IndexRead, QueueError> {
        self.walk_index(cursor, usize::MAX, Walking::InOrder).await
    }

    /// Whether a live index entry lies at or after `cursor`: [`WorkQueue::read_index`]'s
    /// walk, stopped at the first one (an empty queue costs the whole walk).
    pub(crate) async fn any_live_entry(&self, cursor: i64) -> Result<bool, QueueError> {
        let read = self
            .walk_index(cursor, usize::MAX, Walking::FirstOnly)
            .await?;
        Ok(!read.entries.is_empty())
    }

    async fn walk_index(
        &self,
        cursor: i64,
        max_requests: usize,
        walking: Walking,
    ) -> Result<IndexRead, QueueError> {
        let now = self.now();
        let width = self.config.bucket_micros();
        let (first, current) = (cursor / width, now / width);
        let mut walk = Walk {
            queue: self,
            cursor,
            dense: Dense::around(self, now),
            requests_left: max_requests,
            first_only: walking == Walking::FirstOnly,
            read: IndexRead {
                complete: true,
                ..IndexRead::default()
            },
        };
        // The current and next buckets, or the cursor's when it is ahead of them.
        let last_near = (current + 1).max(first);
        if walking == Walking::NearFirst {
            if walk.buckets(first.max(current)..=last_near).await? {
                let far = walk.far_buckets(last_near).await?;
                walk.buckets(far.into_iter().chain(first..current)).await?;
            }
        } else if walk.buckets(first..=last_near).await? {
            let far = walk.far_buckets(last_near).await?;
            walk.buckets(far).await?;
        }
        let mut read = walk.read;
        read.entries.sort_by(|a, b| a.seq.cmp(&b.seq));
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use std::sync::Arc;

    use super::*;
    use crate::QueueConfig;
    use crate::memory::MemoryQueueStore;

    #[test]
    fn reads_where_tombstones_are_dense_span_at_most_a_blind_slice() {
        let dense = Dense {
            from: 1_000_000,
            to: 2_000_000,
        };
        assert_eq!(dense.read_end(0, 10_000_000), 1_000_000);
        assert_eq!(dense.read_end(1_000_000, 10_000_000), 1_100_000);
        assert_eq!(dense.read_end(1_000_000, 1_050_000), 1_050_000);
        assert_eq!(dense.read_end(1_950_000, 10_000_000), 2_000_000);
        assert_eq!(dense.read_end(2_000_000, 10_000_000), 10_000_000);
    }

    /// At the defaults a queue that keeps up costs about 200 reads, nearly all of them the
    /// slices around now; a bound below that stops the reading, and says so.
    #[tokio::test(start_paused = true)]
    async fn a_bound_on_requests_stops_the_reading_and_says_so() {
        let config = QueueConfig::default();
        let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "walk", config).unwrap();
        for job in ["a", "b", "c"] {
            queue.enqueue(job).await.unwrap();
        }
        let cursor = queue.now() - micros(config.cursor_lag());
        let all = queue.read_index(cursor, usize::MAX).await.unwrap();
        assert!(all.complete);
        assert_eq!(all.entries.len(), 3);
        assert!((190..=200).contains(&all.requests), "{}", all.requests);
        let part = queue.read_index(cursor, 5).await.unwrap();
        assert!(!part.complete);
        assert_eq!(part.requests, 5);
    }
}
