//! Range deletion of stretches of the index a read found dead: the stretch's tombstones
//! (one per entry deleted there) merge into one range tombstone, so the next read of it
//! walks two markers instead of a tombstone per entry.
//!
//! Safe for the reason the cursor is: a stretch is deleted only below the reader's clock,
//! read before its read, minus `cursor_lag`, and every entry lands within `cursor_lag -
//! 2 x max_clock_skew` of its position (`placement`), so none can land there after the
//! read. What the read returned live bounds each stretch, so no live entry is in one.

use tracing::{debug, warn};

use super::Dispatcher;
use super::ledger::Ledger;
use crate::clock;
use crate::item::IndexEntry;
use crate::queue::WorkQueue;

/// One read of one bucket, as the compaction sees it.
pub(super) struct ReadSpan<'a> {
    pub bucket: i64,
    /// The read's start (exclusive).
    pub after: &'a str,
    /// The seqs of the live entries it returned, in order.
    pub live: Vec<String>,
    /// The read's end (exclusive) if it reached it: otherwise it stopped at its limit, after
    /// its last live entry.
    pub reached: Option<&'a str>,
}

/// The position of a seq (`"{pos:020}-..."`), or of the start of `bucket` for the empty seq.
pub(super) fn seq_pos(seq: &str, bucket: i64, width: i64) -> i64 {
    seq.get(..20)
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(bucket.saturating_mul(width))
}

impl Dispatcher {
    /// A check entry placed at `pos` by this process (see [`Ledger::placed`]).
    pub(crate) fn placed_at(&self, pos: i64) {
        let processes = self.slots.processes();
        self.ledger().placed(pos, processes);
    }

    pub(super) fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl WorkQueue {
    /// The stretches of `read` without a live entry, below position `closed`, that held at
    /// least a mark's worth of counted entries: each is range-deleted in the background
    /// (a failure only leaves the rows' own tombstones).
    pub(super) fn compact(&self, read: &ReadSpan<'_>, closed: i64) {
        let width = self.config.bucket_micros();
        let ceiling = IndexEntry::seq_floor(closed);
        let mut bounds: Vec<&str> = Vec::with_capacity(read.live.len() + 2);
        bounds.push(read.after);
        bounds.extend(read.live.iter().map(String::as_str));
        if let Some(end) = read.reached {
            bounds.push(end);
        }
        let mut stretches = Vec::new();
        {
            let ledger = self.dispatcher.ledger();
            for pair in bounds.windows(2) {
                let (from, to) = (pair[0], pair[1].min(ceiling.as_str()));
                if from >= to {
                    continue;
                }
                // A read's end may lie past its bucket: the deletion covers this bucket only.
                let bucket_end = (read.bucket + 1).saturating_mul(width);
                let (from_pos, to_pos) = (
                    seq_pos(from, read.bucket, width),
                    seq_pos(to, read.bucket, width).min(bucket_end),
                );
                if ledger.marked_between(from_pos, to_pos) {
                    stretches.push((from.to_owned(), to.to_owned(), from_pos, to_pos));
                }
            }
        }
        if stretches.is_empty() {
            return;
        }
        let (queue, bucket) = (self.clone(), read.bucket);
        // Stamped now, just after the read, not when the task gets to send it: above the
        // timestamps of the rows' own deletions by other clocks within the skew, so their
        // tombstones merge into it (nothing lands in the stretch any more).
        let skew = crate::config::micros(self.config.timing.max_clock_skew);
        let ts = clock::next_micros().saturating_add(skew);
        tokio::spawn(async move {
            for (after, before, from_pos, to_pos) in stretches {
                match queue
                    .store
                    .delete_range(queue.name(), bucket, &after, &before, ts)
                    .await
                {
                    Ok(true) => {
                        // Its marks no longer stand for tombstones: reads cross it whole.
                        queue.dispatcher.ledger().compacted(from_pos, to_pos);
                        debug!(queue = %queue.name(), bucket, %after, %before, "dead index stretch range-deleted")
                    }
                    Ok(false) => return,
                    Err(error) => {
                        warn!(queue = %queue.name(), bucket, %error, "range deletion failed")
                    }
                }
            }
        });
    }
}
