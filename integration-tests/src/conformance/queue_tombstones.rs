//! The queue's index reads and Cassandra's tombstone thresholds: no single read walks more
//! than `tombstone_warn_threshold` (1,000) tombstones, however many items were processed,
//! in steady state and while a long claim holds the shared cursor back. The bound is on the
//! worst read, not the average: one read over the threshold is what Cassandra warns about,
//! and past 100,000 it fails the read. The tools' reads of the whole index (`stats()`)
//! obey the same bound.

use std::time::{Duration, UNIX_EPOCH};

use cql_workqueue::store::{EntryKind, IndexEntry};
use cql_workqueue::{NewItem, QueueConfig, Timing, WorkQueue, clock};

use super::queue::{claim_soon, queue_config, queue_store, queue_with};
use super::test_config;
use crate::backend::Backend;

/// Cassandra's default `tombstone_warn_threshold`.
pub const WARN_THRESHOLD: u64 = 1_000;

/// A claim held for the whole run keeps a stale run entry of its item live at the start,
/// which every scanner leaves to the holder, so the shared cursor cannot pass it. One process
/// works through thousands of items alone, across several buckets; then two more processes
/// join, and all three scan from the cursor across several cursor refreshes. Every processed
/// item left index tombstones between the cursor and the live head. No index read walks more
/// than 1,000 of them; the dead stretches became range deletions; none covered a live entry.
pub async fn no_index_read_walks_a_thousand_tombstones(b: &dyn Backend) {
    if b.queue_counts().is_none() {
        eprintln!("{}: needs store counts; skipped", b.name());
        return;
    }
    let (rounds, per_round, bucket) = if b.simulated_time() {
        (12, 250, Duration::from_secs(5))
    } else {
        (8, 250, Duration::from_secs(2))
    };
    let config = QueueConfig {
        scan_limit: 64,
        choice: 4,
        bucket_width: bucket,
        ..queue_config()
    };
    let first = queue_with(b, "tombstone-bound", config);
    first
        .enqueue("held for the whole run")
        .await
        .expect("enqueue");
    let held = super::queue::claim_soon(b, &first, "long")
        .await
        .expect("the long job");
    // A run entry of the held item left behind (its removal failed, say): scanners leave
    // it to the holder, so it holds the cursor back.
    let width = i64::try_from(bucket.as_micros()).expect("width");
    let stale = IndexEntry::new(
        held.id().clone(),
        clock::now_micros(),
        EntryKind::Run,
        true,
        0,
        width,
    );
    queue_store(b)
        .put_entry("tombstone-bound", &stale, clock::next_micros())
        .await
        .expect("a stale entry");
    let mut processed = 0usize;
    for round in 0..rounds {
        let batch = (0..per_round).map(|n| NewItem::text(&format!("item {round}/{n}")));
        for result in first.enqueue_batch(batch).await {
            result.expect("enqueue");
        }
        processed += drain(&first, "w0").await;
        b.sleep(bucket / 4).await;
    }
    let alone = b.queue_counts().unwrap_or_default();
    // Two more processes join.
    let joined = config;
    let handles: Vec<WorkQueue> = std::iter::once(first)
        .chain((0..2).map(|_| queue_with(b, "tombstone-bound", joined)))
        .collect();
    for round in 0..20 {
        if round % 4 == 0 {
            let batch = (0..50).map(|n| NewItem::text(&format!("late {round}/{n}")));
            for result in handles[1].enqueue_batch(batch).await {
                result.expect("enqueue");
            }
        }
        for (p, h) in handles.iter().enumerate() {
            processed += drain(h, &format!("w{p}")).await;
        }
        b.sleep(joined.cursor_refresh / 2).await;
    }
    assert!(held.is_held(), "the long job kept its claim");
    held.complete().await.expect("complete the long job");
    let counts = b.queue_counts().unwrap_or_default();
    eprintln!(
        "{}: {processed} processed; most tombstones in one read {} (alone: {}), reads over \
         {WARN_THRESHOLD}: {}, {:.1} per scan on average, {} range deletions",
        b.name(),
        counts.max_tombstones_scanned,
        alone.max_tombstones_scanned,
        counts.tombstone_warnings,
        counts.tombstones_scanned as f64 / counts.index_scans.max(1) as f64,
        counts.range_deletes,
    );
    let expected = rounds * per_round + 5 * 50;
    assert!(processed >= expected, "{processed} processed of {expected}");
    assert!(
        counts.max_tombstones_scanned <= WARN_THRESHOLD,
        "one read walked {} tombstones",
        counts.max_tombstones_scanned
    );
    assert_eq!(
        counts.tombstone_warnings, 0,
        "reads over the warning threshold"
    );
}

/// Three thousand fast jobs, one process, 200 every 100 ms: each claim placed a check entry
/// a claim TTL ahead and each completion deleted it, so the stretch ahead of now holds a
/// tombstone per job, which no rescan compacts yet (the TTL, 60 s, outlasts the run on a
/// loaded machine too; buckets of 5 minutes keep them in one or two partitions). `stats()`
/// reads through it with no read walking more than 1,000 tombstones, and counts the jobs
/// left among them: one held, five waiting, three delayed.
pub async fn stats_reads_walk_at_most_a_thousand_tombstones(b: &dyn Backend) {
    if b.queue_counts().is_none() {
        eprintln!("{}: needs store counts; skipped", b.name());
        return;
    }
    let config = QueueConfig {
        timing: Timing {
            lease_duration: Duration::from_secs(60),
            ..test_config()
        },
        scan_limit: 64,
        bucket_width: Duration::from_secs(300),
        ..queue_config()
    };
    let q = queue_with(b, "tombstone-stats", config);
    let mut processed = 0usize;
    for round in 0..15 {
        let batch = (0..200).map(|n| NewItem::text(&format!("item {round}/{n}")));
        for result in q.enqueue_batch(batch).await {
            result.expect("enqueue");
        }
        processed += drain(&q, "w").await;
        b.sleep(Duration::from_millis(100)).await;
    }
    assert!(processed >= 3_000, "{processed} processed");
    q.enqueue("held").await.expect("enqueue");
    let held = claim_soon(b, &q, "holder").await.expect("the held job");
    for result in q
        .enqueue_batch((0..5).map(|n| NewItem::text(&format!("waiting {n}"))))
        .await
    {
        result.expect("enqueue");
    }
    let in_a_minute = u64::try_from(clock::now_micros() + 60_000_000).expect("a position");
    for n in 0..3 {
        let at = UNIX_EPOCH + Duration::from_micros(in_a_minute + n);
        q.enqueue_at("delayed", Some(at)).await.expect("enqueue");
    }
    let before = b.queue_counts().unwrap_or_default();
    let stats = q.stats().await.expect("stats");
    let after = b.queue_counts().unwrap_or_default();
    let walked = after.tombstones_scanned - before.tombstones_scanned;
    eprintln!(
        "{}: stats() made {} index reads walking {walked} tombstones; most in one read so far \
         {} (before stats(): {}), reads over {WARN_THRESHOLD} in stats(): {}",
        b.name(),
        after.index_scans - before.index_scans,
        after.max_tombstones_scanned,
        before.max_tombstones_scanned,
        after.tombstone_warnings - before.tombstone_warnings,
    );
    assert_eq!(
        (stats.available, stats.scheduled, stats.running, stats.dead),
        (5, 3, 1, 0),
        "{stats:?}"
    );
    assert!(
        walked > WARN_THRESHOLD,
        "the index held only {walked} tombstones where stats() read"
    );
    assert!(
        after.max_tombstones_scanned <= WARN_THRESHOLD,
        "one read walked {} tombstones",
        after.max_tombstones_scanned
    );
    assert_eq!(
        after.tombstone_warnings, before.tombstone_warnings,
        "stats() reads over the warning threshold"
    );
    held.complete().await.expect("complete the held job");
}

/// Claims and completes on `q` until a claim finds nothing; returns how many.
async fn drain(q: &WorkQueue, worker: &str) -> usize {
    let workers = (0..4).map(|n| async move {
        let mut done = 0usize;
        while let Some(job) = q.claim(&format!("{worker}.{n}")).await.expect("claim") {
            job.complete().await.expect("complete");
            done += 1;
        }
        done
    });
    futures::future::join_all(workers).await.iter().sum()
}
