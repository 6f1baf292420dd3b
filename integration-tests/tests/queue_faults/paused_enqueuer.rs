//! An enqueuer paused in its retry sleep (GC, VM, an overloaded runtime) for longer than its
//! window: it checks the window again after every pause and never sends past it, so a sweep
//! that gave up on its write cannot be overtaken by a fresh resend (see `seals`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use cql_workqueue::{ItemId, QueueConfig, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_store, queue_with};

use super::plain_items::{AppliedAnswerLost, LostFirstWrite, SlowMiss};
use super::{bakery_backend, claim_within, enqueue_window, key_of, scan_for};
use integration_tests::tweaked::Tweaked;

/// SAFETY (bakery mode): an enqueue paused past its window while a sweep fences its row
/// either reports an unknown outcome or, reported `Ok`, has its item run: the sweep's fence
/// (an unconditional done row, timestamped when it is sent) never overwrites the row of an
/// enqueue told `Ok`.
///
/// The bakery fence rests on "a row write landing later is one its enqueuer gave up on, and
/// carries an older timestamp". Both hold only because the enqueue loop checks `give_up_at`
/// again after its retry sleep: an enqueuer paused there for longer than `enqueue_window`
/// does not resend on waking, with a fresh timestamp (its first send's is forgotten by then,
/// `kept` < `enqueue_window`). The interleaving that would break it:
/// 1. E places its entry and sends the row; the send is lost (answer "unknown"); E sleeps
///    before resending and is paused there for `enqueue_window` + 1 s;
/// 2. scanner S meets the entry, now older than `enqueue_window`, and reads the row: none
///    (the answer is slow on its way back);
/// 3. E wakes, resends (fresh timestamp), the write is acknowledged; E sees its entry is
///    old, places a fresh one, and returns `Ok(id)`;
/// 4. S acts on its read: `drop_orphan` writes the fence with a timestamp later than E's
///    and removes the old entry. The row reads done (`SWEPT`); E's fresh entry is later
///    removed as a done item's.
///
/// With E's clock behind S's (within `max_clock_skew`), step 2's slow answer would not even
/// be needed: a resend landing after the fence carries a lower timestamp and loses, yet is
/// acknowledged.
#[tokio::test(start_paused = true)]
async fn bakery_fence_never_overwrites_an_enqueue_reported_ok() {
    let (b, config) = bakery_backend();
    let name = "fenced-ok";
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    let e_store = Tweaked {
        wrap_items: Some(Box::new(move |items| {
            Arc::new(LostFirstWrite {
                inner: items,
                writes: Arc::clone(&counted),
            })
        })),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(e_store), name, config).expect("queue");
    let (armed, missed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (a, m) = (Arc::clone(&armed), Arc::clone(&missed));
    let s_store = Tweaked {
        wrap_items: Some(Box::new(move |items| {
            Arc::new(SlowMiss {
                inner: items,
                armed: Arc::clone(&a),
                missed: Arc::clone(&m),
                delay: Duration::from_millis(500),
            })
        })),
        ..Tweaked::over(&b)
    };
    let s = WorkQueue::new(Arc::new(s_store), name, config).expect("queue");
    // 1. E's first send is lost; E is then in its retry sleep, and paused there.
    let enqueue = e.enqueue("x");
    futures::pin_mut!(enqueue);
    while writes.load(Ordering::SeqCst) == 0 {
        tokio::select! {
            biased;
            outcome = &mut enqueue => panic!("the enqueue ended at once: {outcome:?}"),
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    tokio::time::sleep(enqueue_window(&config) + Duration::from_secs(1)).await;
    // 2. S reads no row; its answer is on its way.
    armed.store(true, Ordering::SeqCst);
    let claim = s.claim("s");
    futures::pin_mut!(claim);
    while !missed.load(Ordering::SeqCst) {
        tokio::select! {
            biased;
            outcome = &mut claim => panic!("the scan ended before reading the row: {outcome:?}"),
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    armed.store(false, Ordering::SeqCst);
    // 3. E wakes and finishes; 4. S acts on its read.
    let (outcome, claimed) = tokio::join!(enqueue, claim);
    assert!(claimed.expect("claim").is_none());
    // E does not send after its window (it checks it again after the pause), so it
    // reports an unknown outcome; told Ok, its item must run.
    let id = match outcome {
        Ok(id) => id,
        Err(cql_workqueue::QueueError::OutcomeUnknown { .. }) => return,
        Err(other) => panic!("{other:?}"),
    };
    let scanner = queue_with(&b, name, config);
    let key = key_of(name, &id);
    let row = scanner
        .store()
        .read(&key)
        .await
        .expect("read")
        .map(|r| (r.state, r.origin));
    let found = claim_within(&scanner, "w", 60)
        .await
        .map(|j| j.id().clone());
    assert_eq!(
        found,
        Some(id),
        "the enqueue returned Ok, yet its item never runs (its row: {row:?}): the sweep's \
         fence, sent after E's acknowledged write on a read made before it, overwrote it"
    );
}

/// SAFETY/semantics (LWT mode, unique keys): one `enqueue_item` call runs its job at most
/// once, even when its enqueuer is paused past its window and index upkeep seals the done
/// row meanwhile. The docs of `NewItem::unique` promise "A resent enqueue (the same call, its
/// first answer lost) is recognised by its origin and never brings a completed job back": a
/// seal keeps the row's origin (it raises the attempt number instead), and the enqueue loop
/// checks `give_up_at` again after its retry sleep, so it does not resend however late it
/// wakes. The interleaving that would run the job twice (done_retention 1 s):
/// 1. E enqueues key `k`: its LWT applies, the answer is lost; E sleeps before resending and
///    is paused there;
/// 2. F enqueues `k` too: `Duplicate`, but the removal of its own entry fails (best effort),
///    so `k` has two run entries;
/// 3. a worker claims `k` through one of them and completes it (attempt 1, origin E);
/// 4. after `enqueue_window` a scanner meets the other entry on a done row of a unique key,
///    seals the row and removes the entry;
/// 5. E wakes after the done marker expired. Were the seal to replace the origin (with
///    `SWEPT`), a resend would be refused, its read-back would not recognise the row, and
///    E would revive it and return `New`: the job would run again.
#[tokio::test(start_paused = true)]
async fn seal_of_a_done_row_never_lets_the_same_enqueue_run_its_job_twice() {
    use cql_workqueue::{Enqueued, NewItem};

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "twice";
    let lost = Tweaked {
        lost_enqueue_answer: true,
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let no_deletes = Tweaked {
        fail_deletes: true,
        ..Tweaked::over(&b)
    };
    let f = WorkQueue::new(Arc::new(no_deletes), name, config).expect("queue");
    let worker = queue_with(&b, name, config);
    let key = key_of(name, &ItemId::unique("k"));
    // 1. E's LWT applied, its answer lost; E paused in its retry sleep.
    let enqueue = e.enqueue_item(NewItem::text("once").unique("k"));
    futures::pin_mut!(enqueue);
    while queue_store(&b).read(&key).await.expect("read").is_none() {
        tokio::select! {
            biased;
            outcome = &mut enqueue => panic!("the enqueue ended at once: {outcome:?}"),
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    // 2. F's duplicate enqueue leaves its entry.
    let dup = f
        .enqueue_item(NewItem::text("dup").unique("k"))
        .await
        .expect("enqueue");
    assert!(matches!(dup, Enqueued::Duplicate { .. }), "{dup:?}");
    // 3. The job runs once.
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    assert_eq!(job.payload(), "once");
    job.complete().await.expect("complete");
    // 4. The other entry is swept once old, the row sealed.
    scan_for(&worker, enqueue_window(&config) + Duration::from_secs(2)).await;
    // 5. E wakes.
    // E checks its window again after the pause (an unknown outcome), and a seal keeps
    // the row's origin, so a resend would still know its row.
    let outcome = enqueue.await;
    let again = claim_within(&worker, "w", 30).await;
    assert!(
        again.is_none(),
        "one enqueue call ({outcome:?}) ran its job a second time (payload {:?}): its resend \
         no longer recognised its row, whose origin the sweep's seal took over",
        again.as_ref().map(|j| j.payload().to_owned())
    );
}

/// SAFETY (bakery mode): an enqueuer paused past its window never brings its completed item
/// back. The README: "a resent enqueue never brings a completed item back (it is resent with
/// its first send's timestamp ...)". The first send's timestamp is kept only for
/// `kept = 2 x resolve_timeout + request timeout` after it (`PendingEnqueues`); the enqueue
/// loop checks `give_up_at` again after its retry sleep, so an enqueuer paused there for
/// longer than `kept` gives up instead of resending with a fresh timestamp, above the
/// completion's. The interleaving that would run the item again:
/// 1. E enqueues: its row write applies, the answer is lost; E sleeps before resending and
///    is paused there for `enqueue_window` + 1 s (> `kept`);
/// 2. a worker claims the item (token 1) and completes it;
/// 3. E wakes; a resend with a fresh timestamp would overwrite the done row with its
///    `available`, attempt-0 row, and E would place a fresh entry and return `Ok`;
/// 4. a worker would claim the item again.
#[tokio::test(start_paused = true)]
async fn bakery_enqueue_paused_past_its_window_never_brings_its_completed_item_back() {
    let (b, config) = bakery_backend();
    let name = "back-again";
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    let e_store = Tweaked {
        wrap_items: Some(Box::new(move |items| {
            Arc::new(AppliedAnswerLost {
                inner: items,
                writes: Arc::clone(&counted),
            })
        })),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(e_store), name, config).expect("queue");
    let worker = queue_with(&b, name, config);
    // 1. E's write applied, its answer lost; E paused in its retry sleep.
    let enqueue = e.enqueue("once");
    futures::pin_mut!(enqueue);
    while writes.load(Ordering::SeqCst) == 0 {
        tokio::select! {
            biased;
            outcome = &mut enqueue => panic!("the enqueue ended at once: {outcome:?}"),
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    // 2. The item runs and completes.
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    let (id, first_token) = (job.id().clone(), job.attempt());
    job.complete().await.expect("complete");
    scan_for(&worker, enqueue_window(&config) + Duration::from_secs(1)).await;
    // 3. E wakes.
    let outcome = enqueue.await;
    // 4.
    let again = claim_within(&worker, "w", 30).await;
    assert!(
        again.is_none(),
        "the completed item {id:?} (token {first_token}) ran again (token {:?}) after its \
         enqueue's resend ({outcome:?}) overwrote the done row with a fresh timestamp",
        again.as_ref().map(cql_workqueue::Job::attempt)
    );
}
