//! Bounding store calls by a request timeout: the one rule every store decorator of the
//! workspace applies ([`bounded`]), and the lease store's decorator.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::warn;

use crate::error::StoreError;
use crate::fencing::FencingToken;
use crate::store::{AcquireOutcome, CasOutcome, Claim, LeaseStore, StoredLease};

/// Wraps a store so that no call waits longer than `timeout` (what
/// [`crate::LeaseClient`] does with [`crate::Timing::effective_request_timeout`]): a
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

    /// [`bounded`], recorded as one round trip (see [`crate::metrics`]).
    async fn metered<T, F, Fut>(
        &self,
        what: &'static str,
        kind: Call,
        call: F,
        applied: impl FnOnce(&T) -> bool,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let bounded = bounded(what, kind, self.timeout, call);
        crate::metrics::timed("lease", what, bounded, applied).await
    }
}

/// Runs `request` for at most `limit`. With the `scylla` feature this is
/// `scylla::suspects::bounded`, which also marks the coordinators a cut request was still
/// waiting on; without it (no driver, so no coordinators) it is a plain timeout.
pub(crate) async fn within<F: Future>(
    limit: Duration,
    request: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    #[cfg(feature = "scylla")]
    {
        crate::scylla::suspects::bounded(limit, request).await
    }
    #[cfg(not(feature = "scylla"))]
    {
        tokio::time::timeout(limit, request).await
    }
}

/// What a bounded call is: what its timeout means and whether it is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A conditional write (an LWT): one send; cut, its outcome is unknown
    /// ([`StoreError::Unknown`]) and the caller settles it by reading back.
    Conditional,
    /// A read sent once; cut, it is [`StoreError::Unavailable`] (nothing changed).
    Once,
    /// A read, or a plain write carrying its client timestamp (so sending it again writes
    /// the same cells with the same timestamp): cut once, it is sent again at once, which
    /// goes to another coordinator; cut twice, [`StoreError::Unavailable`].
    Resendable,
}

/// Runs `call` for at most `timeout` per send, as `kind` says. With the `scylla` feature, a
/// send that is cut leaves its coordinator suspect (see `cql_lease::scylla::suspects`), so
/// the next request of the process (this call sent again, a retry, the read-back of a lost
/// answer) goes elsewhere.
///
/// # Errors
/// The call's own error, or, when it was cut, [`StoreError::Unknown`] for a
/// [`Call::Conditional`] and [`StoreError::Unavailable`] otherwise.
///
/// # Cancel safety
/// As cancel-safe as `call`'s futures (a dropped conditional write has an unknown outcome).
pub async fn bounded<T, F, Fut>(
    what: &str,
    kind: Call,
    timeout: Duration,
    mut call: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let sends = if kind == Call::Resendable { 2 } else { 1 };
    for send in 1..=sends {
        match within(timeout, call()).await {
            Ok(result) => return result,
            Err(_) => warn!(call = what, send, ?timeout, "store call timed out"),
        }
    }
    let message = format!("{what}: no answer within {timeout:?}");
    Err(if kind == Call::Conditional {
        StoreError::Unknown(message)
    } else {
        StoreError::Unavailable(message)
    })
}

#[async_trait]
impl LeaseStore for TimedStore {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        let call = || self.inner.try_acquire(claim);
        let acquired = |o: &AcquireOutcome| matches!(o, AcquireOutcome::Acquired { .. });
        self.metered("try_acquire", Call::Conditional, call, acquired)
            .await
    }

    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.renew(claim);
        self.metered("renew", Call::Conditional, call, applied)
            .await
    }

    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        let call = || self.inner.release(name, holder_id);
        self.metered("release", Call::Conditional, call, applied)
            .await
    }

    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        let call = || self.inner.hand_over(from_holder_id, from_token, to);
        self.metered("hand_over", Call::Conditional, call, Option::is_some)
            .await
    }

    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        let call = || self.inner.read(name);
        self.metered("read", Call::Once, call, answered).await
    }

    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        let call = || self.inner.peek(name);
        self.metered("peek", Call::Once, call, answered).await
    }

    /// The inner store's line as is: its users bound every call themselves.
    fn waiting_line(&self) -> Option<Arc<dyn crate::cells::CellStore>> {
        self.inner.waiting_line()
    }
}

fn applied(outcome: &CasOutcome) -> bool {
    *outcome == CasOutcome::Applied
}

/// A read or plain write that was answered counts as applied.
fn answered<T>(_: &T) -> bool {
    true
}
