//! One claiming attempt: send the claim so that a dropped caller cannot leave it behind,
//! settle a lost answer by reading back, refuse what came after its deadline, hand it over.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{
    HoldError, HoldTiming, Holdable, release_target, spawn_release, until_resolved_tracked,
};
use crate::error::StoreError;

/// How a [`claim_attempt`] ended, when the store answered (directly or by read-back).
#[derive(Debug)]
pub enum Claimed<T> {
    /// The claim is this attempt's and its deadline (`sent_at + validity`) has not passed.
    /// Hand it over (start a [`Hold`](super::Hold) from `sent_at`, say), then
    /// [`AttemptGuard::disarm`] the guard; dropping it instead gives the claim back.
    Won {
        /// The answer (or what the read-back found).
        outcome: T,
        /// When the claiming request was sent: the deadline counts from here.
        sent_at: Instant,
        /// Still armed.
        guard: AttemptGuard,
    },
    /// The claim is not this attempt's: the store's answer, or what the read-back found
    /// (`None`: no trace of the claim). After a lost answer the target was also marked
    /// [`Holdable::orphaned`], since a coordinator may still apply the write after the
    /// read-back (a CAS still in its prepare phase, or one beaten by the read's ballot and
    /// retried). The guard is disarmed: trying again with a fresh attempt is safe.
    NotWon(Option<T>),
    /// Won, but answered after its deadline: nobody may act on it. It is being given back in
    /// the background (and marked orphaned in case that fails).
    Expired(T),
}

/// One claiming attempt, the step every claiming primitive shares (lease acquire, election
/// campaign, queue claim, and the locks to come):
///
/// 1. sends `request` through `guard` ([`AttemptGuard::send`]), so that a drop of the
///    caller's future gives the claim back only after the request has been answered;
/// 2. if the answer is lost ([`StoreError::is_unknown`]), runs `read_back` through
///    [`until_resolved`](super::resolve::until_resolved) (so for at most `resolve_timeout`): `Ok(Some(outcome))` is what the
///    store holds, `Ok(None)` means no trace of the claim;
/// 3. asks `won` whether the outcome makes the claim this attempt's, and if so whether the
///    answer came before `sent_at + timing.validity` (else it is given back: nothing is
///    handed out past its deadline);
/// 4. returns [`Claimed::Won`] with the still-armed guard for the caller to hand the claim
///    over and disarm it.
///
/// A definite failure (never sent, refused) disarms the guard and returns
/// [`HoldError::Store`]. A read-back that does not settle in time returns
/// [`HoldError::OutcomeUnknown`] after dropping the armed guard, which gives the claim back
/// in the background if it applied and marks it orphaned.
///
/// ```
/// # use std::sync::Arc;
/// # use cql_lease::StoreError;
/// # use cql_lease::hold::{AttemptGuard, Claimed, HoldError, HoldTiming, Holdable, claim_attempt};
/// # async fn demo(
/// #     target: Arc<dyn Holdable>,
/// #     timing: HoldTiming,
/// #     send_claim: impl std::future::Future<Output = Result<bool, StoreError>> + Send + 'static,
/// # ) -> Result<(), HoldError> {
/// let guard = AttemptGuard::new(Arc::clone(&target), timing);
/// let read_back = || { let t = Arc::clone(&target); async move { t.still_held().await.map(Some) } };
/// match claim_attempt(guard, &timing, send_claim, read_back, |won: &bool| *won).await? {
///     Claimed::Won { sent_at, guard, .. } => {
///         // ... start a `Hold` from `sent_at` and give it to the caller ...
/// #       let _ = sent_at;
///         guard.disarm();
///     }
///     Claimed::NotWon(_) | Claimed::Expired(_) => { /* try again later */ }
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`HoldError::Store`] when the request failed definitely (nothing applied);
/// [`HoldError::OutcomeUnknown`] when a lost answer could not be settled in time.
///
/// # Cancel safety
/// Cancel-safe: the guard lives in this future; dropped before hand-over, it releases the
/// claim after the request was answered (see [`AttemptGuard`]).
pub async fn claim_attempt<T, Req, Rb, RbFut>(
    mut guard: AttemptGuard,
    timing: &HoldTiming,
    request: Req,
    mut read_back: Rb,
    won: impl Fn(&T) -> bool,
) -> Result<Claimed<T>, HoldError>
where
    T: Send + 'static,
    Req: Future<Output = Result<T, StoreError>> + Send + 'static,
    Rb: FnMut() -> RbFut,
    RbFut: Future<Output = Result<Option<T>, StoreError>>,
{
    let what = guard.describe();
    // Measured before sending: the store cannot expire the claim before this plus validity.
    let sent_at = Instant::now();
    // Bounded inside the sent task: a claim stuck on a frozen coordinator is given up as
    // unknown and read back (on another coordinator) while there is time to use it.
    let bounded = {
        let (timing, what) = (*timing, what.clone());
        async move { timing.bounded(&what, request).await }
    };
    let (outcome, answer_lost) = match guard.send(bounded).await {
        Ok(outcome) => (Some(outcome), false),
        Err(error) if error.is_unknown() => {
            warn!(claim = %what, %error, "claim answer lost; reading back");
            let found = until_resolved_tracked(timing, &what, &AtomicBool::new(true), || {
                let read = read_back();
                async move { read.await.map(Some) }
            })
            .await;
            match found {
                Ok(found) => (found, true),
                // It may hold: the armed guard, dropped here, gives it back.
                Err(source) => return Err(HoldError::OutcomeUnknown(source)),
            }
        }
        Err(error) => {
            debug!(claim = %what, %error, "claim failed definitely");
            guard.disarm();
            return Err(HoldError::Store(error));
        }
    };
    match outcome {
        Some(outcome) if won(&outcome) => {
            if Instant::now() >= sent_at + timing.validity {
                warn!(claim = %what, "claim answered after its deadline; giving it back");
                drop(guard);
                return Ok(Claimed::Expired(outcome));
            }
            if answer_lost {
                info!(claim = %what, "read-back: the lost claim applied");
            }
            Ok(Claimed::Won {
                outcome,
                sent_at,
                guard,
            })
        }
        outcome => {
            if answer_lost {
                // Not there now, but the write may still land: let its owner recognise it.
                info!(claim = %what, "read-back: the lost claim is not there (yet); remembering it");
                guard.orphan();
            }
            guard.disarm();
            Ok(Claimed::NotWon(outcome))
        }
    }
}

/// Makes a future that sent a claim cancel-safe: if it is dropped while armed (the claim may
/// have applied but was not handed to the caller), it marks the claim
/// [`Holdable::orphaned`] and spawns its conditional release.
/// [`AttemptGuard::disarm`] once the claim is handed over or known not to exist.
///
/// ```
/// # use std::sync::Arc;
/// # use cql_lease::hold::{AttemptGuard, Holdable, HoldTiming};
/// # fn demo(target: Arc<dyn Holdable>, timing: HoldTiming) {
/// let guard = AttemptGuard::new(Arc::clone(&target), timing);
/// // ... send the claim, settle its answer (each await a possible cancellation point) ...
/// guard.disarm(); // handed over: no release on drop
/// # }
/// ```
pub struct AttemptGuard {
    target: Option<Arc<dyn Holdable>>,
    timing: HoldTiming,
    /// Set while a request sent through [`AttemptGuard::send`] is in flight; turns `true`
    /// when it has been answered (or failed).
    in_flight: Option<watch::Receiver<bool>>,
}

impl std::fmt::Debug for AttemptGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AttemptGuard")
            .field("armed", &self.target.is_some())
            .finish()
    }
}

impl AttemptGuard {
    /// Armed for `target`.
    pub fn new(target: Arc<dyn Holdable>, timing: HoldTiming) -> Self {
        AttemptGuard {
            target: Some(target),
            timing,
            in_flight: None,
        }
    }

    /// Sends the claiming request from a task of its own and waits for its answer.
    ///
    /// Dropping the caller's future does not stop a request already on the wire: the
    /// coordinator may apply it later. A release sent at drop time could then land first,
    /// find nothing, and leave the claim to its TTL. So the request runs in a spawned task,
    /// and a guard dropped while it is in flight waits for its answer before releasing.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped mid-flight, the request still completes and the guard (if
    /// armed) releases the claim after it.
    ///
    /// # Errors
    /// The request's own error; [`StoreError::Unknown`] if its task panicked.
    pub async fn send<T, F>(&mut self, request: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (answered, in_flight) = watch::channel(false);
        self.in_flight = Some(in_flight);
        let task = tokio::spawn(async move {
            let result = request.await;
            answered.send_replace(true);
            result
        });
        match task.await {
            Ok(result) => result,
            Err(error) => Err(StoreError::Unknown(format!("request task failed: {error}"))),
        }
    }

    /// No release on drop.
    pub fn disarm(mut self) {
        self.target = None;
    }

    fn describe(&self) -> String {
        self.target
            .as_ref()
            .map_or_else(|| "disarmed attempt".into(), |t| t.describe())
    }

    fn orphan(&self) {
        if let Some(target) = &self.target {
            target.orphaned();
        }
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let Some(target) = self.target.take() else {
            return;
        };
        debug!(claim = %target.describe(), "attempt dropped before hand-over; releasing");
        // Remembered at once: the release below may fail, or a late apply may follow it.
        target.orphaned();
        match self.in_flight.take() {
            // Answered already, or never sent through `send`: release now.
            None => spawn_release(target, self.timing),
            Some(in_flight) if *in_flight.borrow() => spawn_release(target, self.timing),
            Some(mut in_flight) => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    warn!(claim = %target.describe(), "no runtime to release a dropped attempt; it lapses at its TTL");
                    return;
                };
                let timing = self.timing;
                runtime.spawn(async move {
                    // Err: the request task ended without answering (panicked); release anyway.
                    let _ = in_flight.wait_for(|answered| *answered).await;
                    let result = release_target(target.as_ref(), &timing).await;
                    debug!(claim = %target.describe(), ?result, "release after the dropped attempt was answered");
                });
            }
        }
    }
}
