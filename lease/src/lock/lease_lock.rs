//! A mutex on the LWT lease: one conditional write takes it, with a fencing token.
//!
//! `lock` is [`LeaseClient::acquire`]: waiters stand in a FIFO line on plain cells and read
//! the lease with plain reads; only the first in line sends an LWT, when the lease reads
//! free, so many contenders cost about one Paxos round per hand-over and are served in
//! arrival order. It rides through store errors up to the timeout. `try_lock` is one
//! [`LeaseClient::try_acquire`], made again after a transient store error within its budget
//! (see [`Lock::try_lock`]). The guard keeps the lease through the shared hold machine with
//! conditional renewals (`IF holder = me`), and releases it conditionally.
//!
//! # Guarantees
//! Linearizable (Paxos): at most one holder per name; each grant's [`FencingToken`](crate::FencingToken) exceeds
//! every earlier one for the name, even across expiry, so a resource that checks tokens
//! rejects a holder that stalled past its lease. The one to recommend wherever the cluster
//! has LWTs (not on ScyllaDB tablet keyspaces).
//!
//! # Limits
//! - FIFO as far as the waiters' clocks agree (arrival times come from each process's
//!   clock); `try_lock` does not queue and may take the lock ahead of the line when it
//!   reads free.
//! - A waiter that crashed holds the line up for `retry_period` after the lease frees
//!   (the second in line then proposes too) and leaves it within the TTL.
//! - A hand-over costs a release, a read and a claim: about `1 / (2 LWTs + 1 read)`
//!   acquisitions per second, whatever the number of contenders. From a holder to the next
//!   in line of the same process it is one LWT: the release writes the waiter's claim
//!   (see `LeaseClient::acquire`).

use async_trait::async_trait;
use tokio::time::Instant;

use super::transient::{until_deadline, within_budget};
use super::{Lock, LockError, LockGuard, check_request};
use crate::client::{LeaseClient, TryAcquire};
use crate::error::LeaseError;
use crate::hold::{Hold, HoldTiming};
use crate::lease::Lease;
use crate::namespace::Namespace;

/// The lease lock.
#[derive(Debug, Clone)]
pub struct LeaseLock {
    client: LeaseClient,
    owner: String,
}

impl LeaseLock {
    /// A lease lock through `client`, declaring `owner` (a process or node id) as holder.
    /// Its leases are stored in the lock name space: the lock `X` is the row `lock/X` (see
    /// [`crate::namespace`]), apart from the plain lease `X` and the election `X`.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for an empty or long owner.
    pub fn new(client: LeaseClient, owner: &str) -> Result<Self, LockError> {
        crate::config::check_owner_and_value(owner, None)?;
        Ok(LeaseLock {
            client: client.in_namespace(Namespace::Lock),
            owner: owner.to_owned(),
        })
    }

    /// The guard: the lease's own claim (the same target its keep-alive uses), kept by the
    /// shared hold machine.
    fn guard(&self, lease: Lease) -> LockGuard {
        let timing = HoldTiming::from(self.client.config());
        let (_, target, token, must_stop_by) = lease.into_parts();
        let name = target.name.clone();
        let hold = Hold::start(target, timing, must_stop_by - timing.validity, None);
        LockGuard::new(name, "lease", Some(token), hold)
    }
}

#[async_trait]
impl Lock for LeaseLock {
    fn algorithm(&self) -> &'static str {
        "lease"
    }

    async fn lock_until(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        super::check_request(name, None)?;
        // The lease client retries every failure but a refusal or bad input, and bounds each
        // attempt by the timeout (an attempt cut there gives its claim back).
        let timeout = deadline.saturating_duration_since(Instant::now());
        let acquired = async {
            match self
                .client
                .acquire(name, &self.owner, None, Some(timeout))
                .await
            {
                Ok(lease) => Ok(self.guard(lease)),
                Err(LeaseError::Timeout { .. }) => Err(LockError::Timeout {
                    name: name.to_owned(),
                    waited: started.elapsed(),
                }),
                Err(error) => Err(error.into()),
            }
        };
        until_deadline(name, started, deadline, acquired).await
    }

    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        check_request(name, None)?;
        within_budget(name, self.client.config(), || async {
            match self.client.try_acquire(name, &self.owner, None).await? {
                TryAcquire::Acquired(lease) => Ok(Some(self.guard(lease))),
                TryAcquire::Held(_) => Ok(None),
            }
        })
        .await
    }
}
