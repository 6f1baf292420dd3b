//! Reviews 4 and 5 of the work queue (placement of index entries, seals, enqueue windows),
//! each test a finding that failed on the code it was written against, for the reason in
//! its doc comment, and now guards the fix: review 4's in `review4`, review 5's in
//! `review5_upkeep` (seals and index upkeep) and `review5_paused` (an enqueuer paused past
//! its window). They drive the embedded store on paused tokio time through `Tweaked`, a
//! store with a few quirks, so they are fast and deterministic.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::time::Duration;

use cql_workqueue::{ItemKey, JobState, QueueConfig, StoredItem, WorkQueue};

mod review4;
mod review5_paused;
mod review5_upkeep;
mod tweaked;

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).expect("micros")
}

/// The queue's `enqueue_window`: how long after its position an entry may still be an
/// enqueue's in progress. A write landing later than this after its entry is one its
/// enqueuer gave up on, and index upkeep may seal the row against it.
fn enqueue_window(config: &QueueConfig) -> Duration {
    let claim = &config.claim;
    claim.resolve_timeout * 2
        + claim.effective_request_timeout() * 2
        + claim.retry_interval
        + config.cursor_lag()
}

/// Claims with `scanner` every 100 ms until `until` has passed since the call.
async fn scan_for(scanner: &WorkQueue, until: Duration) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < until {
        assert!(scanner.claim("s").await.expect("claim").is_none());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The fix's invariant: an item whose row reads available has an entry a scan finds.
async fn available_is_findable(scanner: &WorkQueue, key: &ItemKey) -> Option<StoredItem> {
    let row = scanner.store().read(key).await.expect("read");
    if row.as_ref().is_some_and(|r| r.state == JobState::Available) {
        let found = claim_within(scanner, "w", 60).await.map(|j| j.id().clone());
        assert_eq!(
            found.as_ref(),
            Some(&key.id),
            "the item is available but has no index entry"
        );
    }
    row
}

/// The next job of `q`, looked for over `rounds` claims 100 ms apart (several rescans from
/// the cursor).
async fn claim_within(q: &WorkQueue, worker: &str, rounds: usize) -> Option<cql_workqueue::Job> {
    for _ in 0..rounds {
        if let Some(job) = q.claim(worker).await.expect("claim") {
            return Some(job);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
