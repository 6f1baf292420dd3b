//! An acquired lease: renew it, release it, or hand it to a keep-alive.

use tokio::time::Instant;
use tracing::{info, instrument, warn};

use crate::client::LeaseClient;
use crate::config::{MAX_VALUE_LEN, check_len};
use crate::error::{LeaseError, LossReason, StoreError};
use crate::fencing::FencingToken;
use crate::keepalive::LeaseGuard;
use crate::store::{CasOutcome, Claim};

/// A lease this process holds. It is valid until [`Lease::must_stop_by`], a local monotonic
/// instant; renew it before then, or use [`Lease::keep_alive`]. Dropping a `Lease` does not
/// release it (its TTL does, or [`Lease::release`]); the [`LeaseGuard`] releases on drop.
#[derive(Debug)]
pub struct Lease {
    client: LeaseClient,
    name: String,
    owner: String,
    value: Option<String>,
    holder_id: String,
    token: FencingToken,
    must_stop_by: Instant,
}

impl Lease {
    pub(crate) fn new(
        client: LeaseClient,
        claim: Claim<'_>,
        token: FencingToken,
        must_stop_by: Instant,
    ) -> Self {
        Lease {
            client,
            name: claim.name.to_owned(),
            owner: claim.owner.to_owned(),
            value: claim.value.map(str::to_owned),
            holder_id: claim.holder_id.to_owned(),
            token,
            must_stop_by,
        }
    }

    /// The lease name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The owner that acquired it.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The value stored with it.
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The fencing token of this acquisition (unchanged by renewals).
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The unique id of this acquisition in the store.
    pub fn holder_id(&self) -> &str {
        &self.holder_id
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
    /// On a lost answer, one linearizable read decides: another holder (or none) gives
    /// [`LeaseError::Lost`]; still ours gives the store error and leaves the deadline where
    /// it was, since the extension may not have happened.
    #[instrument(skip(self), fields(lease = %self.name, token = %self.token))]
    pub async fn renew(&mut self) -> Result<(), LeaseError> {
        let value = self.value.clone();
        self.renew_with(value).await
    }

    /// Replaces the stored value (e.g. a new address), renewing at the same time: one LWT.
    #[instrument(skip(self, value), fields(lease = %self.name, token = %self.token))]
    pub async fn set_value(&mut self, value: Option<String>) -> Result<(), LeaseError> {
        if let Some(v) = &value {
            check_len("value", v, MAX_VALUE_LEN)?;
        }
        self.renew_with(value).await
    }

    async fn renew_with(&mut self, value: Option<String>) -> Result<(), LeaseError> {
        let config = *self.client.config();
        let claim = Claim {
            name: &self.name,
            holder_id: &self.holder_id,
            owner: &self.owner,
            value: value.as_deref(),
            ttl: config.store_ttl(),
        };
        let sent_at = Instant::now();
        match self.client.store().renew(claim).await {
            Ok(CasOutcome::Applied) => {
                self.must_stop_by = sent_at + config.validity();
                self.value = value;
                tracing::debug!(lease = %self.name, "renewed");
                Ok(())
            }
            Ok(CasOutcome::NotApplied) => Err(self.lost()),
            Err(error @ StoreError::Rejected(_)) => Err(LeaseError::store(&self.name, error)),
            Err(error) => {
                warn!(lease = %self.name, %error, "renew failed; reading back");
                match self.client.store().read(&self.name).await {
                    Ok(Some(current)) if current.holder_id == self.holder_id => {
                        Err(LeaseError::store(&self.name, error))
                    }
                    Ok(_) => Err(self.lost()),
                    Err(_) => Err(LeaseError::store(&self.name, error)),
                }
            }
        }
    }

    /// Deletes the lease if this acquisition still holds it: one LWT. The token history stays,
    /// so the next holder gets a greater token.
    #[instrument(skip(self), fields(lease = %self.name, token = %self.token))]
    pub async fn release(self) -> Result<(), LeaseError> {
        let config = *self.client.config();
        let give_up_at = Instant::now() + config.resolve_timeout;
        let mut delays = self.client.poll_delays();
        loop {
            let error = match self
                .client
                .store()
                .release(&self.name, &self.holder_id)
                .await
            {
                Ok(CasOutcome::Applied) => {
                    info!(lease = %self.name, token = %self.token, "lease released");
                    return Ok(());
                }
                Ok(CasOutcome::NotApplied) => return Err(self.lost()),
                Err(error @ StoreError::Rejected(_)) => {
                    return Err(LeaseError::store(&self.name, error));
                }
                Err(error) => error,
            };
            // The delete is conditional on our unique holder id, so asking again is safe.
            warn!(lease = %self.name, %error, "release failed; checking");
            match self.client.store().read(&self.name).await {
                Ok(Some(current)) if current.holder_id == self.holder_id => {}
                Ok(None) => return Ok(()),
                Ok(Some(_)) => return Err(self.lost()),
                Err(_) => {}
            }
            let wake = Instant::now() + delays.next().unwrap_or(config.retry_interval);
            if wake >= give_up_at {
                return Err(LeaseError::OutcomeUnknown {
                    name: self.name.clone(),
                    operation: "release",
                    source: error,
                });
            }
            tokio::time::sleep_until(wake).await;
        }
    }

    /// Starts renewing in the background every `renew_interval`. See [`LeaseGuard`].
    pub fn keep_alive(self) -> LeaseGuard {
        LeaseGuard::start(self, None)
    }

    /// Like [`Lease::keep_alive`], reporting on a `held` channel the caller owns (one that
    /// outlives this lease, say). It is set `true` now and `false` when the holder must stop,
    /// before the guard's cancellation token fires.
    pub fn keep_alive_with(self, held: tokio::sync::watch::Sender<bool>) -> LeaseGuard {
        LeaseGuard::start(self, Some(held))
    }

    fn lost(&self) -> LeaseError {
        info!(lease = %self.name, token = %self.token, "lease lost");
        LeaseError::Lost {
            name: self.name.clone(),
            reason: LossReason::NotHolder,
        }
    }
}
