//! Work-queue scenarios at scale: tombstones per claim pass, convoys and Paxos spread,
//! resent enqueues, skewed enqueuer clocks. LWT and tombstone counts are behaviour (what the
//! store was asked), not timing.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_lease::CasOutcome;
use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::{QueueOp, StoreCounts};
use cql_workqueue::store::NewRow;
use cql_workqueue::{Enqueued, JobState, NewItem, QueueConfig, WallClock, clock};

use super::queue::{queue, queue_config, queue_store, queue_with};
use crate::backend::Backend;

fn counts_or_skip(b: &dyn Backend, scenario: &str) -> Option<StoreCounts> {
    let counts = b.queue_counts();
    if counts.is_none() {
        eprintln!("{}: {scenario} needs store counts; skipped", b.name());
    }
    counts
}

fn counts(b: &dyn Backend) -> StoreCounts {
    b.queue_counts().unwrap_or_default()
}

/// Thousands of completions later, a claim pass still reads only about the live head: the
/// tombstones of completed items are passed over less than 100 times per pass, while the
/// queue drains and once it is empty.
pub async fn claim_passes_skip_tombstones(b: &dyn Backend) {
    let Some(start) = counts_or_skip(b, "claim_passes_skip_tombstones") else {
        return;
    };
    let config = QueueConfig {
        scan_limit: 64,
        choice: 4,
        ..queue_config()
    };
    let q = queue_with(b, "tombstones", config);
    let (rounds, per_round) = if b.simulated_time() {
        (30, 100)
    } else {
        (3, 30)
    };
    let mut passes = 0u64;
    for round in 0..rounds {
        let batch = (0..per_round).map(|n| NewItem::text(&format!("item {round}/{n}")));
        for result in q.enqueue_batch(batch).await {
            result.expect("enqueue");
        }
        loop {
            passes += 1;
            let Some(job) = q.claim("w").await.expect("claim") else {
                break;
            };
            job.complete().await.expect("complete");
        }
        b.sleep(Duration::from_millis(200)).await;
    }
    let drained = counts(b);
    // Idle passes once the last claims' expiry (where their check entries' tombstones sit)
    // is behind the scanners: the first passes walk that last band once...
    b.sleep(config.timing.lease_duration + config.cursor_refresh * 2 + config.cursor_lag())
        .await;
    let idle_passes = 40u64;
    let mut settled = drained.clone();
    for pass in 0..idle_passes {
        if pass == idle_passes / 2 {
            settled = counts(b);
        }
        // Under load a claim answered after its deadline is undone and its item comes back
        // later (at least once delivery): finish such a straggler; the pass still counts.
        if let Some(job) = q.claim("w").await.expect("claim") {
            job.complete().await.expect("complete");
        }
        b.sleep(Duration::from_millis(100)).await;
    }
    let end = counts(b);
    let all_passes = passes + idle_passes;
    let overall = (end.tombstones_scanned - start.tombstones_scanned) as f64 / all_passes as f64;
    // ...and then nothing is walked again: drained tombstones stay behind the cursor.
    let later =
        (end.tombstones_scanned - settled.tombstones_scanned) as f64 / (idle_passes / 2) as f64;
    eprintln!(
        "{}: {} completions, {all_passes} claim passes: {overall:.1} tombstones per pass \
         overall, {later:.1} per idle pass once settled; {:.3} index scans per pass",
        b.name(),
        rounds * per_round,
        (end.index_scans - start.index_scans) as f64 / all_passes as f64,
    );
    assert!(overall < 100.0, "{overall} tombstones per claim pass");
    assert!(later < 100.0, "{later} tombstones per idle pass");
}

/// 64 claimers, four processes of 16, on 1024 items: each item costs at most 1.2 claim LWTs
/// (a process's dispatcher hands each of its claimers a different candidate; processes share
/// the head out by slots once they met, and skip items they read as taken without an LWT),
/// and no item partition takes more than twice the mean number of LWTs. The start-up race is
/// random, so one round can be unlucky: on the embedded store the median of three rounds is
/// asserted; over the wire, see below.
pub async fn no_convoy_with_64_claimers(b: &dyn Backend) {
    if counts_or_skip(b, "no_convoy_with_64_claimers").is_none() {
        return;
    }
    let _alone = super::queue_bakery_convoy::CONVOYS.lock().await;
    // The first claims of a round race before the processes have met each other: on
    // simulated time, enough items that this start-up cost is shared out as in a long run
    // (1024 items measure 1.07 to 1.08 per item). Over the wire (real time, a debug build on
    // a loaded machine) 1024 items take 12 to 16 s and approach the 2 s claim TTL per job, so
    // one round of 256 items is run (measured 1.06 to 1.11 since processes share the head out
    // by slots; 1.12 to 1.23 before).
    let (rounds, items) = if b.simulated_time() {
        (3, 1024)
    } else {
        (1, 256)
    };
    let bar = 1.2;
    let mut per_item = Vec::new();
    for round in 0..rounds {
        per_item.push(convoy_round(b, &format!("convoy{round}"), items).await);
    }
    per_item.sort_by(f64::total_cmp);
    let median = per_item[per_item.len() / 2];
    assert!(median <= bar, "{per_item:?} claim LWTs per claimed item");
}

/// One round of [`no_convoy_with_64_claimers`]: claim LWTs per claimed item.
async fn convoy_round(b: &dyn Backend, name: &str, items: usize) -> f64 {
    let start = counts(b);
    let q = queue_with(
        b,
        name,
        QueueConfig {
            scan_limit: 64,
            choice: 4,
            ..queue_config()
        },
    );
    for result in q
        .enqueue_batch((0..items).map(|n| NewItem::text(&format!("job {n}"))))
        .await
    {
        result.expect("enqueue");
    }
    let enqueued = counts(b);
    if b.supports_faults() {
        // Round trips take time, as on a network: a claimer that scanned the same head as
        // another races it for the same item while its claim is in flight.
        for op in [QueueOp::Claim, QueueOp::Index, QueueOp::Read] {
            b.inject_queue(
                Some(op),
                Fault::Latency(Duration::from_millis(2)),
                Times::Always,
            );
        }
    }
    let claimed = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for p in 0..4 {
        // Another process: its own dispatcher, scanning the same head.
        let process = q.with_clock(WallClock::system());
        for w in 0..16 {
            let (q, claimed) = (process.clone(), Arc::clone(&claimed));
            tasks.push(tokio::spawn(async move {
                while claimed.load(Ordering::SeqCst) < items {
                    match q.claim(&format!("p{p}w{w}")).await {
                        Ok(Some(job)) => {
                            claimed.fetch_add(1, Ordering::SeqCst);
                            // A completion too late for the claim's validity (a loaded
                            // machine) leaves the item to come back after its TTL, as for
                            // any worker; the claim LWTs are what this round counts.
                            if let Err(e) = job.complete().await {
                                eprintln!("complete: {e}");
                            }
                        }
                        Ok(None) => tokio::time::sleep(Duration::from_millis(20)).await,
                        // A request cut at the request timeout fails the claim, and a
                        // worker tries again after the retry interval: so do the claimers.
                        Err(e) => {
                            eprintln!("claim: {e}");
                            tokio::time::sleep(queue_config().timing.retry_period).await;
                        }
                    }
                }
            }));
        }
    }
    for task in tasks {
        task.await.expect("claimer");
    }
    b.clear_faults();
    let end = counts(b);
    let claim_lwts = end.claim_lwts - start.claim_lwts;
    let per_item = claim_lwts as f64 / items as f64;
    // This round's item partitions: each had one enqueue, so they are the new partitions.
    let partitions = (end.lwt_partitions - start.lwt_partitions).max(1);
    let mean = (end.lwts() - enqueued.lwts() + (enqueued.lwts() - start.lwts())) as f64
        / partitions as f64;
    eprintln!(
        "{}: {claim_lwts} claim LWTs for {items} items ({per_item:.2} per item); hottest \
         partition {} LWTs, mean {mean:.2}",
        b.name(),
        end.hottest_partition_lwts
    );
    assert!(
        end.hottest_partition_lwts as f64 <= 2.0 * mean,
        "hottest partition took {} LWTs, mean {mean}",
        end.hottest_partition_lwts
    );
    per_item
}

/// A resent enqueue (its first answer lost) arriving after the item was completed does not
/// bring it back: the done marker refuses it and the attempt number stays. Unique jobs are
/// reported as duplicates, before and after completion.
pub async fn resent_enqueue_after_completion_is_refused(b: &dyn Backend) {
    let store = queue_store(b);
    let q = queue(b, "resent");
    let id = q.enqueue("once").await.expect("enqueue");
    let job = q.claim("w").await.expect("claim").expect("item");
    job.complete().await.expect("complete");
    let key = cql_workqueue::ItemKey {
        partition: "resent".into(),
        id: id.clone(),
    };
    let resent = NewRow {
        key: &key,
        payload: b"once",
        run_at: clock::now_micros(),
        origin: "a resend",
    };
    assert_eq!(
        store.enqueue(resent).await.expect("resend"),
        CasOutcome::NotApplied
    );
    let row = store.read(&key).await.expect("read").expect("done marker");
    assert_eq!((row.state, row.attempt), (JobState::Done, 1));
    b.sleep(Duration::from_secs(3)).await;
    assert!(q.claim("w").await.expect("claim").is_none(), "came back");

    let unique = || NewItem::text("nightly report").unique("report-2026-11-21");
    let first = q.enqueue_item(unique()).await.expect("enqueue");
    assert!(matches!(first, Enqueued::New(_)));
    assert_eq!(
        q.enqueue_item(unique()).await.expect("enqueue"),
        Enqueued::Duplicate {
            id: first.id().clone(),
            state: JobState::Available
        }
    );
    let job = super::queue::claim_soon(b, &q, "w").await.expect("item");
    job.complete().await.expect("complete");
    assert!(matches!(
        q.enqueue_item(unique()).await.expect("enqueue"),
        Enqueued::Duplicate {
            state: JobState::Done,
            ..
        }
    ));

    // The rest needs fault injection; what is above has already been checked.
    if !b.supports_faults() {
        return;
    }
    // The first answer is lost; a worker completes the item before the resend lands.
    b.inject_queue(
        Some(QueueOp::Enqueue),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let worker = {
        let q = q.clone();
        tokio::spawn(async move {
            loop {
                if let Some(job) = q.claim("fast").await.expect("claim") {
                    job.complete().await.expect("complete");
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    q.enqueue("lost answer").await.expect("resend settles");
    worker.await.expect("worker");
    b.sleep(Duration::from_secs(3)).await;
    assert!(q.claim("w").await.expect("claim").is_none(), "came back");
    assert!(q.items().await.expect("items").is_empty());
}

fn system_time(micros: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// Enqueuers ten minutes behind and ahead: their immediate items are claimable at once (none
/// invisible behind the cursor, none hidden in the future), and their delayed items become
/// eligible at `run_at` by the worker's clock, not earlier.
pub async fn skewed_enqueuer_clocks(b: &dyn Backend) {
    let q = queue(b, "skew");
    let ten_minutes = 600_000_000;
    let behind = q.with_clock(WallClock::skewed(-ten_minutes));
    let ahead = q.with_clock(WallClock::skewed(ten_minutes));
    // Traffic first, so the cursor sits close to now.
    q.enqueue("warm-up").await.expect("enqueue");
    q.claim("w")
        .await
        .expect("claim")
        .expect("item")
        .complete()
        .await
        .expect("complete");
    b.sleep(queue_config().cursor_refresh * 2).await;
    assert!(q.claim("w").await.expect("claim").is_none());

    let mut expected = HashSet::new();
    for n in 0..4 {
        expected.insert(
            behind
                .enqueue(&format!("behind {n}"))
                .await
                .expect("enqueue"),
        );
        expected.insert(ahead.enqueue(&format!("ahead {n}")).await.expect("enqueue"));
    }
    let mut claimed = HashSet::new();
    for _ in 0..40 {
        match q.claim("w").await.expect("claim") {
            Some(job) => {
                claimed.insert(job.id().clone());
                job.complete().await.expect("complete");
            }
            None if claimed.len() == expected.len() => break,
            None => b.sleep(Duration::from_millis(100)).await,
        }
    }
    assert_eq!(claimed, expected, "items of skewed enqueuers went missing");

    let run_at = clock::now_micros() + 3_000_000;
    behind
        .enqueue_at("later (behind)", Some(system_time(run_at)))
        .await
        .expect("enqueue");
    ahead
        .enqueue_at("later (ahead)", Some(system_time(run_at)))
        .await
        .expect("enqueue");
    b.sleep(Duration::from_secs(2)).await;
    assert!(
        q.claim("w").await.expect("claim").is_none(),
        "a delayed item became eligible early"
    );
    b.sleep(Duration::from_secs(2)).await;
    let mut later = 0;
    for _ in 0..20 {
        if let Some(job) = q.claim("w").await.expect("claim") {
            later += 1;
            job.complete().await.expect("complete");
        } else if later == 2 {
            break;
        } else {
            b.sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(later, 2);
}
