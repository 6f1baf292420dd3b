//! A lease kept alive in the background: the lease's face on the shared [`Hold`].

use std::sync::Arc;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::{MAX_VALUE_LEN, check_len};
use crate::error::LeaseError;
use crate::fencing::FencingToken;
use crate::hold::{Hold, HoldTiming};
use crate::lease::{Lease, hold_error};
use crate::target::LeaseTarget;

/// A lease kept alive in the background by the shared hold machine ([`crate::hold`]).
///
/// The keep-alive renews every `renew_period`. If a renewal is rejected, or renewals keep
/// failing until the local deadline, the guard's `held` channel turns `false` and its
/// [`CancellationToken`](tokio_util::sync::CancellationToken) is cancelled, at the deadline
/// at the latest, while the store still keeps the lease for at least another second plus the
/// clock skew (see [`crate::Timing::renew_deadline`]); lost at the deadline, it is released in
/// the background only when that margin has passed (freeing a renewal that applied although
/// its answer was lost), so a holder slow to stop is still alone. A lease whose deadline has already
/// passed when the guard is made starts lost (token cancelled) and is released in the
/// background.
///
/// Dropping the guard cancels the token, stops the keep-alive and releases the lease in a
/// spawned task, best effort. Call [`LeaseGuard::release`] to wait for it.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::{LeaseClient, Timing, MemoryStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let client = LeaseClient::new(Arc::new(MemoryStore::new()), Timing::default())?;
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
    target: Arc<LeaseTarget>,
    token: FencingToken,
    hold: Hold,
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("name", &self.target.name)
            .field("token", &self.token)
            .field("held", &self.is_held())
            .finish_non_exhaustive()
    }
}

impl LeaseGuard {
    pub(crate) fn start(lease: Lease, held: Option<watch::Sender<bool>>) -> Self {
        let (client, target, token, must_stop_by) = lease.into_parts();
        let timing = HoldTiming::from(client.config());
        let sent_at = must_stop_by - timing.validity;
        let hold = Hold::start(target.clone(), timing, sent_at, held);
        LeaseGuard {
            target,
            token,
            hold,
        }
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        &self.target.name
    }

    /// The owner that holds it.
    pub fn owner(&self) -> &str {
        &self.target.owner
    }

    /// The unique id of this acquisition in the store.
    pub fn holder_id(&self) -> &str {
        &self.target.holder_id
    }

    /// The fencing token; stays readable after loss, for fencing downstream writes.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    crate::hold::hold_accessors!();

    /// Tells the holder to stop acting now (cancels the token) without releasing yet; the
    /// keep-alive goes on until [`LeaseGuard::release`]. Returns when the holder was told.
    pub fn stop_acting(&self) -> Instant {
        self.hold.stop_acting()
    }

    /// Replaces the stored value and renews at once: one LWT, sent by the keep-alive.
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] for an oversized value; [`LeaseError::Lost`] once the
    /// lease is lost; the store's error if this renewal failed (the old value stays stored
    /// and the keep-alive goes on).
    ///
    /// # Cancel safety
    /// Cancel-safe: the renewal runs in the keep-alive task; if the future is dropped, the
    /// new value may or may not be written.
    pub async fn set_value(&self, value: Option<&str>) -> Result<(), LeaseError> {
        if let Some(v) = value {
            check_len("value", v, MAX_VALUE_LEN)?;
        }
        let value = value.map(str::to_owned);
        let previous = self.target.replace_value(value.clone());
        let result = self.hold.renew_now().await;
        if result.is_err() && self.target.value() == value {
            self.target.replace_value(previous);
        }
        result.map_err(|e| hold_error(&self.target.name, "set_value", e))
    }

    /// Stops renewing without releasing, as a crashed process would: the holder must stop
    /// (the token is cancelled) and the lease stays in the store until its TTL runs out. For
    /// crash tests, and for processes that must not touch the store on their way out.
    pub fn abandon(self) {
        self.hold.abandon();
    }

    /// Stops the keep-alive (the cancellation token fires first) and releases the lease.
    ///
    /// # Errors
    /// [`LeaseError::Lost`] if the lease was already lost; otherwise as [`Lease::release`].
    ///
    /// # Cancel safety
    /// Cancel-safe: the token is cancelled before the first await, and a dropped call
    /// finishes the release in a spawned task.
    pub async fn release(self) -> Result<(), LeaseError> {
        let name = self.target.name.clone();
        self.hold
            .release()
            .await
            .map_err(|e| hold_error(&name, "release", e))
    }
}
