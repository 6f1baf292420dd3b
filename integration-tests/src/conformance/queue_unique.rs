//! Unique jobs across completions: a duplicate while the job exists and for the done window
//! after, a new job (with higher tokens) after that, and a resent enqueue never counted as a
//! new one.

use std::time::Duration;

use cql_lease::memory::{Fault, Times};
use cql_workqueue::memory::QueueOp;
use cql_workqueue::store::{EntryKind, IndexEntry};
use cql_workqueue::{Enqueued, ItemId, JobState, NewItem, QueueConfig, WorkQueue};

use super::queue::{claim_soon, queue_config, queue_store, queue_with};
use crate::backend::Backend;

fn unique(payload: &str) -> NewItem {
    NewItem::text(payload).unique("nightly")
}

async fn claim_and_complete(b: &dyn Backend, q: &WorkQueue, payload: &str, attempt: i32) {
    let job = claim_soon(b, q, "w").await.expect("the job");
    assert_eq!((job.payload(), job.attempt()), (payload, attempt));
    job.complete().await.expect("complete");
}

/// A unique key is a duplicate while its job exists and for `done_retention` after it
/// completed; then a new enqueue of the key starts a new job, whose tokens continue above
/// the last job's. A resent enqueue (its first answer lost, its job completed and the done
/// window over before the resend lands) is the same enqueue: it starts nothing.
pub async fn unique_key_reopens_after_done_window(b: &dyn Backend) {
    // A TTL of n whole seconds ends after between n - 1 and n seconds (the store counts in
    // whole seconds): 2 s keeps the marker for the checks right after completion.
    let window = Duration::from_secs(2);
    let past_window = window + Duration::from_secs(1);
    let mut config = QueueConfig {
        done_retention: window,
        ..queue_config()
    };
    // The resend below is held back past the window: keep settling it meanwhile.
    config.timing.resolve_timeout = Duration::from_secs(10);
    let q = queue_with(b, "reopen", config);
    let first = q.enqueue_item(unique("one")).await.expect("enqueue");
    let id = first.id().clone();
    assert_eq!(first, Enqueued::New(id.clone()));
    let exists = Enqueued::Duplicate {
        id: id.clone(),
        state: JobState::Available,
    };
    assert_eq!(
        q.enqueue_item(unique("again")).await.expect("enqueue"),
        exists
    );
    claim_and_complete(b, &q, "one", 1).await;
    let recent = Enqueued::Duplicate {
        id: id.clone(),
        state: JobState::Done,
    };
    assert_eq!(
        q.enqueue_item(unique("again")).await.expect("enqueue"),
        recent
    );

    b.sleep(past_window).await;
    assert_eq!(
        q.enqueue_item(unique("two")).await.expect("enqueue"),
        Enqueued::New(id.clone())
    );
    assert_eq!(
        q.enqueue_item(unique("again")).await.expect("enqueue"),
        exists
    );
    claim_and_complete(b, &q, "two", 2).await;

    if !b.supports_faults() {
        return;
    }
    b.sleep(past_window).await;
    // The new job's start is applied but its answer lost; the job runs and completes, and
    // its done window ends, while the resend is on its way.
    b.inject_queue(
        Some(QueueOp::Revive),
        Fault::TimeoutAfterApply,
        Times::Next(1),
    );
    let worker = async {
        loop {
            if let Some(job) = q.claim("fast").await.expect("claim") {
                // From now on the resend is slow: it lands after the done window.
                b.inject_queue(
                    Some(QueueOp::Enqueue),
                    Fault::Latency(past_window),
                    Times::Next(1),
                );
                let seen = (job.payload().to_owned(), job.attempt());
                job.complete().await.expect("complete");
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let (enqueued, seen) = futures::join!(q.enqueue_item(unique("three")), worker);
    assert_eq!(
        enqueued.expect("the resend settles"),
        Enqueued::New(id.clone())
    );
    assert_eq!(seen, ("three".to_owned(), 3));
    b.clear_faults();
    b.sleep(Duration::from_millis(500)).await;
    assert!(
        q.claim("w").await.expect("claim").is_none(),
        "the resent enqueue started the job again"
    );
}

/// A config for the scenarios below: a done window of 2 s and a patient enqueue.
fn window_config() -> QueueConfig {
    let mut config = QueueConfig {
        done_retention: Duration::from_secs(2),
        ..queue_config()
    };
    config.timing.resolve_timeout = Duration::from_secs(10);
    config
}

/// Two enqueues of a unique key race to start its next job once the done window is over:
/// both read it done, one starts the job, and the other is told the job's true state
/// (available), not the `Done` it had read before the winner's LWT.
pub async fn unique_enqueue_race_reports_true_state(b: &dyn Backend) {
    let q = queue_with(b, "race", window_config());
    let id = q
        .enqueue_item(unique("one"))
        .await
        .expect("enqueue")
        .id()
        .clone();
    claim_and_complete(b, &q, "one", 1).await;
    b.sleep(Duration::from_secs(3)).await;
    // The first enqueue's revival is slow, so the second one's lands first.
    b.inject_queue(
        Some(QueueOp::Revive),
        Fault::Latency(Duration::from_millis(400)),
        Times::Next(1),
    );
    let second = async {
        b.sleep(Duration::from_millis(100)).await;
        q.enqueue_item(unique("second")).await
    };
    let (first, second) = futures::join!(q.enqueue_item(unique("first")), second);
    b.clear_faults();
    assert_eq!(second.expect("enqueue"), Enqueued::New(id.clone()));
    assert_eq!(
        first.expect("enqueue"),
        Enqueued::Duplicate {
            id,
            state: JobState::Available
        }
    );
    claim_and_complete(b, &q, "second", 2).await;
}

/// A claim's check entry whose removal failed, and a run entry whose claimer crashed before
/// removing it, outlive their job; once the unique key's next job is revived as a delayed
/// job, neither may start it early.
pub async fn stale_check_entry_does_not_start_revived_job_early(b: &dyn Backend) {
    let config = window_config();
    let q = queue_with(b, "stale", config);
    let id = q
        .enqueue_item(unique("one"))
        .await
        .expect("enqueue")
        .id()
        .clone();
    // The first job's run entry, as a claimer that crashed before removing it leaves it.
    let bucket = i64::try_from(config.bucket_width.as_micros()).expect("width");
    let now = cql_workqueue::clock::now_micros();
    let left = IndexEntry::new(id, now, EntryKind::Run, true, 0, bucket);
    queue_store(b)
        .put_entry(q.name(), &left, now)
        .await
        .expect("entry");
    let job = claim_soon(b, &q, "w").await.expect("the job");
    // Let the claim's background removal of the run entry finish, then fail the check
    // entry's removal after the completion.
    b.sleep(Duration::from_millis(200)).await;
    b.inject_queue(Some(QueueOp::Index), Fault::Unavailable, Times::Always);
    job.complete().await.expect("complete");
    b.clear_faults();
    // Past the done window and past the claim's expiry, where the stale entry sits.
    b.sleep(Duration::from_secs(4)).await;
    let tomorrow = std::time::SystemTime::now() + Duration::from_secs(86_400);
    let revived = q
        .enqueue_item(unique("tomorrow").run_at(tomorrow))
        .await
        .expect("enqueue");
    assert!(matches!(revived, Enqueued::New(_)), "{revived:?}");
    // A fresh process scans from the cursor, which stays below the stale entry.
    let other = q.with_clock(cql_workqueue::WallClock::system());
    for _ in 0..5 {
        if let Some(job) = other.claim("early").await.expect("claim") {
            panic!("delayed job {} started early by a stale entry", job.id());
        }
        b.sleep(Duration::from_millis(100)).await;
    }
}

/// A scanner that reads a unique key's next job's entry while the job's revival is still on
/// its way (the row still reads done) leaves the entry: the revived job is claimed.
pub async fn revival_in_flight_keeps_its_entry(b: &dyn Backend) {
    let q = queue_with(b, "revival", window_config());
    q.enqueue_item(unique("one")).await.expect("enqueue");
    claim_and_complete(b, &q, "one", 1).await;
    b.sleep(Duration::from_secs(3)).await;
    // An entry whose item is still being enqueued (no row yet) holds the cursor back, so the
    // enqueue below does not find its entry behind the cursor and re-place it.
    let bucket = i64::try_from(window_config().bucket_width.as_micros()).expect("width");
    let pending = cql_workqueue::clock::now_micros() - 2_500_000;
    let pending = IndexEntry::new(
        ItemId::unique("pending"),
        pending,
        EntryKind::Run,
        true,
        0,
        bucket,
    );
    queue_store(b)
        .put_entry(q.name(), &pending, cql_workqueue::clock::now_micros())
        .await
        .expect("entry");
    b.inject_queue(
        Some(QueueOp::Revive),
        Fault::Latency(Duration::from_millis(500)),
        Times::Next(1),
    );
    // Another process scans while the revival is delayed: it finds the new entry first.
    let other = q.with_clock(cql_workqueue::WallClock::system());
    let scanner = async {
        b.sleep(Duration::from_millis(200)).await;
        other
            .claim("early")
            .await
            .expect("claim")
            .map(|job| job.id().clone())
    };
    let (revived, early) = futures::join!(q.enqueue_item(unique("two")), scanner);
    b.clear_faults();
    assert!(matches!(revived.expect("enqueue"), Enqueued::New(_)));
    assert_eq!(early, None, "claimed before its revival applied");
    claim_and_complete(b, &q, "two", 2).await;
}
