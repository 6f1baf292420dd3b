//! The index upkeep of a delivered claim's hand-back follows the row the release settled on
//! (`Holdable::released`), not the hand-back it meant: an available row gets a run entry
//! even when the hand-back was reported refused after a late first send, and a row the job's
//! own finish made a dead letter is dead-lettered, not reported as available work.

use std::time::Duration;

use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

use cql_workqueue::JobState;

use super::lost_undos::{item_and_claimer, undone_and_found_soon};
use super::{claim_within, enqueue_window, row_of};

/// LIVENESS (delivered claims): a delivered hand-back reported refused after its late first
/// send applied still leaves the item findable at once. `release_target` reports "refused"
/// when its first send's answer was lost, the read-back still saw the claim (the Paxos round
/// not committed yet), the round then applied, and the resend was refused: the item is
/// available and the hand-back applied. The upkeep runs by what the row reads once the
/// release settles, so the item gets a run entry; skipped on "refused", its only index entry
/// would be the job's check entry, due one claim TTL after the claim (15 s by default;
/// `stats()` counting it as running meanwhile).
///
/// Interleaving: item X (run entry E). P claims X (attempt 1; check entry C at + TTL, E
/// removed) and drops the job; the hand-back reschedule #1 answers "unknown" at once; the
/// read-back sees P's claim; #1 commits; the resend #2 is refused -> `released(false)`; the
/// row reads available -> a run entry; Q finds X at once.
#[tokio::test(start_paused = true)]
async fn delivered_hand_back_refused_after_its_late_first_send_leaves_the_item_findable() {
    let b = MemoryBackend::new();
    let name = "hand-back-late";
    let config = queue_config();
    let tweaked = Tweaked {
        // Committed before the resend (read-back delays are at least 50 ms here).
        first_reschedule_late: Some(Duration::from_millis(10)),
        ..Tweaked::over(&b)
    };
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    let job = claim_within(&claimer, "w1", 10).await.expect("the job");
    drop(job);
    undone_and_found_soon(
        &b,
        name,
        &key,
        config,
        Duration::from_millis(400),
        "its only index entry is the dropped job's check entry (due one claim TTL after the \
         claim): the hand-back applied (its first send, late) and its resend was refused, \
         and `released(false)` does no upkeep for a delivered claim",
    )
    .await;
}

/// STATS / UPKEEP: a hand-back after a dropped discard whose write applied leaves a dead
/// letter, reported as such by `stats()`, not as available work. "Not held" does not mean
/// "handed back": when the job's own finishing write (here a discard) applied and the finish
/// was dropped before it settled (`finish` is documented cancel-safe: its guard hands the
/// item back), the row is a dead letter at that very attempt. The hand-back's upkeep is
/// based on the row the release settled on (available: a run entry; discarded: `put_dead`;
/// done or claimed by another: only the check entry removed). A run entry placed for it
/// would look like a requeue's in flight (`due`: kept for the enqueue window, ~32 s by
/// default, ~5 s here), and `stats()` would count the item as available and not dead until
/// the window passed. No job runs twice either way (the claim is conditional).
///
/// Interleaving: X claimed by P (attempt 1, check entry C). P's `discard` sends reschedule
/// #1 (answer "unknown", commits 5 ms later); its read-back sees P's claim and waits; P's
/// caller drops the discard (a timeout) -> the guard hands back: reschedule #2 is refused
/// with its answer lost -> read-back "not held" -> the row reads discarded at attempt 1 ->
/// the dead letter is recorded and C removed; no scan claims X again.
#[tokio::test(start_paused = true)]
async fn hand_back_after_a_dropped_discard_leaves_a_dead_letter() {
    let b = MemoryBackend::new();
    let name = "discard-dropped";
    let config = queue_config();
    let tweaked = Tweaked {
        first_reschedule_late: Some(Duration::from_millis(5)),
        reschedule_answers_lost: true,
        ..Tweaked::over(&b)
    };
    let (key, claimer) = item_and_claimer(&b, name, config, tweaked).await;
    let job = claim_within(&claimer, "w1", 10).await.expect("the job");
    let outcome = tokio::time::timeout(Duration::from_millis(20), job.discard("poison")).await;
    assert!(outcome.is_err(), "the discard must still be settling");
    // Past one claim TTL (when the check entry would have been due), well within the window.
    let settle = config.timing.lease_duration + Duration::from_secs(1);
    assert!(settle < enqueue_window(&config), "the test's premise");
    let scanner = queue_with(&b, name, config);
    let start = tokio::time::Instant::now();
    while start.elapsed() < settle {
        let job = scanner.claim("s").await.expect("claim");
        assert!(job.is_none(), "a discarded item was claimed again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let row = row_of(&b, &key).await;
    assert_eq!(row.state, JobState::Discarded, "{row:?}");
    let stats = scanner.stats().await.expect("stats");
    assert!(
        stats.dead == 1 && stats.available == 0,
        "the dead letter is reported as available work ({stats:?}): the hand-back's upkeep put \
         a run entry at the discarded attempt, which index upkeep keeps as a requeue's for the \
         enqueue window"
    );
}
