//! Where index entries go so that the cursor never passes a live one.
//!
//! A scanner moves the cursor to at most its own clock, read before its scan, minus
//! `cursor_lag`. A scanner that missed an entry read before the entry's write landed, so by
//! clocks correct within `max_clock_skew` the cursor it writes is at most the landing time
//! plus `2 x max_clock_skew` minus the lag. An entry that lands within
//! `cursor_lag - 2 x max_clock_skew` of its position is therefore never passed.
//! [`WorkQueue::place_in_time`] makes sure of that before anything depends on the entry (an
//! enqueue writes its row only after it), so a process that dies at any later point leaves
//! a findable entry; [`WorkQueue::keep_ahead_of_cursor`] then catches clocks off by more
//! than the skew.

use cql_lease::StoreError;
use tokio::time::Instant;
use tracing::warn;

use crate::config::micros;
use crate::error::QueueError;
use crate::item::IndexEntry;
use crate::queue::WorkQueue;

impl WorkQueue {
    /// Places `entry`; while its write lands too late for its position to be safe from the
    /// cursor, places it again at a fresh position (this clock's reading, or its own if
    /// later) and removes the late copy. Returns the entry that landed in time and when its
    /// write was sent.
    ///
    /// Gives up after `resolve_timeout` of late writes, removing what it placed: callers
    /// place before writing anything that depends on the entry.
    pub(crate) async fn place_in_time(
        &self,
        mut entry: IndexEntry,
    ) -> Result<(IndexEntry, Instant), QueueError> {
        let window =
            micros(self.config.cursor_lag()) - 2 * micros(self.config.claim.max_clock_skew);
        let give_up_at = Instant::now() + self.config.claim.resolve_timeout;
        let mut late: Option<IndexEntry> = None;
        loop {
            let sent = Instant::now();
            let clock = self.now();
            let placed = self.place(&entry).await;
            let landed_by = clock.saturating_add(micros(sent.elapsed()));
            if let Some(late) = late.take() {
                self.remove(&late).await;
            }
            placed?;
            if landed_by <= entry.pos.saturating_add(window) {
                return Ok((entry, sent));
            }
            warn!(
                id = %entry.id,
                pos = entry.pos,
                late_by = landed_by - entry.pos,
                "index entry landed too late for its position"
            );
            if Instant::now() >= give_up_at {
                self.remove(&entry).await;
                return Err(QueueError::Store {
                    operation: "place index entry",
                    source: StoreError::Unavailable(format!(
                        "index writes keep landing more than {window} us after their position"
                    )),
                });
            }
            // Moved past its position, it is due when seen (its row says when it may run).
            let fresh = entry.pos.max(self.now());
            let immediate = entry.immediate || fresh > entry.pos;
            let again = self.entry(&entry.id, fresh, entry.kind, immediate, entry.attempt);
            late = Some(std::mem::replace(&mut entry, again));
        }
    }

    /// Re-places `entry` while the cursor could have passed it: the cursor only moves to
    /// `scanner clock - lag`, so an entry written within `lag - 2 x skew` of a correct
    /// clock's reading is safe; a slow write or a clock behind is caught here and the entry
    /// moves to `cursor + lag`. An immediate entry far ahead of the cursor (a clock ahead)
    /// moves back to `cursor + lag`, where scanners look now.
    pub(crate) async fn keep_ahead_of_cursor(
        &self,
        mut entry: IndexEntry,
        mut written_from: Instant,
    ) -> Result<(), QueueError> {
        let lag = micros(self.config.cursor_lag());
        let skew = micros(self.config.claim.max_clock_skew);
        // Scanners read up to their clock + `scan_ahead`; the cursor trails their clock by
        // `lag` to `lag + cursor_refresh`.
        let ahead_limit = 2 * lag + micros(self.config.cursor_refresh);
        for _ in 0..3 {
            let (cursor, cold) = self.read_cursor_cold().await?;
            let elapsed = micros(written_from.elapsed());
            let behind = entry.pos < cursor + lag - skew + elapsed.min(lag);
            let ahead = !cold && entry.immediate && entry.pos > cursor + ahead_limit;
            if !behind && !ahead {
                return Ok(());
            }
            let pos = if ahead {
                cursor + lag
            } else {
                self.now().max(cursor + lag)
            };
            let moved = self.entry(&entry.id, pos, entry.kind, entry.immediate, entry.attempt);
            warn!(id = %entry.id, from = entry.pos, to = pos, cursor, "entry re-placed next to the cursor");
            written_from = Instant::now();
            self.replace(&entry, &moved).await?;
            entry = moved;
        }
        Ok(())
    }
}
