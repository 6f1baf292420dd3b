//! A release hands the lease to the first waiter in line of its own process in the release's
//! one LWT, with a greater token, in arrival order; a waiter of another process that stands
//! ahead is not passed over; a waiter gone before the hand-over lands, or a lost answer,
//! leaves no claim behind.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::cells::CellStore;
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{
    AcquireOutcome, CasOutcome, Claim, CountingStore, FencingToken, Lease, LeaseClient, LeaseStore,
    MemoryStore, StoreError, StoredLease, Timing,
};
use tokio::task::JoinHandle;

fn timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(10),
        renew_period: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
        ..Timing::default()
    }
}

/// Another process's view of the same store: the same data under another identity, so its
/// waiters share nothing with this process's.
struct Apart(Arc<dyn LeaseStore>);

#[async_trait]
impl LeaseStore for Apart {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        self.0.try_acquire(claim).await
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.0.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.0.release(name, holder_id).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.0.hand_over(from_holder_id, from_token, to).await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.0.read(name).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.0.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn CellStore>> {
        self.0.waiting_line()
    }
}

fn wait_for(client: &LeaseClient, owner: &str) -> JoinHandle<Result<Lease, cql_lease::LeaseError>> {
    let (client, owner) = (client.clone(), owner.to_owned());
    tokio::spawn(async move { client.acquire("x", &owner, None, None).await })
}

/// Waiters queued behind a holder of their process each get the lease from the release
/// before them: in arrival order, each with a greater token, and no claim of their own
/// (one LWT per hand-over: the release's).
#[tokio::test(start_paused = true)]
async fn releases_hand_the_lease_down_the_line_in_one_lwt_each() {
    let counted = Arc::new(CountingStore::new(
        Arc::new(MemoryStore::new()) as Arc<dyn LeaseStore>
    ));
    let client = LeaseClient::new(counted.clone(), timing()).unwrap();
    let mut held = client.acquire("x", "first", None, None).await.unwrap();
    let mut waiters = Vec::new();
    for i in 0..4 {
        waiters.push(wait_for(&client, &format!("w{i}")));
        tokio::time::sleep(Duration::from_millis(100)).await; // arrival order
    }
    tokio::time::sleep(Duration::from_secs(2)).await; // all stand in line, looked at
    let claims = counted.calls().try_acquire;
    for (i, waiter) in waiters.into_iter().enumerate() {
        let before = held.token();
        held.release().await.unwrap();
        held = waiter.await.unwrap().unwrap();
        assert_eq!(held.owner(), format!("w{i}"), "served in arrival order");
        assert!(held.token() > before, "the token grows at each hand-over");
        assert_eq!(
            client.holder("x").await.unwrap().unwrap().holder_id,
            held.holder_id()
        );
    }
    assert_eq!(
        counted.calls().try_acquire,
        claims,
        "every hand-over was the release's own LWT"
    );
    held.release().await.unwrap();
    assert!(client.holder("x").await.unwrap().is_none());
}

/// A waiter of another process that stands ahead in line is not passed over: the holder's
/// release leaves the lease free for it rather than handing it to a later waiter here.
#[tokio::test(start_paused = true)]
async fn a_waiter_of_another_process_ahead_in_line_is_served_first() {
    let memory: Arc<dyn LeaseStore> = Arc::new(MemoryStore::new());
    let here = LeaseClient::new(memory.clone(), timing()).unwrap();
    let elsewhere = LeaseClient::new(Arc::new(Apart(memory)), timing()).unwrap();
    let held = here.acquire("x", "holder", None, None).await.unwrap();
    let ahead = wait_for(&elsewhere, "elsewhere");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let behind = wait_for(&here, "here");
    tokio::time::sleep(Duration::from_secs(2)).await;
    held.release().await.unwrap();
    let first = ahead.await.unwrap().unwrap();
    assert!(!behind.is_finished(), "the later waiter waits");
    let first_token = first.token();
    first.release().await.unwrap();
    let second = behind.await.unwrap().unwrap();
    assert!(second.token() > first_token);
}

/// A waiter that gives up while the hand-over to it is under way leaves no claim behind:
/// the lease it was handed is given back, and the next claim finds it free.
#[tokio::test(start_paused = true)]
async fn a_waiter_gone_before_the_hand_over_lands_leaves_the_lease_free() {
    let memory = Arc::new(MemoryStore::new());
    let client = LeaseClient::new(memory.clone(), timing()).unwrap();
    let held = client.acquire("x", "holder", None, None).await.unwrap();
    let first_token = held.token();
    let waiter = wait_for(&client, "gone");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The hand-over's answer takes a second; the waiter is dropped meanwhile.
    memory.inject(
        Some(Op::Release),
        Fault::Latency(Duration::from_secs(1)),
        Times::Next(1),
    );
    let release = tokio::spawn(held.release());
    tokio::time::sleep(Duration::from_millis(500)).await;
    waiter.abort();
    release.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await; // the give-back, in the background
    assert!(
        client.holder("x").await.unwrap().is_none(),
        "the claim handed to the gone waiter was given back"
    );
    let next = client.acquire("x", "next", None, None).await.unwrap();
    assert_eq!(
        next.token().get(),
        first_token.get() + 2,
        "the lease was handed over (one token), then given back"
    );
}

/// A hand-over whose answer is lost after it applied still ends with one holder at a time
/// and nothing stuck: the release reads back that it no longer holds, the claim handed over
/// is given back, and the waiter takes the lease with a greater token.
#[tokio::test(start_paused = true)]
async fn a_lost_hand_over_answer_leaves_the_waiter_to_claim_it() {
    let memory = Arc::new(MemoryStore::new());
    let client = LeaseClient::new(memory.clone(), timing()).unwrap();
    let held = client.acquire("x", "holder", None, None).await.unwrap();
    let first_token = held.token();
    let waiter = wait_for(&client, "waiter");
    tokio::time::sleep(Duration::from_secs(2)).await;
    memory.inject(Some(Op::Release), Fault::TimeoutAfterApply, Times::Next(1));
    held.release().await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter gets the lease soon")
        .unwrap()
        .unwrap();
    assert_eq!(
        next.token().get(),
        first_token.get() + 2,
        "the hand-over applied (one token), was given back, and the waiter claimed anew"
    );
    assert_eq!(
        client.holder("x").await.unwrap().unwrap().holder_id,
        next.holder_id()
    );
    next.release().await.unwrap();
}

/// A release whose future is polled once (the hand-over sent) and then never again still
/// completes the hand-over: the waiter gets the lease.
#[tokio::test(start_paused = true)]
async fn a_release_no_longer_polled_still_hands_the_lease_over() {
    let memory = Arc::new(MemoryStore::new());
    let client = LeaseClient::new(memory.clone(), timing()).unwrap();
    let held = client.acquire("x", "holder", None, None).await.unwrap();
    let waiter = wait_for(&client, "waiter");
    tokio::time::sleep(Duration::from_secs(2)).await;
    memory.inject(
        Some(Op::Release),
        Fault::Latency(Duration::from_millis(100)),
        Times::Next(1),
    );
    let mut release = Box::pin(held.release());
    let polled = tokio::time::timeout(Duration::from_millis(10), release.as_mut()).await;
    assert!(polled.is_err(), "the hand-over is under way");
    let next = tokio::time::timeout(Duration::from_secs(1), waiter)
        .await
        .expect("the waiter gets the lease without the releaser being polled")
        .unwrap()
        .unwrap();
    assert_eq!(next.owner(), "waiter");
    drop(release);
}

/// A waiter whose future is kept but no longer polled does not keep the lease handed to it:
/// it is given back within `retry_period`, and the lease reads free.
#[tokio::test(start_paused = true)]
async fn a_waiter_not_polled_gives_back_the_lease_handed_to_it() {
    let client = LeaseClient::new(Arc::new(MemoryStore::new()), timing()).unwrap();
    let held = client.acquire("x", "holder", None, None).await.unwrap();
    let mut stalled = Box::pin(client.acquire("x", "stalled", None, None));
    let waited = tokio::time::timeout(Duration::from_secs(2), stalled.as_mut()).await;
    assert!(waited.is_err(), "the lease is held");
    held.release().await.unwrap();
    assert_eq!(
        client.holder("x").await.unwrap().unwrap().owner,
        "stalled",
        "handed to the waiter's claim"
    );
    tokio::time::sleep(timing().retry_period + Duration::from_millis(100)).await;
    assert!(
        client.holder("x").await.unwrap().is_none(),
        "given back by the watchdog"
    );
    drop(stalled);
}

/// A waiter of the process that is no longer polled holds the line up for about a
/// `retry_period`: the lease handed to it goes on to the next waiter in line.
#[tokio::test(start_paused = true)]
async fn a_waiter_not_polled_holds_up_the_next_for_about_a_retry_period() {
    let client = LeaseClient::new(Arc::new(MemoryStore::new()), timing()).unwrap();
    let held = client.acquire("x", "holder", None, None).await.unwrap();
    let mut stalled = Box::pin(client.acquire("x", "stalled", None, None));
    let waited = tokio::time::timeout(Duration::from_millis(100), stalled.as_mut()).await;
    assert!(waited.is_err(), "the lease is held");
    let next = wait_for(&client, "next");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let next = next.await.unwrap().unwrap();
    let waited = released.elapsed();
    assert!(
        waited <= timing().retry_period + Duration::from_millis(100),
        "the next waiter waited {waited:?} behind one not polled"
    );
    assert_eq!(next.owner(), "next");
    drop(stalled);
}
