//! Review 10 of the work queue: the review-9 fix (`Holdable::released`, the index upkeep of
//! a claim's hand-back run once the release settles) and the purge conditioned on the
//! attempt number it read. Each test is a finding that fails on the code it was written
//! against, for the reason given in its doc comment.

use std::time::Duration;

use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

use cql_workqueue::JobState;

use super::review9::{item_and_claimer, undone_and_found_soon};
use super::{claim_within, enqueue_window, row_of};

/// LIVENESS (delivered claims, 6b21184): `ClaimTarget::released` skips the index upkeep of a
/// delivered hand-back that was refused (`HandBack::Delivered if !applied => return`). But
/// `release_target` reports "refused" also when its first send's answer was lost, the
/// read-back still saw the claim (the Paxos round not committed yet), the round then
/// applied, and the resend was refused: the item is available, the hand-back applied, and
/// its only index entry is the job's check entry, due one claim TTL after the claim (15 s by
/// default; `stats()` counts it as running meanwhile). The commit's own message names this
/// case ("refused after an earlier send applied late"), and the undelivered branch handles
/// it; the delivered one does not.
///
/// Interleaving: item X (run entry E). P claims X (attempt 1; check entry C at + TTL, E
/// removed) and drops the job; the hand-back reschedule #1 answers "unknown" at once; the
/// read-back sees P's claim; #1 commits; the resend #2 is refused -> `released(false)` ->
/// no upkeep; X is available with only C; Q finds nothing until C is due.
///
/// Suggested fix: for `HandBack::Delivered`, do the upkeep on `released(false)` too (an extra
/// run entry is harmless, and the check entry removed is this claim's own), or better, run
/// it by what the row reads after the release settles (see the next finding).
#[tokio::test(start_paused = true)]
async fn finding_delivered_hand_back_refused_after_its_late_first_send_hides_the_item() {
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

/// STATS / UPKEEP (6b21184): a delivered claim's hand-back settled by reading back "not
/// held" now always places an immediate run entry (attempt = the claim's) and removes the
/// check entry. "Not held" does not mean "handed back": when the job's own finishing write
/// (here a discard) applied and the finish was dropped before it settled (`finish` is
/// documented cancel-safe: its guard hands the item back), the row is a dead letter at that
/// very attempt. The run entry then looks like a requeue's in flight (`due`: kept for the
/// enqueue window, ~32 s by default, ~5 s here), so the item is not dead-lettered, and
/// `stats()` counts it as available and not dead, until the window passes and index upkeep
/// seals the row (one more LWT). Before the hook, the check entry stayed and the item was
/// dead-lettered once it was due (one claim TTL). No job runs twice (the claim is
/// conditional), but a dead letter is reported as available work for the window.
///
/// Interleaving: X claimed by P (attempt 1, check entry C). P's `discard` sends reschedule
/// #1 (answer "unknown", commits 5 ms later); its read-back sees P's claim and waits; P's
/// caller drops the discard (a timeout) -> the guard hands back: reschedule #2 is refused
/// with its answer lost -> read-back "not held" -> `released(true)` -> run entry R (attempt
/// 1, now) placed, C removed; X is discarded at attempt 1 with no dead-letter record; every
/// scan leaves R alone (a requeue's, within its window).
///
/// Suggested fix: base the hand-back's upkeep on the row the release settled on, not on the
/// hand-back it meant: read it (the read-back has it) and call `after_finish` with what it
/// says (available: a run entry; discarded: `put_dead`; done or claimed by another: only
/// remove the check entry).
#[tokio::test(start_paused = true)]
async fn finding_hand_back_after_a_dropped_discard_reports_the_dead_letter_as_available() {
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
    let settle = config.claim.ttl + Duration::from_secs(1);
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
