//! Dead-letter operations and revivals that race each other with lost answers or slow
//! rounds: a purge or requeue read-back tells its own write from another caller's (by
//! `requeued_at`, not the attempt alone), one `requeue_dead` call requeues at most once, a
//! late purge round never purges a later dead letter, and an enqueue whose revival is still
//! on its way is not reported as a duplicate. The bakery mode's documented limit (dead-letter
//! operations do not exclude each other) is shown as it stands.

use std::sync::Arc;
use std::time::Duration;

use cql_workqueue::{Enqueued, ItemId, JobState, NewItem, QueueConfig, WorkQueue};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_with};
use integration_tests::tweaked::Tweaked;

use super::plain_items::SlowWrites;
use super::{available_is_findable, bakery_backend, claim_within, discarded_once, key_of, row_of};

/// A dead letter of `name`: an item claimed once (token 1) and discarded.
async fn dead_letter(b: &MemoryBackend, name: &str, config: QueueConfig, item: NewItem) -> ItemId {
    let (id, token) = discarded_once(b, name, config, item).await;
    assert_eq!(token, 1);
    id
}

/// Claims `id` with a fresh handle (which scans from the cursor) and returns its token,
/// after completing the job (`complete`) or discarding it.
async fn run_once(
    b: &MemoryBackend,
    name: &str,
    config: QueueConfig,
    id: &ItemId,
    complete: bool,
) -> i32 {
    let w = queue_with(b, name, config);
    let job = claim_within(&w, "w", 3).await.expect("the requeued job");
    assert_eq!(job.id(), id);
    let token = job.attempt();
    if complete {
        job.complete().await.expect("complete");
    } else {
        job.discard("poison again").await.expect("discard");
    }
    token
}

/// SAFETY / API (LWT mode, dead letters): `purge_dead` never answers `Ok(true)` ("purged for
/// good") for a dead letter it never purged, which another caller requeued and a worker then
/// ran to completion. The purge read-back accepts a done row with the origin read and an
/// attempt *at least* the one read, to survive a seal (which raises a done row's attempt and
/// keeps its origin). A requeue keeps the origin too, and the requeued job's claim raises
/// the attempt, so its completion reads like "purged, then sealed" but for `requeued_at`,
/// which a seal keeps and a requeue sets: the read-back requires it unchanged. An operator
/// (or a tool recording what was purged) would otherwise be told the poisoned job was
/// deleted unrun, while it ran once more.
///
/// Interleaving: an item is claimed (token 1) and discarded. Then:
/// 1. P calls `purge_dead`: reads the row (discarded, attempt 1, origin O) and sends the
///    purge, which never reaches a replica; its answer is lost 250 ms later;
/// 2. meanwhile R calls `requeue_dead`: applied (available, `requeued_at` 1); worker W
///    claims it (token 2) and completes it: done, attempt 2, origin O;
/// 3. P reads the row back: done, origin O, attempt 2 >= 1, but `requeued_at` moved: not
///    its purge, so not `Ok(true)`.
#[tokio::test(start_paused = true)]
async fn purge_read_back_does_not_take_a_requeued_and_completed_job_for_its_purge() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "purge-vs-requeue";
    let id = dead_letter(&b, name, config, NewItem::text("x")).await;
    let lost = Tweaked {
        // Within the request timeout (1 s here), so the answer is "unknown", not cut.
        purges_lost_after: Some(Duration::from_millis(250)),
        ..Tweaked::over(&b)
    };
    let p = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let r = queue_with(&b, name, config);
    let (purged, token) = tokio::join!(p.purge_dead(&id), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(r.requeue_dead(&id).await.expect("requeue"), "requeued");
        run_once(&b, name, config, &id, true).await
    });
    let row = row_of(&b, &key_of(name, &id)).await;
    assert_eq!((token, row.state, row.attempt), (2, JobState::Done, 2));
    assert!(
        !matches!(purged, Ok(true)),
        "purge_dead answered {purged:?} (purged), but its purge never reached a replica: the \
         dead letter was requeued and ran (token {token}) to completion; the read-back took \
         that completion (done, same origin, attempt {} >= 1) for its purge and a seal",
        row.attempt
    );
}

/// SAFETY (LWT mode, dead letters): one `requeue_dead` call requeues a dead letter at most
/// once, so the job runs no more often than anybody asked. A requeue settled as "not
/// applied" re-reads the row and requeues again only if it is still discarded with a higher
/// attempt *and the same `requeued_at`* as read (a seal changes only the attempt; a claim
/// after a requeue moves `requeued_at`). Its own requeue may have applied (answer lost), the
/// job run and died again, and been requeued by someone else and died again: the read-back
/// then sees another requeue's `requeued_at`, and that is no seal.
///
/// Interleaving (max_attempts 3): an item is claimed (token 1) and discarded. Then:
/// 1. R calls `requeue_dead`: reads discarded at attempt 1, its requeue applies
///    (`requeued_at` 1); its answer is lost 250 ms later;
/// 2. meanwhile W claims the item (token 2) and discards it; R2 calls `requeue_dead`:
///    applied (`requeued_at` 2); W claims it (token 3) and discards it;
/// 3. R reads the row back: discarded, attempt 3, `requeued_at` 2 != 1: not a seal, so R
///    does not requeue again, and the dead letter stays discarded (taking the attempt alone
///    for a seal would make it available a third time).
#[tokio::test(start_paused = true)]
async fn requeue_dead_with_a_lost_answer_requeues_only_once() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "requeue-twice";
    let id = dead_letter(&b, name, config, NewItem::text("x")).await;
    let lost = Tweaked {
        first_requeue_answer_lost_after: Some(Duration::from_millis(250)),
        ..Tweaked::over(&b)
    };
    let r = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let r2 = queue_with(&b, name, config);
    let (outcome, tokens) = tokio::join!(r.requeue_dead(&id), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let first = run_once(&b, name, config, &id, false).await;
        assert!(r2.requeue_dead(&id).await.expect("requeue"), "requeued");
        let second = run_once(&b, name, config, &id, false).await;
        (first, second)
    });
    assert_eq!(tokens, (2, 3));
    let row = row_of(&b, &key_of(name, &id)).await;
    assert_eq!(
        row.state,
        JobState::Discarded,
        "two requeues (R's, applied with its answer lost, and R2's) each ran the job once, \
         which died each time; R's call ({outcome:?}) then requeued it a third time (row: \
         attempt {}, requeued_at {})",
        row.attempt,
        row.requeued_at
    );
}

/// A documented limit (README, bakery mode: "Dead-letter operations do not exclude each
/// other"); this test shows the limit as the docs state it, and fails if it changes.
///
/// DOCS / API (bakery mode, dead letters): a `requeue_dead` and a `purge_dead` of the same
/// dead letter both answer `Ok(true)`: one caller is told the job was requeued, the other
/// that it was deleted for good, and the row ends as whichever write had the later client
/// timestamp (here the requeue's: the job runs although the purge said it was deleted; the
/// other way round, a job reported requeued never runs, its run entry dropped as a done
/// row's). The bakery mode's requeue and purge are a read then an unconditional plain
/// write, so neither can refuse the other. In the LWT mode exactly one applies (both are
/// `IF state = 'discarded'`).
///
/// Interleaving: an item is claimed (token 1) and discarded. Then:
/// 1. P calls `purge_dead`: reads the row (discarded), its row write (done) is slow;
/// 2. R calls `requeue_dead`: reads the row (still discarded), writes it available, and
///    answers `Ok(true)`;
/// 3. P's write lands (an older timestamp: it loses) and P answers `Ok(true)`; a worker
///    then claims the "purged" job.
#[tokio::test(start_paused = true)]
async fn bakery_requeue_and_purge_of_one_dead_letter_may_both_succeed_documented() {
    let (b, config) = bakery_backend();
    let name = "bakery-requeue-purge";
    let id = dead_letter(&b, name, config, NewItem::text("x")).await;
    let slow = Tweaked {
        wrap_items: Some(Box::new(|inner| {
            Arc::new(SlowWrites {
                inner,
                delay: Duration::from_millis(100),
            })
        })),
        ..Tweaked::over(&b)
    };
    let p = WorkQueue::new(Arc::new(slow), name, config).expect("queue");
    let r = queue_with(&b, name, config);
    let (purged, requeued) = tokio::join!(p.purge_dead(&id), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        r.requeue_dead(&id).await
    });
    let ran = claim_within(&queue_with(&b, name, config), "w", 10)
        .await
        .map(|j| j.attempt());
    // The limit as documented: both answer "done", and the later write (the requeue's) won.
    assert!(
        matches!(purged, Ok(true)) && matches!(requeued, Ok(true)),
        "purge_dead answered {purged:?} and requeue_dead {requeued:?}: the README's bakery \
         limit no longer holds (update it)"
    );
    assert_eq!(
        ran,
        Some(2),
        "the requeue's write won, so the job runs again"
    );
}

/// SAFETY (LWT mode, unique keys): an enqueue whose own first revival (its answer lost) is
/// still on its way is not reported as `Duplicate { state: Done }` with its entry removed;
/// whatever it answers, if that revival applies once the done marker expires, the new job
/// has an index entry and runs. Once any revive of the call had a lost answer, a refusal is
/// not final (as `settle` treats "not applied after an earlier lost answer" as unknown): the
/// enqueue keeps its entry and goes on until `give_up_at`, then returns `OutcomeUnknown`
/// leaving the entry, which index upkeep keeps for the window and then seals (raising the
/// attempt fences the late revive). A refusal only means the condition failed *then*: the
/// done marker had not expired yet. The earlier revive's
/// Paxos round, still retrying at its coordinator after the client's request timeout, reads
/// the condition afresh and finds the marker gone. The race sits at the end of the done
/// window, where a periodic unique job ("once per `done_retention`") enqueues.
///
/// Interleaving (done_retention 1 s): the key's first job completes at T (done marker
/// until T + 1 s). At T + 0.7 s E enqueues the key again:
/// 1. `IF NOT EXISTS` refused; the row reads done (attempt 1, origin O); E places its entry
///    (attempt 1) and sends `revive(1, O)`: answered "unknown", its round still retrying;
/// 2. 50 ms later E sends again: refused, the row reads done (attempt 1, O); the revive
///    again: refused (the marker still stands); E reads done, O, attempt 1: not its own,
///    not sealed, but its first revive is unsettled, so E keeps its entry;
/// 3. at T + 1.3 s the first revive's round reads the condition: the marker expired,
///    attempt 1, origin O: applied. The row is available (E's payload), and findable.
#[tokio::test(start_paused = true)]
async fn no_duplicate_reported_while_the_enqueues_own_lost_revival_is_on_its_way() {
    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "lost-revival-duplicate";
    let worker = queue_with(&b, name, config);
    worker
        .enqueue_item(NewItem::text("one").unique("k"))
        .await
        .expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.complete().await.expect("complete");
    tokio::time::sleep(Duration::from_millis(700)).await;
    let late = Tweaked {
        first_revive_late: Some(Duration::from_millis(600)),
        ..Tweaked::over(&b)
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let outcome = e.enqueue_item(NewItem::text("two").unique("k")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let key = key_of(name, &ItemId::unique("k"));
    let row = row_of(&b, &key).await;
    assert!(
        !matches!(outcome, Ok(Enqueued::Duplicate { .. })) || row.state != JobState::Available,
        "the enqueue answered {outcome:?}, yet its own revival applied afterwards: the row is \
         {:?} with payload {:?}",
        row.state,
        row.payload_text()
    );
    // And the item it made has no entry: no claim ever finds it.
    let scanner = queue_with(&b, name, config);
    available_is_findable(&scanner, &key).await;
}

/// A requeue overtaken by another requeue and a new death is not repeated (the retry meant
/// for a seal, reached without a lost answer): R's requeue is slow, and meanwhile R2
/// requeues the dead letter and it dies again. R's requeue is refused (the attempt moved on)
/// and the row reads discarded at a higher attempt, as after a seal; but its `requeued_at`
/// moved too, so this is a new dead letter, and R answers `false` instead of requeueing it
/// once more.
#[tokio::test(start_paused = true)]
async fn requeue_overtaken_by_another_requeue_and_a_new_death_is_not_repeated() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "requeue-overtaken";
    let id = dead_letter(&b, name, config, NewItem::text("x")).await;
    let slow = Tweaked {
        slow_requeue: Some(Duration::from_millis(200)),
        ..Tweaked::over(&b)
    };
    let r = WorkQueue::new(Arc::new(slow), name, config).expect("queue");
    let r2 = queue_with(&b, name, config);
    let (outcome, token) = tokio::join!(r.requeue_dead(&id), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(r2.requeue_dead(&id).await.expect("requeue"), "requeued");
        run_once(&b, name, config, &id, false).await
    });
    assert_eq!(token, 2);
    assert!(matches!(outcome, Ok(false)), "R answered {outcome:?}");
    let row = row_of(&b, &key_of(name, &id)).await;
    assert_eq!((row.state, row.attempt), (JobState::Discarded, 2));
}

/// A purge whose Paxos round outlives its caller (answered "unknown", still retried by its
/// coordinator) must not purge a *later* dead letter of the same item: meanwhile the dead
/// letter it read was requeued, ran, and died again. The purge is conditioned on the
/// attempt number it read, as a requeue is.
#[tokio::test(start_paused = true)]
async fn late_purge_round_does_not_purge_a_later_dead_letter() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "late-purge";
    let id = dead_letter(&b, name, config, NewItem::text("x")).await;
    let late = Tweaked {
        late_purges: Some(Duration::from_secs(3)),
        ..Tweaked::over(&b)
    };
    let p = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let r = queue_with(&b, name, config);
    let (purged, token) = tokio::join!(p.purge_dead(&id), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(r.requeue_dead(&id).await.expect("requeue"), "requeued");
        run_once(&b, name, config, &id, false).await
    });
    assert_eq!(token, 2);
    assert!(
        !matches!(purged, Ok(true)),
        "purge_dead answered {purged:?}"
    );
    // Every late round has landed by now.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let row = row_of(&b, &key_of(name, &id)).await;
    assert_eq!(
        (row.state, row.attempt),
        (JobState::Discarded, 2),
        "the second dead letter was purged by the first one's late round"
    );
    let dead = queue_with(&b, name, config)
        .dead_letters()
        .await
        .expect("list");
    assert_eq!(dead.len(), 1, "{dead:?}");
}
