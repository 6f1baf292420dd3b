//! Index upkeep that deletes an entry because of what a plain read showed reads the item
//! SERIAL first: that completes a Paxos proposal still in progress (an enqueue or requeue
//! given up as of unknown outcome), which could otherwise apply after the entry is gone and
//! leave the item without one. The memory store cannot apply a write late, so these check
//! that the SERIAL read is made (its call count) and what happens to the entry.
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
async fn an_orphan_entry_goes_only_after_a_serial_read() {
    let store = Arc::new(MemoryQueueStore::new());
    let queue = WorkQueue::new(store.clone(), "orphan-serial", QueueConfig::default()).unwrap();
    old_entry(&store, &queue, ItemId::unique("died")).await;
    let before = store.counts().serial_reads;
    assert!(queue.claim("w").await.unwrap().is_none());
    assert_eq!(
        store.counts().serial_reads - before,
        1,
        "the orphan entry was judged by a plain read alone"
    );
    assert!(
        queue.live_entries().await.unwrap().is_empty(),
        "the orphan entry stays"
    );
}

#[tokio::test(start_paused = true)]
async fn an_old_requeue_entry_goes_only_after_a_serial_read() {
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
    let before = store.counts().serial_reads;
    assert!(later.claim("w").await.unwrap().is_none());
    assert_eq!(
        store.counts().serial_reads - before,
        1,
        "the requeue's entry was judged by a plain read alone"
    );
    assert!(
        queue.live_entries().await.unwrap().is_empty(),
        "the entry stays"
    );
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1, "still a dead letter: {dead:?}");
    assert_eq!(dead[0].id, id);
}
