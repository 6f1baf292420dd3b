//! The one hold machine: what every time-limited claim on the store (a lease, an election
//! term, a queue claim, a lock) does while it is held, the way etcd's `Session` serves both
//! its mutex and its election.
//!
//! A [`Holdable`] is one claim, identified in the store by a unique id, that can be renewed,
//! checked and released, each conditionally on that id (so every call may be sent again or
//! settled by reading back). A [`Hold`] keeps it alive in the background and tells the holder
//! when to stop: the `held` watch turns `false` and the cancellation token fires at the local
//! deadline at the latest. [`until_resolved`] is the single "ask again / read back until
//! `resolve_timeout`" loop that settles lost answers, [`AttemptGuard`] makes a future that
//! sent a claim cancel-safe (dropped before it could hand the claim over, it releases it), and
//! [`claim_attempt`] is the one "send through the guard, read back a lost answer, check the
//! deadline, hand over" step of every claiming primitive. [`jittered`] is the one retry and
//! polling delay policy (uniform between half and all of the interval).
//!
//! Rule kept here once for everyone: nothing reaches a caller past its deadline with a live
//! token. A hold whose claim was answered after `sent_at + validity` starts lost and gives
//! the claim back at once; a hold lost at its deadline gives back a claim that was handed out
//! only [`HoldTiming::ttl_margin`] later (see [`Holdable::handed_out`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::{LossReason, StoreError};

/// Why a hold operation did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HoldError {
    /// The claim is no longer held (taken over, expired, released).
    #[error("no longer held: {0}")]
    Lost(LossReason),
    /// The store answered with a definite failure: nothing was applied.
    #[error("store error: {0}")]
    Store(StoreError),
    /// The write may or may not have applied and reading back did not tell in time.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(StoreError),
}

/// Shared between a [`Hold`] and its renew loop.
struct Signals {
    what: String,
    kind: &'static str,
    held: watch::Sender<bool>,
    deadline: watch::Sender<Instant>,
    stop_acting: CancellationToken,
    renewals: AtomicU64,
    /// Whether this hold counts in the held gauge: set once when it starts held, taken once
    /// when it ends. Not read off `held`, which the caller may share between holds.
    counted: AtomicBool,
    reason: Mutex<Option<LossReason>>,
    lost_at: Mutex<Option<Instant>>,
}

impl Signals {
    /// Tells every observer to stop acting; idempotent. Returns when they were first told.
    fn lose(&self, reason: LossReason) -> Instant {
        // Recorded before anyone is told, so it never postdates what they do next.
        let at = match self.lost_at.lock() {
            Ok(mut slot) => *slot.get_or_insert_with(Instant::now),
            Err(_) => Instant::now(),
        };
        if let Ok(mut slot) = self.reason.lock() {
            slot.get_or_insert(reason.clone());
        }
        // The watch first, so whoever wakes on the token already reads `false`.
        self.held.send_replace(false);
        if self.counted.swap(false, Ordering::AcqRel) {
            crate::metrics::hold_ended(self.kind, &reason);
        }
        if !self.stop_acting.is_cancelled() {
            info!(claim = %self.what, %reason, "holder must stop acting");
        }
        self.stop_acting.cancel();
        at
    }

    fn reason(&self) -> Option<LossReason> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }
}

type RenewRequest = oneshot::Sender<Result<(), HoldError>>;

/// A claim kept alive in the background: renewed every `renew_period`, retried with
/// jittered back-off on errors (never past the deadline), and given up at the local deadline
/// at the latest. The `held` watch turns `false` and the token is cancelled, in that order,
/// exactly once.
///
/// Dropping a `Hold` cancels the token and releases the claim in a spawned task;
/// [`Hold::release`] waits for it; [`Hold::abandon`] leaves it to its TTL.
pub struct Hold {
    target: Arc<dyn Holdable>,
    timing: HoldTiming,
    signals: Arc<Signals>,
    stop_task: CancellationToken,
    requests: mpsc::Sender<RenewRequest>,
    task: Option<JoinHandle<bool>>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("claim", &self.signals.what)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl Hold {
    /// Starts keeping `target` alive. `sent_at` is when the write that won the claim was sent:
    /// the deadline is `sent_at + timing.validity`. If that has already passed, the hold
    /// starts lost (`held` false, token cancelled) and the claim is released in the
    /// background at once (nothing was handed out through this hold). `held`, when given, is set `true` now (if valid) and `false` on loss.
    pub fn start(
        target: Arc<dyn Holdable>,
        timing: HoldTiming,
        sent_at: Instant,
        held: Option<watch::Sender<bool>>,
    ) -> Hold {
        let deadline = sent_at + timing.validity;
        let held = held.unwrap_or_else(|| watch::channel(false).0);
        let signals = Arc::new(Signals {
            what: target.describe(),
            kind: target.kind(),
            held,
            deadline: watch::channel(deadline).0,
            stop_acting: CancellationToken::new(),
            renewals: AtomicU64::new(0),
            counted: AtomicBool::new(false),
            reason: Mutex::new(None),
            lost_at: Mutex::new(None),
        });
        let stop_task = CancellationToken::new();
        let (requests, inbox) = mpsc::channel(4);
        let mut hold = Hold {
            target: Arc::clone(&target),
            timing,
            signals: Arc::clone(&signals),
            stop_task: stop_task.clone(),
            requests,
            task: None,
        };
        if Instant::now() >= deadline {
            // Nothing was handed out through this hold: given back at once.
            warn!(claim = %signals.what, "answered after its deadline; giving it back");
            signals.lose(LossReason::Expired);
            spawn_release(target, timing);
            return hold;
        }
        signals.held.send_replace(true);
        signals.counted.store(true, Ordering::Release);
        crate::metrics::held(signals.kind, 1.0);
        hold.task = Some(tokio::spawn(renew::run(
            target, timing, signals, stop_task, inbox,
        )));
        hold
    }

    /// `true` while held; turns `false` once, when the holder must stop.
    pub fn held(&self) -> watch::Receiver<bool> {
        self.signals.held.subscribe()
    }

    /// Whether the claim is still held.
    pub fn is_held(&self) -> bool {
        *self.signals.held.borrow()
    }

    /// Cancelled when the holder must stop acting (loss, local deadline, release or drop).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.signals.stop_acting.clone()
    }

    /// The current local deadline; moves forward with each successful renewal.
    pub fn must_stop_by(&self) -> Instant {
        *self.signals.deadline.borrow()
    }

    /// A watch of the local deadline ([`Hold::must_stop_by`]): it moves forward with each
    /// successful renewal and keeps its last value once the claim is lost.
    pub fn deadline(&self) -> watch::Receiver<Instant> {
        self.signals.deadline.subscribe()
    }

    /// How many renewals have succeeded.
    pub fn renewals(&self) -> u64 {
        self.signals.renewals.load(Ordering::Relaxed)
    }

    /// Why the claim was lost, once it was.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.signals.reason()
    }

    /// When the holder was told to stop (just before the token was cancelled), once it was.
    pub fn lost_at(&self) -> Option<Instant> {
        self.signals.lost_at.lock().ok().and_then(|at| *at)
    }

    /// The claim this hold keeps.
    pub fn target(&self) -> &Arc<dyn Holdable> {
        &self.target
    }

    /// The timing it runs on.
    pub fn timing(&self) -> &HoldTiming {
        &self.timing
    }

    /// Tells the holder to stop acting now (cancels the token) without releasing; renewals go
    /// on until [`Hold::release`]. Returns when the holder was told.
    pub fn stop_acting(&self) -> Instant {
        self.signals.lose(LossReason::Released)
    }

    /// Marks the claim lost for `reason` (e.g. a finishing write found it taken over).
    pub fn mark_lost(&self, reason: LossReason) -> Instant {
        self.signals.lose(reason)
    }

    /// Waits until the holder must stop acting.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits on the token.
    pub async fn lost(&self) {
        self.signals.stop_acting.cancelled().await;
    }

    /// Renews now, in the renew loop (so renewals never overlap), e.g. after the target's
    /// value changed.
    ///
    /// # Cancel safety
    /// Cancel-safe: the renewal completes in the background task either way.
    ///
    /// # Errors
    /// [`HoldError::Lost`] once the claim is lost; the store's error if this renewal failed
    /// (the loop retries until the deadline).
    pub async fn renew_now(&self) -> Result<(), HoldError> {
        let gone = || HoldError::Lost(self.loss_reason().unwrap_or(LossReason::Released));
        if self.task.is_none() {
            return Err(gone());
        }
        let (reply, answer) = oneshot::channel();
        if self.requests.send(reply).await.is_err() {
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Stops renewing, cancels the token, then releases the claim (conditionally, settling a
    /// lost answer).
    ///
    /// # Cancel safety
    /// Cancel-safe: the token is cancelled before the first await, and if the future is
    /// dropped the release goes on in a spawned task.
    ///
    /// # Errors
    /// [`HoldError::Lost`] if the claim was already lost; the release's errors otherwise.
    pub async fn release(mut self) -> Result<(), HoldError> {
        let Some(task) = self.task.take() else {
            return Err(HoldError::Lost(
                self.loss_reason().unwrap_or(LossReason::Released),
            ));
        };
        // Stop acting before the store can hand the claim to anyone else.
        self.signals.lose(LossReason::Released);
        self.stop_task.cancel();
        // If this future is dropped from here on, the guard finishes the release.
        let guard = AttemptGuard::new(Arc::clone(&self.target), self.timing);
        let still_held = task.await.unwrap_or(false);
        guard.disarm();
        if !still_held {
            return Err(HoldError::Lost(
                self.loss_reason().unwrap_or(LossReason::Expired),
            ));
        }
        let guard = AttemptGuard::new(Arc::clone(&self.target), self.timing);
        let result = release_target(self.target.as_ref(), &self.timing).await;
        guard.disarm();
        result
    }

    /// Stops without touching the store, as a crash would: the token is cancelled and the
    /// claim stays until its TTL. For crash tests and processes that must not touch the store.
    pub fn abandon(mut self) -> Instant {
        if let Some(task) = self.task.take() {
            self.stop_task.cancel();
            task.abort();
        }
        self.signals.lose(LossReason::Released)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        self.signals.lose(LossReason::Released);
        self.stop_task.cancel();
        let (target, timing) = (Arc::clone(&self.target), self.timing);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if task.await.unwrap_or(false) {
                        let result = release_target(target.as_ref(), &timing).await;
                        debug!(claim = %target.describe(), ?result, "release on drop");
                    }
                });
            }
            // Best effort only: at process exit the claim waits for its TTL.
            Err(_) => {
                warn!(claim = %self.signals.what, "no runtime to release on drop; the claim lapses at its TTL")
            }
        }
    }
}

mod accessors;
mod attempt;
mod holdable;
mod renew;
mod resolve;
#[cfg(test)]
mod tests;
mod timing;

pub(crate) use accessors::hold_accessors;
pub use attempt::{AttemptGuard, Claimed, claim_attempt};
pub use holdable::Holdable;
pub(crate) use holdable::attempt_budget;
use resolve::spawn_release_at;
pub use resolve::{release_target, spawn_release, until_resolved, until_resolved_tracked};
pub use timing::{HoldTiming, jittered};
