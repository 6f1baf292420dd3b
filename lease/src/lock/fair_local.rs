//! What a process knows of its own contenders on a [fair lock](super), and the reads it saves.
//!
//! A contender of this process says when its claim lands in the main row, when it holds the
//! lock and when its claim is gone (see `shared_looks.rs`). The next in line behind such a
//! contender need not read the main row to learn what it would show: it waits to be told,
//! and reads once the head has left. Waiters further back count the holders of this
//! process that leave the main row, and look again once enough have left to bring them
//! next in line, if that comes before their pace's timer; the next in line whose head is
//! not known here looks again on any change among this process's contenders. Their pace's
//! timer still wakes them at the latest, for contenders of other processes. What decides ownership is unchanged: a contender owns
//! the lock only on a main-row read made after its own claim was confirmed, showing it alone.

use tokio::time::Instant;

use std::sync::Arc;

use super::super::fair_pace::WINDOW;
use super::super::plain::Cells;
use super::queue::QueueSeen;
use crate::shared_looks::{SharedLooks, Tally};

/// What a waiter behind a contender of this process waits for, instead of reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// The holder ahead to leave the main row: then the lock may be ours (claimed next in
    /// line), or we are next in line.
    Gone,
    /// The claimant ahead to hold the lock or leave: claiming early before it holds would
    /// make it wait on our claim (it counts claims behind it as ones that give way).
    HeldOrGone,
    /// This process's claims to have left the main row this many times in all
    /// ([`SharedLooks::departures`]): a waiter further back is then likely next in line.
    /// Its pace still wakes it, for holders of other processes.
    Moved(u64),
    /// Anything to have happened to this process's claims since the round began (the
    /// [`SharedLooks::stirs`] count past this): the head ahead of the next in line may be
    /// one of ours about to claim, hold or leave. Its pace still wakes it, for others.
    Stirred(u64),
}

impl Until {
    /// The wait of a waiter at `place` whose head is `ahead`: `claimed` when it has its own
    /// claim in the main row, else waiting in the queue.
    ///
    /// `seen`: what this process's contenders had done before the queue read that placed
    /// the waiter was sent.
    pub(super) fn after_round(
        looks: &SharedLooks<QueueSeen>,
        (claimed, place): (bool, usize),
        ahead: Option<&str>,
        seen: Tally,
    ) -> Option<Until> {
        let departed = seen.departures;
        let ahead = ahead?;
        match (claimed, place) {
            // Next in line with its claim in: the holder's leaving is the hand-over.
            (true, 1) if looks.held_here(ahead) => Some(Until::Gone),
            // Next in line without a claim: it claims once the head holds.
            (false, 1) if looks.in_main_here(ahead) && !looks.held_here(ahead) => {
                Some(Until::HeldOrGone)
            }
            // Next in line once the holder leaves.
            (false, 2) if looks.held_here(ahead) => Some(Until::Gone),
            // Further back within the window: once as many have left as stand between us
            // and the next in line's place, a look most likely finds us there. Sooner than
            // the pace's timer, which cannot wake within less than its tick. Beyond the
            // window the place is only estimated (from arrival times, often far too far
            // back), but it is past the window: half a window's departures bring it in.
            (false, place) if (2..WINDOW).contains(&place) => {
                Some(Until::Moved(departed.saturating_add(place as u64 - 1)))
            }
            (false, place) if place >= WINDOW => {
                Some(Until::Moved(departed.saturating_add(WINDOW as u64 / 2)))
            }
            // Next in line, the head not known to be ours in the main row: it may be ours
            // and about to claim, hold or leave.
            (_, 1) => Some(Until::Stirred(seen.stirs)),
            _ => None,
        }
    }

    fn still(self, looks: &SharedLooks<QueueSeen>, ahead: &str) -> bool {
        match self {
            Until::Gone => looks.in_main_here(ahead),
            Until::HeldOrGone => looks.in_main_here(ahead) && !looks.held_here(ahead),
            Until::Moved(departures) => looks.departures() < departures,
            Until::Stirred(stirs) => looks.stirs() == stirs,
        }
    }

    /// Whether this wait is for word of the contender ahead, in place of the pace's timer
    /// (else it only comes sooner than the timer).
    pub(super) fn replaces_the_pace(self) -> bool {
        !matches!(self, Until::Moved(_) | Until::Stirred(_))
    }

    /// Waits until the contender `ahead` did what this waits for, or until `give_up_at`
    /// (should a word be missed: a contender cut off, a guard abandoned).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub(super) async fn wait(
        self,
        looks: &SharedLooks<QueueSeen>,
        ahead: &str,
        give_up_at: Instant,
    ) {
        loop {
            // Listening before looking: a change after the look still wakes us.
            // Counting departures needs no word of claims and holds.
            let changed = match self {
                Until::Moved(_) => looks.departure_seen(),
                _ => looks.release_seen(),
            };
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.still(looks, ahead) {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(give_up_at) => return,
                () = changed => {}
            }
        }
    }
}

/// Lets this process's waiters on the lock know when the contender of `cells` claims the
/// main row and when it leaves it.
pub(super) fn watched_by(cells: &Cells, looks: &Arc<SharedLooks<QueueSeen>>) {
    let looks = Arc::clone(looks);
    let id = cells.id().to_owned();
    looks.new_contender(&id);
    let _ = cells.on_main.set(Box::new(move |written| {
        if written {
            looks.claimed(&id);
        } else {
            looks.gone(&id);
        }
    }));
}
