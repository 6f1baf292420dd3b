//! Background renewal of a held lease, and the guard that owns it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::error::{LeaseError, LossReason};
use crate::fencing::FencingToken;
use crate::lease::Lease;

enum Command {
    SetValue(Option<String>, oneshot::Sender<Result<(), LeaseError>>),
}

/// Shared between the guard and its keep-alive task.
struct Signals {
    held: watch::Sender<bool>,
    deadline: watch::Sender<Instant>,
    stop_acting: CancellationToken,
    renewals: AtomicU64,
    reason: Mutex<Option<LossReason>>,
    lost_at: Mutex<Option<Instant>>,
}

impl Signals {
    /// Tells every observer to stop acting. Called at the local deadline at the latest, which
    /// is before the store can expire the lease for anyone else.
    fn lose(&self, name: &str, reason: LossReason) -> Instant {
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
        self.stop_acting.cancel();
        info!(lease = name, %reason, "holder must stop acting");
        at
    }
}

/// A lease kept alive in the background.
///
/// The keep-alive renews every `renew_interval`. If a renewal is rejected, or renewals keep
/// failing until the local deadline, the guard's `held` channel turns `false` and its
/// [`CancellationToken`] is cancelled, at the deadline at the latest, while the store still
/// keeps the lease for at least another second plus the clock skew (see
/// [`crate::LeaseConfig::validity`]).
///
/// Dropping the guard stops the keep-alive and releases the lease in a spawned task, best
/// effort. Call [`LeaseGuard::release`] to wait for it.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::{LeaseClient, LeaseConfig, MemoryStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let client = LeaseClient::new(Arc::new(MemoryStore::new()), LeaseConfig::default())?;
/// let guard = client.acquire("nightly-report", "worker-1", None, None).await?.keep_alive();
/// let stop = guard.cancellation_token();
/// // Do the work, passing the token along to fence every write it makes.
/// let token = guard.token();
/// assert!(!stop.is_cancelled() && guard.is_held());
/// # let _ = token;
/// guard.release().await?;
/// assert!(stop.is_cancelled());
/// # Ok::<(), cql_lease::LeaseError>(())
/// # }).unwrap();
/// ```
pub struct LeaseGuard {
    name: String,
    owner: String,
    token: FencingToken,
    signals: Arc<Signals>,
    stop_task: CancellationToken,
    commands: mpsc::Sender<Command>,
    task: Option<JoinHandle<Option<Lease>>>,
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", &self.name)
            .field("token", &self.token)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl LeaseGuard {
    pub(crate) fn start(lease: Lease, held: Option<watch::Sender<bool>>) -> Self {
        let held = held.unwrap_or_else(|| watch::channel(false).0);
        held.send_replace(lease.is_valid());
        let (deadline, _) = watch::channel(lease.must_stop_by());
        let signals = Arc::new(Signals {
            held,
            deadline,
            stop_acting: CancellationToken::new(),
            renewals: AtomicU64::new(0),
            reason: Mutex::new(None),
            lost_at: Mutex::new(None),
        });
        let stop_task = CancellationToken::new();
        let (commands, inbox) = mpsc::channel(4);
        let guard_fields = (
            lease.name().to_owned(),
            lease.owner().to_owned(),
            lease.token(),
        );
        let task = tokio::spawn(run(lease, Arc::clone(&signals), stop_task.clone(), inbox));
        LeaseGuard {
            name: guard_fields.0,
            owner: guard_fields.1,
            token: guard_fields.2,
            signals,
            stop_task,
            commands,
            task: Some(task),
        }
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner that holds it.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token; stays readable after loss, for fencing downstream writes.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// `true` while held; turns `false` once, when the holder must stop.
    pub fn held(&self) -> watch::Receiver<bool> {
        self.signals.held.subscribe()
    }

    /// Whether the lease is still held.
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

    /// How many renewals have succeeded.
    pub fn renewals(&self) -> u64 {
        self.signals.renewals.load(Ordering::Relaxed)
    }

    /// Why the lease was lost, once it was.
    pub fn loss_reason(&self) -> Option<LossReason> {
        self.signals.reason.lock().ok().and_then(|r| r.clone())
    }

    /// When the holder was told to stop (just before the token was cancelled), once it was.
    pub fn lost_at(&self) -> Option<Instant> {
        self.signals.lost_at.lock().ok().and_then(|at| *at)
    }

    /// Tells the holder to stop acting now (cancels the token) without releasing yet; the
    /// keep-alive goes on until [`LeaseGuard::release`]. Returns when the holder was told.
    pub fn stop_acting(&self) -> Instant {
        self.signals.lose(&self.name, LossReason::Released)
    }

    /// Waits until the holder must stop acting.
    pub async fn lost(&self) {
        self.signals.stop_acting.cancelled().await;
    }

    /// Replaces the stored value and renews at once: one LWT.
    pub async fn set_value(&self, value: Option<String>) -> Result<(), LeaseError> {
        let (reply, answer) = oneshot::channel();
        let gone = || LeaseError::Lost {
            name: self.name.clone(),
            reason: self.loss_reason().unwrap_or(LossReason::Released),
        };
        if self
            .commands
            .send(Command::SetValue(value, reply))
            .await
            .is_err()
        {
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Stops renewing without releasing, as a crashed process would: the holder must stop
    /// (the token is cancelled) and the lease stays in the store until its TTL runs out. For
    /// crash tests, and for processes that must not touch the store on their way out.
    pub fn abandon(mut self) {
        if let Some(task) = self.task.take() {
            self.stop_task.cancel();
            task.abort();
            let _ = self.signals.lose(&self.name, LossReason::Released);
        }
    }

    /// Stops the keep-alive (the cancellation token fires first) and releases the lease.
    pub async fn release(mut self) -> Result<(), LeaseError> {
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        self.stop_task.cancel();
        let lease = task.await.ok().flatten();
        let _ = self.signals.lose(&self.name, LossReason::Released);
        match lease {
            Some(lease) => lease.release().await,
            None => Err(LeaseError::Lost {
                name: self.name.clone(),
                reason: self.loss_reason().unwrap_or(LossReason::Expired),
            }),
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        self.stop_task.cancel();
        let _ = self.signals.lose(&self.name, LossReason::Released);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Ok(Some(lease)) = task.await {
                    let result = lease.release().await;
                    debug!(?result, "release on drop");
                }
            });
        }
    }
}

/// The keep-alive loop. Returns the lease if it was stopped while still held.
async fn run(
    mut lease: Lease,
    signals: Arc<Signals>,
    stop: CancellationToken,
    mut inbox: mpsc::Receiver<Command>,
) -> Option<Lease> {
    let config = *lease.client().config();
    let mut delays = lease.client().poll_delays();
    let mut next_renewal = lease.must_stop_by() - config.validity() + config.renew_interval;
    let mut failing = false;
    loop {
        let deadline = lease.must_stop_by();
        let mut reply = None;
        tokio::select! {
            biased;
            _ = stop.cancelled() => return Some(lease),
            command = inbox.recv() => match command {
                Some(Command::SetValue(value, tx)) => reply = Some((value, tx)),
                None => return Some(lease),
            },
            _ = tokio::time::sleep_until(next_renewal.min(deadline)) => {}
        }
        if Instant::now() >= deadline {
            return expire(lease, &signals, failing);
        }
        let outcome = match reply {
            Some((value, tx)) => {
                let outcome = tokio::time::timeout_at(deadline, lease.set_value(value)).await;
                let _ = tx.send(match &outcome {
                    Ok(result) => result.clone(),
                    Err(_) => Err(LeaseError::Lost {
                        name: lease.name().to_owned(),
                        reason: LossReason::Expired,
                    }),
                });
                outcome
            }
            None => tokio::time::timeout_at(deadline, lease.renew()).await,
        };
        match outcome {
            Err(_deadline_passed) => return expire(lease, &signals, failing),
            Ok(Ok(())) => {
                failing = false;
                signals.renewals.fetch_add(1, Ordering::Relaxed);
                signals.deadline.send_replace(lease.must_stop_by());
                next_renewal = Instant::now() + config.renew_interval;
                delays = lease.client().poll_delays();
            }
            Ok(Err(LeaseError::Lost { reason, .. })) => {
                let _ = signals.lose(lease.name(), reason);
                return None;
            }
            Ok(Err(error)) => {
                failing = true;
                let delay = delays.next().unwrap_or(config.retry_interval);
                warn!(lease = lease.name(), %error, ?delay, "renewal failed; retrying");
                next_renewal = Instant::now() + delay;
            }
        }
    }
}

/// The deadline passed without a successful renewal: stop acting, then try to free the lease
/// early in case a late renewal did apply.
fn expire(lease: Lease, signals: &Signals, failing: bool) -> Option<Lease> {
    let reason = if failing {
        LossReason::Unreachable
    } else {
        LossReason::Expired
    };
    signals.lose(lease.name(), reason);
    lease
        .client()
        .spawn_cleanup(lease.name(), lease.holder_id());
    None
}
