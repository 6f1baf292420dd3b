//! How often a waiter of the [fair lock](super::fair_lock) looks at the queue.
//!
//! The lock changes hands only when the waiter next in line notices the release, so the
//! hand-over is as fast as that waiter's poll. Polling everyone fast would load the store in
//! proportion to the contenders; polling everyone slowly (`poll_interval`) caps the lock at a
//! few hand-overs per poll. So each waiter paces itself by its place in the queue:
//!
//! - **next in line** (place 1): reads start half the time it has already spent waiting on
//!   the current holder apart, at least one measured round trip, at most `poll_interval /
//!   10`: a quick hand-over is noticed within about a round trip, a long hold costs a few
//!   reads (the gaps grow geometrically). A gap shorter than the timer's tick (tokio
//!   rounds sleeps up to the next millisecond, several round trips on a LAN) is not slept:
//!   the next read goes out at once, so the next in line keeps one read in flight.
//! - **second in line** (place 2): paced as below, but like the next in line it reads at
//!   once rather than sleep less than a tick: with a short hold it is next in line before
//!   such a sleep would end.
//! - **within the window** (places 2 to [`WINDOW`] - 1): looks again after about half the
//!   time the places ahead of it should take, (place - 1) × hand-over time / 2, where the
//!   hand-over time is measured from how fast its own place went down (at least the time
//!   since it last moved); between one round trip and place × `poll_interval / 5` (so the
//!   first few places are awake when a long hold ends and hand-overs come quickly), at most
//!   `poll_interval`. A waiter halves its distance to the head per read, so it is next in
//!   line, polling fast, before its turn.
//! - **further back** (or unknown): every `poll_interval`, as before.
//!
//! The extra load is therefore bounded whatever the number of contenders: at most two
//! waiters keep a read in flight (and only while the holder has held for less than a few
//! milliseconds), at most [`WINDOW`] poll faster than `poll_interval`, at rates falling with
//! their place. Each read asks for at most [`WINDOW`] + 1 queue cells, and only as many as
//! the waiter's last place needs.
//! After a collision in the main row (a releasing holder's main cell not yet deleted, a
//! `try_lock`, a latecomer whose clock is behind) the head backs off exponentially from one
//! round trip. Pacing changes only when contenders read, never what they write: safety rests
//! on the main row as before.

use std::time::Duration;

use tokio::time::Instant;

/// How deep into the queue a waiter counts its place; deeper waiters poll slowly.
pub(crate) const WINDOW: usize = 16;

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
            collisions: 0,
        }
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
    /// `place >= read_limit` means not found among the cells read).
    pub(crate) fn observed(&mut self, now: Instant, took: Duration, place: usize) {
        self.last_took = took;
        self.round_trip = Some(match self.round_trip {
            None => took,
            Some(rt) => (rt * 3 + took) / 4,
        });
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

    /// How long to wait before the next read, given the last place observed.
    pub(crate) fn delay(&self, now: Instant) -> Duration {
        let Some((at, place)) = self.since else {
            return self.poll;
        };
        let rt = self.round_trip();
        let waited = now.saturating_duration_since(at);
        // The gap between the starts of two reads.
        let gap = match place {
            0 | 1 => (waited / 2).clamp(rt, (self.poll / 10).max(rt)),
            p if p < WINDOW => {
                // At least four round trips per hand-over (release, notice, write, read),
                // and at least the time this waiter has stood still.
                // At most p × poll/5 apart, so that after a long hold the first few
                // places are awake for the burst of hand-overs that follows.
                let hand_over = self.hand_over.unwrap_or(rt * 4).max(waited);
                let p = u32::try_from(p).unwrap_or(u32::MAX);
                (hand_over * (p - 1) / 2).clamp(rt, (self.poll * p / 5).min(self.poll).max(rt))
            }
            _ => return self.poll,
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

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_millis(20);
    const RT: Duration = Duration::from_micros(200);

    #[test]
    fn next_in_line_reads_back_to_back_then_backs_off_to_a_tenth_of_the_poll() {
        let t0 = Instant::now();
        let mut pace = Pace::new(POLL);
        pace.observed(t0, RT, 1);
        // Just arrived at place 1: read again at once.
        assert_eq!(pace.delay(t0), Duration::ZERO);
        assert_eq!(pace.delay(t0 + Duration::from_millis(2)), Duration::ZERO);
        // Waited 3 ms on the holder: the next read starts 1.5 ms after the last one did.
        assert_eq!(
            pace.delay(t0 + Duration::from_millis(3)),
            Duration::from_micros(1_500) - RT
        );
        // Never slower than a tenth of the poll.
        assert_eq!(pace.delay(t0 + Duration::from_secs(5)), POLL / 10 - RT);
        assert_eq!(pace.read_limit(), 3);
        // A slow store (10 ms round trips): one read in flight at a time, no sleep.
        let mut slow = Pace::new(POLL);
        slow.observed(t0, Duration::from_millis(10), 1);
        assert_eq!(slow.delay(t0 + Duration::from_secs(5)), Duration::ZERO);
    }

    #[test]
    fn waiters_further_back_poll_slower_and_beyond_the_window_at_the_poll() {
        let t0 = Instant::now();
        let at = |place| {
            let mut pace = Pace::new(POLL);
            pace.observed(t0, RT, place);
            pace.delay(t0)
        };
        // The next two in line read back to back; then slower and slower.
        assert_eq!((at(1), at(2)), (Duration::ZERO, Duration::ZERO));
        assert!(Duration::ZERO < at(3) && at(3) < at(4) && at(4) < at(8));
        assert!(at(WINDOW - 1) <= POLL);
        assert_eq!(at(WINDOW), POLL);
        assert_eq!(at(WINDOW + 5), POLL);
        let mut pace = Pace::new(POLL);
        assert_eq!(pace.read_limit(), WINDOW + 1);
        pace.observed(t0, RT, WINDOW + 1);
        assert_eq!(pace.read_limit(), WINDOW + 1);
    }

    #[test]
    fn the_hand_over_time_is_learnt_from_the_place_going_down() {
        let t0 = Instant::now();
        let mut pace = Pace::new(POLL);
        pace.observed(t0, RT, 9);
        // Four places in 2 ms: 0.5 ms per hand-over, so from place 5 wait (5-1) × 0.5 / 2.
        pace.observed(t0 + Duration::from_millis(2), RT, 5);
        assert_eq!(
            pace.delay(t0 + Duration::from_millis(2)),
            Duration::from_millis(1) - RT
        );
        // Standing still for 6 ms means a hand-over takes at least that long.
        assert_eq!(
            pace.delay(t0 + Duration::from_millis(8)),
            Duration::from_millis(12) - RT
        );
        assert_eq!(pace.read_limit(), 7);
    }

    #[test]
    fn collisions_back_off_exponentially_and_reset() {
        let t0 = Instant::now();
        let mut pace = Pace::new(POLL);
        pace.observed(t0, RT, 0);
        assert_eq!(pace.collided(), RT);
        assert_eq!(pace.collided(), RT * 2);
        assert_eq!(pace.collided(), RT * 4);
        for _ in 0..20 {
            assert!(pace.collided() <= POLL * 2);
        }
        pace.no_collision();
        assert_eq!(pace.collided(), RT);
    }

    #[test]
    fn an_instant_store_is_not_polled_in_a_busy_loop() {
        let t0 = Instant::now();
        let mut pace = Pace::new(POLL);
        pace.observed(t0, Duration::ZERO, 1);
        assert_eq!(pace.delay(t0), POLL / 200);
        assert_eq!(pace.delay(t0 + Duration::from_secs(5)), POLL / 10);
        assert_eq!(pace.collided(), POLL / 200);
    }
}
