//! Claims that outlive what their process knows of them: an acquire that a coordinator
//! applies after the read-back showed the lease free, and releases that fail.
//! The owning client must release them on sight, never report them as another holder.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_election::{Election, ElectionEvent};
use cql_lease::memory::{Fault, Op, Times};
use cql_lease::{
    AcquireOutcome, CasOutcome, Claim, FencingToken, LeaseClient, LeaseError, LeaseStore,
    StoreError, StoredLease, Timing, TryAcquire,
};
use futures::StreamExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::election::slack;
use super::{client_with, test_config};
use crate::backend::Backend;

/// A coordinator that goes on after the client lost the connection: the first acquire
/// answers "unknown" at once and is applied `delay` later (as a CAS still in its prepare
/// phase, or beaten by the read-back's ballot and retried, would be); the second is refused
/// before sending. Later calls pass through.
struct LateApply {
    inner: Arc<dyn LeaseStore>,
    calls: AtomicUsize,
    delay: Duration,
    applied: Arc<Notify>,
}

impl LateApply {
    fn new(inner: Arc<dyn LeaseStore>, delay: Duration) -> Arc<Self> {
        Arc::new(LateApply {
            inner,
            calls: AtomicUsize::new(0),
            delay,
            applied: Arc::default(),
        })
    }

    /// Waits until the late write has been applied (it is, `delay` after the first call).
    async fn applied(&self) {
        let limit = self.delay + Duration::from_secs(5);
        if tokio::time::timeout(limit, self.applied.notified())
            .await
            .is_err()
        {
            panic!("the late write was not applied within {limit:?}");
        }
    }
}

#[async_trait]
impl LeaseStore for LateApply {
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError> {
        match self.calls.fetch_add(1, Ordering::SeqCst) {
            0 => {
                let (inner, applied, delay) = (
                    Arc::clone(&self.inner),
                    Arc::clone(&self.applied),
                    self.delay,
                );
                let (name, holder_id, owner) = (
                    claim.name.to_owned(),
                    claim.holder_id.to_owned(),
                    claim.owner.to_owned(),
                );
                let (value, ttl) = (claim.value.map(str::to_owned), claim.ttl);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let claim = Claim {
                        name: &name,
                        holder_id: &holder_id,
                        owner: &owner,
                        value: value.as_deref(),
                        ttl,
                    };
                    let outcome = inner.try_acquire(claim).await;
                    assert!(
                        matches!(outcome, Ok(AcquireOutcome::Acquired { .. })),
                        "the late write must apply on a free lease: {outcome:?}"
                    );
                    applied.notify_one();
                });
                Err(StoreError::Unknown(
                    "connection broken after sending".into(),
                ))
            }
            1 => Err(StoreError::Unavailable("no connection".into())),
            _ => self.inner.try_acquire(claim).await,
        }
    }
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.renew(claim).await
    }
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError> {
        self.inner.release(name, holder_id).await
    }
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError> {
        self.inner.hand_over(from_holder_id, from_token, to).await
    }
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.read(name).await
    }
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.inner.peek(name).await
    }
    fn waiting_line(&self) -> Option<Arc<dyn cql_lease::cells::CellStore>> {
        self.inner.waiting_line()
    }
}

/// An acquire whose answer was lost, read back as "free", then applied by the coordinator:
/// the client remembers it, and releases it when it finds it instead of reporting its own
/// claim as another holder (which would block the lease for a TTL).
pub async fn late_applied_acquire_is_released_on_sight(b: &dyn Backend) {
    let late = LateApply::new(b.store(), Duration::from_millis(100));
    let c = LeaseClient::new(late.clone(), test_config()).expect("client");
    // The second attempt fails definitely, but the first may still land: the outcome is
    // unknown, not "nothing written".
    let first = c.try_acquire("late-acquire", "a", None).await;
    assert!(
        matches!(
            first,
            Err(LeaseError::OutcomeUnknown {
                source: StoreError::Unknown(_),
                ..
            })
        ),
        "{}: {first:?}",
        b.name()
    );
    late.applied().await;
    let orphan = c
        .holder("late-acquire")
        .await
        .expect("holder")
        .expect("the late write holds the lease");
    assert_eq!(orphan.owner, "a");
    assert!(
        c.is_abandoned(&orphan.holder_id),
        "{}: the lost attempt was forgotten",
        b.name()
    );
    match c.try_acquire("late-acquire", "a", None).await {
        Ok(TryAcquire::Acquired(lease)) => {
            assert!(lease.token() > orphan.token);
            lease.release().await.expect("release");
        }
        other => panic!(
            "{}: own late-applied claim not released on sight: {other:?}",
            b.name()
        ),
    }
}

/// The same seen by a campaign and a peer process: the candidate whose late-applied claim
/// holds the lease takes it over at its next poll (it never reports itself as another
/// leader), so a peer that saw the claim follows the real leader within one more poll.
pub async fn late_applied_campaign_does_not_mislead_peers(b: &dyn Backend) {
    // The late write lands between the candidate's first failed poll and its next one.
    let config = Timing {
        lease_duration: Duration::from_secs(4),
        renew_period: Duration::from_secs(1),
        retry_period: Duration::from_millis(400),
        max_clock_skew: Duration::ZERO,
        resolve_timeout: Duration::from_secs(4),
        request_timeout: None,
    };
    let late = LateApply::new(b.store(), Duration::from_millis(100));
    let ea = Election::new(late.clone(), "late-campaign", config).expect("election");
    let mut a = ea.campaign("a", None).expect("campaign");
    late.applied().await;
    let applied_at = Instant::now();
    let eb = Election::new(b.store(), "late-campaign", config).expect("election");
    let mut peer = eb.campaign("b", None).expect("campaign");
    let bound = config.retry_period + slack(b);
    let term = loop {
        let Ok(event) = tokio::time::timeout_at(applied_at + bound, a.next()).await else {
            panic!(
                "{}: not elected within {bound:?} of its own late claim",
                b.name()
            );
        };
        match event {
            Some(ElectionEvent::Elected { term, .. }) => break term,
            Some(ElectionEvent::LeaderChanged { leader: Some(l) }) if l.candidate == "a" => {
                panic!("{}: reported its own claim as another leader", b.name())
            }
            Some(ElectionEvent::LeaderChanged { .. }) => {}
            other => panic!("expected Elected, got {other:?}"),
        }
    };
    let elected_at = Instant::now();
    let follow_by = elected_at + config.retry_period + slack(b);
    loop {
        match tokio::time::timeout_at(follow_by, peer.next()).await {
            Ok(Some(ElectionEvent::LeaderChanged { leader: Some(l) })) if l.term == term => {
                assert_eq!(l.candidate, "a");
                break;
            }
            Ok(Some(ElectionEvent::LeaderChanged { .. })) => {}
            Ok(other) => panic!("{}: unexpected {other:?}", b.name()),
            Err(_) => panic!("{}: the peer did not follow the real term", b.name()),
        }
    }
    a.resign().await.expect("resign");
    drop(peer);
}

/// A release that does not end `Ok` (by hand, or of a guard on drop) leaves the claim
/// remembered: the same client releases it when it finds it, instead of reporting its own
/// claim as another holder until the TTL.
pub async fn failed_releases_are_released_on_sight(b: &dyn Backend) {
    // A TTL well beyond resolve_timeout: the claims outlive the failed releases.
    let config = Timing {
        lease_duration: Duration::from_secs(6),
        resolve_timeout: Duration::from_secs(1),
        ..test_config()
    };
    let c = client_with(b, config);
    let name = "failed-release";
    let acquire = |what: &'static str| {
        let c = c.clone();
        async move {
            match c.try_acquire(name, "a", None).await {
                Ok(TryAcquire::Acquired(lease)) => lease,
                other => panic!("{what}: own claim not released on sight: {other:?}"),
            }
        }
    };
    let lease = acquire("first").await;
    b.inject(Some(Op::Release), Fault::Unavailable, Times::Always);
    assert!(
        lease.release().await.is_err(),
        "{}: release failed",
        b.name()
    );
    b.clear_faults();
    let lease = acquire("after a failed release").await;

    let guard = lease.keep_alive();
    b.inject(Some(Op::Release), Fault::Unavailable, Times::Always);
    drop(guard);
    // The background release gives up after resolve_timeout.
    b.sleep(config.resolve_timeout + config.retry_period * 3 + slack(b))
        .await;
    b.clear_faults();
    let holder = c.holder(name).await.expect("holder").expect("still there");
    assert!(c.is_abandoned(&holder.holder_id));
    acquire("after a failed release on drop")
        .await
        .release()
        .await
        .expect("release");
}
