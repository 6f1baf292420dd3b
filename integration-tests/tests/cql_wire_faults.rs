//! Faults only the wire path can show: broken connections and slow answers on the real
//! driver, and a check that every statement of the backend is known and exercised.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_lease::memory::{Op, Times};
use cql_lease::scylla::cql;
use cql_lease::{LeaseError, TryAcquire};
use cql_test_server::{Flavor, WireFault};
use integration_tests::backend::Backend;
use integration_tests::conformance::lease_basic::{must_acquire, must_be_held};
use integration_tests::conformance::lease_faults::holder_stops_before_anyone_else_acquires;
use integration_tests::conformance::{client, test_config};
use integration_tests::wire_backend::WireBackend;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cas_timeouts_on_acquire_leave_the_right_owner_known() {
    for flavor in [Flavor::Cassandra, Flavor::Scylla] {
        let b = WireBackend::start(flavor).await;
        let c = client(&b);
        b.inject_wire(
            Some(Op::TryAcquire),
            WireFault::CasTimeoutAfterApply,
            Times::Next(1),
        );
        let alice = must_acquire(&c, "cas", "alice").await;
        let seen = must_be_held(&c, "cas", "bob").await;
        assert_eq!((seen.owner.as_str(), seen.token), ("alice", alice.token()));
        alice.release().await.expect("release");
        b.inject_wire(
            Some(Op::TryAcquire),
            WireFault::CasTimeoutWithoutApply,
            Times::Next(1),
        );
        let bob = must_acquire(&c, "cas", "bob").await;
        let read = c.holder("cas").await.expect("holder").expect("held");
        assert_eq!(read.holder_id, bob.holder_id());
        b.after_scenario();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_connections_on_acquire_leave_the_right_owner_known() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let c = client(&b);
    b.inject_wire(
        Some(Op::TryAcquire),
        WireFault::DropConnectionAfterApply,
        Times::Next(1),
    );
    let alice = must_acquire(&c, "broken", "alice").await;
    assert_eq!(
        c.holder("broken")
            .await
            .expect("holder")
            .map(|h| h.holder_id),
        Some(alice.holder_id().to_owned())
    );
    alice.release().await.expect("release");
    b.inject_wire(
        Some(Op::TryAcquire),
        WireFault::DropConnectionWithoutApply,
        Times::Next(1),
    );
    let before = b.calls();
    let bob = must_acquire(&c, "broken", "bob").await;
    let after = b.calls().since(before);
    assert_eq!(
        (after.try_acquire, after.read),
        (2, 1),
        "lost claim, read-back, fresh claim"
    );
    assert_eq!(
        c.holder("broken")
            .await
            .expect("holder")
            .map(|h| h.holder_id),
        Some(bob.holder_id().to_owned())
    );
    b.after_scenario();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_mid_renewal_makes_the_holder_stop_before_anyone_takes_over() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    holder_stops_before_anyone_else_acquires(&b, "dropped", || {
        b.inject_wire(
            Some(Op::Renew),
            WireFault::DropConnectionWithoutApply,
            Times::Always,
        );
    })
    .await;
    b.after_scenario();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_slower_than_the_ttl_make_the_holder_stop_in_time() {
    let b = WireBackend::start(Flavor::Scylla).await;
    holder_stops_before_anyone_else_acquires(&b, "slow", || {
        b.inject_wire(
            Some(Op::Renew),
            WireFault::Latency(test_config().lease_duration * 2),
            Times::Always,
        );
    })
    .await;
    b.after_scenario();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_whose_connection_broke_after_applying_is_read_back() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let c = client(&b);
    let mut lease = must_acquire(&c, "renew-broken", "alice").await;
    b.inject_wire(
        Some(Op::Renew),
        WireFault::DropConnectionAfterApply,
        Times::Next(1),
    );
    assert!(
        matches!(lease.renew().await, Err(LeaseError::Store { .. })),
        "the answer was lost"
    );
    assert!(lease.is_valid());
    // The driver reconnects in the background; renew again while the lease is still valid.
    let mut renewed = lease.renew().await;
    while renewed.is_err() && lease.is_valid() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        renewed = lease.renew().await;
    }
    renewed.expect("a renewal works once the driver has reconnected");
    assert!(matches!(
        c.try_acquire("renew-broken", "bob", None).await,
        Ok(TryAcquire::Held(_))
    ));
    b.after_scenario();
}

/// Every statement the backend declares is accepted by the strict server and executed by a
/// plain workload; a statement added, changed or dropped without the server knowing fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_backend_statement_is_known_and_exercised() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let c = client(&b);
    let first = must_acquire(&c, "all", "alice").await; // brand-new name: CLAIM_ABOVE, then CLAIM_EXACT
    must_be_held(&c, "all", "bob").await;
    let mut lease = first;
    lease.renew().await.expect("renew");
    c.holder("all").await.expect("read");
    c.peek("all").await.expect("peek");
    // A waiter of this process in line: the release hands the lease to it (HAND_OVER).
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move {
            c.acquire("all", "carol", None, Some(Duration::from_secs(10)))
                .await
        })
    };
    // Long enough for the waiter to join, look and post its offer on a busy machine.
    tokio::time::sleep(Duration::from_secs(1)).await;
    lease.release().await.expect("hand-over");
    let next = waiter.await.expect("waiter").expect("handed over");
    next.release().await.expect("release");
    b.after_scenario();
    let executed = b.server.executed();
    for template in cql::ALL {
        let text = cql::render(template, "coordination", "leases");
        let text = text.split(cql::REPLICATION).next().unwrap_or_default();
        assert!(
            executed.iter().any(|e| e.starts_with(text)),
            "statement never executed by the backend: {template}\nexecuted: {executed:#?}"
        );
    }
    assert!(executed.len() >= cql::ALL.len());
}

/// A release that hands the lease to a waiter of its process writes a token above its own,
/// even with the proposer's clock stuck far in the past, and the waiter holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_overs_grow_the_token_even_when_the_proposer_clock_is_behind() {
    let b =
        WireBackend::start_with(Flavor::Cassandra, |store| store.with_proposal_clock(|| 1)).await;
    let c = client(&b);
    let mut held = must_acquire(&c, "handed", "first").await;
    for i in 0..3 {
        let waiter = {
            let c = c.clone();
            let owner = format!("w{i}");
            tokio::spawn(async move {
                c.acquire("handed", &owner, None, Some(Duration::from_secs(10)))
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (before, paxos) = (held.token(), b.server.paxos().total_rounds());
        held.release().await.expect("hand-over");
        held = waiter.await.expect("waiter").expect("handed over");
        assert!(held.token() > before, "{:?} after {before:?}", held.token());
        assert_eq!(
            b.server.paxos().total_rounds() - paxos,
            1,
            "one Paxos round: the release's"
        );
        let stored = c.holder("handed").await.expect("read").expect("held");
        assert_eq!(stored.holder_id, held.holder_id());
        assert_eq!(stored.token, held.token());
    }
    held.release().await.expect("release");
    b.after_scenario();
}

/// Token order comes from the LWT condition on the stored token, not from the proposer's
/// clock: with a clock stuck far in the past, tokens still grow across release and expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_grow_even_when_the_proposer_clock_is_behind() {
    let b =
        WireBackend::start_with(Flavor::Cassandra, |store| store.with_proposal_clock(|| 1)).await;
    integration_tests::conformance::lease_basic::tokens_increase_across_release_and_expiry(&b)
        .await;
    b.after_scenario();
}

/// A request on the wire is not recalled by dropping its future: the coordinator applies it
/// later. The give-back must wait for that answer, or it lands first, finds nothing, and the
/// late claim blocks the lease for a whole TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_dropped_in_flight_leaves_no_lease() {
    let b = WireBackend::start(Flavor::Cassandra).await;
    let c = client(&b);
    b.inject_wire(
        Some(Op::TryAcquire),
        WireFault::Latency(std::time::Duration::from_millis(800)),
        Times::Next(1),
    );
    let cut = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        c.try_acquire("in-flight", "alice", None),
    )
    .await;
    assert!(cut.is_err(), "the slow acquire should have been cut off");
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(
        c.holder("in-flight").await.expect("holder"),
        None,
        "the dropped acquire was left holding the lease"
    );
    match c.try_acquire("in-flight", "bob", None).await.expect("bob") {
        TryAcquire::Acquired(lease) => lease.release().await.expect("release"),
        TryAcquire::Held(holder) => panic!("still held by {holder:?}"),
    }
    b.after_scenario();
}
