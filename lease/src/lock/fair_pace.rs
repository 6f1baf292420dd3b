//! How often a waiter of the [fair lock](super::fair_lock) looks at the queue.
//!
//! The lock changes hands only when the waiter next in line notices the release, so the
//! hand-over is as fast as that waiter's poll. Polling everyone fast would load the store in
//! proportion to the contenders; polling everyone slowly (`poll_interval`) caps the lock at a
//! few hand-overs per poll. So each waiter paces itself by its place in the queue:
//!
//! - **next in line** (place 1; it reads the main row, where its early claim stands, see
//!   [`fair_claim`](super::fair_claim)): reads start half the time it has already spent
//!   waiting on the current holder apart, at least one measured round trip, at most
//!   `poll_interval`: a quick hand-over is noticed within about a round trip, and after the
//!   first few reads a long hold costs one read per `poll_interval` (the gaps grow
//!   geometrically up to that). A gap shorter than the timer's tick (tokio rounds sleeps
//!   up to the next millisecond, several round trips on a LAN) is not slept: the next read
//!   goes out at once, so the next in line keeps one read in flight.
//! - **second in line** (place 2): paced as below, but like the next in line it reads at
//!   once rather than sleep less than a tick: with a short hold it is next in line before
//!   such a sleep would end. While it reads back to back it reads the main row along with
//!   the queue, so that it can claim early on the read that finds it next in line.
//! - **within the window** (places 2 to [`WINDOW`] - 1): looks again after about half the
//!   time the places ahead of it should take, (place - 1) × hand-over time / 2, where the
//!   hand-over time is measured from how fast its own place went down (at least the time
//!   since it last moved); between one round trip and place × `poll_interval / 5` (so the
//!   first few places are awake when a long hold ends and hand-overs come quickly), at most
//!   `poll_interval`. A waiter halves its distance to the head per read, so it is next in
//!   line, polling fast, before its turn.
//! - **further back**: the waiter is not among the cells it read, so it estimates its place
//!   from their arrival times (as if the queue behind them were spaced as they are,
//!   [`estimated_place`]) and learns the hand-over time from how far the head moved between
//!   two of its reads ([`head_moved`]). It looks again after a quarter of the time the
//!   places between it and the window should take, never sooner than `poll_interval`, at
//!   most [`FAR_POLLS`] × `poll_interval`. Without a hand-over time yet (the first read, or
//!   the head moved beyond the cells read), every `poll_interval`. The quarter is
//!   deliberate: arrival times are spaced unevenly (a burst of quick hand-overs, a busy
//!   client), so the estimate can be twice too far back, and a waiter that sleeps past its
//!   turn stalls everyone behind it. Aiming for the middle of the window with half the
//!   estimate (tried first) read a quarter less but granted a quarter fewer locks per
//!   second at 64 contenders.
//!
//! The extra load is therefore bounded whatever the number of contenders: at most two
//! waiters keep a read in flight (and only while the holder has held for less than a few
//! milliseconds), at most [`WINDOW`] poll faster than `poll_interval`, at rates falling with
//! their place, and those further back read less often the further back they are. Each
//! read asks for at most [`WINDOW`] + 1 queue cells, and only as many as the waiter's last
//! place needs. An estimate that is wrong (clocks that disagree spread the arrival times)
//! costs at most a late or an extra read, bounded by the cap.
//! After a collision in the main row (a releasing holder's main cell not yet deleted, a
//! `try_lock`, a latecomer whose clock is behind) the head backs off exponentially from one
//! round trip. Pacing changes only when contenders read, never what they write: safety rests
//! on the main row as before.

use std::time::Duration;

use tokio::time::Instant;

/// How deep into the queue a waiter counts its place; deeper waiters poll slowly.
pub(crate) const WINDOW: usize = 16;

/// Beyond the window, a waiter reads at least once per this many `poll_interval`s.
pub(crate) const FAR_POLLS: u32 = 4;

/// The places that read back to back rather than sleep less than a tick.
const FAST_PLACES: usize = 2;

/// The timer's resolution: a shorter sleep lasts about this long anyway.
const TICK: Duration = Duration::from_millis(1);

/// A waiter's pace: what it measured so far.
#[derive(Debug)]
pub(crate) struct Pace {
    poll: Duration,
    floor: Duration,
    round_trip: Option<Duration>,
    /// How long the last read took.
    last_took: Duration,
    /// Estimated time per hand-over (from the waiter's own place going down).
    hand_over: Option<Duration>,
    /// When the place last changed (or was first seen), and that place.
    since: Option<(Instant, usize)>,
    /// When the last read returned.
    last_read: Option<Instant>,
    /// Beyond the window: the estimated place, and since when the head has not moved.
    far: Option<(usize, Instant)>,
    /// Beyond the window: the time per hand-over, from the head's moves.
    far_hand_over: Option<Duration>,
    collisions: u32,
}

impl Pace {
    /// A pace for a waiter whose slow poll is `poll`.
    pub(crate) fn new(poll: Duration) -> Self {
        Pace {
            poll,
            // Even a store that answers at once (a test's) is not polled in a busy loop.
            floor: poll / 200,
            round_trip: None,
            last_took: Duration::ZERO,
            hand_over: None,
            since: None,
            last_read: None,
            far: None,
            far_hand_over: None,
            collisions: 0,
        }
    }

    /// How long the last queue read took.
    pub(crate) fn last_took(&self) -> Duration {
        self.last_took
    }

    /// How many queue cells the next read asks for: enough to find this waiter one place
    /// further back than last time (a latecomer may sort ahead), at most the window + 1.
    pub(crate) fn read_limit(&self) -> usize {
        match self.since {
            Some((_, place)) if place < WINDOW => place + 2,
            _ => WINDOW + 1,
        }
    }

    fn round_trip(&self) -> Duration {
        self.round_trip.unwrap_or(self.floor).max(self.floor)
    }

    /// Records a queue read that took `took` and found this waiter at `place` (0 = head;
    /// `place >= read_limit` means not found among the cells read: then it is the
    /// [estimated](estimated_place) place), the head having moved `moved` places since the
    /// previous read (`None`: unknown).
    pub(crate) fn observed(
        &mut self,
        now: Instant,
        took: Duration,
        place: usize,
        moved: Option<usize>,
    ) {
        self.last_took = took;
        self.round_trip = Some(match self.round_trip {
            None => took,
            Some(rt) => (rt * 3 + took) / 4,
        });
        self.observed_far(now, place, moved);
        let place = place.min(WINDOW);
        match self.since {
            Some((at, before)) if place < before && before < WINDOW => {
                // The moves happened since the last read: after a long hold that is the
                // pace of the burst that follows, not of the hold.
                let moved = u32::try_from(before - place).unwrap_or(u32::MAX);
                let from = self.last_read.unwrap_or(at).max(at);
                let sample = now.saturating_duration_since(from) / moved;
                self.hand_over = Some(match self.hand_over {
                    None => sample,
                    Some(h) => (h + sample) / 2,
                });
                self.since = Some((now, place));
            }
            Some((_, before)) if place == before => {}
            _ => self.since = Some((now, place)),
        }
        self.last_read = Some(now);
    }

    /// Beyond the window the waiter's own place says nothing: learn the hand-over time
    /// from the head's moves instead.
    fn observed_far(&mut self, now: Instant, place: usize, moved: Option<usize>) {
        if place < WINDOW {
            self.far = None;
            return;
        }
        let still_since = match (moved, self.far, self.last_read) {
            (Some(0), Some((_, since)), _) => since,
            (Some(moved), Some(_), Some(last)) => {
                let moved = u32::try_from(moved).unwrap_or(u32::MAX);
                let sample = now.saturating_duration_since(last) / moved;
                self.far_hand_over = Some(match self.far_hand_over {
                    None => sample,
                    Some(h) => (h + sample) / 2,
                });
                now
            }
            _ => now,
        };
        self.far = Some((place, still_since));
    }

    /// Beyond the window: a quarter of the time the places down to the window should take
    /// (a hand-over takes at least as long as the head has stood still), between
    /// `poll_interval` and [`FAR_POLLS`] of them.
    fn far_gap(&self, now: Instant) -> Duration {
        let (Some((place, still_since)), Some(hand_over)) = (self.far, self.far_hand_over) else {
            return self.poll;
        };
        let hand_over = hand_over.max(now.saturating_duration_since(still_since));
        let places = u32::try_from(place - WINDOW).unwrap_or(u32::MAX);
        (hand_over.saturating_mul(places) / 4).clamp(self.poll, self.poll * FAR_POLLS)
    }

    /// How long to wait before the next read, given the last place observed.
    pub(crate) fn delay(&self, now: Instant) -> Duration {
        let Some((at, place)) = self.since else {
            return self.poll;
        };
        let rt = self.round_trip();
        let waited = now.saturating_duration_since(at);
        // The gap between the starts of two reads.
        let gap = match place {
            0 | 1 => (waited / 2).clamp(rt, self.poll.max(rt)),
            p if p < WINDOW => {
                // At least two round trips per hand-over (the release, the next in line's read),
                // and at least the time this waiter has stood still.
                // At most p × poll/5 apart, so that after a long hold the first few
                // places are awake for the burst of hand-overs that follows.
                let hand_over = self.hand_over.unwrap_or(rt * 2).max(waited);
                let p = u32::try_from(p).unwrap_or(u32::MAX);
                (hand_over * (p - 1) / 2).clamp(rt, (self.poll * p / 5).min(self.poll).max(rt))
            }
            _ => return self.far_gap(now).saturating_sub(self.last_took),
        };
        let left = gap.saturating_sub(self.last_took);
        // At once if a sleep would overshoot, for the next two in line (the second may be
        // next before a sleep would end); never for a store that answers instantly (a
        // test's), which would spin.
        if place <= FAST_PLACES && left < TICK && self.last_took >= self.floor {
            Duration::ZERO
        } else {
            left.max(self.floor)
        }
    }

    /// After a collision in the main row: an exponential back-off from one round trip,
    /// at most twice `poll_interval`.
    pub(crate) fn collided(&mut self) -> Duration {
        let rt = self.round_trip();
        let delay = rt.saturating_mul(1 << self.collisions.min(16));
        self.collisions += 1;
        delay.min((self.poll * 2).max(rt))
    }

    /// The main-row attempt did not collide.
    pub(crate) fn no_collision(&mut self) {
        self.collisions = 0;
    }
}

/// The arrival time (microseconds) a queue cell's name starts with.
fn arrival(name: &str) -> Option<i64> {
    name.get(..20)?.parse().ok()
}

/// The place of `mine` in a queue whose first cells are `read` (in queue order) when it is
/// not among them: at least `read.len()`, more if `mine` arrived later after the last cell
/// read than the cells read are spaced, by as many places as that spacing fits in between.
/// Arrival times that cannot be read or do not spread give `read.len()`.
pub(crate) fn estimated_place(read: &[String], mine: &str) -> usize {
    let known = read.len();
    let (Some(first), Some(last), Some(mine)) = (
        read.first().and_then(|c| arrival(c)),
        read.last().and_then(|c| arrival(c)),
        arrival(mine),
    ) else {
        return known;
    };
    let (span, behind) = (last - first, mine - last);
    if known < 2 || span <= 0 || behind <= 0 {
        return known;
    }
    let spacing = span / i64::try_from(known - 1).unwrap_or(i64::MAX);
    let between = usize::try_from(behind / spacing.max(1)).unwrap_or(usize::MAX);
    known.saturating_add(between.saturating_sub(1))
}

/// How many places the head moved between a read that found `before` and one whose first
/// cell is `head`: `None` when the head is not among the cells read before.
pub(crate) fn head_moved(before: &[String], head: &str) -> Option<usize> {
    before.iter().position(|c| c == head)
}

#[cfg(test)]
#[path = "fair_pace_tests.rs"]
mod tests;
