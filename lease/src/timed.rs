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

    /// [`TimedStore::bounded`], recorded as one round trip (see [`crate::metrics`]).
    async fn metered<T>(
        &self,
        what: &'static str,
        write: bool,
        call: impl Future<Output = Result<T, StoreError>>,
        applied: impl FnOnce(&T) -> bool,
    ) -> Result<T, StoreError> {
        let bounded = self.bounded(what, write, call);
        crate::metrics::timed("lease", what, bounded, applied).await
    }

    async fn bounded<T>(
        &self,
        what: &'static str,
        write: bool,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, call).await {
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
        let acquired = |o: &AcquireOutcome| matches!(o, AcquireOutcome::Acquired { .. });
        self.metered("try_acquire", true, self.inner.try_acquire(claim), acquired)
            .await
    }

    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.metered("renew", true, self.inner.renew(claim), applied)
            .await
    }

    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.metered(
            "release",
            true,
            self.inner.release(name, holder_id),
            applied,
        )
        .await
    }

    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.metered("read", false, self.inner.read(name), answered)
            .await
    }

    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.metered("peek", false, self.inner.peek(name), answered)
            .await
    }
}

fn applied(outcome: &CasOutcome) -> bool {
    *outcome == CasOutcome::Applied
}

/// A read or plain write that was answered counts as applied.
fn answered<T>(_: &T) -> bool {
    true
}
