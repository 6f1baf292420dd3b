//! The renew loop of a [`Hold`](super::Hold).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::{HoldError, HoldTiming, Holdable, RenewRequest, Signals, spawn_release_at};
use crate::error::{LossReason, StoreError};
use crate::store::CasOutcome;

/// The renew loop. Returns whether the claim was still held when it was stopped.
pub(super) async fn run(
    target: Arc<dyn Holdable>,
    timing: HoldTiming,
    signals: Arc<Signals>,
    stop: CancellationToken,
    mut inbox: mpsc::Receiver<RenewRequest>,
) -> bool {
    let mut next = *signals.deadline.borrow() - timing.validity + timing.renew_interval;
    let mut delays = timing.delays();
    let mut failing = false;
    loop {
        let deadline = *signals.deadline.borrow();
        let mut reply = None;
        tokio::select! {
            biased;
            _ = stop.cancelled() => return true,
            request = inbox.recv() => match request {
                Some(tx) => reply = Some(tx),
                None => return true,
            },
            _ = tokio::time::sleep_until(next.min(deadline)) => {}
        }
        let answer = |result: Result<(), HoldError>| {
            if let Some(tx) = reply {
                let _ = tx.send(result);
            }
        };
        if Instant::now() >= deadline {
            let reason = expire(&target, &timing, &signals, failing);
            answer(Err(HoldError::Lost(reason)));
            return false;
        }
        let sent_at = Instant::now();
        // A renewal may not use up the time left: by default it gets at most half of it (and
        // at most `request_timeout`), so a renewal stuck on a frozen coordinator is given up
        // with time to send it again, which the driver routes to another coordinator.
        let budget = target.renewal_budget(&timing, deadline - sent_at);
        let attempt_end = (sent_at + budget).min(deadline);
        // Bounded so that a renewal cut here marks its coordinator suspect as well.
        let outcome = crate::timed::within(attempt_end - sent_at, async {
            match target.renew().await {
                Ok(outcome) => Ok(outcome),
                // A lost answer: one read-back tells whether it is still ours.
                Err(error) if error.is_unknown() => match target.still_held().await {
                    Ok(false) => Ok(CasOutcome::NotApplied),
                    _ => Err(error),
                },
                Err(error) => Err(error),
            }
        })
        .await;
        crate::metrics::renewal(signals.kind, &outcome, sent_at);
        match outcome {
            Err(_deadline_passed) if Instant::now() >= deadline => {
                let reason = expire(&target, &timing, &signals, failing);
                answer(Err(HoldError::Lost(reason)));
                return false;
            }
            Err(_attempt_timed_out) => {
                // Its outcome is unknown; sending it again settles it (it is conditional on
                // this claim's id), so do that now rather than after a retry delay.
                failing = true;
                warn!(claim = %signals.what, budget = ?attempt_end - sent_at, "renewal timed out; sending it again");
                next = Instant::now();
                answer(Err(HoldError::OutcomeUnknown(StoreError::Unknown(
                    format!(
                        "renewal of {}: no answer within {:?}",
                        signals.what,
                        attempt_end - sent_at
                    ),
                ))));
            }
            Ok(Ok(CasOutcome::Applied)) => {
                failing = false;
                signals.renewals.fetch_add(1, Ordering::Relaxed);
                signals.deadline.send_replace(sent_at + timing.validity);
                next = Instant::now() + timing.renew_interval;
                delays = timing.delays();
                debug!(claim = %signals.what, "renewed");
                answer(Ok(()));
            }
            Ok(Ok(CasOutcome::NotApplied)) => {
                signals.lose(LossReason::NotHolder);
                answer(Err(HoldError::Lost(LossReason::NotHolder)));
                return false;
            }
            Ok(Err(error)) => {
                failing = true;
                let delay = delays.next().unwrap_or(timing.retry_interval);
                warn!(claim = %signals.what, %error, ?delay, "renewal failed; retrying");
                next = Instant::now() + delay;
                answer(Err(match error {
                    StoreError::Unknown(_) => HoldError::OutcomeUnknown(error),
                    _ => HoldError::Store(error),
                }));
            }
        }
    }
}

/// The deadline passed without a successful renewal: stop acting, then free the claim in
/// case a late renewal did apply. A claim that was handed out is freed only when the store
/// would let it lapse anyway, so a holder slow to stop keeps the TTL's margin; one that never
/// was, at once.
fn expire(
    target: &Arc<dyn Holdable>,
    timing: &HoldTiming,
    signals: &Signals,
    failing: bool,
) -> LossReason {
    let reason = if failing {
        LossReason::Unreachable
    } else {
        LossReason::Expired
    };
    signals.lose(reason.clone());
    let not_before = target.handed_out().then(|| {
        let at = *signals.deadline.borrow() + timing.ttl_margin;
        debug!(claim = %signals.what, margin = ?timing.ttl_margin, "giving it back when its TTL would lapse");
        at
    });
    spawn_release_at(Arc::clone(target), *timing, not_before);
    reason
}
