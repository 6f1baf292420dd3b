//! Lost answers and outages: the holder always learns the truth, and stops in time.

use std::time::Duration;

use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{LeaseError, Timing, TryAcquire};
use tokio::time::Instant;

use super::lease_basic::{must_acquire, must_be_held};
use super::{client, client_with, test_config};
use crate::backend::Backend;

/// With the holder's renewals failing, the keep-alive cancels it at its deadline at the
/// latest, and a contender polling all along acquires only after that.
pub async fn keepalive_signals_loss_before_expiry_when_store_unavailable(b: &dyn Backend) {
    holder_stops_before_anyone_else_acquires(b, "outage", || {
        b.inject(Some(Op::Renew), Fault::Unavailable, Times::Always);
    })
    .await;
}

/// Holds `name` with a keep-alive, calls `break_renewals` (which must make every renewal
/// fail), and checks the hand-over: the holder stops by its deadline, the contender's
/// acquisition returns after that, and the contender was really trying (held out) until
/// shortly before.
pub async fn holder_stops_before_anyone_else_acquires(
    b: &dyn Backend,
    name: &str,
    break_renewals: impl FnOnce(),
) {
    let c = client(b);
    let guard = must_acquire(&c, name, "alice").await.keep_alive();
    b.sleep(test_config().renew_period * 2 + Duration::from_millis(100))
        .await;
    assert!(guard.renewals() >= 1);
    break_renewals();
    let stop = guard.cancellation_token();
    let contender = {
        let (c, name, alice) = (c.clone(), name.to_owned(), guard.held());
        tokio::spawn(async move {
            let mut last_held = None;
            loop {
                match c.try_acquire(&name, "bob", None).await {
                    Ok(TryAcquire::Acquired(lease)) => {
                        // Paused time can give both events one instant: the order is
                        // checked on alice's own flag, as seen when bob got the lease.
                        assert!(!*alice.borrow(), "bob acquired while alice held the lease");
                        return (lease, Instant::now(), last_held);
                    }
                    Ok(TryAcquire::Held(_)) => last_held = Some(Instant::now()),
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        })
    };
    let held = guard.held();
    stop.cancelled().await;
    // The hold's own record of when it told alice to stop: this task may wake later than
    // that on a loaded machine, and its wake-up time proves nothing about alice.
    let stopped_at = guard
        .lost_at()
        .expect("a cancelled hold records when it stopped");
    assert!(
        stopped_at <= guard.must_stop_by() + Duration::from_millis(50),
        "stopped late"
    );
    assert!(!*held.borrow());
    assert!(matches!(
        guard.loss_reason(),
        Some(cql_lease::LossReason::Expired | cql_lease::LossReason::Unreachable)
    ));
    let (bob, acquired_at, last_held) =
        tokio::time::timeout(test_config().takeover_bound() * 2, contender)
            .await
            .expect("bob acquires")
            .expect("join");
    b.clear_faults();
    assert!(
        acquired_at >= stopped_at,
        "bob acquired before alice stopped"
    );
    let last_held = last_held.expect("bob was held out while alice held the lease");
    assert!(
        last_held + Duration::from_millis(500) >= stopped_at,
        "bob stopped trying too early to prove anything"
    );
    assert!(bob.token() > guard.token());
}

/// The acquire applied but its answer was lost: the caller is told it holds the lease.
pub async fn lost_answer_of_applied_acquire_is_resolved(b: &dyn Backend) {
    let c = client(b);
    b.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let before = b.calls();
    let lease = must_acquire(&c, "ambiguous-applied", "alice").await;
    let after = b.calls();
    assert_eq!(after.read - before.read, 1, "one read-back");
    let read = c
        .holder("ambiguous-applied")
        .await
        .expect("holder")
        .expect("held");
    assert_eq!(
        (read.holder_id.as_str(), read.token),
        (lease.holder_id(), lease.token())
    );
    let bob = must_be_held(&c, "ambiguous-applied", "bob").await;
    assert_eq!(bob.owner, "alice");
    lease
        .release()
        .await
        .expect("the resolved lease is really ours");
    assert_eq!(c.holder("ambiguous-applied").await.expect("holder"), None);
}

/// The acquire did not apply and its answer was lost: the caller is not told it holds the
/// lease; it tries again when free, and reports the real holder otherwise.
pub async fn lost_answer_of_unapplied_acquire_is_resolved(b: &dyn Backend) {
    let c = client(b);
    b.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    let before = b.calls();
    let lease = must_acquire(&c, "ambiguous-lost", "alice").await;
    let after = b.calls();
    assert_eq!(after.read - before.read, 1, "one read-back");
    let read = c
        .holder("ambiguous-lost")
        .await
        .expect("holder")
        .expect("held");
    assert_eq!(read.holder_id, lease.holder_id());
    b.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    let seen = must_be_held(&c, "ambiguous-lost", "bob").await;
    assert_eq!(seen.owner, "alice");
    // Every attempt's answer lost: the outcome is unknown (the claims may still land; they
    // are released on sight), and here nothing was held.
    lease.release().await.expect("release");
    b.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutWithoutApply,
        Times::Always,
    );
    let err = c
        .try_acquire("ambiguous-lost", "bob", None)
        .await
        .expect_err("every answer lost");
    assert!(matches!(err, LeaseError::OutcomeUnknown { .. }), "{err:?}");
    b.clear_faults();
    assert_eq!(c.holder("ambiguous-lost").await.expect("holder"), None);
}

/// The acquire applied, the answer and every read-back were lost: an error, and the claim
/// is deleted in the background instead of lingering until its TTL.
pub async fn unresolvable_acquire_leaves_no_lease_behind(b: &dyn Backend) {
    let config = Timing {
        lease_duration: Duration::from_secs(30),
        renew_period: Duration::from_secs(10),
        resolve_timeout: Duration::from_millis(300),
        ..test_config()
    };
    let c = client_with(b, config);
    b.inject(
        Some(Op::TryAcquire),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    b.inject(Some(Op::Read), Fault::Unavailable, Times::Always);
    let err = c
        .try_acquire("ghost", "alice", None)
        .await
        .expect_err("unknown");
    assert!(
        matches!(
            err,
            LeaseError::OutcomeUnknown {
                operation: "acquire",
                ..
            }
        ),
        "{err:?}"
    );
    b.clear_faults();
    let bob = c
        .acquire("ghost", "bob", None, Some(Duration::from_secs(3)))
        .await
        .expect("the ghost claim was cleaned up well before its 30 s TTL");
    assert_eq!(bob.owner(), "bob");
}

/// Lost answers on renew and release: the lease stays correct, and release still frees it.
pub async fn lost_answers_on_renew_and_release_are_resolved(b: &dyn Backend) {
    let c = client(b);
    let mut lease = must_acquire(&c, "ambiguous-renew", "alice").await;
    for fault in [Fault::TimeoutAfterApply, Fault::TimeoutWithoutApply] {
        let deadline = lease.must_stop_by();
        b.inject(Some(Op::Renew), fault, Times::Next(1));
        let err = lease.renew().await.expect_err("answer lost");
        assert!(matches!(err, LeaseError::Store { .. }), "{err:?}");
        assert_eq!(
            lease.must_stop_by(),
            deadline,
            "an unconfirmed renewal does not extend"
        );
        assert_eq!(
            c.holder("ambiguous-renew")
                .await
                .expect("holder")
                .map(|h| h.token),
            Some(lease.token())
        );
        lease.renew().await.expect("a later renewal works");
    }
    b.inject(Some(Op::Release), Fault::TimeoutAfterApply, Times::Next(1));
    lease.release().await.expect("applied release resolved");
    assert_eq!(c.holder("ambiguous-renew").await.expect("holder"), None);
    let lease = must_acquire(&c, "ambiguous-renew", "alice").await;
    b.inject(
        Some(Op::Release),
        Fault::TimeoutWithoutApply,
        Times::Next(1),
    );
    lease.release().await.expect("unapplied release retried");
    assert_eq!(c.holder("ambiguous-renew").await.expect("holder"), None);
    // A keep-alive rides out flaky renewals.
    let guard = must_acquire(&c, "ambiguous-renew", "alice")
        .await
        .keep_alive();
    b.inject(Some(Op::Renew), Fault::TimeoutWithoutApply, Times::Next(2));
    b.sleep(test_config().lease_duration * 2).await;
    assert!(guard.is_held(), "lost: {:?}", guard.loss_reason());
    assert!(matches!(
        c.try_acquire("ambiguous-renew", "bob", None).await,
        Ok(TryAcquire::Held(_))
    ));
    guard.release().await.expect("release");
}
