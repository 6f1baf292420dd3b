//! Scenarios of the LWT-free claim mode that the LWT mode does not share: what it refuses,
//! and why a resent enqueue cannot bring a completed item back without a conditional write.

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_lease::{CasOutcome, InvalidArgument};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::store::{ClaimOutcome, ItemClaim, NewRow};
use cql_workqueue::{
    ClaimMode, ItemId, ItemKey, JobState, NewItem, QueueConfig, QueueError, WorkQueue, clock,
};

use super::queue::{queue, queue_config, queue_with};
use crate::backend::Backend;

/// Unique keys need a conditional write: refused with a typed error, nothing written. A
/// queue in the LWT mode refuses the bakery mode's store (one mode per queue).
pub async fn unique_keys_and_mode_mismatch_are_refused(b: &dyn Backend) {
    let q = queue(b, "bakery-unique");
    assert_eq!(q.config().claim_mode, ClaimMode::Bakery);
    let result = q.enqueue_item(NewItem::text("x").unique("k")).await;
    assert!(
        matches!(
            result,
            Err(QueueError::InvalidArgument(InvalidArgument::Invalid {
                field: "unique key",
                ..
            }))
        ),
        "{result:?}"
    );
    q.enqueue("plain items are fine").await.expect("enqueue");
    assert_eq!(q.items().await.expect("items").len(), 1);
    let lwt = QueueConfig {
        claim_mode: ClaimMode::Lwt,
        ..queue_config()
    };
    let mismatch = WorkQueue::new(std::sync::Arc::clone(q.store()), "bakery-unique", lwt);
    assert!(
        matches!(mismatch, Err(QueueError::InvalidArgument(_))),
        "{mismatch:?}"
    );
}

/// An enqueue whose answer was lost is sent again with its first timestamp: landing after
/// the item was claimed and completed, it loses to the completion (a later timestamp), so
/// the item stays done and its number is not issued again.
pub async fn resent_enqueue_cannot_undo_a_completion(b: &dyn Backend) {
    let q = queue(b, "bakery-resent");
    let store = q.store();
    let key = ItemKey {
        partition: "bakery-resent".into(),
        id: ItemId::now(),
    };
    let row = NewRow {
        key: &key,
        payload: b"once",
        run_at: clock::now_micros(),
        origin: "the one enqueue",
    };
    // Applied, answer lost.
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    assert!(store.enqueue(row).await.is_err());
    b.clear_faults();
    let claim = ItemClaim {
        key: &key,
        claim_id: "w/0-claim",
        seen_attempt: 0,
        ttl: Duration::from_secs(5),
    };
    assert_eq!(
        store.claim(claim).await.expect("claim"),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store
            .complete(&key, "w/0-claim", Duration::from_secs(60))
            .await
            .expect("complete"),
        CasOutcome::Applied
    );
    // The resend lands now.
    assert_eq!(
        store.enqueue(row).await.expect("resend"),
        CasOutcome::Applied
    );
    let item = store.read(&key).await.expect("read").expect("row");
    assert_eq!(
        (item.state, item.attempt),
        (JobState::Done, 1),
        "{}: the resend brought the item back",
        b.name()
    );
}

/// Claimers racing for one item at the same moment (every cell request slowed, so they all
/// read the number row before anyone writes): numbers tie, the tie-break by claim id picks
/// one, and exactly one claim wins each round.
pub async fn one_winner_among_simultaneous_claims(b: &dyn Backend) {
    // Twelve racers, each claim a few cell round trips slowed by 20 ms: on a loaded machine
    // one can outlast the suite's request timeout and fail every claim of the round. This
    // scenario is about the tie-break, so requests get 2 s.
    let config = queue_config();
    let config = cql_workqueue::QueueConfig {
        timing: cql_lease::Timing {
            request_timeout: Some(Duration::from_secs(2)),
            ..config.timing
        },
        ..config
    };
    let q = queue_with(b, "bakery-race", config);
    let store = std::sync::Arc::clone(q.store());
    for round in 0..3 {
        let id = q.enqueue(&format!("job {round}")).await.expect("enqueue");
        let key = ItemKey {
            partition: "bakery-race".into(),
            id,
        };
        b.inject_queue(
            Some(QueueOp::Claim),
            Fault::Latency(Duration::from_millis(20)),
            Times::Always,
        );
        let claims = (0..12).map(|n| {
            let (store, key) = (std::sync::Arc::clone(&store), key.clone());
            async move {
                let claim_id = format!("racer{n:02}/r{round}-claim");
                let claim = ItemClaim {
                    key: &key,
                    claim_id: &claim_id,
                    seen_attempt: 0,
                    ttl: Duration::from_secs(5),
                };
                (claim_id.clone(), store.claim(claim).await)
            }
        });
        let results = futures::future::join_all(claims).await;
        b.clear_faults();
        let winners: Vec<&String> = results
            .iter()
            .filter(|(_, r)| matches!(r, Ok(ClaimOutcome::Claimed)))
            .map(|(id, _)| id)
            .collect();
        assert_eq!(winners.len(), 1, "{}: round {round}: {results:?}", b.name());
        let item = store.read(&key).await.expect("read").expect("row");
        assert_eq!(item.claim.as_deref(), Some(winners[0].as_str()));
        assert_eq!(
            store
                .complete(&key, winners[0], Duration::from_secs(60))
                .await
                .expect("complete"),
            CasOutcome::Applied
        );
    }
}
