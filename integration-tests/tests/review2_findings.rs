//! Review 2 findings on today's merges (hold machine, bakery claim mode). Each `finding_*`
//! test FAILS on the reviewed code: it shows a guarantee that does not hold. Embedded store,
//! paused tokio time.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::{BakeryParts, PlainItemStore};
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{
    ClaimMode, ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueConfig,
    QueueStore, Reschedule, StoredItem, WorkQueue,
};
use integration_tests::conformance::queue::queue_config;

/// The embedded plain item rows, except that one armed read is executed at once and its
/// answer delivered `delay` later (a QUORUM read whose response is slow on the network: the
/// data is as of when the replicas answered, not as of when the client gets it).
struct SlowAnswers {
    inner: Arc<dyn PlainItemStore>,
    armed: AtomicBool,
    delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowAnswers {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }

    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let answer = self.inner.read_item(key).await;
        if self.armed.swap(false, Ordering::SeqCst) {
            tokio::time::sleep(self.delay).await;
        }
        answer
    }
}

/// A [`MemoryQueueStore`] whose bakery parts read item rows through [`SlowAnswers`].
struct Wrapped {
    inner: Arc<MemoryQueueStore>,
    items: Arc<SlowAnswers>,
}

#[async_trait]
impl QueueStore for Wrapped {
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        self.inner.enqueue(row).await
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        self.inner.revive(row, a, o).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.inner.claim(claim).await
    }
    async fn heartbeat(&self, k: &ItemKey, c: &str, t: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.heartbeat(k, c, t).await
    }
    async fn complete(&self, k: &ItemKey, c: &str, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.complete(k, c, r).await
    }
    async fn reschedule(
        &self,
        k: &ItemKey,
        c: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner.unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        self.inner.requeue(k, r, a).await
    }
    async fn purge(&self, k: &ItemKey, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner.purge(k, r).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner.read(k).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner.peek(k).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner.put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_entry(q, b, s, ts).await
    }
    async fn scan_index(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.inner.scan_index(q, b, after, before, limit).await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.inner.read_cursor(q).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner.advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner.put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.inner.list_buckets(q, a, l).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner.delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.inner.list_dead(q, a, l).await
    }
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner.bakery_parts()?;
        Some(BakeryParts {
            items: Arc::clone(&self.items) as _,
            cells: parts.cells,
        })
    }
}

fn wrapped(delay: Duration) -> Arc<Wrapped> {
    let inner = Arc::new(MemoryQueueStore::new());
    let items = Arc::new(SlowAnswers {
        inner: Arc::clone(inner.plain_items()) as _,
        armed: AtomicBool::new(false),
        delay,
    });
    Arc::new(Wrapped { inner, items })
}

fn bakery_config() -> QueueConfig {
    QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    }
}

/// Safety. An undone bakery claim's give-back (`unclaim` -> `give_back`, the path of a
/// parked job lost at its deadline, of a claim cut before hand-over, and of a claim whose
/// high-water mark went unanswered until its validity ran out) is fenced by nothing but
/// the number row it read first: unlike `finish`, it never checks that its ticket still
/// holds, neither before nor after reading the row. Interleaving:
///
/// 1. A claims the item (number 1, recorded) and undoes it; give_back reads the number row
///    (mark 1, only A live) and the item row (attempt 0, available, payload), whose answer
///    is slow.
/// 2. Meanwhile A's number cell expires (nobody renews an undone claim); B claims (number 2)
///    and completes: row done, attempt 2, payload cleared.
/// 3. A's row answer arrives: attempt 0 < 1, so A writes attempt 1, requeued_at + 1, state
///    available, with the old payload, at a fresh client timestamp above B's: B's completion
///    is overwritten. The row reads `available` with its payload again (a caller polling for
///    `done` never sees it), yet B's finish removed its index entry, so no claimer runs it
///    either: stranded, against "nothing lost (every item keeps an index entry)".
#[tokio::test(start_paused = true)]
async fn finding_give_back_unfenced_by_ticket_validity_resurrects_completed_item() {
    let store = wrapped(Duration::from_secs(5));
    let config = bakery_config();
    let a = WorkQueue::new(Arc::clone(&store) as _, "g", config).expect("queue A");
    let b = WorkQueue::new(Arc::clone(&store) as _, "g", config).expect("queue B");
    let id = a.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "g".into(),
        id,
    };
    // A's claim, made through A's store handle (what `WorkQueue::claim` sends first).
    let outcome = a
        .store()
        .claim(ItemClaim {
            key: &key,
            claim_id: "A/claim-1",
            seen_attempt: 0,
            ttl: Duration::from_secs(2),
        })
        .await
        .expect("claim");
    assert_eq!(outcome, ClaimOutcome::Claimed);
    // A undoes it (never handed out); its read of the row answers late.
    store.items.armed.store(true, Ordering::SeqCst);
    let undo = tokio::spawn({
        let a_store = Arc::clone(a.store());
        let key = key.clone();
        async move {
            a_store
                .unclaim(&key, "A/claim-1", JobState::Available, 0)
                .await
        }
    });
    // A's number expires by its TTL (2 s); B claims and completes.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let job = loop {
        if let Some(job) = b.claim("B").await.expect("claim B") {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(job.token() > cql_lease::FencingToken::new(1), "B's token");
    job.complete().await.expect("B completes");
    let done = b.store().read(&key).await.expect("read").expect("row");
    assert_eq!(done.state, JobState::Done, "B's completion landed");
    // A's give-back ends.
    let undone = undo.await.expect("join");
    let item = b.store().read(&key).await.expect("read").expect("row");
    let again = b.claim("C").await.expect("claim C");
    assert!(
        item.state == JobState::Done && again.is_none(),
        "A's give-back (answer {undone:?}) overwrote B's completion: row state {:?}, attempt {}, \
         requeued_at {}, payload {:?}; claimable again: {:?}",
        item.state,
        item.attempt,
        item.requeued_at,
        String::from_utf8_lossy(&item.payload),
        again.as_ref().map(|j| j.payload().to_owned())
    );
}

/// Doc untrue / liveness (attempt budget). README: "A claim ... whose high-water mark
/// landed without its answer, keeps its number in the mark ... and the attempt is given back
/// (not when another claimer is already drawing)". The give-back decides on one read of the
/// number row right after the mark's write was given up; a mark that lands after that read
/// (a straggler: its answer lost, applied later, the case the README itself names for
/// finishes) is never given back, although nobody else was drawing. Interleaving:
///
/// 1. A's claim draws number 1; every send of its high-water mark loses its answer and lands
///    3 s later; the write is given up at the ticket's validity (1 s).
/// 2. give_back reads the number row: mark 0 (not landed), so nothing is written; the claim
///    is withdrawn and reported lost. Nobody else is drawing.
/// 3. The mark lands: 1. The next claim must take number 2, and counts it as attempt 2 of
///    an item never delivered: with `max_attempts = 1` its first delivery is refused.
#[tokio::test(start_paused = true)]
async fn finding_high_water_mark_landing_after_give_back_spends_an_undelivered_attempt() {
    use cql_lease::cells::memory::CellOp;
    use cql_lease::memory::{Fault, Times};
    let mem = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        max_attempts: 1,
        ..bakery_config()
    };
    let q = WorkQueue::new(Arc::clone(&mem) as _, "h", config).expect("queue");
    let id = q.enqueue("run me once").await.expect("enqueue");
    let key = ItemKey {
        partition: "h".into(),
        id,
    };
    // Row reads a little slow, so the fault can be armed between the number and the mark.
    mem.cells().inject(
        Some(CellOp::ReadRow),
        Fault::Latency(Duration::from_millis(1)),
        Times::Always,
    );
    let base = mem.cells().calls(CellOp::Write);
    let first = tokio::spawn({
        let store = Arc::clone(q.store());
        let key = key.clone();
        async move {
            store
                .claim(ItemClaim {
                    key: &key,
                    claim_id: "w/first-claim",
                    seen_attempt: 0,
                    ttl: Duration::from_secs(2),
                })
                .await
        }
    });
    // Choosing mark and number written: every later write (the mark's sends) lands late.
    while mem.cells().calls(CellOp::Write) < base + 2 {
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    mem.cells()
        .inject_late_apply(Some(CellOp::Write), Duration::from_secs(3), Times::Always);
    let outcome = first.await.expect("join");
    mem.cells().clear_faults();
    assert!(
        matches!(outcome, Ok(ClaimOutcome::Lost) | Err(_)),
        "the first claim should not count: {outcome:?}"
    );
    // The straggling marks land; nobody else ever drew on the item.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let job = q.claim("worker").await.expect("claim");
    let item = q.store().read(&key).await.expect("read").expect("row");
    assert!(
        job.as_ref().is_some_and(|j| j.attempts_used() == 1),
        "never delivered, yet its first delivery is refused or not attempt 1: job attempts {:?}; \
         row {:?} attempt {} requeued_at {} error {:?}",
        job.as_ref().map(|j| j.attempts_used()),
        item.state,
        item.attempt,
        item.requeued_at,
        item.last_error
    );
}

/// Liveness (attempt budget) / minor. `HeldTickets::won` drops every entry whose ticket ran
/// out by the local clock, without giving its attempt back or withdrawing it. An undone
/// claim whose ticket ran out (the parked job lost at its deadline, its heartbeats failing,
/// is undone exactly then) is thus forgotten as soon as any other claim of the process wins
/// a draw in between: its `unclaim` finds nothing (`NotApplied`), the attempt stays spent
/// and the number cells stay until their TTL. Interleaving (store calls of one process):
///
/// 1. Claim X on item 1 (number 1, recorded); its heartbeats fail for the validity.
/// 2. Another claim of the process wins on item 2: `won` retains only valid tickets, X goes.
/// 3. X is undone (never delivered): `unclaim` answers `NotApplied`, nothing given back.
/// 4. Item 1's first delivery is attempt 2: with `max_attempts = 1`, a dead letter.
#[tokio::test(start_paused = true)]
async fn finding_expired_entry_pruned_by_another_claim_makes_unclaim_skip_give_back() {
    let mem = Arc::new(MemoryQueueStore::new());
    let config = QueueConfig {
        max_attempts: 1,
        ..bakery_config()
    };
    let q = WorkQueue::new(Arc::clone(&mem) as _, "p", config).expect("queue");
    let first = q.enqueue("one").await.expect("enqueue");
    let second = q.enqueue("two").await.expect("enqueue");
    let key = |id: ItemId| ItemKey {
        partition: "p".into(),
        id,
    };
    let (k1, k2) = (key(first), key(second));
    let claim = |k: ItemKey, id: &'static str| {
        let store = Arc::clone(q.store());
        async move {
            store
                .claim(ItemClaim {
                    key: &k,
                    claim_id: id,
                    seen_attempt: 0,
                    ttl: Duration::from_secs(2),
                })
                .await
                .expect("claim")
        }
    };
    assert_eq!(claim(k1.clone(), "w/x").await, ClaimOutcome::Claimed);
    // X's validity (1 s) runs out unrenewed; its cells still stand (TTL 2 s).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(claim(k2.clone(), "w/y").await, ClaimOutcome::Claimed);
    let undone = q
        .store()
        .unclaim(&k1, "w/x", JobState::Available, 0)
        .await
        .expect("unclaim");
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Only item 1 is due: item 2 is still claimed by Y (never renewed, it lapses too, so
    // take whatever comes and look for item 1).
    let mut delivered = Vec::new();
    while let Some(job) = q.claim("worker").await.expect("claim") {
        delivered.push((job.id().clone(), job.attempts_used()));
    }
    let item = q.store().read(&k1).await.expect("read").expect("row");
    assert!(
        delivered
            .iter()
            .any(|(id, used)| *id == k1.id && *used == 1),
        "X was undone (unclaim answered {undone:?}) and never delivered, yet item 1 was not \
         delivered as attempt 1: delivered {delivered:?}; row {:?} attempt {} requeued_at {} \
         error {:?}",
        item.state,
        item.attempt,
        item.requeued_at,
        item.last_error
    );
}

/// Doc untrue (minor). README, "Fewer doomed draws": "the claimer's look at a candidate ...
/// treats any live number as a claim ... so it skips that item without drawing". Since
/// a3b36bb the look (`peek`) ignores a live number at or below the row's finished attempt
/// (a leftover whose withdrawal failed), while the draw still steps aside for any live
/// number: such an item is drawn on (choosing mark written, read, deleted) and always
/// stepped aside from, until the leftover's TTL. Interleaving:
///
/// 1. A fails its job (retry after the back-off, 0.5 s); the withdrawal of its number is
///    refused by the store, so the number stays live until its TTL (2 s).
/// 2. After the back-off B claims: the look does not skip the item, B draws, steps aside
///    (writes a choosing mark), and gets nothing.
#[tokio::test(start_paused = true)]
async fn finding_peek_does_not_skip_finished_leftover_number_but_draw_steps_aside() {
    use cql_lease::cells::memory::CellOp;
    use cql_lease::memory::{Fault, Times};
    let mem = Arc::new(MemoryQueueStore::new());
    let q = WorkQueue::new(Arc::clone(&mem) as _, "d", bakery_config()).expect("queue");
    q.enqueue("work").await.expect("enqueue");
    let job = q.claim("A").await.expect("claim").expect("a job for A");
    // A's number cannot be deleted: its withdrawal fails, the cell lives until its TTL.
    mem.cells()
        .inject(Some(CellOp::Delete), Fault::Unavailable, Times::Always);
    let state = job.fail("try again").await.expect("fail");
    assert_eq!(state, JobState::Retryable);
    mem.cells().clear_faults();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let writes = mem.cells().calls(CellOp::Write);
    let b = q.claim("B").await.expect("claim B");
    let drawn = mem.cells().calls(CellOp::Write) - writes;
    assert!(
        b.is_some() || drawn == 0,
        "the item with a live (leftover) number was not skipped: B drew on it ({drawn} cell \
         writes) and got nothing"
    );
}
