//! Settling lost answers, and giving back claims nobody will use: the one read-back loop
//! and the one conditional release of the hold machine.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::{HoldError, HoldTiming, Holdable};
use crate::error::{LossReason, StoreError};
use crate::store::CasOutcome;

/// Runs `step` until it decides, for at most `timing.resolve_timeout`, each step for at most
/// `timing.request_timeout` (a step that times out counts as of unknown outcome).
///
/// `step` returns `Ok(Some(answer))` when it has the answer, `Ok(None)` when it must be asked
/// again (a read-back found the claim unchanged), or an error. A [`StoreError::Rejected`]
/// ends it at once; other errors are retried after a jittered delay. When time runs out,
/// the last error is returned ([`StoreError::Unknown`] if any attempt may have applied).
///
/// # Cancel safety
/// Cancel-safe if `step` is: each step is conditional on a unique id.
///
/// # Errors
/// The rejection, or the last error when `resolve_timeout` passes undecided.
pub async fn until_resolved<T, F, Fut>(
    timing: &HoldTiming,
    what: &str,
    step: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, StoreError>>,
{
    until_resolved_tracked(timing, what, &AtomicBool::new(false), step).await
}

/// [`until_resolved`] for a caller that knows when an answer was lost: `lost` is `true`
/// from the start (a claim whose answer was lost, being read back) or set by `step` when
/// it sees one (and by the loop on every step of unknown outcome). When it ends `true`, the
/// result is counted as a resolved or unresolved unknown outcome
/// ([`crate::metrics::UNKNOWN_OUTCOMES`]), once per call.
///
/// # Cancel safety
/// As [`until_resolved`]; a dropped call is not counted.
///
/// # Errors
/// As [`until_resolved`].
pub async fn until_resolved_tracked<T, F, Fut>(
    timing: &HoldTiming,
    what: &str,
    lost: &AtomicBool,
    step: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, StoreError>>,
{
    let result = settle(timing, what, lost, step).await;
    if lost.load(Ordering::Relaxed) {
        crate::metrics::unknown_outcome(result.is_ok());
    }
    result
}

/// The loop of [`until_resolved`].
async fn settle<T, F, Fut>(
    timing: &HoldTiming,
    what: &str,
    lost: &AtomicBool,
    mut step: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, StoreError>>,
{
    let give_up_at = Instant::now() + timing.resolve_timeout;
    let mut delays = timing.delays();
    let mut unknown: Option<StoreError> = None;
    loop {
        let error = match timing.bounded(what, step()).await {
            Ok(Some(answer)) => return Ok(answer),
            Ok(None) => StoreError::Unknown(format!("{what}: outcome not settled yet")),
            Err(error @ StoreError::Rejected(_)) => return Err(error),
            Err(error) => error,
        };
        if error.is_unknown() {
            lost.store(true, Ordering::Relaxed);
            unknown = Some(error.clone());
        }
        let wake = Instant::now() + delays.next().unwrap_or(timing.retry_interval);
        if wake >= give_up_at {
            warn!(what, %error, "giving up settling the outcome");
            // Once any attempt may have applied, the outcome stays unknown.
            return Err(match (unknown, error) {
                (Some(unknown), StoreError::Unavailable(_)) => unknown,
                (_, error) => error,
            });
        }
        debug!(what, %error, "not settled; trying again");
        tokio::time::sleep_until(wake).await;
    }
}

/// Releases `target` conditionally, settling lost answers by asking again and reading back.
///
/// `Ok` when the claim is gone (released by this call or no longer this one's at read-back);
/// [`HoldError::Lost`] when the store said it was not this one's. Whenever it does not end
/// `Ok`, the claim may outlive its holder, so [`Holdable::orphaned`] is called first: its
/// owner can then release it on sight instead of taking it for somebody else's.
///
/// # Cancel safety
/// Cancel-safe: the release is conditional on the claim's id; a dropped call leaves at most
/// the claim to its TTL.
///
/// # Errors
/// [`HoldError::Lost`], [`HoldError::Store`] on a rejection or a definite failure, and
/// [`HoldError::OutcomeUnknown`] when the outcome could not be settled in time.
pub async fn release_target(target: &dyn Holdable, timing: &HoldTiming) -> Result<(), HoldError> {
    let what = target.describe();
    let lost = AtomicBool::new(false);
    let result = until_resolved_tracked(timing, &what, &lost, || async {
        match target.release().await {
            Ok(outcome) => Ok(Some(outcome)),
            Err(error @ StoreError::Rejected(_)) => Err(error),
            Err(error) => {
                // Settled below or by a later step: counted either way.
                lost.fetch_or(error.is_unknown(), Ordering::Relaxed);
                match target.still_held().await {
                    Ok(false) => Ok(Some(CasOutcome::Applied)),
                    Ok(true) => Err(error),
                    Err(_) => Err(error),
                }
            }
        }
    })
    .await;
    let result = match result {
        Ok(CasOutcome::Applied) => {
            info!(claim = %what, "released");
            target.released().await;
            return Ok(());
        }
        Ok(CasOutcome::NotApplied) => {
            target.released().await;
            Err(HoldError::Lost(LossReason::NotHolder))
        }
        Err(error @ StoreError::Unknown(_)) => Err(HoldError::OutcomeUnknown(error)),
        Err(error) => Err(HoldError::Store(error)),
    };
    warn!(claim = %what, ?result, "release did not end cleanly; remembering the claim as orphaned");
    target.orphaned();
    result
}

/// Spawns [`release_target`] if a runtime is running (best effort; the TTL bounds it anyway).
pub fn spawn_release(target: Arc<dyn Holdable>, timing: HoldTiming) {
    spawn_release_at(target, timing, None);
}

/// [`spawn_release`], sent no earlier than `not_before` when given.
pub(super) fn spawn_release_at(
    target: Arc<dyn Holdable>,
    timing: HoldTiming,
    not_before: Option<Instant>,
) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        warn!(claim = %target.describe(), "no runtime for a background release; the claim lapses at its TTL");
        return;
    };
    runtime.spawn(async move {
        if let Some(at) = not_before {
            tokio::time::sleep_until(at).await;
        }
        let result = release_target(target.as_ref(), &timing).await;
        debug!(claim = %target.describe(), ?result, "background release");
    });
}
