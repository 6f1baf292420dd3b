//! Calls overtaken by a seal: index upkeep seals a row (raising its attempt number, keeping
//! its origin) while a revival, requeue or purge conditioned on the row as it read is on its
//! way. The call goes round again or recognises its own write, and answers what the row
//! ended as; a seal is counted in the attempt numbers as documented, and an enqueue never
//! sends past its `resolve_timeout`.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::store::QueueStore;
use cql_workqueue::{Enqueued, ItemId, NewItem, QueueConfig, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};

use super::{
    claim_within, config_with_default_resolve, dead_letter_with_a_given_up_requeue, enqueue_window,
    key_of, row_of, scan_for, scan_then_idle,
};
use integration_tests::tweaked::Tweaked;

/// LIVENESS (LWT mode, unique keys): a new enqueue of a unique key whose done window is over
/// starts its job even when index upkeep seals the row while the enqueue's revival is on its
/// way. README: "a new enqueue of the key after that starts a new job". A seal raises the
/// attempt number and keeps the origin; a refused revival that reads the row back still
/// done, with the origin it saw and a higher attempt, takes it for a seal (not another
/// enqueue's job) and goes round again, with the new attempt.
///
/// Interleaving (done_retention 1 s): the key's first job leaves a second run entry (a
/// duplicate enqueue whose removal of its own entry failed; the twin of a copy does the
/// same), then completes; no scan reaches that leftover until it is older than
/// `enqueue_window`. Then:
/// 1. E enqueues the key again: `IF NOT EXISTS` refused, the row reads done (attempt 1,
///    origin O), E places its entry and sends `revive(seen 1, O)`, which is slow;
/// 2. scanner S meets the old leftover run entry on the done row, seals it
///    (attempt 1 -> 2, origin O kept) and removes it;
/// 3. E's revival is refused (attempt 2); E reads the row back: done, origin O, attempt 2:
///    sealed, so E revives again at attempt 2 and its job runs (not
///    `Duplicate { state: Done }`).
#[tokio::test(start_paused = true)]
async fn revival_refused_by_a_seal_is_sent_again_and_its_job_runs() {
    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "sealed-revival";
    let worker = queue_with(&b, name, config);
    let first = worker
        .enqueue_item(NewItem::text("one").unique("k"))
        .await
        .expect("enqueue");
    assert!(matches!(first, Enqueued::New(_)), "{first:?}");
    let no_deletes = Tweaked {
        fail_deletes: true,
        ..Tweaked::over(&b)
    };
    let f = WorkQueue::new(Arc::new(no_deletes), name, config).expect("queue");
    let dup = f
        .enqueue_item(NewItem::text("dup").unique("k"))
        .await
        .expect("enqueue");
    assert!(matches!(dup, Enqueued::Duplicate { .. }), "{dup:?}");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    assert_eq!(job.payload(), "one");
    job.complete().await.expect("complete");
    // Nobody scans until the leftover entry is older than any enqueue's window.
    tokio::time::sleep(enqueue_window(&config) + Duration::from_secs(2)).await;
    let slow = Tweaked {
        // Within the request timeout (1 s here), so it is answered.
        slow_revive: Some(Duration::from_millis(250)),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(slow), name, config).expect("queue");
    let scanner = queue_with(&b, name, config);
    let (outcome, ()) = tokio::join!(
        e.enqueue_item(NewItem::text("two").unique("k")),
        scan_for(&scanner, Duration::from_millis(200))
    );
    let row = row_of(&b, &key_of(name, &ItemId::unique("k"))).await;
    let ran = claim_within(&scanner, "w", 30)
        .await
        .map(|j| j.payload().to_owned());
    assert_eq!(
        ran.as_deref(),
        Some("two"),
        "an enqueue of a unique key past its done window was reported {outcome:?} and its \
         job never runs; the row ({:?}, attempt {}, origin kept) was sealed under the \
         revival, which the enqueue took for another enqueue's job",
        row.state,
        row.attempt
    );
}

/// LIVENESS / API (LWT mode, dead letters): `requeue_dead` never answers `Ok(false)` ("it
/// was not a dead letter") for an item that is, and stays, a listed dead letter, when index
/// upkeep seals the row (`Seal::Discarded`, attempt raised) while the requeue LWT is on its
/// way: the requeue, conditioned on the attempt read, is refused; a SERIAL read showing the
/// row still discarded at a higher attempt means sealed, and the requeue is sent again at
/// that attempt (a seal only ever raises it by one per stale entry, so this ends). An
/// operator (or a tool) that trusts the answer would otherwise leave the item dead for good.
///
/// Interleaving: an earlier `requeue_dead` of the item was given up as of unknown outcome
/// (its LWT never reached a replica), leaving its run entry (attempt 1); no scan reaches it
/// until it is older than `enqueue_window`. Then:
/// 1. R calls `requeue_dead` again: reads the row (discarded, attempt 1), places its run
///    entry, sends `requeue(attempt 1)`, which is slow;
/// 2. scanner S meets the old entry on the still-discarded row: seals it (attempt 1 -> 2),
///    records the dead letter and removes the entry (and R's entry too: its attempt no
///    longer matches the row's);
/// 3. R's requeue is refused; R reads the row, sees the seal and requeues at attempt 2: the
///    item is requeued and findable.
#[tokio::test(start_paused = true)]
async fn requeue_dead_refused_by_a_seal_is_sent_again() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "sealed-requeue";
    let (id, _) = dead_letter_with_a_given_up_requeue(&b, name, config, NewItem::text("x")).await;
    tokio::time::sleep(enqueue_window(&config) + Duration::from_secs(1)).await;
    let slow = Tweaked {
        // Within the request timeout (1 s here), so it is answered.
        slow_requeue: Some(Duration::from_millis(250)),
        ..Tweaked::over(&b)
    };
    let r = WorkQueue::new(Arc::new(slow), name, config).expect("queue");
    let scanner = queue_with(&b, name, config);
    let (outcome, ()) = tokio::join!(
        r.requeue_dead(&id),
        scan_for(&scanner, Duration::from_millis(200))
    );
    let dead: Vec<ItemId> = scanner
        .dead_letters()
        .await
        .expect("dead letters")
        .into_iter()
        .map(|d| d.id)
        .collect();
    if matches!(outcome, Ok(true)) {
        let found = claim_within(&scanner, "w", 30)
            .await
            .map(|j| j.id().clone());
        assert_eq!(found, Some(id), "requeued, yet no claim finds it");
        return;
    }
    assert!(
        !dead.contains(&id),
        "requeue_dead answered {outcome:?} (\"not a dead letter\"), yet the item is still a \
         listed dead letter: the row was sealed under the requeue"
    );
}

/// DOCS (dead letters): `DeadLetter::attempt` and `StoredItem::attempts_used` count the
/// attempt numbers used, claims and seals alike ("each seal skips one attempt number", the
/// README says): an item claimed once, discarded, whose requeue was given up and whose
/// leftover entry was swept, is listed with attempt 2, and the seal's number is never issued
/// as a token.
#[tokio::test(start_paused = true)]
async fn dead_letter_attempt_counts_claims_and_seals_as_documented() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "sealed-count";
    let (id, token) =
        dead_letter_with_a_given_up_requeue(&b, name, config, NewItem::text("x")).await;
    let scanner = queue_with(&b, name, config);
    scan_for(&scanner, enqueue_window(&config) + Duration::from_secs(2)).await;
    let letters = scanner.dead_letters().await.expect("dead letters");
    let letter = letters.iter().find(|d| d.id == id).expect("listed");
    let row = row_of(&b, &key_of(name, &id)).await;
    // As documented: `attempt` is the last attempt number (claims plus seals), and the
    // seal's number is never issued as a token.
    assert_eq!(
        (letter.attempt, row.attempts_used()),
        (token + 1, token + 1),
        "one claim (token {token}) and one seal: the dead letter says {} and the row {} \
         attempts used",
        letter.attempt,
        row.attempts_used()
    );
}

/// Stats (LWT mode, unique keys; no fault, correct clocks): a completed unique job that got
/// a copy leaves `stats()` once it completes, as a plain item does
/// (`seals::completed_item_with_a_copy_leaves_stats_and_the_cursor`). A unique job enqueued
/// after an idle spell gets a copy and keeps its original entry; it runs through one of them
/// and completes. The other is a run entry of a unique key's done row, which index upkeep
/// keeps for the whole `enqueue_window` (about 22 s here, 32 s with the defaults) as a
/// possible revival; `stats()` must not count it as available work meanwhile (the README
/// gives `stats()` as items by state).
#[tokio::test(start_paused = true)]
async fn completed_unique_job_with_a_copy_leaves_stats() {
    let b = MemoryBackend::new();
    let config = config_with_default_resolve();
    let name = "copied-unique";
    let worker = queue_with(&b, name, config);
    scan_then_idle(&worker, &config).await;
    let e = queue_with(&b, name, config);
    let enqueued = e
        .enqueue_item(NewItem::text("x").unique("k"))
        .await
        .expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    assert_eq!(job.id(), enqueued.id());
    job.complete().await.expect("complete");
    scan_for(&worker, Duration::from_secs(5)).await;
    let stats = worker.stats().await.expect("stats");
    assert_eq!(
        (stats.available, stats.running, stats.scheduled),
        (0, 0, 0),
        "5 s after its only job completed, stats still count it ({stats:?})"
    );
}

/// API (LWT mode, unique keys, dead letters): `purge_dead` answers `Ok(true)` for a dead
/// letter it purged, when its answer is lost and index upkeep seals the purged row
/// (`Seal::Done`: attempt raised) before the read-back. The read-back accepts a done row
/// whose origin is the one read and whose attempt is at least the one read (a seal raises a
/// done row's attempt without changing its origin), not only "done with the attempt read".
///
/// Interleaving: a unique job is discarded (attempt 1); a `requeue_dead` of it is given up
/// as of unknown outcome (its LWT never reached a replica), leaving its run entry; no scan
/// reaches it until it is older than `enqueue_window`. Then:
/// 1. P calls `purge_dead`: the row reads discarded (attempt 1); the purge applies (done,
///    attempt 1), its answer is lost;
/// 2. scanner S meets the old run entry of a unique key's done row: seals it
///    (attempt 1 -> 2) and removes it;
/// 3. P reads the row back: done, origin O, attempt 2: its own purge, sealed since; it
///    returns `Ok(true)`.
#[tokio::test(start_paused = true)]
async fn purge_dead_with_a_lost_answer_and_a_seal_says_purged() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "sealed-purge";
    let (id, _) =
        dead_letter_with_a_given_up_requeue(&b, name, config, NewItem::text("x").unique("k")).await;
    tokio::time::sleep(enqueue_window(&config) + Duration::from_secs(1)).await;
    let lost = Tweaked {
        lost_purge_answers: true,
        ..Tweaked::over(&b)
    };
    let p = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let scanner = queue_with(&b, name, config);
    let (outcome, ()) = tokio::join!(
        p.purge_dead(&id),
        scan_for(&scanner, Duration::from_millis(200))
    );
    let row = row_of(&b, &key_of(name, &id)).await;
    assert!(
        matches!(outcome, Ok(true)),
        "purge_dead answered {outcome:?} although its purge applied (the row: {:?}, attempt \
         {}): the seal raised the attempt its read-back looks for",
        row.state,
        row.attempt
    );
}

/// Bound (LWT mode, unique keys): as the README says, "An enqueue never sends after its own
/// `resolve_timeout` (it checks again after every pause)", and that holds for the revival
/// branch of the enqueue loop too: after placing a fresh entry (`place_in_time`, which may
/// itself take up to `resolve_timeout` of late writes) it checks `give_up_at` again before
/// it sends the revive LWT. The window arithmetic is argued from this bound.
///
/// Interleaving (resolve 2 s, request timeout 3 s): a unique key's job is done and its done
/// window over; E enqueues the key: its `IF NOT EXISTS` sends fail (replicas unreachable)
/// until just before `give_up_at`; the last one is answered "not applied", the row reads
/// done, E places a revival entry whose write lands 1.5 s later (late for its position, so
/// it is placed again), and would send the revive about 1.4 s after `give_up_at`; it gives
/// up instead.
#[tokio::test(start_paused = true)]
async fn enqueue_sends_no_revival_after_its_resolve_timeout() {
    let b = MemoryBackend::new();
    let base = queue_config();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        timing: cql_lease::Timing {
            request_timeout: Some(Duration::from_secs(3)),
            ..base.timing
        },
        ..base
    };
    let name = "late-revival";
    let worker = queue_with(&b, name, config);
    worker
        .enqueue_item(NewItem::text("one").unique("k"))
        .await
        .expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.complete().await.expect("complete");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let start = tokio::time::Instant::now();
    let resolve = config.timing.resolve_timeout;
    let slow = Arc::new(Tweaked {
        enqueues_fail_until: Some(start + resolve - Duration::from_millis(100)),
        slow_first_revival_entry: Some(Duration::from_millis(1500)),
        ..Tweaked::over(&b)
    });
    let e = WorkQueue::new(Arc::clone(&slow) as Arc<dyn QueueStore>, name, config).expect("queue");
    let outcome = e.enqueue_item(NewItem::text("two").unique("k")).await;
    let sent: Vec<Duration> = slow
        .revives_sent
        .lock()
        .expect("lock")
        .iter()
        .map(|at| at.duration_since(start))
        .collect();
    assert!(
        sent.iter().all(|after| *after <= resolve),
        "the enqueue ({outcome:?}) sent revives {sent:?} after it began, later than its \
         resolve_timeout ({resolve:?}): the README's \"never sends after its own \
         resolve_timeout\" does not hold for revivals"
    );
}
