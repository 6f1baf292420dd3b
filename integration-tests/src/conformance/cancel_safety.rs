//! Cancel safety: every public future of leases and elections is dropped at each of a
//! series of cut-off points (covering every await: the LWT, the read-back of a lost answer,
//! the release). Afterwards no lease may remain of a claim never handed over, and a lease
//! or term that was handed over stays consistent: ours with a live keep-alive, or released.

use std::future::Future;
use std::time::Duration;

use cql_election::{Election, ElectionEvent};
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::namespace::Namespace;
use cql_lease::{Lease, LeaseClient, LeaseGuard, StoredLease, TryAcquire};
use futures::StreamExt;
use tokio::time::Instant;

use super::election::election_config;
use super::{client, test_config};
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
    let c = client(b).in_namespace(Namespace::Election);
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

/// Makes the next `op` lose its answer (alternately after and without applying) and the
/// read-back slow.
fn lose_the_answer_of(b: &dyn Backend, op: Op, n: usize) {
    b.clear_faults();
    let fault = if n.is_multiple_of(2) {
        Fault::TimeoutAfterApply
    } else {
        Fault::TimeoutWithoutApply
    };
    b.inject(Some(op), fault, Times::Next(1));
    b.inject(Some(Op::Read), Fault::Latency(READ_BACK), Times::Next(1));
}

/// The holder of `name`, which must exist.
async fn holder_of(b: &dyn Backend, c: &LeaseClient, name: &str, what: &str) -> StoredLease {
    match c.holder(name).await.expect("holder") {
        Some(holder) => holder,
        None => panic!("{}: {what} lost the lease", b.name()),
    }
}

/// A dropped renewal of a plain [`Lease`] never lets the holder act longer than the store
/// keeps its claim, and the lease stays this acquisition's (renewable, releasable).
async fn check_plain_lease(b: &dyn Backend, c: &LeaseClient, mut lease: Lease, what: &str) {
    b.clear_faults();
    let holder = holder_of(b, c, lease.name(), what).await;
    let margin = test_config().lease_duration - test_config().renew_deadline();
    assert!(
        holder.holder_id == lease.holder_id() && holder.token == lease.token(),
        "{}: after {what} another claim holds it: {holder:?}",
        b.name()
    );
    assert!(
        lease.must_stop_by() + margin <= Instant::now() + holder.expires_within,
        "{}: after {what} the holder may act until {:?}, past the store's expiry in {:?}",
        b.name(),
        lease.must_stop_by() - Instant::now(),
        holder.expires_within
    );
    lease.renew().await.expect("renew after the drop");
    lease.release().await.expect("release");
}

/// After a dropped call on a kept-alive lease: still this acquisition's, the keep-alive
/// still renewing (held across two renew intervals, token live), and the value the old or the
/// new one; then it releases cleanly.
async fn check_guard(b: &dyn Backend, c: &LeaseClient, guard: LeaseGuard, values: [&str; 2]) {
    b.clear_faults();
    let token = guard.cancellation_token();
    let renewals = guard.renewals();
    b.sleep(test_config().renew_period * 2 + READ_BACK).await;
    let after = holder_of(b, c, guard.name(), "a dropped set_value").await;
    assert!(
        guard.is_held()
            && !token.is_cancelled()
            && guard.renewals() > renewals
            && after.holder_id == guard.holder_id()
            && guard.must_stop_by() > Instant::now(),
        "{}: the keep-alive stopped after a dropped set_value: {after:?}",
        b.name()
    );
    assert!(
        after.value.as_deref().is_some_and(|v| values.contains(&v)),
        "{}: value {:?} after a dropped set_value",
        b.name(),
        after.value
    );
    guard.release().await.expect("release");
}

/// `Lease::renew`, `Lease::set_value` and `LeaseGuard::set_value`, dropped at every cut-off
/// point with a lost answer being settled: the holder never acts past the store's expiry,
/// the lease stays ours with a live keep-alive (where there is one) until released, and the
/// next acquisition gets a greater token.
pub async fn dropped_renewals_keep_the_lease_consistent(b: &dyn Backend) {
    let c = client(b);
    let mut dropped = 0;
    for (n, cut) in cut_points().enumerate() {
        let name = format!("cut-renew-{n}");
        let mut lease = c
            .acquire(&name, "a", Some("v1"), None)
            .await
            .expect("acquire");
        let first = lease.token();
        b.sleep(Duration::from_millis(300)).await;
        lose_the_answer_of(b, Op::Renew, n);
        if run_until(cut, lease.renew()).await.is_none() {
            dropped += 1;
        }
        check_plain_lease(b, &c, lease, &format!("renew dropped after {cut:?}")).await;

        let mut lease = c
            .acquire(&name, "a", Some("v1"), None)
            .await
            .expect("acquire");
        assert!(lease.token() > first, "{}: token reused", b.name());
        b.sleep(Duration::from_millis(300)).await;
        lose_the_answer_of(b, Op::Renew, n);
        let _ = run_until(cut, lease.set_value(Some("v2"))).await;
        let value = lease.value();
        assert!(
            matches!(value.as_deref(), Some("v1" | "v2")),
            "{}: {value:?}",
            b.name()
        );
        check_plain_lease(b, &c, lease, &format!("set_value dropped after {cut:?}")).await;

        let guard = c
            .acquire(&name, "a", Some("v1"), None)
            .await
            .expect("acquire")
            .keep_alive();
        lose_the_answer_of(b, Op::Renew, n);
        let _ = run_until(cut, guard.set_value(Some("v2"))).await;
        check_guard(b, &c, guard, ["v1", "v2"]).await;
        assert_free(b, &c, &name, "a dropped renewal", cut).await;
    }
    assert!(dropped > 0, "some cut-off points fell inside the futures");
}

/// A leader's `proclaim` and `resign`, dropped at every cut-off point with a lost answer
/// being settled: a dropped proclaim leaves the term going (leading, token live, lease ours
/// and renewed, value the old or the new one); a dropped resign either resigned (not leading,
/// token cancelled, lease free) or left the term going, never something in between; either
/// way dropping the campaign then frees the lease at once, and the next term is greater.
pub async fn dropped_proclaim_and_resign_keep_the_term_consistent(b: &dyn Backend) {
    let c = client(b).in_namespace(Namespace::Election);
    let mut last_term = None;
    let name = "cut-term";
    let e = Election::new(b.store(), name, election_config()).expect("election");
    let (mut proclaims_dropped, mut resigns_dropped) = (0, 0);
    for (n, cut) in cut_points().enumerate() {
        let mut campaign = e.campaign("a", Some("v1")).expect("campaign");
        let Some(ElectionEvent::Elected { term, stop, .. }) = campaign.next().await else {
            panic!("{}: not elected", b.name());
        };
        assert!(last_term < Some(term), "{}: term reused", b.name());
        last_term = Some(term);

        lose_the_answer_of(b, Op::Renew, n);
        if run_until(cut, campaign.proclaim(Some("v2")))
            .await
            .is_none()
        {
            proclaims_dropped += 1;
        }
        b.clear_faults();
        b.sleep(election_config().renew_period * 2 + READ_BACK)
            .await;
        let leader = e.leader().await.expect("leader");
        assert!(
            campaign.is_leader()
                && !stop.is_cancelled()
                && leader.as_ref().is_some_and(|l| l.term == term
                    && l.candidate == "a"
                    && matches!(l.value.as_deref(), Some("v1" | "v2"))),
            "{}: proclaim dropped after {cut:?}: leading {}, stopped {}, leader {leader:?}",
            b.name(),
            campaign.is_leader(),
            stop.is_cancelled()
        );

        lose_the_answer_of(b, Op::Release, n);
        let resigned = run_until(cut, campaign.resign()).await.is_some();
        if !resigned {
            resigns_dropped += 1;
        }
        b.clear_faults();
        b.sleep(READ_BACK + Duration::from_millis(300)).await;
        let holder = c.holder(name).await.expect("holder");
        let still_leading = campaign.is_leader();
        assert!(
            (still_leading && !resigned && !stop.is_cancelled() && holder.is_some())
                || (!still_leading && stop.is_cancelled() && holder.is_none()),
            "{}: resign dropped after {cut:?}: leading {still_leading}, stopped {}, holder {holder:?}",
            b.name(),
            stop.is_cancelled()
        );
        drop(campaign);
        assert_free(b, &c, name, "a dropped resign", cut).await;
    }
    assert!(
        proclaims_dropped > 0 && resigns_dropped > 0,
        "{}: some cut-off points fell inside the futures (proclaim {proclaims_dropped}, resign {resigns_dropped})",
        b.name()
    );
}
