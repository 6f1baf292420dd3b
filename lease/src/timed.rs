//! A store decorator bounding every call by the lease's request timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::warn;

use crate::error::StoreError;
use crate::store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

/// Wraps a store so that no call waits longer than `timeout` (what
/// [`crate::LeaseClient`] does with [`crate::LeaseConfig::effective_request_timeout`]): a
/// write that times out has an unknown outcome ([`StoreError::Unknown`], settled by the
/// caller's read-back), a read that times out is [`StoreError::Unavailable`] (nothing
/// changed). Either way the next call is free to go to another coordinator.
pub(crate) struct TimedStore {
    inner: Arc<dyn LeaseStore>,
    timeout: Duration,
}

impl TimedStore {
    pub(crate) fn new(inner: Arc<dyn LeaseStore>, timeout: Duration) -> Self {
        TimedStore { inner, timeout }
    }

    async fn bounded<T>(
        &self,
        what: &'static str,
        write: bool,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        // A call cut here leaves its coordinator suspect, so the next one (a retry, the
        // read-back of a lost answer) goes elsewhere.
        match crate::scylla::suspects::bounded(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                warn!(call = what, timeout = ?self.timeout, "store call timed out");
                let message = format!("{what}: no answer within {:?}", self.timeout);
                Err(if write {
                    StoreError::Unknown(message)
                } else {
                    StoreError::Unavailable(message)
                })
            }
        }
    }
}

#[async_trait]
impl LeaseStore for TimedStore {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        self.bounded("try_acquire", true, self.inner.try_acquire(claim))
            .await
    }

    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.bounded("renew", true, self.inner.renew(claim)).await
    }

    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.bounded("release", true, self.inner.release(name, holder_id))
            .await
    }

    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.bounded("read", false, self.inner.read(name)).await
    }

    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.bounded("peek", false, self.inner.peek(name)).await
    }
}
