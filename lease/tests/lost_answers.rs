//! What `try_acquire` reports when answers are lost and the claims may still land.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{Claim, LeaseClient, LeaseError, LeaseStore, MemoryStore, StoreError, Timing};

/// When every attempt's answer is lost and each read-back shows the lease free, the claims
/// may still apply, so `try_acquire` reports an unknown outcome, not a definite failure.
#[tokio::test(start_paused = true)]
async fn try_acquire_reports_an_unknown_outcome_when_every_answer_is_lost() {
    let store = Arc::new(MemoryStore::new());
    store.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let client = LeaseClient::new(store, Timing::default()).unwrap();

    let result = client.try_acquire("lost", "a", None).await;
    match result {
        Err(LeaseError::OutcomeUnknown {
            operation: "acquire",
            source: StoreError::Unknown(_),
            ..
        }) => {}
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
}

/// Releasing an abandoned claim of ours whose answer is lost reports an unknown outcome:
/// the release may still apply.
#[tokio::test(start_paused = true)]
async fn a_lost_answer_releasing_an_abandoned_claim_is_an_unknown_outcome() {
    let store = Arc::new(MemoryStore::new());
    store
        .try_acquire(Claim {
            name: "orphaned",
            holder_id: "abandoned",
            owner: "a",
            value: None,
            ttl: Duration::from_secs(15),
        })
        .await
        .unwrap();
    store.inject(Some(Op::Release), Fault::TimeoutWithoutApply, Times::Always);
    let client = LeaseClient::new(store, Timing::default()).unwrap();
    client.release_on_sight("abandoned");

    let result = client.try_acquire("orphaned", "a", None).await;
    match result {
        Err(LeaseError::OutcomeUnknown {
            operation: "release",
            source: StoreError::Unknown(_),
            ..
        }) => {}
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
}
