//! Claims in the [fair lock](super::fair_lock)'s main row: who may keep its cell there while
//! it is not alone.
//!
//! In the original design a contender writes into the main row only once it is first in the queue,
//! so every hand-over waits for four store round trips one after the other (the holder's
//! delete, the next in line noticing it, its main-row write, its read back). Here the next
//! in line (place 1) writes its main cell while the holder still holds, and keeps it there
//! while the only other cells belong to a holder; it then polls the main row alone, and the
//! read that no longer shows the holder's cell is already its read back. A hand-over so
//! costs the holder's delete and one read.
//!
//! Ownership is unchanged: a contender owns the lock only when a read made after its own
//! write was confirmed shows its cell and no other (the original design's Lemma 1 needs nothing else),
//! and safety never depends on the rules below. They only decide who *keeps* a cell while
//! not alone, and must never let two contenders wait on each other for ever:
//!
//! - a cell marked [`HELD`] is an owner's (an owner rewrites its cell with that mark once
//!   it holds the lock, at once unless its next in line is of its own process, else once
//!   it has held for a `poll_interval`, see [`mark_held`]), and so is a cell of a contender its
//!   own process knows holds the lock, or held it last (a release not confirmed): such
//!   cells are read as marked. Owners and former owners wait for nobody, so waiting on one
//!   makes no cycle;
//! - a [`CLAIM`] cell of a contender queued *behind* this one (by this contender's last
//!   queue read) waits for this one: that contender finds this one's cell ahead of it and
//!   not held, so it gives way;
//! - any other cell (a claim ahead, a `try_lock`, a latecomer whose clock is behind, a
//!   cell this contender has not seen in the queue) is given way to, as in the original design, but
//!   only when the next read still shows it: the holder that has just taken the lock
//!   usually has not marked its cell yet, and by the next read it has often released.
//!
//! Two contenders each keeping a cell because of the other would need each to be behind the
//! other in the queue, or one of them to be an owner; neither can happen, so someone always
//! gives way. A lingering [`HELD`] cell (an owner that crashed) expires with its TTL, as in
//! the original design.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use super::fair_lock::queue::SharedQueue;
use super::fair_pace::Pace;
use super::numbering::poll_delay;
use super::plain::Cells;
use crate::cells::rows::MAIN;
use crate::cells::{Cell, ClientClock};

/// A main-row cell of a contender trying to own the lock.
pub(crate) const CLAIM: i64 = 1;

/// A main-row cell rewritten by its owner once it holds the lock.
pub(crate) const HELD: i64 = 2;

/// How many main-row cells a read asks for; a row that full counts as contended.
pub(crate) const MAIN_READ: usize = 8;

/// Back-to-back main-row reads, at most, while only claims behind us stand in the way.
const QUICK_HOLDS: u32 = 8;

/// Length of a queue cell's name before the contender id: arrival time and sequence.
const QUEUE_PREFIX: usize = 40;

/// The contender id of a queue cell's name.
pub(crate) fn contender_of(queue_cell: &str) -> Option<&str> {
    queue_cell.get(QUEUE_PREFIX..)
}

/// What a contender does after reading the main row with its own cell in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Its cell alone: it owns the lock.
    Alone,
    /// The queue decides: its cell is alone but it claimed as the next in line and has not
    /// seen the contender ahead of it in the main row since (that one may not have claimed
    /// yet: owning would be safe, but would overtake it), or others are there whom its
    /// last queue read does not place behind it (newcomers since).
    Unsure,
    /// Others are there whom it may wait on: keep the cell, read again.
    HoldOn,
    /// Give way: delete the cell (or write it again, if it was missing).
    Yield,
}

/// One contender's view for judging the main row, kept across its rounds.
#[derive(Debug, Default)]
pub(crate) struct Claim {
    /// The contender ids queued behind it, by its last queue read.
    behind: Vec<String>,
    /// The contender first in the queue when it claimed as the next in line.
    ahead: Option<String>,
    /// Whether a main-row read since then showed that contender's cell.
    ahead_seen: bool,
    /// Whether the previous read already showed a cell it may not wait on.
    strike: bool,
    /// Whether the last main-row read judged showed another's cell marked held.
    owner_seen: bool,
    /// Whether the last read before claiming showed the head's cell marked held.
    ahead_held: bool,
    /// The head this contender last gave way to: it claims early behind that head again
    /// only once its cell is marked held (else the two would collide again and again).
    yielded_to: Option<String>,
}

impl Claim {
    /// Records a queue read (cell names in queue order) in which this contender stood at
    /// `place` (`place >= queue.len()`: not among them).
    pub(crate) fn saw_queue(&mut self, queue: &[String], place: usize) {
        self.ahead = match place {
            0 => None,
            _ => queue
                .first()
                .and_then(|name| name.get(QUEUE_PREFIX..))
                .map(str::to_owned),
        };
        self.ahead_seen = false;
        self.behind = queue
            .iter()
            .skip(place.saturating_add(1))
            .filter_map(|name| name.get(QUEUE_PREFIX..))
            .map(str::to_owned)
            .collect();
    }

    /// Records a main-row read made before claiming, with the queue read that placed it.
    pub(crate) fn saw_main(&mut self, main: &[Cell]) {
        let Some(ahead) = &self.ahead else {
            return;
        };
        let cell = main.iter().find(|c| c.name == *ahead);
        self.ahead_seen |= cell.is_some();
        self.ahead_held = cell.is_some_and(|c| c.value == HELD);
    }

    /// Whether the contender ahead (as of the last queue read) has been seen in the main
    /// row since: true when nobody is ahead.
    pub(crate) fn head_claimed(&self) -> bool {
        match &self.ahead {
            None => true,
            Some(_) if !self.ahead_seen => false,
            Some(_) => self.ahead_held || self.yielded_to != self.ahead,
        }
    }

    /// Records that the contender ahead holds the lock, as this process knows (it is one
    /// of its own): as good as a read that shows its cell marked held.
    pub(crate) fn ahead_holds(&mut self) {
        if self.ahead.is_some() {
            self.ahead_seen = true;
            self.ahead_held = true;
        }
    }

    /// The contender first in the queue by the last queue read, unless it was us.
    pub(crate) fn ahead(&self) -> Option<&str> {
        self.ahead.as_deref()
    }

    /// Whether the last main-row read judged showed another contender's cell marked held.
    pub(crate) fn owner_seen(&self) -> bool {
        self.owner_seen
    }

    /// Judges a main-row read (at most [`MAIN_READ`] cells) made after `id`'s claim was
    /// confirmed. `fresh`: the queue was read this round, after the claim; otherwise a
    /// verdict that the queue could change comes back [`Verdict::Unsure`]: read the queue
    /// ([`Claim::saw_queue`]) and judge the same read again, fresh.
    pub(crate) fn judge(&mut self, main: &[Cell], id: &str, fresh: bool) -> Verdict {
        self.owner_seen = main.iter().any(|c| c.name != id && c.value == HELD);
        if !main.iter().any(|c| c.name == id) {
            // Our cell is gone (expired while we were paused): start the claim again.
            self.strike = false;
            return Verdict::Yield;
        }
        if let Some(ahead) = &self.ahead {
            self.ahead_seen |= main.iter().any(|c| c.name == *ahead);
        }
        if main.len() == 1 {
            self.strike = false;
            return match (&self.ahead, self.ahead_seen, fresh) {
                (Some(_), false, false) => Verdict::Unsure,
                (Some(_), false, true) => Verdict::HoldOn,
                _ => Verdict::Alone,
            };
        }
        let may_wait = main.len() < MAIN_READ
            && main
                .iter()
                .filter(|c| c.name != id)
                .all(|c| c.value == HELD || self.behind.contains(&c.name));
        let verdict = match (may_wait, fresh, self.strike) {
            (true, _, _) => Verdict::HoldOn,
            (false, false, _) => return Verdict::Unsure,
            (false, true, false) => Verdict::HoldOn,
            (false, true, true) => Verdict::Yield,
        };
        self.strike = !may_wait && verdict == Verdict::HoldOn;
        if verdict == Verdict::Yield {
            self.yielded_to.clone_from(&self.ahead);
        }
        debug!(
            others = main.len() - 1,
            may_wait,
            ?verdict,
            "main row shared"
        );
        verdict
    }
}

/// One acquisition's state across its rounds.
pub(crate) struct Waiter {
    /// Our queue cell's name.
    pub(crate) mine: String,
    /// Our place by the last queue read.
    pub(crate) place: usize,
    /// Whether the last pause was none (reads back to back).
    pub(crate) fast: bool,
    /// Back-to-back reads so far while waiting on claims behind us.
    pub(crate) quick_holds: u32,
    pub(crate) pace: Pace,
    /// The queue cells the previous queue read returned.
    pub(crate) seen: Vec<String>,
    pub(crate) claim: Claim,
    /// Our share in this process's looks at the queue (`None`: we read it ourselves).
    pub(crate) shared: Option<SharedQueue>,
    /// How long we last paused between rounds.
    pub(crate) paused: Duration,
}

impl Waiter {
    pub(crate) fn new(mine: String, poll: Duration) -> Self {
        Waiter {
            mine,
            place: usize::MAX,
            fast: false,
            quick_holds: 0,
            pace: Pace::new(poll),
            seen: Vec::new(),
            claim: Claim::default(),
            shared: None,
            paused: Duration::ZERO,
        }
    }

    /// Our queue cell was written just now: shared looks from now on only.
    pub(crate) fn queued(&mut self) {
        if let Some(shared) = self.shared.as_mut() {
            shared.after = Some(Instant::now());
        }
    }

    /// The pause after holding on: none for the first [`QUICK_HOLDS`] reads in a row while
    /// only claims behind us stand in the way (they give way within a few round trips),
    /// else the next in line's pace (at most `poll_interval`), so that a claim that never
    /// goes away (its contender cut off, until its TTL) costs a read per poll, not a spin.
    pub(crate) fn hold_pause(&mut self) -> Duration {
        if !self.claim.owner_seen() && self.quick_holds < QUICK_HOLDS {
            self.quick_holds += 1;
            return Duration::ZERO;
        }
        poll_delay(self.pace.delay(Instant::now()))
    }
}

/// Marks the new owner's main cell [`HELD`]: its later rewrites carry the mark, and it is
/// written after `delay` (at once when zero) unless the owner let go by then, in the
/// background, so that a next in line of another process keeps its claim on a marked cell
/// instead of giving way, and a `try_lock` sees an owner. The timestamp is taken now, before
/// the guard exists, so the guard's rewrites and its release (later timestamps) always win
/// over this write, whenever it lands. Until the mark lands (a delay, a failed write), a
/// next in line of another process gives way to the owner's claim and waits for the mark
/// or the release before it claims again, and a `try_lock` of another process that sorts
/// ahead (its clock behind) may poll for up to its few rounds' bound before it fails.
pub(crate) fn mark_held(cells: &Arc<Cells>, delay: Duration) {
    let id = cells.id().to_owned();
    if !cells.set_value(MAIN, &id, HELD) {
        return;
    }
    let timestamp = ClientClock::next();
    // Within the validity of the claim that won the lock, as the mark sent at once would
    // be: a late mark must not keep a cell of a hold that ended (abandoned, lost) alive
    // any longer than that.
    let give_up_at = Instant::now() + cells.validity();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let cells = Arc::clone(cells);
    runtime.spawn(async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
            if !cells.has(MAIN, &id) || !cells.still_valid() || Instant::now() >= give_up_at {
                return;
            }
        }
        let at = cells.at(MAIN, &id);
        match cells
            .durable
            .write(at, HELD, Some(cells.ttl()), timestamp, give_up_at)
            .await
        {
            Ok(()) => debug!(lock = %cells.lock, id, "main cell marked held"),
            Err(error) => debug!(lock = %cells.lock, id, %error, "held mark not written"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(name: &str, value: i64) -> Cell {
        Cell {
            name: name.to_owned(),
            value,
        }
    }

    fn queue(ids: &[&str]) -> Vec<String> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| format!("{:020}{:020}{id}", 100 + i, 0))
            .collect()
    }

    #[test]
    fn alone_owns_and_a_missing_own_cell_starts_over() {
        let mut claim = Claim::default();
        claim.saw_queue(&queue(&["b"]), 0);
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", true), Verdict::Alone);
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", false), Verdict::Alone);
        assert_eq!(claim.judge(&[cell("a", HELD)], "b", false), Verdict::Yield);
        assert_eq!(claim.judge(&[], "b", true), Verdict::Yield);
    }

    /// The next in line waits on a holder for ever, and owns once the holder's cell is gone.
    #[test]
    fn waits_on_a_holder_then_owns() {
        let mut claim = Claim::default();
        claim.saw_queue(&queue(&["a", "b", "c"]), 1);
        let main = [cell("a", HELD), cell("b", CLAIM)];
        assert_eq!(claim.judge(&main, "b", true), Verdict::HoldOn);
        for _ in 0..10 {
            assert_eq!(claim.judge(&main, "b", false), Verdict::HoldOn);
        }
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", false), Verdict::Alone);
    }

    /// Alone without ever seeing the head's cell: the head may not have claimed yet, so the
    /// queue decides; still second there, it holds on.
    #[test]
    fn alone_as_next_in_line_is_unsure_until_the_head_was_seen() {
        let mut claim = Claim::default();
        claim.saw_queue(&queue(&["a", "b"]), 1);
        assert_eq!(
            claim.judge(&[cell("b", CLAIM)], "b", false),
            Verdict::Unsure
        );
        claim.saw_queue(&queue(&["a", "b"]), 1);
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", true), Verdict::HoldOn);
        let shared = [cell("a", CLAIM), cell("b", CLAIM)];
        assert_eq!(claim.judge(&shared, "b", true), Verdict::HoldOn);
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", false), Verdict::Alone);
        // First in the queue by a fresh read: it owns.
        let mut claim = Claim::default();
        claim.saw_queue(&queue(&["a", "b"]), 1);
        assert_eq!(
            claim.judge(&[cell("b", CLAIM)], "b", false),
            Verdict::Unsure
        );
        claim.saw_queue(&queue(&["b"]), 0);
        assert_eq!(claim.judge(&[cell("b", CLAIM)], "b", true), Verdict::Alone);
    }

    /// The head that claims waits for the next in line to give way; the next in line gives
    /// way to the head's unmarked claim on its second fresh sight, so one of the two always
    /// deletes (no deadlock), and it is the one behind (no overtaking).
    #[test]
    fn a_claim_ahead_is_given_way_to_on_the_second_sight_and_the_head_keeps() {
        let q = queue(&["a", "b", "c"]);
        let main = [cell("a", CLAIM), cell("b", CLAIM)];
        let mut head = Claim::default();
        head.saw_queue(&q, 0);
        let mut next = Claim::default();
        next.saw_queue(&q, 1);
        for _ in 0..5 {
            assert_eq!(head.judge(&main, "a", false), Verdict::HoldOn);
        }
        assert_eq!(next.judge(&main, "b", false), Verdict::Unsure);
        assert_eq!(next.judge(&main, "b", true), Verdict::HoldOn);
        assert_eq!(next.judge(&main, "b", false), Verdict::Unsure);
        assert_eq!(next.judge(&main, "b", true), Verdict::Yield);
        // A read in between without the other cell resets the count.
        assert_eq!(next.judge(&main, "b", true), Verdict::HoldOn);
        assert_eq!(next.judge(&[cell("b", CLAIM)], "b", true), Verdict::Alone);
        assert_eq!(next.judge(&main, "b", true), Verdict::HoldOn);
    }

    /// A newcomer's claim that the last queue read did not place: the queue is read again,
    /// and a claim behind is waited on.
    #[test]
    fn a_newcomer_behind_is_placed_by_a_fresh_queue_read() {
        let mut head = Claim::default();
        head.saw_queue(&queue(&["a", "b"]), 1);
        let main = [cell("b", CLAIM), cell("c", CLAIM)];
        assert_eq!(head.judge(&main, "b", false), Verdict::Unsure);
        head.saw_queue(&queue(&["b", "c"]), 0);
        assert_eq!(head.judge(&main, "b", true), Verdict::HoldOn);
        assert_eq!(head.judge(&main, "b", false), Verdict::HoldOn);
    }

    /// A cell not in the queue (a `try_lock`, a latecomer) is given way to, and so is a row
    /// too full to judge, even by the head.
    #[test]
    fn unknown_cells_and_a_full_row_are_given_way_to() {
        let mut head = Claim::default();
        head.saw_queue(&queue(&["a", "b"]), 0);
        let main = [cell("a", CLAIM), cell("x", CLAIM)];
        assert_eq!(head.judge(&main, "a", true), Verdict::HoldOn);
        assert_eq!(head.judge(&main, "a", true), Verdict::Yield);
        // Our cell and owners' cells up to the read's limit: what lies beyond is unknown.
        let full: Vec<Cell> = std::iter::once(cell("a", CLAIM))
            .chain((1..MAIN_READ).map(|i| cell(&format!("z{i}"), HELD)))
            .collect();
        let mut head = Claim::default();
        head.saw_queue(&queue(&["a"]), 0);
        assert_eq!(head.judge(&full, "a", true), Verdict::HoldOn);
        assert_eq!(head.judge(&full, "a", true), Verdict::Yield);
    }
}
