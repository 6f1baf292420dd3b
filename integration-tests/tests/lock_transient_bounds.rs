//! Bounds of the lease lock's ride through transient store errors, on the embedded lease
//! store with tokio's clock paused: a refusal of the read-back settling a lost claim ends
//! `lock` and `try_lock` at once. (How long `try_lock` may take under write timeouts is a
//! lock suite scenario, `try_lock_under_write_timeouts_answers_within_its_budget`, run on
//! the embedded stores and over the wire.)

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;

use async_trait::async_trait;
use cql_lease::cells::CellStore;
use cql_lease::lock::{LeaseLock, Lock, LockError};
use cql_lease::{
    AcquireOutcome, CasOutcome, Claim, FencingToken, LeaseClient, LeaseError, LeaseStore,
    MemoryStore, StoreError, StoredLease, Timing,
};
use integration_tests::conformance::lock::lock_options;
use tokio::time::Instant;

/// A lease store whose claims time out (after applying when `applies`, else without) and
/// whose linearizable reads (the read-back that settles a lost claim) are refused, as a
/// store refuses a statement it cannot run (a consistency level it does not serve): a
/// definite refusal, which no retry can change. Plain reads, renewals and releases go
/// through.
struct ReadBackRefused {
    inner: Arc<MemoryStore>,
    applies: bool,
}

#[async_trait]
impl LeaseStore for ReadBackRefused {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        if self.applies {
            self.inner.try_acquire(claim).await?;
        }
        Err(StoreError::Unknown("claim timed out".into()))
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.inner.release(name, holder_id).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.inner.hand_over(from_holder_id, from_token, to).await
    }
    async fn read(&self, _: &str) -> Result<Option<StoredLease>, StoreError> {
        Err(StoreError::Rejected("SERIAL reads are not served".into()))
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        self.inner.waiting_line()
    }
}

/// A lease lock on a [`ReadBackRefused`] store, and the store behind it.
fn lease_lock_on(applies: bool) -> (LeaseLock, Timing, Arc<MemoryStore>) {
    let config = lock_options().timing;
    let inner = Arc::new(MemoryStore::new());
    let store = ReadBackRefused {
        inner: Arc::clone(&inner),
        applies,
    };
    let client = LeaseClient::new(Arc::new(store), config).unwrap();
    (LeaseLock::new(client, "node-a").unwrap(), config, inner)
}

fn refused_lease_lock() -> (LeaseLock, Timing) {
    let (lock, config, _) = lease_lock_on(false);
    (lock, config)
}

fn carries_rejection(error: &LockError) -> bool {
    matches!(
        error,
        LockError::Store {
            source: StoreError::Rejected(_),
            ..
        } | LockError::Lease(
            LeaseError::Store {
                source: StoreError::Rejected(_),
                ..
            } | LeaseError::OutcomeUnknown {
                source: StoreError::Rejected(_),
                ..
            }
        )
    )
}

/// `lock` ends at once on a definite refusal, here of the read-back settling a lost claim,
/// instead of trying again until its timeout.
#[tokio::test(start_paused = true)]
async fn lease_lock_ends_at_once_when_the_store_refuses_the_read_back() {
    let (lock, config) = refused_lease_lock();
    let timeout = config.lease_duration * 10;
    let started = Instant::now();
    let got = lock.lock("refused", Some(timeout)).await;
    let waited = started.elapsed();
    let error = got.expect_err("no lock can be taken");
    assert!(
        carries_rejection(&error),
        "expected the refusal, got {error:?} after {waited:?}"
    );
    assert!(
        waited < timeout / 2,
        "lock() kept retrying a refusal for {waited:?}"
    );
}

/// `try_lock` reports a definite refusal as such, not as `Unreachable` (which says the
/// store may answer if asked again).
#[tokio::test(start_paused = true)]
async fn lease_try_lock_reports_a_refused_read_back_as_a_refusal() {
    let (lock, _) = refused_lease_lock();
    let got = lock.try_lock("refused").await;
    let error = got.expect_err("no lock can be taken");
    assert!(
        carries_rejection(&error),
        "expected the refusal, got {error:?}"
    );
}

/// The refused read-back leaves the claim's outcome unknown: a claim that did apply is
/// still given back (in the background), so the lock is free again long before its TTL,
/// and the error says the outcome is unknown.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_read_back_is_refused_is_given_back() {
    let (lock, config, inner) = lease_lock_on(true);
    let got = lock
        .lock("refused-applied", Some(config.lease_duration * 10))
        .await;
    let error = got.expect_err("the claim's outcome cannot be settled");
    assert!(
        matches!(
            error,
            LockError::Lease(LeaseError::OutcomeUnknown {
                source: StoreError::Rejected(_),
                ..
            })
        ),
        "expected an unknown outcome caused by the refusal, got {error:?}"
    );
    tokio::time::sleep(config.retry_period).await;
    let left = inner.read("lock/refused-applied").await.unwrap();
    assert!(
        left.is_none(),
        "the applied claim was not given back: {left:?}"
    );
}
