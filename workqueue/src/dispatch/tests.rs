//! The dispatcher's scan position after a scan from the cursor, which reads ahead of the
//! process's clock.
#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{WallClock, now_micros};
use crate::config::micros;
use crate::memory::MemoryQueueStore;
use crate::{QueueConfig, WorkQueue};

/// A scan from the cursor reads up to `lag + cursor_refresh` ahead of the clock; when that
/// reaches into the next bucket, the scan position must not stay there: an item enqueued
/// just after, at the clock (still in the earlier bucket), is claimable at once, not only at
/// the next rescan from the cursor (`cursor_refresh` later).
#[tokio::test(start_paused = true)]
async fn an_item_placed_after_a_scan_reaching_the_next_bucket_is_found_at_once() {
    let config = QueueConfig::default();
    let store = Arc::new(MemoryQueueStore::new());
    let base = WorkQueue::new(store, "edge", config).unwrap();
    // This process's clock reads one second before a bucket boundary: less than the read
    // ahead of a scan from the cursor (`lag` alone is over a second).
    let width = config.bucket_micros();
    let now = now_micros();
    let boundary = (now / width + 1) * width;
    let queue = base.with_clock(WallClock::skewed(
        boundary - micros(Duration::from_secs(1)) - now,
    ));
    assert!(
        micros(config.cursor_lag() + config.cursor_refresh) > micros(Duration::from_secs(1)),
        "the scan from the cursor reaches the next bucket"
    );

    queue.enqueue("first").await.unwrap();
    let first = queue.claim("w").await.unwrap().expect("the first item");
    first.complete().await.unwrap();
    queue.enqueue("second").await.unwrap();
    // Well within `cursor_refresh`: this claim scans on from the position, not the cursor.
    let second = queue
        .claim("w")
        .await
        .unwrap()
        .expect("an item enqueued after the scan is claimable at once");
    assert_eq!(second.payload(), "second");
    second.complete().await.unwrap();
}
