//! Index upkeep that deletes an entry because of what a plain read showed first fences the
//! row (an orphan's: sealed against a late enqueue; a dead letter's: its attempt number
//! raised against a late requeue), so a write given up as of unknown outcome cannot apply
//! after the entry is gone and leave the item without one. These check that the fence is
//! made (call counts), that it refuses the late write, and what happens to the entry.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;

use crate::clock::WallClock;
use crate::item::{EntryKind, IndexEntry, ItemId};
use crate::memory::MemoryQueueStore;
use crate::store::QueueStore;
use crate::{QueueConfig, WorkQueue};

/// A run entry of `id` ten seconds past its enqueue window.
async fn old_entry(store: &MemoryQueueStore, queue: &WorkQueue, id: ItemId) {
    let now = crate::clock::now_micros();
    let pos = now - queue.enqueue_window() - 10_000_000;
    let width = queue.config().bucket_micros();
    let entry = IndexEntry::new(id, pos, EntryKind::Run, true, 0, width);
    store.put_entry(queue.name(), &entry, now).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_orphan_entry_goes_only_after_its_row_is_sealed() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "orphan-seal", QueueConfig::default()).unwrap();
    let id = ItemId::unique("died");
    old_entry(&store, &queue, id.clone()).await;
    let before = store.counts().enqueue_lwts;
    assert!(queue.claim("w").await.unwrap().is_none());
    assert_eq!(
        store.counts().enqueue_lwts - before,
        1,
        "the orphan entry went without a fence against a late enqueue"
    );
    assert!(
        queue.live_entries().await.unwrap().is_empty(),
        "the orphan entry stays"
    );
    let row = store
        .read(&queue.key(id))
        .await
        .unwrap()
        .expect("the fence");
    assert_eq!(row.origin, crate::store::SWEPT);
    // A late enqueue of the same row is refused.
    let key = queue.key(ItemId::unique("died"));
    let late = crate::store::NewRow {
        key: &key,
        payload: b"late",
        run_at: crate::store::AT_ONCE,
        origin: "late",
    };
    assert_eq!(
        store.enqueue(late).await.unwrap(),
        cql_lease::CasOutcome::NotApplied
    );
}

#[tokio::test(start_paused = true)]
async fn an_old_requeue_entry_goes_only_after_its_row_is_sealed() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "requeue-serial", QueueConfig::default()).unwrap();
    let id = queue.enqueue("poison").await.unwrap();
    let job = queue.claim("w").await.unwrap().expect("a job");
    job.discard("bad").await.unwrap();
    // What a requeue of unknown outcome leaves: a run entry naming the discarded attempt,
    // met past its window by a scanner (whose clock reads later: the cursor has moved on
    // from older positions).
    let now = crate::clock::now_micros();
    let width = queue.config().bucket_micros();
    let entry = IndexEntry::new(id.clone(), now, EntryKind::Run, true, 1, width);
    store.put_entry(queue.name(), &entry, now).await.unwrap();
    let later = queue.with_clock(WallClock::skewed(queue.enqueue_window() + 10_000_000));
    let before = store.counts().finish_lwts;
    assert!(later.claim("w").await.unwrap().is_none());
    assert_eq!(
        store.counts().finish_lwts - before,
        1,
        "the requeue's entry went without a fence against a late requeue"
    );
    // The fence: the attempt number raised, which a late requeue is conditioned on.
    let row = store.read(&queue.key(id.clone())).await.unwrap().unwrap();
    assert_eq!(row.attempt, 2);
    let late = store
        .requeue(&queue.key(id.clone()), crate::store::AT_ONCE, 1)
        .await
        .unwrap();
    assert_eq!(late, cql_lease::CasOutcome::NotApplied);
    assert!(
        queue.live_entries().await.unwrap().is_empty(),
        "the entry stays"
    );
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1, "still a dead letter: {dead:?}");
    assert_eq!(dead[0].id, id);
}

/// One claim of a fresh item by a queue whose clock reads `into_bucket` µs past a bucket's
/// start: the plain write requests the claim sent, and the live entries after it.
async fn one_claim(into_bucket: i64) -> (u64, Vec<IndexEntry>) {
    let store = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig::default();
    let width = config.bucket_micros();
    let now = crate::clock::now_micros();
    let offset = (now / width + 1) * width + into_bucket - now;
    let queue = WorkQueue::new(store.clone(), "moves", config)
        .unwrap()
        .with_clock(WallClock::skewed(offset));
    queue.enqueue("x").await.unwrap();
    let before = store.counts().plain_writes;
    let job = queue.claim("w").await.unwrap().expect("the item");
    // Room for a removal left to a spawned task.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let writes = store.counts().plain_writes - before;
    let live = queue.live_entries().await.unwrap();
    job.complete().await.unwrap();
    (writes, live)
}

/// A claim places its check entry and only then removes the entry it was found by: two
/// writes, never one batch (a batch landing late could leave the item no entry beside a
/// range deletion), wherever the bucket boundary falls.
#[tokio::test(start_paused = true)]
async fn a_claim_places_its_check_entry_before_removing_the_old_one() {
    // Early in a bucket: the check entry (15 s ahead) shares it with the enqueue's entry.
    let (same, live) = one_claim(1_000_000).await;
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].kind, EntryKind::Check);
    // Late in a bucket: the check entry falls in the next one.
    let (across, live) = one_claim(QueueConfig::default().bucket_micros() - 3_000_000).await;
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0].kind, EntryKind::Check);
    assert_eq!(same, across, "no batch when the entries share a bucket");
}
