//! A mutex on the LWT lease (seed 001): one conditional write takes it, with a fencing token.
//!
//! `lock` is [`LeaseClient::acquire`] (polling while held, up to the timeout); `try_lock` is
//! one [`LeaseClient::try_acquire`]. The guard keeps the lease through the shared hold
//! machine with conditional renewals (`IF holder = me`), and releases it conditionally.
//!
//! # Guarantees
//! Linearizable (Paxos): at most one holder per name; each grant's [`FencingToken`] exceeds
//! every earlier one for the name, even across expiry, so a resource that checks tokens
//! rejects a holder that stalled past its lease. The one to recommend wherever the cluster
//! has LWTs (not on ScyllaDB tablet keyspaces).
//!
//! # Limits
//! - Waiters poll every `retry_interval`; grants are not FIFO (etcd orders its mutex by
//!   revision; this lock does not, yet).
//! - Paxos contention: many contenders on one name cost extra LWT rounds.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Lock, LockError, LockGuard, check_request};
use crate::client::{LeaseClient, TryAcquire};
use crate::error::{LeaseError, StoreError};
use crate::fencing::FencingToken;
use crate::hold::{Hold, HoldTiming, Holdable};
use crate::lease::Lease;
use crate::store::{CasOutcome, Claim, LeaseStore};

/// The lease lock.
#[derive(Debug, Clone)]
pub struct LeaseLock {
    client: LeaseClient,
    owner: String,
}

impl LeaseLock {
    /// A lease lock through `client`, declaring `owner` (a process or node id) as holder.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for an empty or long owner.
    pub fn new(client: LeaseClient, owner: &str) -> Result<Self, LockError> {
        crate::config::check_owner_and_value(owner, None)?;
        Ok(LeaseLock {
            client,
            owner: owner.to_owned(),
        })
    }

    fn guard(&self, lease: Lease) -> LockGuard {
        let timing = HoldTiming::from(self.client.config());
        let sent_at = lease.must_stop_by() - timing.validity;
        let token = lease.token();
        let name = lease.name().to_owned();
        let target = Arc::new(LeaseTarget {
            store: Arc::clone(self.client.store()),
            name: name.clone(),
            holder_id: lease.holder_id().to_owned(),
            owner: self.owner.clone(),
            ttl: self.client.config().store_ttl(),
            token,
        });
        LockGuard::new(
            name,
            "lease",
            Some(token),
            Hold::start(target, timing, sent_at, None),
        )
    }
}

/// One acquired lease, as the hold machine sees it.
struct LeaseTarget {
    store: Arc<dyn LeaseStore>,
    name: String,
    holder_id: String,
    owner: String,
    ttl: Duration,
    token: FencingToken,
}

#[async_trait]
impl Holdable for LeaseTarget {
    fn describe(&self) -> String {
        format!("lease lock {:?} (token {})", self.name, self.token)
    }

    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.store
            .renew(Claim {
                name: &self.name,
                holder_id: &self.holder_id,
                owner: &self.owner,
                value: None,
                ttl: self.ttl,
            })
            .await
    }

    async fn still_held(&self) -> Result<bool, StoreError> {
        Ok(self
            .store
            .read(&self.name)
            .await?
            .is_some_and(|current| current.holder_id == self.holder_id))
    }

    async fn release(&self) -> Result<CasOutcome, StoreError> {
        self.store.release(&self.name, &self.holder_id).await
    }
}

#[async_trait]
impl Lock for LeaseLock {
    fn algorithm(&self) -> &'static str {
        "lease"
    }

    async fn lock(&self, name: &str, timeout: Duration) -> Result<LockGuard, LockError> {
        check_request(name, Some(timeout))?;
        let started = Instant::now();
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
    }

    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        check_request(name, None)?;
        match self.client.try_acquire(name, &self.owner, None).await? {
            TryAcquire::Acquired(lease) => Ok(Some(self.guard(lease))),
            TryAcquire::Held(_) => Ok(None),
        }
    }
}
