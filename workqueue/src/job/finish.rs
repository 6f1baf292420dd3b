//! How a [`Job`] ends: its finishing write (complete or reschedule) sent and settled by
//! asking again and reading back, and the index upkeep after it.

use std::sync::atomic::{AtomicBool, Ordering};

use cql_lease::hold::{AttemptGuard, until_resolved_tracked};
use cql_lease::{CasOutcome, StoreError};
use tracing::{info, warn};

use super::Job;
use crate::error::QueueError;
use crate::item::{EntryKind, IndexEntry, JobState, StoredItem};
use crate::queue::WorkQueue;
use crate::store::Reschedule;

impl Job {
    /// Completes (`None`) or reschedules the item, settling lost answers by asking again
    /// (conditional on the claim id) and reading back. The worker is told to stop first, so
    /// every exit path leaves the token cancelled and `held` false.
    pub(super) async fn finish(self, to: Option<Reschedule<'_>>) -> Result<(), QueueError> {
        let operation = if to.is_some() {
            "reschedule"
        } else {
            "complete"
        };
        let Job {
            queue,
            item,
            claim,
            hold,
            check,
            in_flight: _in_flight,
            target: _,
        } = self;
        let timing = *hold.timing();
        let was_held = hold.is_held();
        // Stop renewing and acting now; the claim stays for the finishing write.
        hold.abandon();
        if !was_held {
            return Err(QueueError::ClaimLost {
                id: item.key.id.clone(),
            });
        }
        // Dropped before it settled: hand the item back (a no-op if the write applied).
        let guard = AttemptGuard::new(claim.clone(), timing);
        let store = &queue.store;
        let key = &item.key;
        let claim_id = claim.claim_id.as_str();
        let maybe_applied = AtomicBool::new(false);
        let state = to.map_or(JobState::Done, |to| to.state);
        let applied = |current: &Option<StoredItem>| {
            current
                .as_ref()
                .is_some_and(|c| c.claim.is_none() && c.attempt == item.attempt && c.state == state)
        };
        let retention = queue.config.done_retention;
        let result = until_resolved_tracked(&timing, operation, &maybe_applied, || async {
            let sent = match to {
                None => store.complete(key, claim_id, retention).await,
                Some(to) => store.reschedule(key, claim_id, to).await,
            };
            let error = match sent {
                Ok(CasOutcome::Applied) => return Ok(Some(true)),
                Ok(CasOutcome::NotApplied) if !maybe_applied.load(Ordering::Relaxed) => {
                    return Ok(Some(false));
                }
                Ok(CasOutcome::NotApplied) => {
                    StoreError::Unknown("not applied after an earlier lost answer".into())
                }
                Err(error @ StoreError::Rejected(_)) => return Err(error),
                Err(error) => error,
            };
            if error.is_unknown() {
                maybe_applied.store(true, Ordering::Relaxed);
            }
            warn!(id = %key.id, %error, operation, "answer lost; reading back");
            // A failed read-back leaves the write's own (unknown) error standing.
            let Ok(current) = store.read(key).await else {
                return Err(error);
            };
            if applied(&current) {
                return Ok(Some(true));
            }
            let mine = current
                .as_ref()
                .is_some_and(|c| c.claim.as_deref() == Some(claim_id));
            if mine { Err(error) } else { Ok(Some(false)) }
        })
        .await;
        match result {
            Ok(true) => {
                guard.disarm();
                info!(id = %key.id, operation, "job finished");
                queue.count(finished_metric(to.map(|to| to.state)));
                queue.after_finish(&check, item.attempt, to).await;
                Ok(())
            }
            Ok(false) => {
                guard.disarm();
                info!(id = %key.id, operation, "claim lost before finishing");
                Err(QueueError::ClaimLost { id: key.id.clone() })
            }
            Err(source @ StoreError::Unknown(_)) => {
                // If it did not apply, the item is handed back rather than left to the TTL.
                drop(guard);
                Err(QueueError::OutcomeUnknown {
                    operation,
                    id: key.id.clone(),
                    source,
                })
            }
            Err(source) => {
                // Definitely not applied: hand the item back rather than leave it to the TTL.
                drop(guard);
                Err(QueueError::Store { operation, source })
            }
        }
    }
}

/// The counter of a job that finished as `state` (`None`: completed).
fn finished_metric(state: Option<JobState>) -> &'static str {
    match state {
        None => cql_lease::metrics::COMPLETED,
        Some(JobState::Discarded) => cql_lease::metrics::DISCARDED,
        Some(_) => cql_lease::metrics::FAILED,
    }
}

impl WorkQueue {
    /// Index upkeep after a claim ended with the LWT `to` (`None`: completed): the item's
    /// next entry (a run entry, or a dead letter) is placed, then the claim's check entry is
    /// removed. A failure leaves the check entry, which a later scan acts on.
    pub(crate) async fn after_finish(
        &self,
        check: &IndexEntry,
        attempt: i32,
        to: Option<Reschedule<'_>>,
    ) {
        let result = match to.map(|to| (to.state, to.run_at)) {
            None => Ok(()),
            Some((JobState::Discarded, _)) => self.put_dead(&check.id).await,
            Some((state, run_at)) => {
                let immediate = state == JobState::Available;
                let run = self.entry(&check.id, run_at, EntryKind::Run, immediate, attempt);
                match self.place_in_time(run).await {
                    // This worker's clock may be behind: never leave the entry under the cursor.
                    Ok((run, placed_from)) => self.keep_ahead_of_cursor(run, placed_from).await,
                    Err(error) => Err(error),
                }
            }
        };
        match result {
            // Awaited, not spawned: a caller whose `complete` returned may exit at once, and a
            // check entry left behind would count the item as running until a scan looks.
            Ok(()) => self.remove(check).await,
            Err(error) => {
                warn!(id = %check.id, %error, "index upkeep failed; the check entry stays")
            }
        }
    }
}
