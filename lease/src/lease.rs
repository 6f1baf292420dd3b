//! An acquired lease: renew it, release it, or hand it to a keep-alive.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{info, instrument, warn};

use crate::client::LeaseClient;
use crate::config::{MAX_VALUE_LEN, check_len};
use crate::error::{LeaseError, LossReason};
use crate::fencing::FencingToken;
use crate::hold::{AttemptGuard, HoldError, HoldTiming, Holdable, release_target};
use crate::keepalive::LeaseGuard;
use crate::store::CasOutcome;
use crate::target::LeaseTarget;

/// A lease this process holds. It is valid until [`Lease::must_stop_by`], a local monotonic
/// instant; renew it before then, or use [`Lease::keep_alive`]. Dropping a `Lease` does not
/// release it (its TTL does, or [`Lease::release`]); the [`LeaseGuard`] releases on drop.
pub struct Lease {
    client: LeaseClient,
    target: Arc<LeaseTarget>,
    token: FencingToken,
    must_stop_by: Instant,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.target.name)
            .field("owner", &self.target.owner)
            .field("token", &self.token)
            .field("must_stop_by", &self.must_stop_by)
            .finish_non_exhaustive()
    }
}

impl Lease {
    pub(crate) fn new(
        client: LeaseClient,
        target: Arc<LeaseTarget>,
        token: FencingToken,
        must_stop_by: Instant,
    ) -> Self {
        Lease {
            client,
            target,
            token,
            must_stop_by,
        }
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        &self.target.name
    }

    /// The owner that acquired it.
    pub fn owner(&self) -> &str {
        &self.target.owner
    }

    /// The value stored with it.
    pub fn value(&self) -> Option<String> {
        self.target.value()
    }

    /// The fencing token of this acquisition (unchanged by renewals).
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The unique id of this acquisition in the store.
    pub fn holder_id(&self) -> &str {
        &self.target.holder_id
    }

    /// The local instant after which the holder must not act on the lease.
    pub fn must_stop_by(&self) -> Instant {
        self.must_stop_by
    }

    /// Whether the holder may still act (the local deadline has not passed).
    pub fn is_valid(&self) -> bool {
        Instant::now() < self.must_stop_by
    }

    /// The client it was acquired with.
    pub fn client(&self) -> &LeaseClient {
        &self.client
    }

    /// Rewrites the TTL if this acquisition still holds it: one LWT.
    ///
    /// # Errors
    /// [`LeaseError::Lost`] when another holder (or none) has it; on a lost answer one
    /// linearizable read decides, and if the lease is still ours the store error is returned
    /// and the deadline stays where it was (the extension may not have happened).
    /// [`LeaseError::Store`] when the store failed definitely.
    ///
    /// # Cancel safety
    /// Cancel-safe: the renewal is conditional on this acquisition's id; a dropped call
    /// leaves the deadline unchanged.
    #[instrument(skip(self), fields(lease = %self.target.name, token = %self.token))]
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        let value = self.target.value();
        self.renew_with(value).await
    }

    /// Replaces the stored value (e.g. a new address), renewing at the same time: one LWT.
    ///
    /// # Errors
    /// As [`Lease::renew`], plus [`LeaseError::InvalidArgument`] for an oversized value.
    ///
    /// # Cancel safety
    /// As [`Lease::renew`].
    #[instrument(skip(self, value), fields(lease = %self.target.name, token = %self.token))]
    pub async fn set_value(&mut self, value: Option<&str>) -> Result<(), LeaseError> {
        if let Some(v) = value {
            check_len("value", v, MAX_VALUE_LEN)?;
        }
        self.renew_with(value.map(str::to_owned)).await
    }

    async fn renew_with(&mut self, value: Option<String>) -> Result<(), LeaseError> {
        let validity = self.client.config().renew_deadline();
        let sent_at = Instant::now();
        match self.target.renew_with(value).await {
            Ok(CasOutcome::Applied) => {
                self.must_stop_by = sent_at + validity;
                tracing::debug!(lease = %self.target.name, "renewed");
                Ok(())
            }
            Ok(CasOutcome::NotApplied) => Err(self.lost()),
            Err(error) if error.is_unknown() => {
                warn!(lease = %self.target.name, %error, "renew answer lost; reading back");
                match self.target.still_held().await {
                    Ok(false) => Err(self.lost()),
                    _ => Err(LeaseError::store(&self.target.name, error)),
                }
            }
            Err(error) => Err(LeaseError::store(&self.target.name, error)),
        }
    }

    /// Deletes the lease if this acquisition still holds it: one LWT. The token history stays,
    /// so the next holder gets a greater token. Lost answers are settled by asking again
    /// (the delete is conditional on this acquisition's unique id) and reading back.
    ///
    /// # Errors
    /// [`LeaseError::Lost`] when the lease was not this acquisition's any more;
    /// [`LeaseError::OutcomeUnknown`] when the outcome could not be settled within
    /// `resolve_timeout` (the TTL bounds it); [`LeaseError::Store`] on a definite failure.
    ///
    /// # Cancel safety
    /// Cancel-safe: if the future is dropped, the release goes on in a spawned task.
    #[instrument(skip(self), fields(lease = %self.target.name, token = %self.token))]
    pub async fn release(self) -> Result<(), LeaseError> {
        let timing = HoldTiming::from(self.client.config());
        let guard = AttemptGuard::new(self.target.clone(), timing);
        let result = release_target(self.target.as_ref(), &timing).await;
        guard.disarm();
        result.map_err(|e| hold_error(&self.target.name, "release", e))
    }

    /// Starts renewing in the background every `renew_period`. See [`LeaseGuard`].
    pub fn keep_alive(self) -> LeaseGuard {
        LeaseGuard::start(self, None)
    }

    /// Like [`Lease::keep_alive`], reporting on a `held` channel the caller owns (one that
    /// outlives this lease, say). It is set `true` now and `false` when the holder must stop,
    /// before the guard's cancellation token fires.
    pub fn keep_alive_with(self, held: tokio::sync::watch::Sender<bool>) -> LeaseGuard {
        LeaseGuard::start(self, Some(held))
    }

    pub(crate) fn into_parts(self) -> (LeaseClient, Arc<LeaseTarget>, FencingToken, Instant) {
        (self.client, self.target, self.token, self.must_stop_by)
    }

    fn lost(&self) -> LeaseError {
        info!(lease = %self.target.name, token = %self.token, "lease lost");
        LeaseError::Lost {
            name: self.target.name.clone(),
            reason: LossReason::NotHolder,
        }
    }
}

/// The lease-level error for a hold machine error.
pub(crate) fn hold_error(name: &str, operation: &'static str, error: HoldError) -> LeaseError {
    match error {
        HoldError::Lost(reason) => LeaseError::Lost {
            name: name.to_owned(),
            reason,
        },
        HoldError::Store(source) => LeaseError::store(name, source),
        HoldError::OutcomeUnknown(source) => LeaseError::OutcomeUnknown {
            name: name.to_owned(),
            operation,
            source,
        },
    }
}
