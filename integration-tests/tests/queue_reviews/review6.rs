//! Review 6 of the work queue: the fixes of review 5 (`QueueStore::seal` raises the attempt
//! number of a unique key's done row or of a dead letter instead of taking its origin; the
//! enqueue loop checks its window after every pause; only a unique key's done row keeps a
//! recent run entry). Each test is a finding that fails on the code it was written against,
//! for the reason given in its doc comment.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{Enqueued, ItemId, NewItem, QueueConfig, QueueStore, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};

use super::{
    claim_within, config_with_default_resolve, dead_letter_with_a_given_up_requeue, enqueue_window,
    key_of, row_of, scan_for, scan_then_idle,
};
use integration_tests::tweaked::Tweaked;

/// LIVENESS (LWT mode, unique keys): a new enqueue of a unique key whose done window is over
/// is reported `Duplicate { state: Done }` and its job never runs, when index upkeep seals
/// the row while the enqueue's revival is on its way. A regression of 138a9f1: the seal
/// used to write origin `SWEPT`, which the enqueue loop recognises ("sealed by index upkeep
/// meanwhile: revive it instead"); it now raises the attempt number and keeps the origin,
/// so that branch never matches a done row's seal and the refused revival falls through to
/// `Duplicate`. README: "a new enqueue of the key after that starts a new job".
///
/// Interleaving (done_retention 1 s): the key's first job leaves a second run entry (a
/// duplicate enqueue whose removal of its own entry failed; the twin of a copy does the
/// same), then completes; no scan reaches that leftover until it is older than
/// `enqueue_window`. Then:
/// 1. E enqueues the key again: `IF NOT EXISTS` refused, the row reads done (attempt 1,
///    origin O), E places its entry and sends `revive(seen 1, O)`, which is slow;
/// 2. scanner S meets the old leftover run entry on the done row, seals it
///    (attempt 1 -> 2, origin O kept) and removes it;
/// 3. E's revival is refused (attempt 2); E reads the row back: done, origin O (not its
///    own, not `SWEPT`), so it removes its entry and returns `Duplicate { state: Done }`.
///
/// Suggested fix: after a refused revival, a row still done whose origin is the one seen and
/// whose attempt grew was sealed, not taken: go round the loop again (read, place an entry
/// with the new attempt, revive conditioned on it), as for `SWEPT`.
#[tokio::test(start_paused = true)]
async fn finding_revival_refused_by_a_seal_is_reported_as_a_done_duplicate() {
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

/// LIVENESS / API (LWT mode, dead letters): `requeue_dead` returns `Ok(false)` ("it was not
/// a dead letter") for an item that is, and stays, a listed dead letter, when index upkeep
/// seals the row (`Seal::Discarded`, attempt raised) while the requeue LWT is on its way.
/// The requeue is conditioned on the attempt read, is refused, and `NotApplied` before any
/// lost answer is taken as "not a dead letter". An operator (or a tool) that trusts the
/// answer leaves the item dead for good.
///
/// Interleaving: an earlier `requeue_dead` of the item was given up as of unknown outcome
/// (its LWT never reached a replica), leaving its run entry (attempt 1); no scan reaches it
/// until it is older than `enqueue_window`. Then:
/// 1. R calls `requeue_dead` again: reads the row (discarded, attempt 1), places its run
///    entry, sends `requeue(attempt 1)`, which is slow;
/// 2. scanner S meets the old entry on the still-discarded row: seals it (attempt 1 -> 2),
///    records the dead letter and removes the entry (and R's entry too: its attempt no
///    longer matches the row's);
/// 3. R's requeue is refused; R removes its entry and returns `Ok(false)`.
///
/// Suggested fix: on `NotApplied`, read the row (SERIAL); still discarded with a higher
/// attempt means sealed: requeue again at that attempt (a seal only ever raises it by one per
/// stale entry, so this ends), and return `false` only when it is no dead letter.
#[tokio::test(start_paused = true)]
async fn finding_requeue_dead_refused_by_a_seal_says_not_a_dead_letter() {
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

/// DOCS (dead letters): `DeadLetter::attempt` ("Claims it had") and
/// `StoredItem::attempts_used` ("Claims since the item was enqueued or last requeued")
/// count the attempt number a seal skipped as a claim. An item claimed once, discarded,
/// whose requeue was given up and whose leftover entry was swept, is listed with 2 claims.
/// The README says "each seal skips one attempt number" (the token), but the dead-letter
/// API reports it as a claim the item had (each seal of a given-up requeue adds one).
///
/// Suggested fix: document `attempt` as the item's last fencing token (not a claim count),
/// or keep a separate `seals` count (or claims column) and report claims from it.
#[tokio::test(start_paused = true)]
async fn finding_dead_letter_counts_a_seal_as_a_claim_documented() {
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
    // Fixed in the docs: `attempt` is the last attempt number (claims plus seals), and the
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

/// DOCS / stats (LWT mode, unique keys; no fault, correct clocks): review 5's finding
/// (`finding_completed_item_with_a_copy_stays_available_in_stats_and_holds_cursor`) was
/// fixed for plain items only. A unique job enqueued after an idle spell gets a copy and
/// keeps its original entry; it runs through one of them and completes; the other is a run
/// entry of a unique key's done row, kept for the whole `enqueue_window` (about 22 s here,
/// 32 s with the defaults) as a possible revival. Until then `stats()` counts the completed
/// job as available, its oldest-available age growing. The README's Limits mention that the
/// cursor waits behind such a leftover, not that `stats()` reports a completed job as
/// available (the "Features" line sells `stats()` as items by state).
///
/// Suggested fix: `stats()` cannot tell without reading the row; either state it in the
/// README's Limits (a unique key's completed job can count as available for up to the
/// enqueue window after an idle spell or a duplicate enqueue), or keep the copy's twin from
/// being left: a claim through the copy removes the original too (both are known to the
/// enqueuer only, so record the twin's seq in the copy).
#[tokio::test(start_paused = true)]
async fn finding_completed_unique_job_with_a_copy_stays_available_in_stats() {
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

/// API (LWT mode, unique keys, dead letters): `purge_dead` returns `Ok(false)` ("it was not
/// a dead letter") for a dead letter it purged, when its answer is lost and index upkeep
/// seals the purged row (`Seal::Done`: attempt raised) before the read-back. The read-back
/// takes "done with the attempt read" as the only sign of its own purge, and a seal changes
/// the attempt.
///
/// Interleaving: a unique job is discarded (attempt 1); a `requeue_dead` of it is given up
/// as of unknown outcome (its LWT never reached a replica), leaving its run entry; no scan
/// reaches it until it is older than `enqueue_window`. Then:
/// 1. P calls `purge_dead`: the row reads discarded (attempt 1); the purge applies (done,
///    attempt 1), its answer is lost;
/// 2. scanner S meets the old run entry of a unique key's done row: seals it
///    (attempt 1 -> 2) and removes it;
/// 3. P reads the row back: done, attempt 2, not 1: "not purged by this call"; it returns
///    `Ok(false)`.
///
/// Suggested fix: a purge read-back should accept a done row whose origin is the one read
/// and whose attempt is at least the one read (only a seal raises a done row's attempt
/// without changing its origin), or purge with a marker of its own (e.g. `last_error` set to
/// the call's id) to recognise it.
#[tokio::test(start_paused = true)]
async fn finding_purge_dead_with_a_lost_answer_and_a_seal_says_not_purged() {
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

/// DOCS (LWT mode, unique keys): the README says "An enqueue never sends after its own
/// `resolve_timeout` (it checks again after every pause)", but the revival branch of the
/// enqueue loop places a fresh entry (`place_in_time`, which may itself take up to
/// `resolve_timeout` of late writes) and then sends the revive LWT without checking
/// `give_up_at` again. Harmless for safety as far as this review found (the revival's entry
/// is fresh, and a revival landing after that entry's window is refused by the seal, with
/// the outcome of `finding_revival_refused_by_a_seal_is_reported_as_a_done_duplicate`), but
/// the stated bound, which the window arithmetic is argued from, does not hold.
///
/// Interleaving (resolve 2 s, request timeout 3 s): a unique key's job is done and its done
/// window over; E enqueues the key: its `IF NOT EXISTS` sends fail (replicas unreachable)
/// until just before `give_up_at`; the last one is answered "not applied", the row reads
/// done, E places a revival entry whose write lands 1.5 s later (late for its position, so
/// it is placed again), and sends the revive about 1.4 s after `give_up_at`.
///
/// Suggested fix: check `give_up_at` again right before the revive (returning
/// `OutcomeUnknown` and leaving the fresh entry, or removing it since nothing was sent), or
/// state the revival's own bound in the README.
#[tokio::test(start_paused = true)]
async fn finding_enqueue_sends_a_revival_after_its_resolve_timeout() {
    let b = MemoryBackend::new();
    let base = queue_config();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        claim: cql_lease::LeaseConfig {
            request_timeout: Some(Duration::from_secs(3)),
            ..base.claim
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
    let resolve = config.claim.resolve_timeout;
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
