//! What the lease layer records: each test installs its own recorder on its (current-thread)
//! runtime, so the keep-alive tasks it spawns record there too.

#![allow(clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use super::capture::Capture;
use super::*;
use crate::cells::memory::MemoryCellStore;
use crate::lock::{FairLock, Lock, LockOptions};
use crate::memory::{Fault, Op, Times};
use crate::{LeaseClient, LeaseError, MemoryStore, Timing, TryAcquire};

fn config() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(10),
        renew_period: Duration::from_secs(3),
        ..Timing::default()
    }
}

fn lease_calls(capture: &Capture, operation: &str, outcome: &str) -> u64 {
    let labels = [
        ("store", "lease"),
        ("operation", operation),
        ("outcome", outcome),
    ];
    capture.counter(STORE_REQUESTS, &labels)
}

#[tokio::test(start_paused = true)]
async fn a_lease_records_its_round_trips_its_hold_and_its_renewals() {
    let capture = Capture::default();
    let _installed = capture.install();
    let client = LeaseClient::new(Arc::new(MemoryStore::new()), config()).unwrap();

    let guard = client
        .acquire("metered", "a", None, None)
        .await
        .unwrap()
        .keep_alive();
    assert_eq!(lease_calls(&capture, "try_acquire", "applied"), 1);
    assert_eq!(capture.gauge(HELD, &[("kind", "lease")]), 1.0);
    let TryAcquire::Held(_) = client.try_acquire("metered", "b", None).await.unwrap() else {
        panic!("a holds it");
    };
    assert_eq!(lease_calls(&capture, "try_acquire", "not_applied"), 1);

    tokio::time::sleep(Duration::from_secs(10)).await;
    let renewals = capture.histogram(RENEW_SECONDS, &[("kind", "lease"), ("outcome", "applied")]);
    assert!(renewals.len() >= 3, "{renewals:?}");
    assert_eq!(
        lease_calls(&capture, "renew", "applied"),
        renewals.len() as u64
    );
    let latencies = capture.histogram(STORE_REQUEST_SECONDS, &[("operation", "renew")]);
    assert_eq!(latencies.len(), renewals.len());

    guard.release().await.unwrap();
    assert_eq!(lease_calls(&capture, "release", "applied"), 1);
    assert_eq!(capture.gauge(HELD, &[("kind", "lease")]), 0.0);
    assert_eq!(capture.counter(LOSSES, &[]), 0, "a release is no loss");
    assert_eq!(capture.counter(UNKNOWN_OUTCOMES, &[]), 0);
}

#[tokio::test(start_paused = true)]
async fn a_keep_alive_that_cannot_renew_counts_a_loss() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone(), config()).unwrap();
    let guard = client
        .acquire("unreachable", "a", None, None)
        .await
        .unwrap()
        .keep_alive();
    store.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    guard.lost().await;

    let reason = [("kind", "lease"), ("reason", "unreachable")];
    assert_eq!(capture.counter(LOSSES, &reason), 1);
    assert_eq!(capture.gauge(HELD, &[("kind", "lease")]), 0.0);
    assert!(lease_calls(&capture, "renew", "error") >= 1);
    let failed = capture.histogram(RENEW_SECONDS, &[("outcome", "error")]);
    assert!(!failed.is_empty());
}

/// A frozen node: renewals get no answer at all. Each renewal the hold gives up on (at its
/// budget, half the time left, which is shorter than the request timeout) is a round trip
/// with no answer, so it must show as `outcome="unknown"` in [`STORE_REQUESTS`] (what the
/// README promises: renewals' lost answers show as `unknown` round trips), not vanish.
#[tokio::test(start_paused = true)]
async fn renewals_cut_by_the_hold_show_as_unknown_round_trips() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryStore::new());
    let client = LeaseClient::new(store.clone(), config()).unwrap();
    let guard = client
        .acquire("frozen", "a", None, None)
        .await
        .unwrap()
        .keep_alive();
    store.inject(
        Some(Op::Renew),
        Fault::Latency(Duration::from_secs(600)),
        Times::Always,
    );
    guard.lost().await;

    let cut = capture.histogram(RENEW_SECONDS, &[("kind", "lease"), ("outcome", "unknown")]);
    assert!(!cut.is_empty(), "the renewals were cut");
    let sent = lease_calls(&capture, "renew", "unknown") + lease_calls(&capture, "renew", "error");
    assert_eq!(
        sent,
        cut.len() as u64,
        "every renewal sent and cut is a round trip without an answer"
    );
}

/// `keep_alive_with` lets the caller share one `held` channel between guards. The gauge of
/// held claims must still count each hold once up and once down, whatever the channel shows.
#[tokio::test(start_paused = true)]
async fn guards_sharing_a_held_channel_leave_the_gauge_at_zero() {
    let capture = Capture::default();
    let _installed = capture.install();
    let client = LeaseClient::new(Arc::new(MemoryStore::new()), config()).unwrap();
    let (held, _watch) = tokio::sync::watch::channel(false);
    let first = client.acquire("one", "a", None, None).await.unwrap();
    let second = client.acquire("two", "a", None, None).await.unwrap();
    let first = first.keep_alive_with(held.clone());
    let second = second.keep_alive_with(held.clone());
    assert_eq!(capture.gauge(HELD, &[("kind", "lease")]), 2.0, "two held");
    first.release().await.unwrap();
    second.release().await.unwrap();
    assert_eq!(capture.gauge(HELD, &[("kind", "lease")]), 0.0, "none held");
}

#[tokio::test(start_paused = true)]
async fn a_lost_claim_answer_read_back_counts_as_resolved() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryStore::new());
    store.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let client = LeaseClient::new(store, config()).unwrap();

    let lease = client.acquire("lost", "a", None, None).await.unwrap();
    assert_eq!(lease_calls(&capture, "try_acquire", "unknown"), 1);
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "resolved")]),
        1
    );
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "unresolved")]),
        0
    );
    lease.release().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_lost_claim_answer_that_cannot_be_read_back_counts_as_unresolved() {
    let capture = Capture::default();
    let _installed = capture.install();
    let store = Arc::new(MemoryStore::new());
    store.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    store.inject(Some(Op::Read), Fault::Unavailable, Times::Always);
    let client = LeaseClient::new(store, config()).unwrap();

    let result = client.try_acquire("lost", "a", None).await;
    assert!(
        matches!(result, Err(LeaseError::OutcomeUnknown { .. })),
        "{result:?}"
    );
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "unresolved")]),
        1
    );
    assert_eq!(
        capture.counter(UNKNOWN_OUTCOMES, &[("result", "resolved")]),
        0
    );
    assert!(lease_calls(&capture, "read", "error") >= 1);
}

#[tokio::test(start_paused = true)]
async fn a_lock_records_how_long_it_waited() {
    let capture = Capture::default();
    let _installed = capture.install();
    let options = LockOptions {
        timing: config(),
        ..LockOptions::default()
    };
    let lock = Arc::new(FairLock::new(Arc::new(MemoryCellStore::new()), options).unwrap());
    let first = lock
        .lock("door", Some(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(capture.gauge(HELD, &[("kind", "lock")]), 1.0);
    let waiter = tokio::spawn({
        let lock = Arc::clone(&lock);
        async move { lock.lock("door", Some(Duration::from_secs(30))).await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();

    let waits = capture.histogram(LOCK_WAIT, &[("algorithm", "fair")]);
    assert_eq!(waits.len(), 2, "{waits:?}");
    assert!(waits.iter().any(|w| *w >= 2.0), "{waits:?}");
    assert_eq!(capture.counter(LOCKS_ACQUIRED, &[("algorithm", "fair")]), 2);
    let cells = [("store", "cells"), ("outcome", "applied")];
    assert!(capture.counter(STORE_REQUESTS, &cells) > 0);
    second.release().await.unwrap();
    assert_eq!(capture.gauge(HELD, &[("kind", "lock")]), 0.0);
}

#[test]
fn every_metric_is_named_once_in_the_prometheus_style() {
    let mut names: Vec<&str> = ALL.iter().map(|m| m.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ALL.len());
    for metric in ALL {
        assert!(metric.name.starts_with("cqlcoord_"), "{}", metric.name);
        let counter = metric.kind == "counter";
        assert_eq!(counter, metric.name.ends_with("_total"), "{}", metric.name);
    }
}
