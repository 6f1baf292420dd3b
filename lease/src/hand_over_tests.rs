//! Which offer a release may take: the earliest of this process, and only with no waiter
//! of this process without an offer, nor any ticket of another process, ahead of it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;

use super::*;
use crate::memory::MemoryStore;
use crate::orphans::Orphans;
use crate::store::{Claim, LeaseStore};

/// A store of its own per test: offers are kept per store, process-wide.
fn store() -> (Arc<dyn LeaseStore>, StoreId) {
    let store: Arc<dyn LeaseStore> = Arc::new(MemoryStore::new());
    let id = StoreId::of(&store);
    (store, id)
}

fn offer_of(store: &Arc<dyn LeaseStore>, in_line: &InLine) -> Posted {
    let claim = Claim {
        name: "x",
        holder_id: &in_line.ticket,
        owner: "o",
        value: None,
        ttl: std::time::Duration::from_secs(5),
    };
    let id = StoreId::of(store);
    let target = Arc::new(LeaseTarget::new(
        Arc::clone(store),
        id,
        "x",
        claim,
        Arc::new(Orphans::default()),
    ));
    post(in_line, target, HoldTiming::from(&crate::Timing::default())).unwrap()
}

fn line(tickets: &[&str]) -> Vec<String> {
    tickets.iter().map(|t| (*t).to_owned()).collect()
}

/// A waiter of this process ahead without an offer (proposing itself, say) keeps the offer
/// behind it from being taken; once it has left, the offer is taken.
#[test]
fn a_waiter_here_without_an_offer_is_not_passed_over() {
    let (store, id) = store();
    let a = InLine::new(id, "x", "a");
    let b = InLine::new(id, "x", "b");
    let _offer = offer_of(&store, &b);
    assert!(take(id, "x", &line(&["a", "b"])).is_none());
    drop(a);
    let taken = take(id, "x", &line(&["a", "b"])).expect("a left: b's offer");
    assert_eq!(taken.target.holder_id, "b");
}

/// A ticket of another process ahead in the line keeps the offer from being taken.
#[test]
fn a_ticket_of_another_process_ahead_is_not_passed_over() {
    let (store, id) = store();
    let b = InLine::new(id, "x", "b");
    let _offer = offer_of(&store, &b);
    assert!(take(id, "x", &line(&["a", "b"])).is_none());
    assert!(take(id, "x", &line(&["b"])).is_some());
}

/// An offer whose ticket no look has shown yet is not taken.
#[test]
fn an_offer_no_look_has_shown_is_not_taken() {
    let (store, id) = store();
    let c = InLine::new(id, "x", "c");
    let _offer = offer_of(&store, &c);
    assert!(take(id, "x", &line(&["a0", "b"])).is_none());
}

/// The earliest offer is taken first, whatever the order offers were posted in.
#[test]
fn the_earliest_ticket_is_served_first() {
    let (store, id) = store();
    let (a, b) = (InLine::new(id, "x", "a"), InLine::new(id, "x", "b"));
    let _later = offer_of(&store, &b);
    let _earlier = offer_of(&store, &a);
    let taken = take(id, "x", &line(&["a", "b"])).expect("a's offer");
    assert_eq!(taken.target.holder_id, "a");
}

/// A grant that reached an offer its waiter then dropped untaken gives the claim back at
/// once, not at the watchdog's `retry_interval`.
#[tokio::test(start_paused = true)]
async fn a_grant_dropped_untaken_gives_the_claim_back_at_once() {
    let (store, id) = store();
    let b = InLine::new(id, "x", "b");
    let offer = offer_of(&store, &b);
    // The hand-over applied: "b" (the offer's holder id) holds the lease.
    let claim = Claim {
        name: "x",
        holder_id: "b",
        owner: "o",
        value: None,
        ttl: std::time::Duration::from_secs(5),
    };
    let token = match store.try_acquire(claim).await.unwrap() {
        crate::store::AcquireOutcome::Acquired { token } => token,
        held => panic!("free store: {held:?}"),
    };
    let taken = take(id, "x", &line(&["b"])).expect("b's offer");
    let timing = taken.timing;
    let guard = AttemptGuard::new(taken.target.clone(), timing);
    taken.grant(token, Instant::now(), guard);
    drop(offer); // the waiter leaves without taking it
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(
        store.read("x").await.unwrap().is_none(),
        "given back before any time passed"
    );
}
