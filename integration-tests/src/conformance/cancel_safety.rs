//! Cancel safety: every public future of leases and elections is dropped at each of a
//! series of cut-off points (covering every await: the LWT, the read-back of a lost answer,
//! the release), and afterwards no lease may remain.

use std::future::Future;
use std::time::Duration;

use cql_election::Election;
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{LeaseClient, TryAcquire};
use futures::StreamExt;

use super::client;
use super::election::election_config;
use crate::backend::Backend;

/// How long the read-back of a lost answer is made to take: the window in which a dropped
/// future has sent an applied LWT but not yet handed its lease over.
const READ_BACK: Duration = Duration::from_millis(200);

/// Cut-off points from "before the first poll" to "after the read-back".
pub fn cut_points() -> impl Iterator<Item = Duration> {
    (0..=12).map(|i| Duration::from_millis(i * 25))
}

/// Makes the next acquire apply but lose its answer, and its read-back slow.
fn lose_the_next_answer(b: &dyn Backend, op: Op) {
    b.clear_faults();
    b.inject(Some(op), Fault::TimeoutAfterApply, Times::Next(1));
    b.inject(Some(Op::Read), Fault::Latency(READ_BACK), Times::Next(1));
}

/// Lets background releases finish, then checks that nobody holds `name`.
async fn assert_free(b: &dyn Backend, c: &LeaseClient, name: &str, what: &str, cut: Duration) {
    b.clear_faults();
    b.sleep(READ_BACK + Duration::from_millis(300)).await;
    let holder = c.holder(name).await.expect("holder");
    assert!(
        holder.is_none(),
        "{}: {what} dropped after {cut:?} left {holder:?} behind",
        b.name()
    );
}

/// Runs `make()` for at most `cut`; returns its output if it finished.
async fn run_until<F: Future>(cut: Duration, future: F) -> Option<F::Output> {
    tokio::time::timeout(cut, future).await.ok()
}

/// `try_acquire`, `acquire`, `Lease::release` and `LeaseGuard::release`, dropped anywhere.
pub async fn dropped_lease_futures_leave_no_lease(b: &dyn Backend) {
    let c = client(b);
    let mut dropped = 0;
    for (n, cut) in cut_points().enumerate() {
        let name = format!("cut-try-{n}");
        lose_the_next_answer(b, Op::TryAcquire);
        match run_until(cut, c.try_acquire(&name, "a", None)).await {
            None => dropped += 1,
            Some(Ok(TryAcquire::Acquired(lease))) => lease.release().await.expect("release"),
            Some(other) => panic!("{}: {other:?}", b.name()),
        }
        assert_free(b, &c, &name, "try_acquire", cut).await;

        let name = format!("cut-acquire-{n}");
        lose_the_next_answer(b, Op::TryAcquire);
        match run_until(cut, c.acquire(&name, "a", None, None)).await {
            None => dropped += 1,
            Some(result) => result.expect("acquire").release().await.expect("release"),
        }
        assert_free(b, &c, &name, "acquire", cut).await;

        let name = format!("cut-release-{n}");
        let lease = c.acquire(&name, "a", None, None).await.expect("acquire");
        lose_the_next_answer(b, Op::Release);
        let _ = run_until(cut, lease.release()).await;
        assert_free(b, &c, &name, "Lease::release", cut).await;

        let name = format!("cut-guard-{n}");
        let guard = c
            .acquire(&name, "a", None, None)
            .await
            .expect("acquire")
            .keep_alive();
        let token = guard.cancellation_token();
        lose_the_next_answer(b, Op::Release);
        let _ = run_until(cut, guard.release()).await;
        assert!(token.is_cancelled());
        assert_free(b, &c, &name, "LeaseGuard::release", cut).await;
    }
    assert!(dropped > 0, "some cut-off points fell inside the futures");
}

/// A campaign whose stream is dropped while its claim's answer is being settled leaves no
/// lease behind.
pub async fn dropped_campaign_leaves_no_lease(b: &dyn Backend) {
    let c = client(b);
    for (n, cut) in cut_points().enumerate() {
        let name = format!("cut-campaign-{n}");
        let e = Election::new(b.store(), &name, election_config()).expect("election");
        lose_the_next_answer(b, Op::TryAcquire);
        let mut campaign = e.campaign("a", None).expect("campaign");
        let _ = run_until(cut, campaign.next()).await;
        drop(campaign);
        assert_free(b, &c, &name, "a campaign", cut).await;
    }
}
