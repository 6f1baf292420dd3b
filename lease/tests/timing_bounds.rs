//! Timing settings are bounded where they are validated: input that passes validation never
//! panics on a deadline, and a timing that validates leaves requests time to be answered.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_lease::cells::memory::MemoryCellStore;
use cql_lease::lock::{BakeryLock, FairLock, Lock, LockError, LockOptions, ShadowLock};
use cql_lease::{InvalidArgument, MAX_DURATION, MIN_RENEW_DEADLINE, Timing};

fn refused_naming(result: Result<(), LockError>, field: &str) {
    match result {
        Err(LockError::InvalidArgument(InvalidArgument::Timing(message))) => {
            assert!(message.contains(field), "{message}");
        }
        other => panic!("expected a timing error naming {field}: {other:?}"),
    }
}

/// A `poll_interval` longer than every other timing bound (20 years), which no clock reading
/// can be advanced by, is refused by every plain-cell lock's constructor with
/// `InvalidArgument`, naming the field.
#[test]
fn an_overlong_poll_interval_is_refused_by_every_lock() {
    let options = LockOptions {
        poll_interval: Duration::MAX,
        ..LockOptions::default()
    };
    let store = Arc::new(MemoryCellStore::new());
    refused_naming(
        FairLock::new(store.clone(), options).map(|_| ()),
        "poll_interval",
    );
    refused_naming(
        BakeryLock::new(store.clone(), options).map(|_| ()),
        "poll_interval",
    );
    refused_naming(ShadowLock::new(store, options).map(|_| ()), "poll_interval");
    // One past the bound is refused too; the bound itself is accepted.
    let over = LockOptions {
        poll_interval: MAX_DURATION + Duration::from_nanos(1),
        ..options
    };
    assert!(matches!(over.validate(), Err(InvalidArgument::Timing(_))));
    let longest = LockOptions {
        poll_interval: MAX_DURATION,
        ..options
    };
    assert_eq!(longest.validate(), Ok(()));
}

/// The longest `poll_interval` accepted still leaves every deadline a fair lock computes
/// within reach of the clock: `try_lock` on a free lock takes it instead of panicking.
#[tokio::test]
async fn the_longest_accepted_poll_interval_takes_a_free_fair_lock() {
    let options = LockOptions {
        poll_interval: MAX_DURATION,
        ..LockOptions::default()
    };
    let lock = FairLock::new(Arc::new(MemoryCellStore::new()), options).unwrap();
    let taken = tokio::spawn(async move { lock.try_lock("jobs").await.map(|g| g.is_some()) })
        .await
        .expect("try_lock must not panic");
    assert!(matches!(taken, Ok(true)), "{taken:?}");
}

/// A timing whose renew deadline is under 100 ms is refused, naming `lease_duration` and the
/// renew deadline: its derived request timeout (a third of it) would be a few milliseconds
/// or zero, so every store request would be cut before it could answer and nothing could
/// ever be held.
#[test]
fn a_renew_deadline_under_100_ms_is_refused() {
    let timing = Timing {
        lease_duration: Duration::from_millis(1502),
        max_clock_skew: Duration::from_millis(500),
        renew_period: Duration::from_millis(1),
        ..Timing::default()
    };
    assert_eq!(timing.effective_request_timeout(), Duration::ZERO);
    match timing.validate() {
        Err(InvalidArgument::Timing(message)) => {
            assert!(message.contains("lease_duration"), "{message}");
            assert!(message.contains("renew deadline"), "{message}");
        }
        other => panic!("validates with a zero request timeout: {timing:?}: {other:?}"),
    }
    // Exactly the shortest renew deadline is accepted.
    let shortest = Timing {
        lease_duration: Duration::from_millis(1600),
        ..timing
    };
    assert_eq!(shortest.renew_deadline(), MIN_RENEW_DEADLINE);
    assert_eq!(shortest.validate(), Ok(()));
}

/// An explicit `request_timeout` under 1 ms is refused, naming the field; 1 ms is accepted.
#[test]
fn an_explicit_request_timeout_under_1_ms_is_refused() {
    for short in [Duration::ZERO, Duration::from_micros(999)] {
        let timing = Timing {
            request_timeout: Some(short),
            ..Timing::default()
        };
        match timing.validate() {
            Err(InvalidArgument::Timing(message)) => {
                assert!(message.contains("request_timeout"), "{message}");
            }
            other => panic!("request_timeout {short:?} accepted: {other:?}"),
        }
    }
    let shortest = Timing {
        request_timeout: Some(Duration::from_millis(1)),
        ..Timing::default()
    };
    assert_eq!(shortest.validate(), Ok(()));
}

/// `LeaseClient::acquire` refuses a timeout longer than a lock's longest wait (a year) with
/// `InvalidArgument` before any store call, instead of overflowing its deadline; `None`
/// still waits for ever.
#[tokio::test]
async fn acquire_refuses_an_overlong_timeout_without_a_store_call() {
    let counted = Arc::new(cql_lease::CountingStore::new(
        Arc::new(cql_lease::MemoryStore::new()) as Arc<dyn cql_lease::LeaseStore>,
    ));
    let client = cql_lease::LeaseClient::new(counted.clone(), Timing::default()).unwrap();
    let refused = client
        .acquire("x", "owner", None, Some(Duration::MAX))
        .await
        .expect_err("an overlong timeout is refused");
    assert!(
        matches!(
            refused,
            cql_lease::LeaseError::InvalidArgument(InvalidArgument::Timing(_))
        ),
        "{refused:?}"
    );
    assert_eq!(
        counted.calls().paxos_rounds() + counted.peeks() + counted.line_calls(),
        0,
        "a store call was made"
    );
    let lease = client
        .acquire("x", "owner", None, Some(cql_lease::lock::MAX_LOCK_TIMEOUT))
        .await
        .expect("the longest timeout is accepted");
    lease.release().await.unwrap();
}
