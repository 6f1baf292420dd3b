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
//!
//! The same rule keeps entries clear of range deletions (`dispatch::compact`): a scanner
//! deletes only stretches below its clock minus the lag, and below the clock reading it last
//! noted in the fleet clock. So an entry placed at or above the fleet clock minus the lag
//! (less the skew) by a writer that read the fleet clock after its write landed is outside
//! every deletion; one below it (a writer's clock behind the fleet's) is placed again at
//! the fleet clock.

use cql_lease::StoreError;
use tokio::time::Instant;
use tracing::{debug, warn};

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
            micros(self.config.cursor_lag()) - 2 * micros(self.config.timing.max_clock_skew);
        let give_up_at = Instant::now() + self.config.timing.resolve_timeout;
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
    /// moves forward to `cursor + lag`. An immediate entry far ahead of where scanners read
    /// (this clock ahead of the fleet's) gets a copy there: see [`Self::copy_back_after`].
    pub(crate) async fn keep_ahead_of_cursor(
        &self,
        mut entry: IndexEntry,
        mut written_from: Instant,
    ) -> Result<(), QueueError> {
        self.keep_entry_ahead(&mut entry, &mut written_from).await
    }

    /// [`Self::keep_ahead_of_cursor`] on the caller's `entry` and `written_from`, left as
    /// the entry now is (moved or not), so a caller that retries after an error goes on
    /// from there.
    pub(crate) async fn keep_entry_ahead(
        &self,
        entry: &mut IndexEntry,
        written_from: &mut Instant,
    ) -> Result<(), QueueError> {
        let lag = micros(self.config.cursor_lag());
        let skew = micros(self.config.timing.max_clock_skew);
        for _ in 0..3 {
            let ((cursor, cold), fleet) =
                tokio::try_join!(self.read_cursor_cold(), self.read_fleet_clock())?;
            let elapsed = micros(written_from.elapsed());
            // Range deletions stay below a scanner's noted clock minus the lag, and the
            // fleet clock is at least that noted reading: an entry of a clock behind the
            // fleet's by more than the lag could lie under one.
            let clear_of_deletions = entry.pos >= fleet - lag + skew;
            if entry.pos >= cursor + lag - skew + elapsed.min(lag) && clear_of_deletions {
                if !cold && entry.immediate && entry.pos > cursor + self.ahead_limit() {
                    self.copy_back_after(entry, cursor, fleet).await?;
                }
                return Ok(());
            }
            let pos = self.now().max(cursor + lag).max(fleet);
            let moved = self.entry(&entry.id, pos, entry.kind, entry.immediate, entry.attempt);
            warn!(id = %entry.id, from = entry.pos, to = pos, cursor, "entry moved ahead of the cursor");
            (*entry, *written_from) = self.replace(entry, &moved).await?;
        }
        Ok(())
    }

    /// How far above the cursor (or the fleet clock) an immediate entry may lie and still
    /// be read soon: scanners read up to their clock plus `lag + cursor_refresh`, the cursor
    /// trails their clock by at least `lag`, and the fleet clock trails it by up to
    /// `cursor_refresh` (and as much again between its writes).
    fn ahead_limit(&self) -> i64 {
        2 * micros(self.config.cursor_lag()) + 2 * micros(self.config.cursor_refresh)
    }

    /// An immediate entry far above the cursor: either the cursor is old (a backlog holds
    /// it, or nobody rescanned for a while) and the entry is where it belongs, or this
    /// clock is ahead of the scanners' and they will not read that far for a while. The
    /// fleet clock (the latest clock reading of any scanner) tells them apart. Only in the
    /// second case is a copy placed next to where scanners read, and the original stays:
    /// moving an entry backwards could put it where a scan already in progress has read,
    /// which would then move the cursor past it, so the copy only makes the item found
    /// sooner and never decides whether it is found.
    async fn copy_back_after(
        &self,
        entry: &IndexEntry,
        cursor: i64,
        fleet: i64,
    ) -> Result<(), QueueError> {
        if fleet <= 0 || entry.pos <= fleet + self.ahead_limit() {
            return Ok(());
        }
        let pos = fleet.max(cursor) + micros(self.config.cursor_lag());
        let copy = self.entry(&entry.id, pos, entry.kind, entry.immediate, entry.attempt);
        warn!(id = %entry.id, at = entry.pos, copy = pos, fleet, "entry ahead of the fleet's clocks; a copy placed where scanners read");
        self.place(&copy).await
    }

    /// The fleet clock's cell: a cursor cell under a name no queue can have (queue names
    /// refuse control characters), so it shares the cursor's never-decreasing write.
    fn fleet_clock_name(&self) -> String {
        format!("{}\u{1f}clock", self.name())
    }

    /// Records `now` (this process's clock, read before a rescan from the cursor) in the
    /// fleet clock; returns whether it stands. A failure only makes enqueuers whose clock
    /// is ahead wait longer, and keeps this process's range deletions below its last
    /// noted reading, so it is logged, not returned.
    pub(crate) async fn note_fleet_clock(&self, now: i64) -> bool {
        let name = self.fleet_clock_name();
        match self.store.advance_cursor(&name, now).await {
            Ok(()) => {
                debug!(queue = %self.name(), now, "fleet clock noted");
                true
            }
            Err(error) => {
                warn!(queue = %self.name(), %error, "fleet clock not noted");
                false
            }
        }
    }

    /// The latest clock reading any scanner noted (0 if none did).
    async fn read_fleet_clock(&self) -> Result<i64, QueueError> {
        self.store
            .read_cursor(&self.fleet_clock_name())
            .await
            .map_err(|source| QueueError::Store {
                operation: "read fleet clock",
                source,
            })
    }
}
