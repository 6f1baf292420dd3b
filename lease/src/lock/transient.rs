//! Riding through transient store errors, the way the election's followers and the work
//! queue's workers do: a request timeout, an unavailable replica or an unknown outcome that
//! the lower layers could not settle in time is logged and the attempt is made again after
//! one jittered `retry_period` ([`jittered`], the workspace's one retry policy), until the
//! caller's own bound: the timeout of [`Lock::lock`](super::Lock::lock), or the budget
//! ([`Timing::resolve_timeout`]) of [`Lock::try_lock`](super::Lock::try_lock).
//!
//! What a failed attempt wrote is cleaned up: a plain cell whose write was not confirmed is
//! deleted with a later timestamp (or, if the attempt is given up, by its contender's
//! cleanup, in the background); a cell whose delete cannot be confirmed either (the store
//! stays unreachable, or the write lands after the delete was given up) expires within its
//! TTL (`ttl + max_clock_skew`). A lease claim whose answer was lost is settled by reading
//! back its unique holder id and released when it is not handed over (see
//! [`LeaseClient::try_acquire`](crate::LeaseClient::try_acquire)). Only bad input, a
//! definite refusal ([`StoreError::Rejected`], of a request or of the read-back settling a
//! lost claim), a contender whose own cell is hidden ([`LockError::Shadowed`]) and the
//! caller's bound end the loop.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::LockError;
use crate::config::Timing;
use crate::error::{LeaseError, LossReason, StoreError};
use crate::hold::jittered;

/// The store error behind `error` when it is transient (the attempt may succeed if made
/// again); `None` when it is definite.
pub(crate) fn transient_cause(error: &LockError) -> Option<StoreError> {
    match error {
        LockError::Store { source, .. } | LockError::Unreachable { source, .. } => {
            transient_store_error(source)
        }
        // Refused, the claim or the read-back of its lost answer: asking again cannot help.
        LockError::Lease(error) if error.is_refusal() => None,
        LockError::Lease(LeaseError::Store { source, .. }) => transient_store_error(source),
        LockError::Lease(LeaseError::OutcomeUnknown { source, .. }) => Some(source.clone()),
        // An answer that came after the claim's deadline: it was given back, nothing is held.
        LockError::Lease(LeaseError::Lost {
            reason: LossReason::Expired,
            ..
        }) => Some(StoreError::Unknown(
            "the claim was answered after its deadline".into(),
        )),
        _ => None,
    }
}

fn transient_store_error(source: &StoreError) -> Option<StoreError> {
    match source {
        StoreError::Unknown(_) | StoreError::Unavailable(_) => Some(source.clone()),
        StoreError::Rejected(_) => None,
    }
}

/// One acquisition's run of transient failures: when to try again, and what to report if
/// the bound comes first.
pub(crate) struct Trouble {
    name: String,
    started: Instant,
    delays: Box<dyn Iterator<Item = Duration> + Send>,
    failures: u32,
    last: Option<StoreError>,
}

impl Trouble {
    /// No failure yet on lock `name`; retries come `retry_period` apart (jittered).
    pub(crate) fn new(name: &str, retry_interval: Duration) -> Self {
        Trouble {
            name: name.to_owned(),
            started: Instant::now(),
            delays: Box::new(jittered(retry_interval)),
            failures: 0,
            last: None,
        }
    }

    /// A failed attempt. A definite error comes back as `Err`, to be returned to the caller;
    /// a transient one is logged and answered with when to try again.
    pub(crate) fn failed(&mut self, error: LockError) -> Result<Instant, LockError> {
        let Some(cause) = transient_cause(&error) else {
            return Err(error);
        };
        self.failures += 1;
        if self.failures == 1 {
            warn!(lock = %self.name, %error, "store trouble; trying again");
        } else {
            debug!(lock = %self.name, %error, failures = self.failures, "store trouble; trying again");
        }
        self.last = Some(cause);
        let delay = self.delays.next().unwrap_or_default();
        Ok(Instant::now() + delay)
    }

    /// A step went through: the run of failures, if any, is over.
    pub(crate) fn recovered(&mut self) {
        if self.failures > 0 {
            info!(lock = %self.name, failures = self.failures, "store answering again");
            self.failures = 0;
        }
    }

    /// An attempt cut at the caller's bound before it answered: its requests may have been
    /// applied, so the outcome is unknown (reported if no earlier failure says more).
    pub(crate) fn cut(&mut self) {
        if self.last.is_none() {
            self.last = Some(StoreError::Unknown(
                "no answer within the try_lock budget".into(),
            ));
        }
    }

    /// The error of a `try_lock` whose budget ran out with only transient failures.
    pub(crate) fn unreachable(&self) -> LockError {
        LockError::Unreachable {
            name: self.name.clone(),
            waited: self.started.elapsed(),
            source: self.last.clone().unwrap_or_else(|| {
                StoreError::Unavailable("no answer within the try_lock budget".into())
            }),
        }
    }
}

/// `try_lock`'s loop: runs `attempt` (one try, which answers at once when the lock is held),
/// again after each transient failure, all within `timing.resolve_timeout` from now; then
/// [`LockError::Unreachable`].
///
/// The budget bounds each attempt too, not only the pause before the next one: an attempt
/// whose writes keep timing out could otherwise retry a write for a whole validity and its
/// cleanup for a whole takeover bound. An attempt still under way when the budget runs out
/// is dropped there, as `lock`'s acquisition is at its timeout: every attempt is
/// cancel-safe (its contender's cells, or its claim, are given back in the background).
pub(crate) async fn within_budget<T, F, Fut>(
    name: &str,
    timing: &Timing,
    mut attempt: F,
) -> Result<T, LockError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, LockError>>,
{
    let budget_end = Instant::now() + timing.resolve_timeout;
    let mut trouble = Trouble::new(name, timing.retry_period);
    loop {
        let Ok(result) = tokio::time::timeout_at(budget_end, attempt()).await else {
            trouble.cut();
            let error = trouble.unreachable();
            warn!(lock = name, %error, "try_lock budget ran out mid-attempt; nothing is held");
            return Err(error);
        };
        match result {
            Ok(answer) => {
                trouble.recovered();
                return Ok(answer);
            }
            Err(error) => {
                let wake = trouble.failed(error)?;
                if wake >= budget_end {
                    let error = trouble.unreachable();
                    warn!(lock = name, %error, "try_lock gives up; nothing is held");
                    return Err(error);
                }
                tokio::time::sleep_until(wake).await;
            }
        }
    }
}

/// `lock`'s bound: runs the acquisition until `deadline`, then drops it (its contender's
/// cells, or its claim, are given back in the background: every acquisition is cancel-safe)
/// and reports [`LockError::Timeout`].
pub(crate) async fn until_deadline<T>(
    name: &str,
    started: Instant,
    deadline: Instant,
    acquisition: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    match tokio::time::timeout_at(deadline, acquisition).await {
        Ok(result) => result,
        Err(_) => {
            debug!(lock = name, "lock timeout reached");
            Err(LockError::Timeout {
                name: name.to_owned(),
                waited: started.elapsed(),
            })
        }
    }
}
