//! A claim made for a [`Worker`](crate::Worker) that has not reached the consumer yet: how
//! it is given back (undone: no attempt spent) until it is handed out, and how it is undone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use async_trait::async_trait;
use cql_lease::hold::{Holdable, until_resolved};
use cql_lease::{CasOutcome, StoreError};
use tracing::{info, warn};

use super::Job;
use crate::claim::ClaimTarget;
use crate::item::{ItemKey, JobState};
use crate::store::{QueueStore, Reschedule};

/// What a job's heartbeat keeps alive: its claim, given back as undelivered (state and
/// attempt number restored) until the job is handed out, and as delivered (attempt kept,
/// since its token may have fenced writes) from then on.
pub(super) struct JobClaim {
    /// The claim, handing the item back as delivered.
    pub(super) delivered: Arc<ClaimTarget>,
    /// The same claim, undoing it as never delivered.
    pub(super) undelivered: ClaimTarget,
    /// Whether the job reached a consumer ([`UNDELIVERED`], [`DELIVERED`] or [`RELEASED`]).
    /// Delivery and the hand-back each move it out of `UNDELIVERED` by compare-exchange,
    /// so exactly one wins: a job whose hand-back decided "undelivered" (attempt restored)
    /// can no longer be delivered with that attempt's token.
    pub(super) delivery: AtomicU8,
}

/// Not handed out yet: a hand-back now undoes the claim.
pub(super) const UNDELIVERED: u8 = 0;
/// Handed out: a hand-back keeps the attempt.
const DELIVERED: u8 = 1;
/// Handed back as undelivered: never to be handed out.
const RELEASED: u8 = 2;

impl JobClaim {
    /// Whether a hand-back now counts the attempt, deciding "undelivered" for good if the
    /// job was not handed out yet.
    fn settle_delivered(&self) -> bool {
        match self.delivery.compare_exchange(
            UNDELIVERED,
            RELEASED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => false,
            Err(state) => state == DELIVERED,
        }
    }
}

#[async_trait]
impl Holdable for JobClaim {
    fn describe(&self) -> String {
        self.delivered.describe()
    }

    fn kind(&self) -> &'static str {
        "queue_claim"
    }

    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.delivered.renew().await
    }

    async fn still_held(&self) -> Result<bool, StoreError> {
        self.delivered.still_held().await
    }

    async fn release(&self) -> Result<CasOutcome, StoreError> {
        if self.settle_delivered() {
            self.delivered.release().await
        } else {
            self.undelivered.release().await
        }
    }

    async fn released(&self) {
        if self.settle_delivered() {
            self.delivered.released().await;
        } else {
            self.undelivered.released().await;
        }
    }

    // Asked when the heartbeat loses the claim at its deadline: a parked job is decided
    // undelivered for good here, so it is undone at once; a delivered one is handed back
    // only when its TTL would lapse, leaving its consumer the margin to stop.
    fn handed_out(&self) -> bool {
        self.settle_delivered()
    }

    // A hand-back that did not end cleanly leaves the claim to be handed back on sight, the
    // same way the release would have (undone while undelivered).
    fn orphaned(&self) {
        if self.settle_delivered() {
            self.delivered.orphaned();
        } else {
            self.undelivered.orphaned();
        }
    }
}

/// How undoing an undelivered claim ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Undo {
    /// The item is unclaimed with the state and attempt number it had before the claim (by
    /// this undo or by the heartbeat's own hand-back of the lost claim).
    Undone,
    /// The claim had lapsed or the item moved on: nothing to undo; its check entry brings
    /// the item back.
    Gone,
}

/// Undoes `claim_id` on `key`, restoring attempt number `attempt`, settling lost answers by
/// asking again and reading back (SERIAL). Tells an undo apart from a claim already gone.
async fn undo(
    store: &dyn QueueStore,
    key: &ItemKey,
    claim_id: &str,
    attempt: i32,
    timing: &cql_lease::hold::HoldTiming,
) -> Result<Undo, StoreError> {
    until_resolved(timing, "undo claim", || async {
        let error = match store
            .unclaim(key, claim_id, JobState::Available, attempt)
            .await
        {
            Ok(CasOutcome::Applied) => return Ok(Some(Undo::Undone)),
            Ok(CasOutcome::NotApplied) => None,
            Err(error @ StoreError::Rejected(_)) => return Err(error),
            Err(error) => Some(error),
        };
        // Not applied, or the answer was lost: the item's row tells which case this is.
        let current = match store.read(key).await {
            Ok(current) => current,
            Err(read) => return Err(error.unwrap_or(read)),
        };
        Ok(match current {
            Some(c) if c.claim.as_deref() == Some(claim_id) => match error {
                // Still ours after a failed attempt: ask again.
                Some(error) => return Err(error),
                // Refused although it reads as ours: the claim's TTL ran out.
                None => Some(Undo::Gone),
            },
            Some(c)
                if c.claim.is_none() && c.attempt == attempt && c.state == JobState::Available =>
            {
                Some(Undo::Undone)
            }
            _ => Some(Undo::Gone),
        })
    })
    .await
}

impl Job {
    /// Marks the job as handed to a consumer: from now on a loss hands the item back as
    /// delivered (the attempt counts). `false` when its heartbeat already handed it back as
    /// undelivered (attempt restored): it must not be handed out, since the next claim gets
    /// the same attempt number; undo it ([`Job::undeliver`]) instead.
    #[must_use]
    pub(crate) fn deliver(&self) -> bool {
        match self.target.delivery.compare_exchange(
            UNDELIVERED,
            DELIVERED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => true,
            Err(state) => state == DELIVERED,
        }
    }

    /// Undoes a claim that never reached a consumer (the [`Worker`](crate::Worker) that made
    /// it was dropped, shut down or drained, the claim waited too long, or was lost, before
    /// a poll took it): the heartbeat stops, the claim is undone in a spawned task with the
    /// item's state and attempt number restored (its token was never handed out, so no
    /// attempt is spent), and the item gets an immediate run entry in place of the claim's
    /// check entry, so it is claimable again at once rather than after a TTL. If the claim
    /// was already gone (lapsed, taken over) the index is left to the check entry; if the
    /// undo fails, the check entry brings the item back once the claim lapses. The job's
    /// in-flight count (see [`Drain`](crate::Drain)) lasts until the undo has ended.
    pub(crate) fn undeliver(self) {
        let Job {
            queue,
            item,
            claim,
            hold,
            check,
            in_flight,
            target: _,
        } = self;
        let timing = *hold.timing();
        // Stop renewing; the claim stays for the undo.
        hold.abandon();
        let attempt = item.attempt - 1;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            warn!(id = %item.key.id, "no runtime to undo an undelivered claim; it lapses at its TTL");
            return;
        };
        runtime.spawn(async move {
            let _in_flight = in_flight;
            let result = undo(
                queue.store.as_ref(),
                &item.key,
                &claim.claim_id,
                attempt,
                &timing,
            )
            .await;
            match result {
                Ok(Undo::Undone) => {
                    info!(id = %item.key.id, attempt, "undelivered claim undone");
                    let to = Reschedule {
                        state: JobState::Available,
                        run_at: queue.now(),
                        error: None,
                        requeued_at: None,
                    };
                    queue.after_finish(&check, attempt, Some(to)).await;
                }
                Ok(Undo::Gone) => {
                    info!(id = %item.key.id, "undelivered claim already gone (lapsed or taken over); nothing to undo");
                }
                Err(error) => {
                    warn!(id = %item.key.id, %error, "undoing an undelivered claim failed; remembered as orphaned, else it lapses at its TTL");
                    claim.orphans.insert(
                        &claim.claim_id,
                        crate::claim::HandBack::Undelivered {
                            state: JobState::Available,
                            attempt,
                        },
                    );
                }
            }
        });
    }
}
