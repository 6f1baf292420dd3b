//! The work queue under faults that race its index upkeep: writes whose answers are lost or
//! that land late, enqueuers paused past their window, claims dropped midway, and seals,
//! requeues and purges overtaking each other. Every test names the guarantee it checks: an
//! item that exists is findable, a job runs no more often than asked, and every call's
//! answer matches what the rows ended as.
//!
//! - `index_entries`: where entries are placed, and sweeps of entries whose write is late;
//! - `seals`: a sweep seals the row against the late write it gives up on;
//! - `paused_enqueuer`: an enqueuer paused past its window never sends again;
//! - `overtaken_by_seals`: a revival, requeue or purge whose row was sealed meanwhile;
//! - `dead_letter_races`: requeues, purges and revivals whose answers were lost;
//! - `lost_moves`: a claim undone after its index move;
//! - `lost_undos`: an undo or hand-back whose answer was lost;
//! - `settled_hand_backs`: the index upkeep of a hand-back follows the row it settled on;
//! - `orphans`: an orphaned claim stays known until its hand-back settles.
//!
//! They drive the embedded store on paused tokio time through
//! `integration_tests::tweaked::Tweaked`, a store with a few quirks, so they are fast and
//! deterministic.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{
    ItemId, ItemKey, JobState, NewItem, QueueConfig, QueueError, StoredItem, WorkQueue,
};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

mod dead_letter_races;
mod index_entries;
mod lost_moves;
mod lost_undos;
mod orphans;
mod overtaken_by_seals;
mod paused_enqueuer;
mod plain_items;
mod seals;
mod settled_hand_backs;

/// The embedded store in the bakery claim mode, and the suite's queue config in that mode.
fn bakery_backend() -> (MemoryBackend, QueueConfig) {
    let config = QueueConfig {
        claim_mode: cql_workqueue::ClaimMode::Bakery,
        ..queue_config()
    };
    (MemoryBackend::bakery(), config)
}

/// The stored row of `key`, which must exist.
async fn row_of(b: &MemoryBackend, key: &ItemKey) -> StoredItem {
    integration_tests::conformance::queue::queue_store(b)
        .read(key)
        .await
        .expect("read")
        .expect("row")
}

/// Enqueues `item` through `q` while `scanner` scans for `scan`; the enqueue must end with
/// an unknown outcome (its write late or lost).
async fn unknown_while_scanning(q: &WorkQueue, item: NewItem, scanner: &WorkQueue, scan: Duration) {
    let (outcome, ()) = tokio::join!(q.enqueue_item(item), scan_for(scanner, scan));
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).expect("micros")
}

/// The queue's `enqueue_window`: how long after its position an entry may still be an
/// enqueue's in progress. A write landing later than this after its entry is one its
/// enqueuer gave up on, and index upkeep may seal the row against it.
fn enqueue_window(config: &QueueConfig) -> Duration {
    let claim = &config.timing;
    claim.resolve_timeout * 2
        + claim.effective_request_timeout() * 2
        + claim.retry_period
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

/// `queue_config()` with the library's default resolve timeout: `enqueue_window` about 22 s
/// here (32 s with every default).
fn config_with_default_resolve() -> QueueConfig {
    let base = queue_config();
    QueueConfig {
        timing: cql_lease::Timing {
            resolve_timeout: Duration::from_secs(10),
            ..base.timing
        },
        ..base
    }
}

/// The fleet clock and the cursor noted by a scan of `worker`, then an idle fleet (long
/// enough for the next enqueue to get a copy next to the stale fleet clock).
async fn scan_then_idle(worker: &WorkQueue, config: &QueueConfig) {
    assert!(worker.claim("w").await.expect("claim").is_none());
    tokio::time::sleep(
        2 * config.cursor_lag() + 2 * config.cursor_refresh + Duration::from_secs(2),
    )
    .await;
}

/// The invariant: an item whose row reads available has an entry a scan finds.
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

fn key_of(name: &str, id: &ItemId) -> ItemKey {
    ItemKey {
        partition: name.to_owned(),
        id: id.clone(),
    }
}

/// A dead letter of `name`: `item` enqueued, claimed once and discarded. Returns its id and
/// the token of that claim.
async fn discarded_once(
    b: &MemoryBackend,
    name: &str,
    config: QueueConfig,
    item: NewItem,
) -> (ItemId, i32) {
    let worker = queue_with(b, name, config);
    let id = worker
        .enqueue_item(item)
        .await
        .expect("enqueue")
        .id()
        .clone();
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    let token = job.attempt();
    job.discard("poison").await.expect("discard");
    (id, token)
}

/// A discarded item with a requeue's run entry (attempt = the row's) left behind by a
/// `requeue_dead` given up as of unknown outcome (its LWT never reached a replica), and no
/// scan since. Returns the item's id and the token its only claim had.
async fn dead_letter_with_a_given_up_requeue(
    b: &MemoryBackend,
    name: &str,
    config: QueueConfig,
    item: NewItem,
) -> (ItemId, i32) {
    let (id, token) = discarded_once(b, name, config, item).await;
    let lost = Tweaked {
        lost_requeues: true,
        ..Tweaked::over(b)
    };
    let e1 = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let outcome = e1.requeue_dead(&id).await;
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    (id, token)
}
