//! A claim that a coordinator applies after its claimer read back "not claimed": the
//! claimer's process remembers it as an orphan and hands the item back the moment it finds
//! it held by that claim, instead of leaving it to the claim's TTL.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{ItemKey, WorkQueue};
use tokio::time::Instant;

use super::queue::{queue_config, queue_store};
use crate::backend::Backend;
use crate::tweaked::Tweaked;

/// A claim applied after its read-back said "not claimed" is this process's orphan: its
/// next claim hands the item back and takes it at once (attempt 1: the orphaned claim never
/// reached a worker), long before the orphan's TTL would have freed it.
pub async fn late_applied_claim_is_handed_back_at_once(b: &dyn Backend) {
    let delay = Duration::from_millis(300);
    // The first claim answers "unknown" at once and is applied `delay` later; the second is
    // refused before it is sent.
    let store = Arc::new(Tweaked {
        late_claim: Some(delay),
        ..Tweaked::over(b)
    });
    let config = queue_config();
    let q = WorkQueue::new(store, "orphans", config).expect("queue");
    let id = q.enqueue("only").await.expect("enqueue");
    // Lost answer, read back "not claimed"; the retry is refused before it is sent.
    assert!(q.claim("w").await.is_err(), "the refused retry is reported");
    // The coordinator applies the first claim after all.
    b.sleep(delay * 2).await;
    let held = queue_store(b)
        .read(&ItemKey {
            partition: "orphans".into(),
            id: id.clone(),
        })
        .await
        .expect("read")
        .expect("item");
    assert!(held.claim.is_some(), "the late claim landed");
    let started = Instant::now();
    let job = q
        .claim("w")
        .await
        .expect("claim")
        .expect("the orphan handed back and the item claimed at once");
    assert!(
        started.elapsed() < config.timing.lease_duration / 2,
        "{:?}",
        started.elapsed()
    );
    assert_eq!((job.id(), job.attempt()), (&id, 1));
    job.complete().await.expect("complete");
}
