//! One scan pass of the order index into the dispatcher's buffer: this process's share
//! first, then others' entries left waiting; the shared cursor moved up behind it.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;

use tokio::time::Instant;
use tracing::debug;

use super::compact::{ReadSpan, seq_pos};
use super::ledger::BLIND_EXTRA;
use super::{MAX_PAGES, MAX_READS, READ_AHEAD, STEAL_AGE, ScanState, scan_error};
use crate::config::micros;
use crate::error::QueueError;
use crate::item::IndexEntry;
use crate::queue::WorkQueue;

impl WorkQueue {
    /// One scan pass into the buffer, from our position or from the cursor: this process's
    /// share of the entries, then others' entries it passed over at least `STEAL_AGE` ago
    /// that lag behind its own work (or any such, when `idle`), newest first: the owner
    /// works from its oldest, so the thief meets it last.
    pub(super) async fn refill(&self, state: &mut ScanState, idle: bool) -> Result<(), QueueError> {
        let now = self.now();
        let width = self.config.bucket_micros();
        // Nothing above `now + lag + cursor_refresh` is read: future check entries (and
        // their tombstones) are not walked long before they are due. Immediate entries of
        // clocks further ahead were re-placed below it by their enqueuers.
        let lag = micros(self.config.cursor_lag());
        let from_cursor = state.position.is_none();
        // Between restarts a process reads only up to its clock.
        let horizon = if from_cursor {
            now + lag + micros(self.config.cursor_refresh)
        } else {
            now
        };
        let last_bucket = horizon / width;
        let before = IndexEntry::seq_floor(horizon + 1);
        // Stretches below this are closed: nothing lands there any more (see `compact`).
        // Entries written from the first scan on are counted as reads return them.
        let blind = lag + micros(BLIND_EXTRA);
        self.dispatcher.ledger().start(now, blind);
        let (mut bucket, mut after, cursor) = match state.position.take() {
            Some((bucket, after)) => (bucket, after, None),
            None => {
                let cursor = self.read_cursor().await?;
                state.last_restart = Some(Instant::now());
                self.dispatcher.handed_out.store(0, Ordering::Relaxed);
                self.dispatcher.ledger().forget_below(cursor);
                // At every rescan: range deletions stay below what was noted.
                if self.note_fleet_clock(now).await {
                    state.noted = Some(now);
                }
                state.ahead.clear();
                self.dispatcher.slots.fade(self.config.cursor_refresh * 3);
                (cursor / width, IndexEntry::seq_floor(cursor), Some(cursor))
            }
        };
        // Range deletions stay below this (see `compact`): what a placer whose clock is
        // behind checks its entries against (`placement`).
        let closed = state
            .noted
            .map_or(i64::MIN, |noted| noted.min(now).saturating_sub(lag));
        let limit = self.config.scan_limit;
        // Several candidates per local claimer: claimers of other processes that read the
        // same head then start on different items (see `pick`).
        let claimers = self.dispatcher.active.load(Ordering::Relaxed).max(1);
        // At most two pages: local claimers wait for a refill.
        let target = (READ_AHEAD * claimers).clamp(limit as usize, 2 * limit as usize);
        let mut first_live: Option<i64> = None;
        let mut covered;
        let mut pages = 0;
        let mut reads = 0;
        let slots = &self.dispatcher.slots;
        // Others' entries this pass saw (a pass from the cursor to the horizon forgets the
        // rest of what it passed over: they left the index).
        let mut foreign = HashSet::new();
        // Entries taken from others, oldest first; only the newest `target` are kept.
        let mut stolen = VecDeque::new();
        loop {
            // A slice spanning a bounded number of the entries ever written (`ledger`).
            let from = seq_pos(&after, bucket, width);
            let (end, blind) = {
                let ledger = self.dispatcher.ledger();
                (ledger.slice_end(from, horizon + 1), ledger.blind(from))
            };
            // A slice ending past this bucket reads the bucket to its end.
            let sliced = end <= horizon && end < (bucket + 1).saturating_mul(width);
            let slice = if sliced {
                IndexEntry::seq_floor(end)
            } else {
                before.clone()
            };
            let page = self
                .store
                .scan_index(self.name(), bucket, &after, &slice, limit)
                .await
                .map_err(scan_error)?;
            // Blind slices are few (`cursor_lag + BLIND_EXTRA` in slices of `BLIND_SLICE`)
            // and once per process: they do not cut a first scan short.
            reads += u32::from(!blind);
            let full = page.len() == limit as usize;
            self.dispatcher
                .ledger()
                .saw(bucket, now, page.iter().map(|e| (e.seq.as_str(), e.pos)));
            self.compact(
                &ReadSpan {
                    bucket,
                    after: &after,
                    live: page.iter().map(|e| e.seq.clone()).collect(),
                    reached: (!full).then_some(slice.as_str()),
                },
                closed,
            );
            let mut blocked = false;
            for entry in page {
                first_live.get_or_insert(entry.pos);
                let in_flight = self
                    .dispatcher
                    .in_flight
                    .lock()
                    .is_ok_and(|set| set.contains(&entry.seq));
                // Whether to take the entry, and whether it is another process's.
                let mut take = |entry: &IndexEntry| {
                    if slots.owns(entry) {
                        return Some(false);
                    }
                    foreign.insert(entry.seq.clone());
                    slots.steal(entry, idle, STEAL_AGE).then_some(true)
                };
                let taken = if in_flight {
                    after = entry.seq.clone();
                    None
                } else if entry.pos <= now {
                    after = entry.seq.clone();
                    take(&entry)
                } else if entry.immediate {
                    // Ahead of our clock: eligible, but our position stays at our clock so
                    // entries written later below it are still found.
                    take(&entry).filter(|_| state.ahead.insert(entry.seq.clone()))
                } else {
                    blocked = true;
                    break;
                };
                match taken {
                    Some(false) => state.buffer.push_back(entry),
                    Some(true) => {
                        if stolen.len() >= target {
                            stolen.pop_front();
                        }
                        stolen.push_back(entry);
                    }
                    None => {}
                }
            }
            covered = blocked || (!full && !sliced && bucket >= last_bucket);
            // Only full pages count: empty buckets between the cursor and now are cheap.
            pages += u32::from(full);
            if blocked
                || state.buffer.len() >= target
                || covered
                || pages >= MAX_PAGES
                || reads >= MAX_READS
            {
                if !blocked && !full && sliced && slice > after {
                    after = slice;
                }
                break;
            }
            // A full page of entries local claimers are still working on: read on in this
            // bucket; a slice read to its end: the next slice; an exhausted bucket: the
            // next one.
            if !full && sliced {
                if slice > after {
                    after = slice;
                }
            } else if !full {
                bucket += 1;
                after = String::new();
            }
        }
        if from_cursor {
            state.steal_more = stolen.len() >= target;
        }
        if !stolen.is_empty() {
            debug!(queue = %self.name(), stolen = stolen.len(), idle, "others' entries taken");
        }
        state.buffer.extend(stolen.into_iter().rev());
        if covered {
            // Everything live up to the horizon is buffered (or blocked behind a delayed
            // entry): what is written from now on lands at `now - lag` or later, so the
            // tombstones below it need not be read again.
            let floor = now - lag;
            if (floor / width, IndexEntry::seq_floor(floor)) > (bucket, after.clone()) {
                bucket = floor / width;
                after = IndexEntry::seq_floor(floor);
            }
        }
        if from_cursor && covered {
            slots.keep_passed(|seq| foreign.contains(seq));
        }
        debug!(queue = %self.name(), bucket, from_cursor, found = state.buffer.len(), "index scanned");
        if let Some(cursor) = cursor {
            let bucket_start = bucket * width;
            let reached = match first_live {
                Some(pos) => pos,
                None if covered => now - lag,
                None => bucket_start.max(cursor),
            };
            let target = reached.min(now - lag);
            if target > cursor {
                self.store
                    .advance_cursor(self.name(), target)
                    .await
                    .map_err(scan_error)?;
                self.dispatcher.saw_cursor(target);
                debug!(queue = %self.name(), from = cursor, to = target, "cursor advanced");
            }
        }
        // A scan from the cursor reads ahead of our clock (immediate entries of clocks ahead),
        // and may have stepped into a bucket that starts after it; but entries are still
        // written at our clock (an undo's or hand-back's run entry, an enqueue), so the next
        // scan must start no later than just past it. Entries ahead read again then are
        // known (`ahead`) or not due.
        let clock_floor = now.saturating_add(1);
        let ceiling = (clock_floor / width, IndexEntry::seq_floor(clock_floor));
        if (bucket, after.clone()) > ceiling {
            (bucket, after) = ceiling;
        }
        state.position = Some((bucket, after));
        Ok(())
    }
}
