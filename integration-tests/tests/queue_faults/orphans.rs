//! Orphaned claims (a claim that applied after its claimer read back "not claimed"): the
//! orphan path of `WorkQueue::try_entry` keeps an orphan known until its hand-back has
//! settled, so the claimer's process hands the item back rather than taking it for a live
//! claim of its own.

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use integration_tests::backend::{Backend, MemoryBackend};
use integration_tests::conformance::queue::queue_config;
use integration_tests::tweaked::Tweaked;

use super::lost_undos::item_and_claimer;
use super::{claim_within, row_of};

/// LIVENESS (LWT mode, orphans): an orphaned claim whose one hand-back fails stays known as
/// an orphan, and the item is handed back by a later claim of the same process, well before
/// the orphaned claim's TTL runs out. `try_entry` takes an orphan out of `Orphans` only once
/// its hand-back is settled: when that LWT fails (not applied: the replicas briefly
/// unreachable, the very kind of fault that made the claim an orphan), the orphan is put
/// back. Forgotten, it would still hold the item, and every later claimer of this process
/// would take it for a live claim of its own and skip the item, which nobody would work on
/// until the abandoned claim's TTL runs out (15 s by default, 2 s here) - what the orphan
/// path exists to avoid ("a claimer of this process that finds one of them holding an item
/// hands it back at once").
///
/// Interleaving: item X (run entry E). P's claim X1 answers "unknown" and is read back as
/// not claimed (the LWT still on its way): X1 is an orphan. X1 applies. P's next claim
/// meets E, sees X1 and sends the unclaim: refused before it is sent (unavailable); X1 stays
/// an orphan. A later claim of P hands X1 back and gets X.
#[tokio::test(start_paused = true)]
async fn orphan_stays_known_after_one_failed_hand_back() {
    let b = MemoryBackend::new();
    let name = "orphan-hand-back-failed";
    let config = queue_config();
    let tweaked = Tweaked {
        // The first claim LWT answers "unknown" and applies 300 ms later; the second is
        // refused before it is sent; later ones pass through.
        late_claim: Some(Duration::from_millis(300)),
        ..Tweaked::over(&b)
    };
    let (key, p) = item_and_claimer(&b, name, config, tweaked).await;
    let first = p.claim("w1").await;
    assert!(first.is_err(), "precondition: no job from the lost claim");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = row_of(&b, &key).await;
    assert!(
        held.claim.is_some() && held.attempt == 1,
        "precondition: the orphaned claim applied late: {held:?}"
    );
    let applied_at = tokio::time::Instant::now() - Duration::from_millis(200);
    // The orphan path's one hand-back fails, not applied.
    b.inject_queue(Some(QueueOp::Unclaim), Fault::Unavailable, Times::Next(1));
    assert!(p.claim("w1").await.expect("claim").is_none());
    // Well before the orphaned claim lapses (one claim TTL after it applied).
    let job = claim_within(&p, "w1", 8).await;
    assert!(
        tokio::time::Instant::now() < applied_at + config.timing.lease_duration,
        "the test's premise: still within the orphaned claim's TTL"
    );
    assert!(
        job.is_some(),
        "the item stays held by this process's orphaned claim: the orphan was forgotten when \
         its one hand-back failed, so every later claimer skips the item as held by a live \
         claim of its own until the claim's TTL runs out ({:?})",
        row_of(&b, &key).await
    );
}
