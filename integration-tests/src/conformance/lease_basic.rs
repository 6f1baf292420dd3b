//! Acquire, hold, renew, release, expire: the plain behaviour of a lease.

use std::time::Duration;

use cql_lease::memory::CallCounts;
use cql_lease::{InvalidArgument, LeaseClient, LeaseError, Timing, TryAcquire};
use tokio::time::Instant;

use super::{client, client_with, test_config};
use crate::backend::Backend;

/// Acquires or panics.
pub async fn must_acquire(client: &LeaseClient, name: &str, owner: &str) -> cql_lease::Lease {
    match client.try_acquire(name, owner, Some(owner)).await {
        Ok(TryAcquire::Acquired(lease)) => lease,
        other => panic!("{owner} expected to acquire {name}: {other:?}"),
    }
}

/// Expects the lease to be held by someone else; returns who.
pub async fn must_be_held(client: &LeaseClient, name: &str, owner: &str) -> cql_lease::StoredLease {
    match client.try_acquire(name, owner, None).await {
        Ok(TryAcquire::Held(holder)) => holder,
        other => panic!("{owner} expected {name} to be held: {other:?}"),
    }
}

/// One owner holds it; another is told who, with the same token and value.
pub async fn acquire_hold_release(b: &dyn Backend) {
    let c = client(b);
    let lease = must_acquire(&c, "basic", "alice").await;
    assert!(lease.is_valid());
    let held = must_be_held(&c, "basic", "bob").await;
    assert_eq!(held.owner, "alice");
    assert_eq!(held.value.as_deref(), Some("alice"));
    assert_eq!(held.token, lease.token());
    assert!(
        held.expires_within >= test_config().lease_duration,
        "{held:?}"
    );
    let read = c.holder("basic").await.expect("holder").expect("held");
    assert_eq!((read.owner.as_str(), read.token), ("alice", lease.token()));
    assert!(read.expires_within <= test_config().store_ttl());
    lease.release().await.expect("release");
    assert_eq!(c.holder("basic").await.expect("holder"), None);
    let again = must_acquire(&c, "basic", "bob").await;
    assert!(again.token() > held.token);
}

/// Tokens grow strictly across release, expiry and renewal-free hand-overs.
pub async fn tokens_increase_across_release_and_expiry(b: &dyn Backend) {
    let c = client(b);
    let mut last = None;
    for round in 0..6 {
        let lease = must_acquire(&c, "tokens", &format!("owner-{round}")).await;
        if let Some(previous) = last {
            assert!(
                lease.token() > previous,
                "round {round}: {} <= {previous}",
                lease.token()
            );
        }
        last = Some(lease.token());
        if round % 2 == 0 {
            lease.release().await.expect("release");
        } else {
            b.advance_store_clock(test_config().takeover_bound()).await;
        }
    }
}

/// A holder that stops renewing loses the lease to the next contender after the TTL.
pub async fn expiry_then_takeover(b: &dyn Backend) {
    let c = client(b);
    let first = must_acquire(&c, "expiry", "alice").await;
    must_be_held(&c, "expiry", "bob").await;
    b.advance_store_clock(test_config().takeover_bound()).await;
    let second = must_acquire(&c, "expiry", "bob").await;
    assert!(second.token() > first.token());
    assert_eq!(
        c.holder("expiry").await.expect("holder").map(|h| h.owner),
        Some("bob".into())
    );
}

/// Renewing after expiry fails, whether or not somebody took over.
pub async fn renew_after_expiry_fails(b: &dyn Backend) {
    let c = client(b);
    let mut lease = must_acquire(&c, "late-renew", "alice").await;
    b.advance_store_clock(test_config().takeover_bound()).await;
    assert!(matches!(lease.renew().await, Err(LeaseError::Lost { .. })));
    let bob = must_acquire(&c, "late-renew", "bob").await;
    assert!(matches!(lease.renew().await, Err(LeaseError::Lost { .. })));
    let read = c.holder("late-renew").await.expect("holder").expect("held");
    assert_eq!((read.owner.as_str(), read.token), ("bob", bob.token()));
}

/// A stale holder's renew and release are refused and change nothing; so are forged ones.
pub async fn non_owner_cannot_renew_or_release(b: &dyn Backend) {
    let c = client(b);
    let mut stale = must_acquire(&c, "fenced", "alice").await;
    b.advance_store_clock(test_config().takeover_bound()).await;
    let bob = must_acquire(&c, "fenced", "bob").await;
    let before = c.holder("fenced").await.expect("holder").expect("held");
    assert!(matches!(stale.renew().await, Err(LeaseError::Lost { .. })));
    assert!(matches!(
        stale.set_value(Some("x")).await,
        Err(LeaseError::Lost { .. })
    ));
    assert!(matches!(
        stale.release().await,
        Err(LeaseError::Lost { .. })
    ));
    // Straight at the store, with a made-up holder id.
    let forged = cql_lease::Claim {
        name: "fenced",
        holder_id: "not-the-holder",
        owner: "mallory",
        value: Some("evil"),
        ttl: test_config().store_ttl(),
    };
    assert_eq!(
        b.store().renew(forged).await.expect("renew"),
        cql_lease::CasOutcome::NotApplied
    );
    assert_eq!(
        b.store()
            .release("fenced", "not-the-holder")
            .await
            .expect("release"),
        cql_lease::CasOutcome::NotApplied
    );
    let after = c.holder("fenced").await.expect("holder").expect("held");
    assert_eq!(
        (&after.holder_id, &after.owner, &after.value, after.token),
        (
            &before.holder_id,
            &before.owner,
            &before.value,
            before.token
        )
    );
    assert_eq!(after.token, bob.token());
    // The same owner's earlier acquisition is just as stale as anyone else's.
    let mut bob_earlier = must_acquire(&c, "fenced-same-owner", "bob").await;
    b.advance_store_clock(test_config().takeover_bound()).await;
    let bob_now = must_acquire(&c, "fenced-same-owner", "bob").await;
    assert!(matches!(
        bob_earlier.renew().await,
        Err(LeaseError::Lost { .. })
    ));
    let current = c
        .holder("fenced-same-owner")
        .await
        .expect("holder")
        .expect("held");
    assert_eq!(current.holder_id, bob_now.holder_id());
}

/// Renewal keeps the token, moves the deadline, and can carry a new value.
pub async fn renew_keeps_token_and_updates_value(b: &dyn Backend) {
    let c = client(b);
    let mut lease = must_acquire(&c, "renew", "alice").await;
    let token = lease.token();
    let deadline = lease.must_stop_by();
    b.sleep(Duration::from_millis(300)).await;
    lease.renew().await.expect("renew");
    assert_eq!(lease.token(), token);
    assert!(lease.must_stop_by() > deadline);
    lease
        .set_value(Some("10.0.0.9:80"))
        .await
        .expect("set value");
    let read = c.holder("renew").await.expect("holder").expect("held");
    assert_eq!(
        (read.value.as_deref(), read.token),
        (Some("10.0.0.9:80"), token)
    );
    lease.release().await.expect("release");
}

/// `acquire` waits for a release, and gives up at its timeout while the lease stays held.
pub async fn acquire_waits_and_times_out(b: &dyn Backend) {
    let c = client(b);
    let alice = must_acquire(&c, "wait", "alice").await;
    let started = Instant::now();
    let timeout = Duration::from_millis(500);
    match c.acquire("wait", "bob", None, Some(timeout)).await {
        Err(LeaseError::Timeout {
            last_holder: Some(h),
            ..
        }) => assert_eq!(h.owner, "alice"),
        other => panic!("expected a timeout: {other:?}"),
    }
    assert!(started.elapsed() >= timeout);
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            c.acquire("wait", "bob", None, Some(Duration::from_secs(5)))
                .await
        })
    };
    b.sleep(Duration::from_millis(250)).await;
    alice.release().await.expect("release");
    let bob = waiter
        .await
        .expect("join")
        .expect("bob acquires after the release");
    assert_eq!(bob.owner(), "bob");
}

/// Bad input and bad timing are typed errors, and nothing reaches the store.
pub async fn bad_input_is_rejected_before_any_store_call(b: &dyn Backend) {
    let c = client(b);
    let before = b.calls();
    let long = "x".repeat(cql_lease::MAX_NAME_LEN + 1);
    let huge = "v".repeat(cql_lease::MAX_VALUE_LEN + 1);
    let cases: [(&str, &str, Option<&str>); 6] = [
        ("", "o", None),
        (&long, "o", None),
        ("n", "", None),
        ("n", &long, None),
        ("n", "o", Some(&huge)),
        ("bad\nname", "o", None),
    ];
    for (name, owner, value) in cases {
        let err = c
            .try_acquire(name, owner, value)
            .await
            .expect_err("must be rejected");
        assert!(matches!(err, LeaseError::InvalidArgument(_)), "{err:?}");
        let err = c
            .acquire(name, owner, value, None)
            .await
            .expect_err("must be rejected");
        assert!(matches!(err, LeaseError::InvalidArgument(_)), "{err:?}");
    }
    assert!(matches!(
        c.holder("").await,
        Err(LeaseError::InvalidArgument(InvalidArgument::Empty { .. }))
    ));
    let bad = Timing {
        renew_period: Duration::from_secs(5),
        lease_duration: Duration::from_secs(5),
        ..test_config()
    };
    assert!(matches!(
        LeaseClient::new(b.store(), bad),
        Err(LeaseError::InvalidArgument(InvalidArgument::Timing(_)))
    ));
    let mut lease = must_acquire(&c, "bad-value", "o").await;
    let mid = b.calls();
    assert!(matches!(
        lease.set_value(Some(huge.as_str())).await,
        Err(LeaseError::InvalidArgument(_))
    ));
    assert_eq!(b.calls(), mid);
    assert_eq!(
        mid.writes() - before.writes(),
        mid.try_acquire - before.try_acquire
    );
    assert_eq!(before.read, mid.read);
}

fn delta(after: CallCounts, before: CallCounts) -> CallCounts {
    after.since(before)
}

fn only(try_acquire: u64, renew: u64, release: u64, read: u64) -> CallCounts {
    CallCounts {
        try_acquire,
        renew,
        release,
        read,
    }
}

/// Each operation is exactly one round trip, with no hidden reads.
pub async fn store_call_costs(b: &dyn Backend) {
    let c = client(b);
    // Give the name a token history first, as a long-lived lease name has.
    must_acquire(&c, "cost", "earlier")
        .await
        .release()
        .await
        .expect("release");
    let fresh = client(b); // a new process knows nothing about the name
    let at = b.calls();
    let mut lease = must_acquire(&fresh, "cost", "alice").await;
    assert_eq!(
        delta(b.calls(), at),
        only(1, 0, 0, 0),
        "uncontended acquire"
    );
    let at = b.calls();
    must_be_held(&fresh, "cost", "bob").await;
    assert_eq!(
        delta(b.calls(), at),
        only(1, 0, 0, 0),
        "contended try_acquire"
    );
    let at = b.calls();
    lease.renew().await.expect("renew");
    assert_eq!(delta(b.calls(), at), only(0, 1, 0, 0), "renew");
    let at = b.calls();
    fresh.holder("cost").await.expect("holder");
    assert_eq!(delta(b.calls(), at), only(0, 0, 0, 1), "holder");
    let at = b.calls();
    lease.release().await.expect("release");
    assert_eq!(delta(b.calls(), at), only(0, 0, 1, 0), "release");
    let at = b.calls();
    must_acquire(&fresh, "cost-brand-new", "alice").await;
    let first = if b.first_claim_costs_extra_round() {
        2
    } else {
        1
    };
    assert_eq!(
        delta(b.calls(), at),
        only(first, 0, 0, 0),
        "first acquisition of a new name"
    );
}

/// The keep-alive renews N times and the lease stays held with its token.
pub async fn keepalive_survives_renewals(b: &dyn Backend) {
    let c = client(b);
    let guard = must_acquire(&c, "keepalive", "alice").await.keep_alive();
    let n = 5;
    // A renewal goes out `renew_interval` after the previous one answered. On simulated
    // time round trips take no time, so `n` renewals come within `n` intervals. In real time
    // a loaded machine's slow round trips stretch that cadence; the library's promise there
    // is the validity: each renewal is sent before the previous one's validity runs out, so
    // a lease still held after `n + 1` validities was renewed at least `n` times.
    let config = test_config();
    let bound = if b.simulated_time() {
        config.renew_period * n + Duration::from_millis(200)
    } else {
        config.renew_deadline() * (n + 1)
    };
    let give_up = Instant::now() + bound;
    while guard.renewals() < u64::from(n) && guard.is_held() && Instant::now() < give_up {
        b.sleep(config.renew_period / 4).await;
    }
    assert!(
        guard.renewals() >= u64::from(n),
        "only {} renewals in {bound:?} (held: {})",
        guard.renewals(),
        guard.is_held()
    );
    assert!(guard.is_held() && !guard.cancellation_token().is_cancelled());
    assert!(guard.must_stop_by() > Instant::now());
    let read = c.holder("keepalive").await.expect("holder").expect("held");
    assert_eq!(read.token, guard.token());
    must_be_held(&c, "keepalive", "bob").await;
    let stop = guard.cancellation_token();
    guard.release().await.expect("release");
    assert!(stop.is_cancelled());
    assert_eq!(c.holder("keepalive").await.expect("holder"), None);
}

/// Dropping a guard cancels its token and releases the lease without waiting for the TTL.
pub async fn guard_drop_releases(b: &dyn Backend) {
    let c = client_with(
        b,
        Timing {
            lease_duration: Duration::from_secs(30),
            renew_period: Duration::from_secs(10),
            ..test_config()
        },
    );
    let guard = must_acquire(&c, "drop", "alice").await.keep_alive();
    let token = guard.token();
    let stop = guard.cancellation_token();
    drop(guard);
    assert!(stop.is_cancelled());
    let bob = c
        .acquire("drop", "bob", None, Some(Duration::from_secs(3)))
        .await
        .expect("released on drop, long before the 30 s TTL");
    assert!(bob.token() > token);
}
