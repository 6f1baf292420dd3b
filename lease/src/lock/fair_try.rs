//! [`Lock::try_lock`](crate::lock::Lock::try_lock) on the [fair lock](super): one attempt,
//! never a wait for a holder.

use std::time::Duration;

use tokio::time::Instant;

use super::super::fair_claim::Waiter;
use super::super::plain::Attempt;
use super::{FairLock, QUEUE_LOOKS, Step, TRY_ROUNDS, watched_by};
use crate::cells::rows::MAIN;
use crate::lock::{LockError, LockGuard};

impl FairLock {
    /// One `try_lock` attempt. On a store error its contender's cells are removed in the
    /// background.
    pub(super) async fn try_once(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        let main = self
            .base
            .durable
            .read_row(name, MAIN, "", 1, self.base.read_deadline())
            .await
            .map_err(|source| LockError::Store {
                name: name.to_owned(),
                source,
            })?;
        if !main.is_empty() {
            return Ok(None);
        }
        let cells = self.base.contender(name);
        watched_by(&cells, &QUEUE_LOOKS.of(self.store_id, name));
        let attempt = Attempt::new(&cells);
        let mine = self.enqueue(&cells).await?;
        // Only the first place matters here: read two cells at most.
        let mut waiter = Waiter::new(mine, self.base.options.poll_interval);
        waiter
            .pace
            .observed(Instant::now(), Duration::ZERO, 0, None);
        // Claims queued behind us give way; one whose delete fails is sent again after
        // the store's retry interval (at most 1.5 times it), so wait that long for them.
        let hold_until = Instant::now()
            + self.base.options.timing.retry_period.mul_f64(1.5)
            + self.base.options.poll_interval;
        let mut rounds = 0;
        while rounds < TRY_ROUNDS {
            match self.round(&cells, &mut waiter, false).await? {
                Step::Owned if cells.keep_fresh().await => {
                    return Ok(Some(self.granted(cells, attempt, Duration::ZERO)));
                }
                // An owner's cell: the lock is held.
                Step::HoldingOn if waiter.claim.owner_seen() => break,
                Step::HoldingOn if Instant::now() >= hold_until => break,
                Step::HoldingOn => {
                    let pause = waiter.hold_pause();
                    tokio::time::sleep(pause).await;
                }
                Step::Owned | Step::Collided => rounds += 1,
                Step::Waiting => break,
            }
        }
        cells.clear().await;
        attempt.disarm();
        Ok(None)
    }
}
