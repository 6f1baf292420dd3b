//! Review 5 of the work queue: the fixes of review 4 (the row sealed before index upkeep
//! deletes an item's last entry, `QueueStore::seal`; the fleet clock and `copy_back`). Each
//! test was a finding that failed on the code it was written against, for the reason in its
//! doc comment, and now guards the fix: a seal raises the row's attempt number (so a second
//! seal fences too, the origin stays for resend recognition, and dead letters are sealed
//! against a late requeue), an enqueue checks its window again after every pause, and only
//! a unique key's done row keeps a recent run entry. Tests whose premise the fix removed
//! (an enqueue told Ok after its window) accept the fixed outcome and check the rest.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::{CasOutcome, StoreError};
use cql_workqueue::bakery::{BakeryParts, PlainItemStore};
use cql_workqueue::{
    ClaimOutcome, IndexEntry, ItemClaim, ItemId, ItemKey, JobState, NewRow, QueueConfig,
    QueueStore, Reschedule, StoredItem, WorkQueue,
};
use integration_tests::backend::MemoryBackend;
use integration_tests::conformance::queue::{queue_config, queue_store, queue_with};

type WrapItems = Box<dyn Fn(Arc<dyn PlainItemStore>) -> Arc<dyn PlainItemStore> + Send + Sync>;

/// A process's view of the store with one quirk, everything else passing straight through:
/// - `late_revive`: its first revive LWT answers "unknown" at once and is applied that much
///   later (a Paxos proposal accepted but committed only by a later round), its later ones
///   fail before they are sent (the partition's replicas unreachable from it);
/// - `late_enqueue`, `late_requeue`: the same for the enqueue and requeue LWTs;
/// - `lost_enqueue_answer`, `fail_deletes`: see the fields;
/// - `wrap_items` (bakery mode): the plain item rows seen through a wrapper.
#[derive(Default)]
struct Tweaked {
    inner: Option<Arc<dyn QueueStore>>,
    late_revive: Option<Duration>,
    revives: AtomicUsize,
    late_enqueue: Option<Duration>,
    enqueues: AtomicUsize,
    wrap_items: Option<WrapItems>,
    /// Like `late_revive`, for the dead-letter requeue LWT.
    late_requeue: Option<Duration>,
    requeues: AtomicUsize,
    /// Its first enqueue LWT applies, and its answer is lost.
    lost_enqueue_answer: bool,
    /// Its index deletes fail (the index replicas unreachable from it).
    fail_deletes: bool,
    /// Its first requeue LWT arrives just after index upkeep sealed the dead letter.
    seal_before_requeue: bool,
}

impl Tweaked {
    fn inner(&self) -> &Arc<dyn QueueStore> {
        self.inner.as_ref().expect("inner store")
    }
}

/// Plain item rows whose first write is lost before it reaches any replica (answered
/// "unknown"); later writes pass through.
struct LostFirstWrite {
    inner: Arc<dyn PlainItemStore>,
    writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for LostFirstWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(StoreError::Unknown("write timed out".into()));
        }
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose first write applies and its answer is lost; later writes pass
/// through.
struct AppliedAnswerLost {
    inner: Arc<dyn PlainItemStore>,
    writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for AppliedAnswerLost {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        let first = self.writes.fetch_add(1, Ordering::SeqCst) == 0;
        self.inner.write_item(item, ts).await?;
        if first {
            return Err(StoreError::Unknown("answer lost".into()));
        }
        Ok(())
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose reads, once `armed`, answer "no row" `delay` after the replicas
/// were read (an answer slow on its way back): the process acts on a read that was true
/// when it was served.
struct SlowMiss {
    inner: Arc<dyn PlainItemStore>,
    armed: Arc<AtomicBool>,
    missed: Arc<AtomicBool>,
    delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowMiss {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let read = self.inner.read_item(key).await?;
        if read.is_none() && self.armed.load(Ordering::SeqCst) {
            self.missed.store(true, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
        }
        Ok(read)
    }
}

#[async_trait]
impl QueueStore for Tweaked {
    fn bakery_parts(&self) -> Option<BakeryParts> {
        let parts = self.inner().bakery_parts()?;
        Some(match &self.wrap_items {
            None => parts,
            Some(wrap) => BakeryParts {
                items: wrap(parts.items),
                cells: parts.cells,
            },
        })
    }
    async fn scan_index(
        &self,
        q: &str,
        b: i64,
        after: &str,
        before: &str,
        limit: u32,
    ) -> Result<Vec<IndexEntry>, StoreError> {
        self.inner().scan_index(q, b, after, before, limit).await
    }
    async fn claim(&self, claim: ItemClaim<'_>) -> Result<ClaimOutcome, StoreError> {
        self.inner().claim(claim).await
    }
    async fn enqueue(&self, row: NewRow<'_>) -> Result<CasOutcome, StoreError> {
        if self.lost_enqueue_answer && self.enqueues.fetch_add(1, Ordering::SeqCst) == 0 {
            self.inner().enqueue(row).await?;
            return Err(StoreError::Unknown("answer lost".into()));
        }
        let Some(delay) = self.late_enqueue else {
            return self.inner().enqueue(row).await;
        };
        if self.enqueues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let inner = Arc::clone(self.inner());
        let (key, payload, origin) = (row.key.clone(), row.payload.to_vec(), row.origin.to_owned());
        let run_at = row.run_at;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let row = NewRow {
                key: &key,
                payload: &payload,
                run_at,
                origin: &origin,
            };
            let _ = inner.enqueue(row).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn revive(&self, row: NewRow<'_>, a: i32, o: &str) -> Result<CasOutcome, StoreError> {
        let Some(delay) = self.late_revive else {
            return self.inner().revive(row, a, o).await;
        };
        if self.revives.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let inner = Arc::clone(self.inner());
        let (key, payload, origin) = (row.key.clone(), row.payload.to_vec(), row.origin.to_owned());
        let (run_at, seen_origin) = (row.run_at, o.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let row = NewRow {
                key: &key,
                payload: &payload,
                run_at,
                origin: &origin,
            };
            let _ = inner.revive(row, a, &seen_origin).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn heartbeat(&self, k: &ItemKey, c: &str, t: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().heartbeat(k, c, t).await
    }
    async fn complete(&self, k: &ItemKey, c: &str, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().complete(k, c, r).await
    }
    async fn reschedule(
        &self,
        k: &ItemKey,
        c: &str,
        to: Reschedule<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().reschedule(k, c, to).await
    }
    async fn unclaim(
        &self,
        k: &ItemKey,
        c: &str,
        s: JobState,
        a: i32,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().unclaim(k, c, s, a).await
    }
    async fn requeue(&self, k: &ItemKey, r: i64, a: i32) -> Result<CasOutcome, StoreError> {
        if self.seal_before_requeue && self.requeues.fetch_add(1, Ordering::SeqCst) == 0 {
            let seen = cql_workqueue::Seal::Discarded { attempt: a };
            self.inner().seal(k, seen).await?;
        }
        let Some(delay) = self.late_requeue else {
            return self.inner().requeue(k, r, a).await;
        };
        if self.requeues.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, key) = (Arc::clone(self.inner()), k.clone());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.requeue(&key, r, a).await;
        });
        Err(StoreError::Unknown("coordinator timed out".into()))
    }
    async fn purge(&self, k: &ItemKey, r: Duration) -> Result<CasOutcome, StoreError> {
        self.inner().purge(k, r).await
    }
    async fn seal(
        &self,
        k: &ItemKey,
        s: cql_workqueue::Seal<'_>,
    ) -> Result<CasOutcome, StoreError> {
        self.inner().seal(k, s).await
    }
    async fn read(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner().read(k).await
    }
    async fn peek(&self, k: &ItemKey) -> Result<Option<StoredItem>, StoreError> {
        self.inner().peek(k).await
    }
    async fn put_entry(&self, q: &str, e: &IndexEntry, ts: i64) -> Result<(), StoreError> {
        self.inner().put_entry(q, e, ts).await
    }
    async fn delete_entry(&self, q: &str, b: i64, s: &str, ts: i64) -> Result<(), StoreError> {
        if self.fail_deletes {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        self.inner().delete_entry(q, b, s, ts).await
    }
    async fn read_cursor(&self, q: &str) -> Result<i64, StoreError> {
        self.inner().read_cursor(q).await
    }
    async fn advance_cursor(&self, q: &str, pos: i64) -> Result<(), StoreError> {
        self.inner().advance_cursor(q, pos).await
    }
    async fn put_bucket(&self, q: &str, b: i64, t: Duration, ts: i64) -> Result<(), StoreError> {
        self.inner().put_bucket(q, b, t, ts).await
    }
    async fn list_buckets(&self, q: &str, a: i64, l: u32) -> Result<Vec<i64>, StoreError> {
        self.inner().list_buckets(q, a, l).await
    }
    async fn put_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner().put_dead(q, id, ts).await
    }
    async fn delete_dead(&self, q: &str, id: &ItemId, ts: i64) -> Result<(), StoreError> {
        self.inner().delete_dead(q, id, ts).await
    }
    async fn list_dead(&self, q: &str, a: &str, l: u32) -> Result<Vec<ItemId>, StoreError> {
        self.inner().list_dead(q, a, l).await
    }
}

/// The queue's `enqueue_window`: how long after its position an entry may still be an
/// enqueue's in progress.
fn enqueue_window(config: &QueueConfig) -> Duration {
    let claim = &config.claim;
    claim.resolve_timeout * 2
        + claim.effective_request_timeout() * 2
        + claim.retry_interval
        + config.cursor_lag()
}

/// Claims with `scanner` every 100 ms until `until` has passed since the call.
async fn scan_for(scanner: &WorkQueue, until: Duration) {
    let start = tokio::time::Instant::now();
    while start.elapsed() < until {
        assert!(scanner.claim("s").await.expect("claim").is_none());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn claim_within(q: &WorkQueue, worker: &str, rounds: usize) -> Option<cql_workqueue::Job> {
    for _ in 0..rounds {
        if let Some(job) = q.claim(worker).await.expect("claim") {
            return Some(job);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// SAFETY (LWT mode, unique keys): sealing a row that is already sealed changes nothing, so
/// it fences off nothing: a revival of a sealed row, conditioned on `origin = SWEPT`, still
/// applies after the sweep of its entry, and leaves a live job that no scan finds.
///
/// `QueueStore::seal(key, Some((attempt, origin)))` sets `origin = SWEPT` "only if it still
/// has that attempt and origin". When the row's origin is already `SWEPT` (a unique key whose
/// earlier entry was swept: an orphan sealed `IF NOT EXISTS`, or a done row sealed once), the
/// update `SET origin = SWEPT IF attempt = a AND origin = SWEPT` applies without changing
/// anything, and a revival `IF state = null AND attempt = a AND origin = SWEPT` sent before it
/// still matches afterwards. Interleaving (resolve 2 s, lag 1 s):
/// 1. an enqueue of key `k` is given up (`OutcomeUnknown`); after `enqueue_window` a scanner
///    seals the absent row (done, attempt 0, origin `SWEPT`) and removes the entry; its late
///    LWT is refused (review 4's fix, working);
/// 2. E enqueues `k` again: places a run entry, sends the revive conditioned on
///    `(0, SWEPT)`, whose answer is lost (accepted, not committed); its resends fail, so it
///    returns `OutcomeUnknown` after `resolve_timeout`, leaving its last entry;
/// 3. a scanner meets that entry older than `enqueue_window` on a row that reads done,
///    "seals" it (`(0, SWEPT)` -> `SWEPT`: applied, a no-op) and removes the entry;
/// 4. the revival is committed: the row is available, with no entry.
///
/// Suggested fix: every seal writes a fresh origin (`SWEPT` plus a unique suffix, recognised
/// by prefix), so a revival conditioned on the row as it was before any seal can never apply.
#[tokio::test(start_paused = true)]
async fn finding_resealing_a_sealed_row_does_not_fence_a_late_revival() {
    use cql_workqueue::{NewItem, QueueError};

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "resealed";
    // Later than the sweep of the last entry the revival's resends place.
    let late_by = enqueue_window(&config) + config.claim.resolve_timeout + Duration::from_secs(3);
    let scanner = queue_with(&b, name, config);
    let id = ItemId::unique("k");
    let key = ItemKey {
        partition: name.to_owned(),
        id: id.clone(),
    };
    // 1. The key's row sealed by an orphan sweep.
    let lost = Tweaked {
        inner: Some(queue_store(&b)),
        late_enqueue: Some(late_by),
        ..Tweaked::default()
    };
    let e1 = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let (outcome, ()) = tokio::join!(
        e1.enqueue_item(NewItem::text("one").unique("k")),
        scan_for(&scanner, late_by + Duration::from_secs(1))
    );
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    let row = queue_store(&b)
        .read(&key)
        .await
        .expect("read")
        .expect("row");
    assert_eq!(
        (row.state, row.origin.as_str()),
        (JobState::Done, cql_workqueue::SWEPT),
        "precondition: the orphan sweep sealed the row"
    );
    // 2.-4. A revival of the sealed row, committed after its entry was swept.
    let late = Tweaked {
        inner: Some(queue_store(&b)),
        late_revive: Some(late_by),
        ..Tweaked::default()
    };
    let e2 = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let (outcome, ()) = tokio::join!(
        e2.enqueue_item(NewItem::text("two").unique("k")),
        scan_for(&scanner, late_by + Duration::from_secs(1))
    );
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    let row = queue_store(&b)
        .read(&key)
        .await
        .expect("read")
        .expect("row");
    if row.state == JobState::Available {
        let found = claim_within(&scanner, "w", 60)
            .await
            .map(|j| j.id().clone());
        assert_eq!(
            found,
            Some(id),
            "the revived item is available but has no index entry: the sweep's seal of a \
             row already sealed changed nothing, so the late revival still applied"
        );
    }
}

/// SAFETY (bakery mode): an enqueue reported `Ok` whose item never runs: the sweep's fence
/// (an unconditional done row, timestamped when it is sent) overwrites the row of an enqueue
/// that wrote it, read it as applied, and returned.
///
/// The bakery fence rests on "a row write landing later is one its enqueuer gave up on, and
/// carries an older timestamp". Neither holds for an enqueuer paused in its retry sleep
/// (GC, VM, an overloaded runtime) for longer than `enqueue_window`: the loop checks
/// `give_up_at` only before sleeping, so on waking it resends; its first send's timestamp
/// is forgotten by then (`kept` < `enqueue_window`), so it writes with a fresh one, and
/// the write is acknowledged. Interleaving:
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
/// With E's clock behind S's (within `max_clock_skew`), step 2's slow answer is not even
/// needed: a resend landing after the fence carries a lower timestamp and loses, yet is
/// acknowledged. Suggested fix: after a bakery-mode write, E reads the row back and treats
/// `SWEPT` as refused; and the fence is timestamped at `entry.pos + enqueue_window` (not at
/// its sender's clock), with an enqueue whose first send is older than its window placing a
/// fresh entry before writing with a fresh timestamp, which then always beats the fence.
#[tokio::test(start_paused = true)]
async fn finding_bakery_fence_overwrites_an_enqueue_reported_ok() {
    use cql_workqueue::ClaimMode;

    let b = MemoryBackend::bakery();
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let name = "fenced-ok";
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    let e_store = Tweaked {
        inner: Some(queue_store(&b)),
        wrap_items: Some(Box::new(move |items| {
            Arc::new(LostFirstWrite {
                inner: items,
                writes: Arc::clone(&counted),
            })
        })),
        ..Tweaked::default()
    };
    let e = WorkQueue::new(Arc::new(e_store), name, config).expect("queue");
    let (armed, missed) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (a, m) = (Arc::clone(&armed), Arc::clone(&missed));
    let s_store = Tweaked {
        inner: Some(queue_store(&b)),
        wrap_items: Some(Box::new(move |items| {
            Arc::new(SlowMiss {
                inner: items,
                armed: Arc::clone(&a),
                missed: Arc::clone(&m),
                delay: Duration::from_millis(500),
            })
        })),
        ..Tweaked::default()
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
    // Fixed: E no longer sends after its window (it checks it again after the pause), so
    // it reports an unknown outcome; told Ok, its item must run.
    let id = match outcome {
        Ok(id) => id,
        Err(cql_workqueue::QueueError::OutcomeUnknown { .. }) => return,
        Err(other) => panic!("{other:?}"),
    };
    let scanner = queue_with(&b, name, config);
    let key = ItemKey {
        partition: name.to_owned(),
        id: id.clone(),
    };
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

/// SAFETY/semantics (LWT mode, unique keys): the seal of a done row takes over its origin,
/// so a resent enqueue no longer recognises the job it created and, once the done marker
/// expired, starts it again: one `enqueue_item` call, two executions. The docs of
/// `NewItem::unique` promise "A resent enqueue (the same call, its first answer lost) is
/// recognised by its origin and never brings a completed job back"; before the seal that
/// held (the row kept the call's origin).
///
/// The enqueue loop checks `give_up_at` only before its retry sleep, so an enqueuer paused
/// in that sleep (GC, VM) resends on waking however late. Interleaving (done_retention 1 s):
/// 1. E enqueues key `k`: its LWT applies, the answer is lost; E sleeps before resending and
///    is paused there;
/// 2. F enqueues `k` too: `Duplicate`, but the removal of its own entry fails (best effort),
///    so `k` has two run entries;
/// 3. a worker claims `k` through one of them and completes it (attempt 1, origin E);
/// 4. after `enqueue_window` a scanner meets the other entry on a done row of a unique key,
///    seals the row (origin -> `SWEPT`) and removes the entry;
/// 5. E wakes after the done marker expired: its resend is refused, its read-back shows
///    origin `SWEPT` (not its own), so it revives the row and returns `New`: the job runs
///    again.
///
/// Suggested fix: keep the enqueue's origin recognisable through a seal (seal into a
/// separate column, e.g. `sealed = true` / a seal counter, leaving `origin` alone, and
/// condition revivals on it), and re-check `give_up_at` after the retry sleep.
#[tokio::test(start_paused = true)]
async fn finding_seal_of_done_row_lets_the_same_enqueue_run_its_job_twice() {
    use cql_workqueue::{Enqueued, NewItem};

    let b = MemoryBackend::new();
    let config = QueueConfig {
        done_retention: Duration::from_secs(1),
        ..queue_config()
    };
    let name = "twice";
    let lost = Tweaked {
        inner: Some(queue_store(&b)),
        lost_enqueue_answer: true,
        ..Tweaked::default()
    };
    let e = WorkQueue::new(Arc::new(lost), name, config).expect("queue");
    let no_deletes = Tweaked {
        inner: Some(queue_store(&b)),
        fail_deletes: true,
        ..Tweaked::default()
    };
    let f = WorkQueue::new(Arc::new(no_deletes), name, config).expect("queue");
    let worker = queue_with(&b, name, config);
    let key = ItemKey {
        partition: name.to_owned(),
        id: ItemId::unique("k"),
    };
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
    // Fixed: E checks its window again after the pause (an unknown outcome), and a seal
    // keeps the row's origin, so a resend would still know its row.
    let outcome = enqueue.await;
    let again = claim_within(&worker, "w", 30).await;
    assert!(
        again.is_none(),
        "one enqueue call ({outcome:?}) ran its job a second time (payload {:?}): its resend \
         no longer recognised its row, whose origin the sweep's seal took over",
        again.as_ref().map(|j| j.payload().to_owned())
    );
}

/// LIVENESS / stats (no fault, correct clocks): an item that got a copy (`copy_back`) and
/// ran through it leaves its original entry, and that entry is kept for the whole
/// `enqueue_window` after its position because its row reads done (`due` keeps every recent
/// run entry of a done row, unique key or not, as a possible revival, though only unique keys
/// are ever revived). Until then `stats()` counts the completed item as available (its
/// oldest available age growing), and the cursor, which stops at the first live entry, is
/// held at the original, so every rescan from the cursor walks all entries (tombstones, on
/// a real cluster) written since. The window was enlarged by review 4's fix (default about
/// 30 s), and copies are new with it. Copies are made, by design, for every immediate item
/// enqueued after the fleet was idle for `2 x cursor_lag + 2 x cursor_refresh` (README,
/// Limits), or by an enqueuer whose clock is ahead of the fleet clock by as much.
/// Interleaving: a worker scans once (fleet clock noted), then nobody scans for a few
/// seconds; E enqueues one item, which gets a copy next to the stale fleet clock and keeps
/// its original; the worker claims it through the copy and completes it; the worker keeps
/// scanning for 5 s (several rescans): the queue holds no live item, yet `stats()` counts one
/// available (whichever of the two entries the claim went through, the other is left).
///
/// Suggested fix: keep a done row's recent run entry only for unique keys (`u:`); a plain
/// item's entries go as soon as its row reads done (nothing can revive it), as before.
#[tokio::test(start_paused = true)]
async fn finding_completed_item_with_a_copy_stays_available_in_stats_and_holds_cursor() {
    let b = MemoryBackend::new();
    let base = queue_config();
    // The library's default resolve timeout: `enqueue_window` about 22 s here (32 s with
    // every default).
    let config = QueueConfig {
        claim: cql_lease::LeaseConfig {
            resolve_timeout: Duration::from_secs(10),
            ..base.claim
        },
        ..base
    };
    let name = "copied";
    let worker = queue_with(&b, name, config);
    // The fleet clock and the cursor noted by a scan, then an idle fleet.
    assert!(worker.claim("w").await.expect("claim").is_none());
    tokio::time::sleep(
        2 * config.cursor_lag() + 2 * config.cursor_refresh + Duration::from_secs(2),
    )
    .await;
    let e = queue_with(&b, name, config);
    let id = e.enqueue("x").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    assert_eq!(job.id(), &id);
    job.complete().await.expect("complete");
    let before = worker.stats().await.expect("stats");
    scan_for(&worker, Duration::from_secs(5)).await;
    let stats = worker.stats().await.expect("stats");
    let cursor = queue_store(&b).read_cursor(name).await.expect("cursor");
    assert_eq!(
        (stats.available, stats.running, stats.scheduled),
        (0, 0, 0),
        "5 s after its only item completed, stats still count it ({stats:?}; right after \
         completion: {before:?}); the cursor is held at {cursor}, behind the completed \
         item's original entry"
    );
}

/// SAFETY (bakery mode): a resent enqueue brings its completed item back, and the item
/// runs again. The README: "a resent enqueue never brings a completed item back (it is
/// resent with its first send's timestamp ...)". The first send's timestamp is kept only for
/// `kept = 2 x resolve_timeout + request timeout` after it (`PendingEnqueues`), and the
/// enqueue loop checks `give_up_at` only before its retry sleep, so an enqueuer paused in
/// that sleep for longer than `kept` resends on waking with a fresh timestamp, above the
/// completion's. Interleaving:
/// 1. E enqueues: its row write applies, the answer is lost; E sleeps before resending and
///    is paused there for `enqueue_window` + 1 s (> `kept`);
/// 2. a worker claims the item (token 1) and completes it;
/// 3. E wakes and resends: a fresh timestamp, so its `available`, attempt-0 row overwrites
///    the done row; E sees its entry is old, places a fresh one, and returns `Ok`;
/// 4. a worker claims the item again.
///
/// Suggested fix: never resend with a fresh timestamp (give up instead: re-check
/// `give_up_at` after the sleep and before each send, and keep the first send's timestamp
/// for as long as any send of that enqueue can be made), or read the row back before a
/// resend and stop if it exists.
#[tokio::test(start_paused = true)]
async fn finding_bakery_resend_after_pause_brings_completed_item_back() {
    use cql_workqueue::ClaimMode;

    let b = MemoryBackend::bakery();
    let config = QueueConfig {
        claim_mode: ClaimMode::Bakery,
        ..queue_config()
    };
    let name = "back-again";
    let writes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&writes);
    let e_store = Tweaked {
        inner: Some(queue_store(&b)),
        wrap_items: Some(Box::new(move |items| {
            Arc::new(AppliedAnswerLost {
                inner: items,
                writes: Arc::clone(&counted),
            })
        })),
        ..Tweaked::default()
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

/// SAFETY (LWT mode, dead-letter requeue): review 4's reasoning, applied to enqueues and
/// revivals but not to requeues. `due` removes a requeue's run entry older than
/// `enqueue_window` (and records the item as a dead letter again) once a SERIAL read shows
/// it still discarded; the fix's own comment (`drop_orphan`) says such a read "does not stop
/// an enqueue still on its way (a coordinator retrying its Paxos round ...)". The same holds
/// for a requeue given up as of unknown outcome. Interleaving (resolve 2 s):
/// 1. an item is discarded; `requeue_dead` places its run entry and sends the requeue LWT,
///    whose answer is lost (the round is still retried by its coordinator); its resends fail
///    and its SERIAL read-backs show it discarded, so it returns `OutcomeUnknown` ("the item
///    is then findable either way", say its docs);
/// 2. after `enqueue_window` a scanner meets the run entry; its SERIAL read shows the item
///    discarded, so it records the dead letter and removes the entry;
/// 3. the requeue applies: the item is available with no run entry (and `dead_letters()`
///    deletes its record, as that of an item that is no dead letter).
///
/// Suggested fix: fence it as enqueues are: before removing the entry, take the row over
/// with an LWT the late requeue is conditioned against (e.g. bump a requeue epoch /
/// `requeued_at` condition, or seal the discarded row's origin), and condition `REQUEUE` on
/// that column too.
#[tokio::test(start_paused = true)]
async fn finding_requeue_applied_after_its_entry_was_dead_lettered_is_lost() {
    use cql_workqueue::QueueError;

    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "late-requeue";
    let worker = queue_with(&b, name, config);
    let id = worker.enqueue("x").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.discard("poison").await.expect("discard");
    let late_by = enqueue_window(&config) + Duration::from_secs(2);
    let late = Tweaked {
        inner: Some(queue_store(&b)),
        late_requeue: Some(late_by),
        ..Tweaked::default()
    };
    let e = WorkQueue::new(Arc::new(late), name, config).expect("queue");
    let (outcome, ()) = tokio::join!(
        e.requeue_dead(&id),
        scan_for(&worker, late_by + Duration::from_secs(1))
    );
    assert!(
        matches!(outcome, Err(QueueError::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    let key = ItemKey {
        partition: name.to_owned(),
        id: id.clone(),
    };
    let row = queue_store(&b)
        .read(&key)
        .await
        .expect("read")
        .expect("row");
    let dead = worker.dead_letters().await.expect("dead letters").len();
    if row.state == JobState::Discarded {
        // Fixed: the row was sealed before its entry went, so the late requeue was
        // refused; the item stays a listed dead letter.
        assert_eq!(dead, 1, "a discarded item not listed as a dead letter");
        return;
    }
    let found = claim_within(&worker, "w", 60).await.map(|j| j.id().clone());
    assert_eq!(
        found,
        Some(id),
        "the requeued item ({:?}, {dead} dead-letter records) is findable by no scan: its \
         run entry was removed on a SERIAL read before the late requeue applied",
        row.state
    );
}

/// A dead letter's requeue whose condition (the attempt number it read) is overtaken by
/// index upkeep sealing the row against an older, given-up requeue: the row still reads
/// discarded, so the requeue is tried again with the new number (not reported as "not a
/// dead letter").
#[tokio::test(start_paused = true)]
async fn requeue_overtaken_by_a_seal_is_tried_again() {
    let b = MemoryBackend::new();
    let config = queue_config();
    let name = "requeue-sealed";
    let worker = queue_with(&b, name, config);
    let id = worker.enqueue("poison").await.expect("enqueue");
    let job = claim_within(&worker, "w", 10).await.expect("the job");
    job.discard("poison").await.expect("discard");
    let sealing = Tweaked {
        inner: Some(queue_store(&b)),
        seal_before_requeue: true,
        ..Tweaked::default()
    };
    let e = WorkQueue::new(Arc::new(sealing), name, config).expect("queue");
    assert!(
        e.requeue_dead(&id).await.expect("requeue"),
        "reported not a dead letter"
    );
    let job = claim_within(&worker, "w", 60)
        .await
        .expect("the requeued job");
    // Attempt 1 was discarded, 2 skipped by the seal: the next token is 3.
    assert_eq!((job.id(), job.attempt()), (&id, 3));
    assert!(
        worker
            .dead_letters()
            .await
            .expect("dead letters")
            .is_empty()
    );
}
