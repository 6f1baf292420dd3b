//! Bounds of the locks' ride through transient store errors, on the embedded stores with
//! tokio's clock paused: how long `try_lock` may take before it answers, and which errors
//! end `lock` at once.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::memory::CellOp;
use cql_lease::lock::{LeaseLock, Lock, LockError, LockOptions};
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{
    AcquireOutcome, CasOutcome, Claim, LeaseClient, LeaseConfig, LeaseError, LeaseStore,
    MemoryStore, StoreError, StoredLease,
};
use integration_tests::conformance::lock::{
    Algo, LockBackend, MemoryLockBackend, contender_with, lock_name, lock_options,
};
use tokio::time::Instant;

/// The suite's lock options with the library's default timing (resolve timeout 10 s,
/// validity 13.5 s, takeover bound 15.5 s).
fn default_timing() -> LockOptions {
    LockOptions {
        timing: LeaseConfig::default(),
        ..lock_options()
    }
}

/// Writes (cell writes and deletes, lease claims) time out for good while reads answer:
/// `try_lock` gives up with `Unreachable` once its budget (the resolve timeout) has passed,
/// not after a whole write retry plus a whole delete retry (validity + takeover bound).
async fn try_lock_under_write_timeouts_answers_within_its_budget(algo: Algo) {
    let b = MemoryLockBackend::new();
    let options = default_timing();
    let timing = options.timing;
    let a = contender_with(&b, algo, 0, options);
    b.inject_cells(Some(CellOp::Write), Fault::TimeoutAfterApply, Times::Always);
    b.inject_cells(
        Some(CellOp::Delete),
        Fault::TimeoutAfterApply,
        Times::Always,
    );
    b.leases().inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let name = lock_name("try-budget");
    let started = Instant::now();
    let got = a.lock.try_lock(&name).await;
    let waited = started.elapsed();
    assert!(
        matches!(got, Err(LockError::Unreachable { .. })),
        "{algo:?}: expected Unreachable, got {got:?}"
    );
    let budget = timing.resolve_timeout + timing.retry_interval;
    assert!(
        waited <= budget,
        "{algo:?}: try_lock answered after {waited:?}; its budget is the resolve timeout \
         ({:?}, plus one retry interval)",
        timing.resolve_timeout
    );
}

#[tokio::test(start_paused = true)]
async fn try_lock_under_write_timeouts_answers_within_its_budget_bakery() {
    try_lock_under_write_timeouts_answers_within_its_budget(Algo::Bakery).await;
}

#[tokio::test(start_paused = true)]
async fn try_lock_under_write_timeouts_answers_within_its_budget_fair() {
    try_lock_under_write_timeouts_answers_within_its_budget(Algo::Fair).await;
}

#[tokio::test(start_paused = true)]
async fn try_lock_under_write_timeouts_answers_within_its_budget_shadow() {
    try_lock_under_write_timeouts_answers_within_its_budget(Algo::Shadow).await;
}

#[tokio::test(start_paused = true)]
async fn try_lock_under_write_timeouts_answers_within_its_budget_lease() {
    try_lock_under_write_timeouts_answers_within_its_budget(Algo::Lease).await;
}

/// A lease store whose claims time out without applying and whose reads (the read-back
/// that settles a lost claim) are refused, as a store refuses a statement it cannot run
/// (schema, permissions): a definite refusal, which no retry can change.
struct ReadBackRefused(MemoryStore);

#[async_trait]
impl LeaseStore for ReadBackRefused {
    async fn try_acquire(&self, _: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        Err(StoreError::Unknown("claim timed out".into()))
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.0.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.0.release(name, holder_id).await
    }
    async fn read(&self, _: &str) -> Result<Option<StoredLease>, StoreError> {
        Err(StoreError::Rejected(
            "unauthorized: no SELECT on the lease table".into(),
        ))
    }
}

fn refused_lease_lock() -> (LeaseLock, LeaseConfig) {
    let config = lock_options().timing;
    let client = LeaseClient::new(Arc::new(ReadBackRefused(MemoryStore::new())), config).unwrap();
    (LeaseLock::new(client, "node-a").unwrap(), config)
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
    let timeout = config.ttl * 10;
    let started = Instant::now();
    let got = lock.lock("refused", timeout).await;
    let waited = started.elapsed();
    let error = got.err().expect("no lock can be taken");
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
    let error = got.err().expect("no lock can be taken");
    assert!(
        carries_rejection(&error),
        "expected the refusal, got {error:?}"
    );
}
