//! The hold machine on a scripted claim, with paused time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

use super::*;
use crate::store::CasOutcome;

/// A claim whose answers the test scripts.
#[derive(Default)]
struct Scripted {
    held: AtomicBool,
    renew_error: Mutex<Option<StoreError>>,
    renews: AtomicU64,
    releases: AtomicU64,
    orphaned: AtomicBool,
    /// The next renewal never answers (sent to a frozen coordinator).
    hang_next_renew: AtomicBool,
    /// Never handed out (a parked claim): given back at once when lost.
    parked: AtomicBool,
}

impl Scripted {
    fn held() -> Arc<Self> {
        let s = Scripted::default();
        s.held.store(true, Ordering::SeqCst);
        Arc::new(s)
    }
}

#[async_trait]
impl Holdable for Scripted {
    fn describe(&self) -> String {
        "scripted claim".into()
    }
    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.renews.fetch_add(1, Ordering::SeqCst);
        if self.hang_next_renew.swap(false, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if let Some(error) = self
            .renew_error
            .lock()
            .map_err(|_| StoreError::Unavailable("poisoned".into()))?
            .clone()
        {
            return Err(error);
        }
        Ok(if self.held.load(Ordering::SeqCst) {
            CasOutcome::Applied
        } else {
            CasOutcome::NotApplied
        })
    }
    async fn still_held(&self) -> Result<bool, StoreError> {
        Ok(self.held.load(Ordering::SeqCst))
    }
    async fn release(&self) -> Result<CasOutcome, StoreError> {
        self.releases.fetch_add(1, Ordering::SeqCst);
        Ok(if self.held.swap(false, Ordering::SeqCst) {
            CasOutcome::Applied
        } else {
            CasOutcome::NotApplied
        })
    }
    fn orphaned(&self) {
        self.orphaned.store(true, Ordering::SeqCst);
    }
    fn handed_out(&self) -> bool {
        !self.parked.load(Ordering::SeqCst)
    }
}

fn timing() -> HoldTiming {
    HoldTiming {
        validity: Duration::from_secs(8),
        renew_interval: Duration::from_secs(3),
        retry_interval: Duration::from_secs(1),
        resolve_timeout: Duration::from_secs(5),
        // Longer than the validity: these tests are about answers that arrive late.
        request_timeout: Duration::from_secs(10),
        ttl_margin: Duration::from_secs(2),
    }
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_after_the_deadline_starts_lost_and_is_given_back() {
    let claim = Scripted::held();
    let sent_at = Instant::now();
    tokio::time::advance(timing().validity).await;
    let hold = Hold::start(claim.clone(), timing(), sent_at, None);
    assert!(!hold.is_held());
    assert!(hold.cancellation_token().is_cancelled());
    assert_eq!(hold.loss_reason(), Some(LossReason::Expired));
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 1);
    assert!(!claim.held.load(Ordering::SeqCst));
    assert_eq!(
        hold.release().await,
        Err(HoldError::Lost(LossReason::Expired))
    );
}

#[tokio::test(start_paused = true)]
async fn renews_until_released_and_stops_acting_first() {
    let claim = Scripted::held();
    let hold = Hold::start(claim.clone(), timing(), Instant::now(), None);
    let token = hold.cancellation_token();
    let mut held = hold.held();
    assert!(*held.borrow_and_update());
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(hold.renewals() >= 9, "{}", hold.renewals());
    assert!(hold.must_stop_by() > Instant::now());
    assert!(!token.is_cancelled());
    hold.release().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(token.is_cancelled() && !*held.borrow());
    assert!(!claim.held.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_never_answers_is_sent_again_in_time() {
    let claim = Scripted::held();
    let start = Instant::now();
    let hold = Hold::start(claim.clone(), timing(), start, None);
    claim.hang_next_renew.store(true, Ordering::SeqCst);
    // The first renewal (at 3 s, deadline 8 s) hangs; it gets half the time left, then is
    // sent again and answered well before the deadline.
    tokio::time::sleep(timing().validity + Duration::from_secs(1)).await;
    assert!(
        hold.is_held(),
        "lost: {:?} at {:?}",
        hold.loss_reason(),
        hold.lost_at().map(|at| at - start)
    );
    assert!(claim.renews.load(Ordering::SeqCst) >= 2);
    assert!(hold.must_stop_by() > start + timing().validity);
}

#[tokio::test(start_paused = true)]
async fn failing_renewals_lose_it_at_the_deadline_not_later() {
    let claim = Scripted::held();
    let start = Instant::now();
    let hold = Hold::start(claim.clone(), timing(), start, None);
    *claim.renew_error.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(StoreError::Unavailable("down".into()));
    hold.lost().await;
    let lost_at = hold.lost_at().unwrap_or_else(Instant::now);
    assert!(
        lost_at <= start + timing().validity,
        "{:?}",
        lost_at - start
    );
    assert_eq!(hold.loss_reason(), Some(LossReason::Unreachable));
    assert!(
        claim.renews.load(Ordering::SeqCst) >= 3,
        "retried with back-off"
    );
    // The store keeps a claim nobody renews `ttl_margin` past the deadline: a holder slow to
    // stop keeps that margin, and the release (which frees a renewal that applied late, as
    // the scripted claim, still held, stands for) waits for it.
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 0, "given back early");
    tokio::time::sleep_until(hold.must_stop_by() + timing().ttl_margin - Duration::from_millis(1))
        .await;
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 0, "given back early");
    tokio::time::sleep(Duration::from_millis(1)).await;
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 1, "never given back");
    assert!(!claim.held.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_claim_never_handed_out_is_given_back_at_once_when_lost() {
    let claim = Scripted::held();
    claim.parked.store(true, Ordering::SeqCst);
    let hold = Hold::start(claim.clone(), timing(), Instant::now(), None);
    *claim.renew_error.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(StoreError::Unavailable("down".into()));
    hold.lost().await;
    settle().await;
    assert_eq!(
        claim.releases.load(Ordering::SeqCst),
        1,
        "given back at once"
    );
    assert!(!claim.held.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_rejected_renewal_is_a_loss() {
    let claim = Scripted::held();
    let hold = Hold::start(claim.clone(), timing(), Instant::now(), None);
    claim.held.store(false, Ordering::SeqCst);
    hold.lost().await;
    assert_eq!(hold.loss_reason(), Some(LossReason::NotHolder));
    assert!(!hold.is_held());
    assert_eq!(
        hold.renew_now().await,
        Err(HoldError::Lost(LossReason::NotHolder))
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_cancels_and_releases_abandoning_does_not_release() {
    let claim = Scripted::held();
    let hold = Hold::start(claim.clone(), timing(), Instant::now(), None);
    let token = hold.cancellation_token();
    drop(hold);
    assert!(token.is_cancelled());
    settle().await;
    assert!(!claim.held.load(Ordering::SeqCst));

    let claim = Scripted::held();
    let hold = Hold::start(claim.clone(), timing(), Instant::now(), None);
    let token = hold.cancellation_token();
    hold.abandon();
    assert!(token.is_cancelled());
    settle().await;
    assert!(claim.held.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn an_armed_attempt_guard_releases_on_drop() {
    let claim = Scripted::held();
    drop(AttemptGuard::new(claim.clone(), timing()));
    settle().await;
    assert!(!claim.held.load(Ordering::SeqCst));

    let claim = Scripted::held();
    AttemptGuard::new(claim.clone(), timing()).disarm();
    settle().await;
    assert!(claim.held.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn until_resolved_gives_up_unknown_after_resolve_timeout() {
    let start = Instant::now();
    let calls = AtomicU64::new(0);
    let result: Result<(), StoreError> = until_resolved(&timing(), "test", || {
        calls.fetch_add(1, Ordering::SeqCst);
        async {
            if calls.load(Ordering::SeqCst) == 1 {
                Err(StoreError::Unknown("lost".into()))
            } else {
                Err(StoreError::Unavailable("down".into()))
            }
        }
    })
    .await;
    assert!(matches!(result, Err(StoreError::Unknown(_))), "{result:?}");
    assert!(start.elapsed() <= timing().resolve_timeout);
    assert!(calls.load(Ordering::SeqCst) >= 5);

    let rejected: Result<(), StoreError> = until_resolved(&timing(), "test", || async {
        Err(StoreError::Rejected("syntax".into()))
    })
    .await;
    assert!(matches!(rejected, Err(StoreError::Rejected(_))));
}

/// `claim_attempt` on a scripted claim: `held` is what the store has after the request.
async fn attempt(
    claim: &Arc<Scripted>,
    answer: Result<bool, StoreError>,
    latency: Duration,
) -> Result<Claimed<bool>, HoldError> {
    let guard = AttemptGuard::new(claim.clone(), timing());
    let request = async move {
        tokio::time::sleep(latency).await;
        answer
    };
    let read_back = || {
        let claim = claim.clone();
        async move { Ok(Some(claim.held.load(Ordering::SeqCst))) }
    };
    claim_attempt(guard, &timing(), request, read_back, |won: &bool| *won).await
}

#[tokio::test(start_paused = true)]
async fn a_lost_claim_read_back_absent_is_remembered_as_orphaned() {
    let claim = Arc::new(Scripted::default());
    let result = attempt(
        &claim,
        Err(StoreError::Unknown("lost".into())),
        Duration::ZERO,
    )
    .await;
    assert!(
        matches!(result, Ok(Claimed::NotWon(Some(false)))),
        "{result:?}"
    );
    assert!(
        claim.orphaned.load(Ordering::SeqCst),
        "a late apply may follow"
    );

    // A definite "no" is not an orphan.
    let claim = Arc::new(Scripted::default());
    let result = attempt(&claim, Ok(false), Duration::ZERO).await;
    assert!(
        matches!(result, Ok(Claimed::NotWon(Some(false)))),
        "{result:?}"
    );
    assert!(!claim.orphaned.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_claim_won_late_is_given_back_and_a_timely_one_handed_over() {
    let claim = Scripted::held();
    let result = attempt(&claim, Ok(true), timing().validity).await;
    assert!(matches!(result, Ok(Claimed::Expired(true))), "{result:?}");
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 1, "given back");
    assert!(claim.orphaned.load(Ordering::SeqCst));

    let claim = Scripted::held();
    let start = Instant::now();
    let result = attempt(
        &claim,
        Err(StoreError::Unknown("lost".into())),
        Duration::ZERO,
    )
    .await;
    let Ok(Claimed::Won { sent_at, guard, .. }) = result else {
        panic!("{result:?}");
    };
    assert_eq!(sent_at, start);
    guard.disarm();
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 0);
    assert!(!claim.orphaned.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn a_definite_failure_is_not_given_back() {
    let claim = Scripted::held();
    let result = attempt(
        &claim,
        Err(StoreError::Unavailable("down".into())),
        Duration::ZERO,
    )
    .await;
    assert!(matches!(result, Err(HoldError::Store(_))), "{result:?}");
    settle().await;
    assert_eq!(claim.releases.load(Ordering::SeqCst), 0);
}
