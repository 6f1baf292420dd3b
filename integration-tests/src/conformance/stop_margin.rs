//! The margin a holder told to stop keeps to itself: a claim that was handed out (a lease
//! guard, a queue job) and lost at its deadline is given back only when the store would let
//! it lapse anyway (`deadline + ttl - validity`), not one round trip after the stop signal;
//! the release still frees a renewal that applied although its answer was lost. (A claim
//! never handed out, a worker's parked claim, is still undone at once: the workqueue's
//! `worker::tests`.)
//!
//! On the embedded backend's paused clock only: the bounds are exact there, and the waits
//! are TTL-long.

use std::time::Duration;

use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{LeaseClient, TryAcquire};
use cql_workqueue::WorkQueue;
use cql_workqueue::memory::QueueOp;
use tokio::time::Instant;

use super::lease_basic::must_acquire;
use super::queue::queue;
use super::{client, test_config};
use crate::backend::Backend;

/// How often the contender polls.
const POLL: Duration = Duration::from_millis(25);

/// How long past the deadline the store keeps a claim nobody renews: `ttl - validity`.
fn margin() -> Duration {
    test_config().lease_duration - test_config().renew_deadline()
}

/// Polls `try_acquire` as bob until it wins; returns when.
async fn bob_acquires(c: &LeaseClient, name: &str) -> Instant {
    let give_up = Instant::now() + test_config().lease_duration * 3;
    loop {
        if let Ok(TryAcquire::Acquired(_)) = c.try_acquire(name, "bob", None).await {
            return Instant::now();
        }
        assert!(Instant::now() < give_up, "bob never acquired {name}");
        tokio::time::sleep(POLL).await;
    }
}

/// A kept-alive lease whose renewals fail: alice is told to stop at her deadline, and bob,
/// polling from then on, gets the lease only `ttl - validity` later, when it would have
/// lapsed anyway (it was given back one round trip after the stop signal before).
pub async fn handed_out_lease_stays_until_it_would_lapse(b: &dyn Backend) {
    let c = client(b);
    let guard = must_acquire(&c, "stop-margin", "alice").await.keep_alive();
    b.sleep(test_config().renew_period + Duration::from_millis(100))
        .await;
    assert!(guard.renewals() >= 1, "{}", b.name());
    b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    guard.lost().await;
    let deadline = guard.must_stop_by();
    let stopped_at = guard.lost_at().expect("a lost guard records when");
    assert!(stopped_at <= deadline, "{}: stopped late", b.name());
    let acquired_at = bob_acquires(&c, "stop-margin").await;
    b.clear_faults();
    assert!(
        acquired_at >= deadline + margin(),
        "{}: bob got the lease {:?} after alice's deadline, within the {:?} margin",
        b.name(),
        acquired_at - deadline,
        margin()
    );
    assert!(
        acquired_at <= deadline + margin() + POLL * 2,
        "{}: freed {:?} after the deadline",
        b.name(),
        acquired_at - deadline
    );
}

/// A renewal applied but its answer lost (and the read-back failing) extends the lease in
/// the store beyond what alice knows: it is still given back at `deadline + ttl - validity`,
/// long before that renewal's TTL would run out.
pub async fn applied_renewal_with_lost_answer_is_freed_at_the_margin(b: &dyn Backend) {
    let c = client(b);
    let guard = must_acquire(&c, "stop-margin-late", "alice")
        .await
        .keep_alive();
    b.sleep(test_config().renew_period + Duration::from_millis(100))
        .await;
    let renewals = guard.renewals();
    assert!(renewals >= 1, "{}", b.name());
    // The next renewal applies and its answer is lost; every later one, and every read-back,
    // fails.
    b.inject(Some(Op::Renew), Fault::TimeoutAfterApply, Times::Next(1));
    b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    b.inject(Some(Op::Read), Fault::Unavailable, Times::Always);
    guard.lost().await;
    assert_eq!(guard.renewals(), renewals, "{}: no renewal known", b.name());
    let deadline = guard.must_stop_by();
    // The store keeps alice's claim past the margin: the lost renewal applied.
    let stored = c
        .peek("stop-margin-late")
        .await
        .expect("peek")
        .expect("alice's claim is stored");
    let lapses_at = Instant::now() + stored.expires_within;
    assert!(
        lapses_at > deadline + margin() + POLL * 4,
        "{}: the renewal did not extend the lease ({:?} past the deadline)",
        b.name(),
        lapses_at - deadline
    );
    let acquired_at = bob_acquires(&c, "stop-margin-late").await;
    b.clear_faults();
    assert!(
        acquired_at >= deadline + margin() && acquired_at <= deadline + margin() + POLL * 2,
        "{}: bob got the lease {:?} after alice's deadline (margin {:?}, the late renewal \
         lapses {:?} after it)",
        b.name(),
        acquired_at - deadline,
        margin(),
        lapses_at - deadline
    );
}

/// Polls `claim` as w2 until it gets the job; returns when.
async fn w2_claims(q: &WorkQueue) -> Instant {
    let give_up = Instant::now() + test_config().lease_duration * 3;
    loop {
        if let Ok(Some(job)) = q.claim("w2").await {
            let at = Instant::now();
            job.complete().await.expect("complete");
            return at;
        }
        assert!(Instant::now() < give_up, "w2 never claimed the item");
        tokio::time::sleep(POLL).await;
    }
}

/// A delivered job whose heartbeats fail is stopped at its deadline, and another worker can
/// claim the item only `ttl - validity` later; the handed-back attempt counts.
pub async fn delivered_job_stays_until_it_would_lapse(b: &dyn Backend) {
    let q = queue(b, "stop-margin");
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("w1").await.expect("claim").expect("a job");
    b.inject_queue(Some(QueueOp::Heartbeat), Fault::Unavailable, Times::Always);
    job.cancellation_token().cancelled().await;
    // The heartbeat has stopped; in the bakery mode the fault would hit w2's claims too.
    b.clear_faults();
    let deadline = job.must_stop_by();
    let stopped_at = job.lost_at().expect("a lost job records when");
    assert!(stopped_at <= deadline, "{}: stopped late", b.name());
    let claimed_at = w2_claims(&q).await;
    assert!(
        claimed_at >= deadline + margin(),
        "{}: w2 claimed the item {:?} after w1's deadline, within the {:?} margin",
        b.name(),
        claimed_at - deadline,
        margin()
    );
    assert!(
        claimed_at <= deadline + margin() + test_config().renew_period,
        "{}: claimable only {:?} after the deadline",
        b.name(),
        claimed_at - deadline
    );
    drop(job);
}
