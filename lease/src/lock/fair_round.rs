//! One round of a [fair lock](super) waiter: read, claim, judge.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{debug, instrument};

use super::super::fair_claim::{CLAIM, HELD, Verdict, Waiter, contender_of};
use super::super::plain::Cells;
use super::queue::QUEUE_LOOKS;
use super::{FairLock, Step};
use crate::cells::Cell;
use crate::cells::rows::MAIN;
use crate::lock::LockError;

impl FairLock {
    /// One round. Without a main-row claim: read the queue and, at place 0 (or 1 with
    /// `early`), claim the main row. With one: read the main row (that read is the claim's
    /// read back) and judge it ([`Claim::judge`]).
    #[instrument(level = "debug", skip(self, cells, waiter), fields(lock = %cells.lock, id = cells.id()))]
    pub(super) async fn round(
        &self,
        cells: &Cells,
        waiter: &mut Waiter,
        early: bool,
    ) -> Result<Step, LockError> {
        let id = cells.id().to_owned();
        let claimed = cells.has(MAIN, &id);
        // What this process knows of the main row: its own contenders' claims there
        // (a `try_lock` shares no looks but knows them too).
        let looks = waiter.shared.as_ref().map_or_else(
            || QUEUE_LOOKS.of(self.store_id, &cells.lock),
            |shared| Arc::clone(&shared.looks),
        );
        let held = |id: Option<&str>| id.is_some_and(|id| looks.held_here(id));
        if !claimed {
            let here = |id: Option<&str>| id.is_some_and(|id| looks.in_main_here(id));
            // The second in line reads the main row too only while it polls back to back
            // (short holds): then it is likely next in line by its next read.
            let joint = early && (waiter.place <= 1 || (waiter.place == 2 && waiter.fast));
            // A head that is one of ours, now or next, needs no read of the main row: one
            // with its claim there ...
            let known = waiter
                .seen
                .iter()
                .take(2)
                .any(|cell| here(contender_of(cell)));
            // ... or one waiting in line here, whether it claimed or not (this process
            // knows which). Should the head turn out to be another's, we read then.
            let local = joint
                && !known
                && !waiter.seen.is_empty()
                && waiter.seen.iter().take(2).all(|c| looks.ours_or_left(c));
            let place = if joint && !known && !local {
                // Next in line: read the main row with the queue, and claim only once the
                // head's cell is there (it has claimed, so its read back is most likely
                // done by the time ours lands, and ours does not make it collide).
                let (place, main) = futures::future::join(
                    self.read_place(cells, waiter, true),
                    self.read_main(cells),
                )
                .await;
                let place = place?;
                waiter.claim.saw_main(&held_as_marked(main?, &held));
                place
            } else {
                let place = self.read_place(cells, waiter, true).await?;
                let ahead = waiter.claim.ahead();
                if held(ahead) {
                    waiter.claim.ahead_holds();
                } else if early && place == 1 && here(ahead) {
                    // The head, one of ours, has claimed but does not hold yet: claiming
                    // now would make it wait on us. It tells us when it holds.
                    waiter.place = place;
                    return Ok(Step::Waiting);
                } else if joint
                    && place == 1
                    && !waiter.seen.first().is_some_and(|c| looks.ours_or_left(c))
                {
                    // A head of ours needs no read: it has not claimed (a claim not yet
                    // confirmed counts as none; it tells us when it does, and our pace's
                    // timer covers one that never will), or it left the main row and its
                    // queue cell goes next.
                    let main = self.read_main(cells).await?;
                    waiter.claim.saw_main(&held_as_marked(main, &held));
                }
                place
            };
            waiter.place = place;
            if place > usize::from(early) || (place == 1 && !waiter.claim.head_claimed()) {
                debug!(place, "waiting in the queue");
                return Ok(Step::Waiting);
            }
            cells.put(MAIN, &id, CLAIM).await?;
            if place == 1 && held(waiter.claim.ahead()) {
                // The head, one of ours, holds the lock: our read would show it. Its
                // leaving wakes us, and the read after that decides.
                return Ok(Step::HoldingOn);
            }
        }
        let sent = Instant::now();
        let main = held_as_marked(self.read_main(cells).await?, &held);
        if claimed {
            // Polling the main row as the next in line.
            let now = Instant::now();
            waiter.pace.observed(now, now - sent, 1, None);
        }
        let mut verdict = waiter.claim.judge(&main, &id, !claimed);
        if verdict == Verdict::Unsure {
            // Read by ourselves: after our main-row read.
            let place = self.read_place(cells, waiter, false).await?;
            if place > usize::from(early) {
                cells.remove(MAIN, &id).await;
                return Ok(Step::Waiting);
            }
            verdict = waiter.claim.judge(&main, &id, true);
        }
        match verdict {
            Verdict::Alone => {
                waiter.pace.no_collision();
                Ok(Step::Owned)
            }
            // Only a stale view is unsure; the fresh one above decides.
            Verdict::HoldOn | Verdict::Unsure => Ok(Step::HoldingOn),
            Verdict::Yield => {
                debug!(others = main.len(), "main row not ours alone; giving way");
                cells.remove(MAIN, &id).await;
                Ok(Step::Collided)
            }
        }
    }
}

/// A main-row read with the cells of this process's holders marked [`HELD`], as their
/// mark reads once it lands: a holder here followed by a waiter of its own writes its mark
/// only after a while (see `FairLock::granted`), and this process knows its owners.
fn held_as_marked(mut main: Vec<Cell>, held: &impl Fn(Option<&str>) -> bool) -> Vec<Cell> {
    for cell in &mut main {
        if held(Some(&cell.name)) {
            cell.value = HELD;
        }
    }
    main
}
