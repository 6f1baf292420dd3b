//! The queue handle: enqueue, claim, list.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use cql_lease::hold::{AttemptGuard, HoldTiming, until_resolved};
use cql_lease::{CasOutcome, StoreError, check_name, check_text};
use rand::Rng;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::claim::{ClaimTarget, HandBack};
use crate::clock;
use crate::config::{MAX_PAYLOAD_LEN, QueueConfig};
use crate::error::QueueError;
use crate::item::{ItemId, ItemKey, StoredItem};
use crate::job::Job;
use crate::store::{ClaimOutcome, ItemClaim, QueueStore};
use crate::worker::Worker;

/// A named work queue on a [`QueueStore`]. Cheap to clone.
///
/// Items are kept in `shards` partitions, ordered by enqueue time inside each. A worker reads
/// the head of every partition, merges them oldest first, and claims the first claimable item
/// with one LWT that takes the item's next attempt number: that number is the claim's fencing
/// token, and the claim is a lease that the worker's [`Job`] keeps alive.
///
/// ```
/// use std::sync::Arc;
/// use cql_workqueue::{QueueConfig, WorkQueue, memory::MemoryQueueStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let queue = WorkQueue::new(Arc::new(MemoryQueueStore::new()), "emails", QueueConfig::default())?;
/// queue.enqueue("send welcome to ada@example.com").await?;
/// queue.enqueue("send welcome to bob@example.com").await?;
///
/// let job = queue.claim("worker-1").await?.expect("an item");
/// assert_eq!(job.payload(), "send welcome to ada@example.com");
/// assert_eq!(job.attempt(), 1);
/// job.complete().await?;
/// assert_eq!(queue.items().await?.len(), 1);
/// # Ok::<(), cql_workqueue::QueueError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct WorkQueue {
    pub(crate) store: Arc<dyn QueueStore>,
    name: Arc<str>,
    pub(crate) config: QueueConfig,
}

impl std::fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkQueue")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WorkQueue {
    /// A handle on the queue `name`, after checking the name and settings.
    pub fn new(
        store: Arc<dyn QueueStore>,
        name: &str,
        config: QueueConfig,
    ) -> Result<Self, QueueError> {
        check_name(name)?;
        config.validate()?;
        Ok(WorkQueue {
            store,
            name: name.into(),
            config,
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Adds an item, available now. One LWT. See [`WorkQueue::enqueue_at`].
    ///
    /// # Errors
    /// As [`WorkQueue::enqueue_at`].
    ///
    /// # Cancel safety
    /// As [`WorkQueue::enqueue_at`].
    pub async fn enqueue(&self, payload: &str) -> Result<ItemId, QueueError> {
        self.enqueue_at(payload, None).await
    }

    /// Adds an item that no worker takes before `run_at` (wall clock; `None`: now). One LWT.
    ///
    /// A lost answer is settled by sending the same insert again: it is conditional on the
    /// item's fresh unique key, so it can apply at most once.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] before any store call; [`QueueError::OutcomeUnknown`]
    /// when a lost answer could not be settled within `resolve_timeout`;
    /// [`QueueError::Store`] on a definite failure.
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that matters for a unique insert: if the future is dropped
    /// after the insert was sent, the item exists once or not at all (never twice).
    #[instrument(skip(self, payload), fields(queue = %self.name))]
    pub async fn enqueue_at(
        &self,
        payload: &str,
        run_at: Option<SystemTime>,
    ) -> Result<ItemId, QueueError> {
        check_text("payload", payload, MAX_PAYLOAD_LEN)?;
        let run_at = run_at.map_or_else(clock::now_micros, clock::micros_of);
        let id = ItemId::now();
        let shard = rand::rng().random_range(0..self.config.shards);
        let key = ItemKey {
            partition: self.partition(shard),
            id: id.clone(),
        };
        let timing = HoldTiming::from(&self.config.claim);
        // Once a send may have applied, "already exists" means it did.
        let maybe_sent = AtomicBool::new(false);
        let result = until_resolved(&timing, "enqueue", || async {
            match self.store.enqueue(&key, payload, run_at).await {
                Ok(CasOutcome::Applied) => Ok(Some(true)),
                Ok(CasOutcome::NotApplied) => Ok(Some(maybe_sent.load(Ordering::Relaxed))),
                Err(error) => {
                    if error.is_unknown() {
                        maybe_sent.store(true, Ordering::Relaxed);
                    }
                    Err(error)
                }
            }
        })
        .await;
        match result {
            Ok(true) => {
                info!(queue = %self.name, %id, shard, "enqueued");
                Ok(id)
            }
            Ok(false) => Err(QueueError::Store {
                operation: "enqueue",
                source: StoreError::Rejected(format!("item id {id} already exists")),
            }),
            Err(source @ StoreError::Unknown(_)) => Err(QueueError::OutcomeUnknown {
                operation: "enqueue",
                id,
                source,
            }),
            Err(source) => Err(QueueError::Store {
                operation: "enqueue",
                source,
            }),
        }
    }

    /// One pass over the queue: claims the oldest claimable item for `worker`, or returns
    /// `None` when there is nothing to do now. Costs one read per shard plus one LWT per
    /// item tried (another worker may win an item; the next one is tried).
    ///
    /// A claim answered after its deadline is undone at once and not returned.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] for a bad worker id; [`QueueError::Store`] when a
    /// scan or claim failed definitely; [`QueueError::OutcomeUnknown`] when a lost claim
    /// answer could not be settled (the claim is then undone in the background if it held).
    ///
    /// # Cancel safety
    /// Cancel-safe: if the future is dropped after a claim was sent and before its [`Job`]
    /// is returned, the claim is undone in a spawned task (conditional on its unique id),
    /// restoring the item's state and attempt number, so no attempt is spent.
    #[instrument(skip(self), fields(queue = %self.name))]
    pub async fn claim(&self, worker: &str) -> Result<Option<Job>, QueueError> {
        check_text("worker", worker, cql_lease::MAX_OWNER_LEN)?;
        let now = clock::now_micros();
        let mut candidates: Vec<StoredItem> = Vec::new();
        let start = rand::rng().random_range(0..self.config.shards);
        for i in 0..self.config.shards {
            let shard = (start + i) % self.config.shards;
            candidates.extend(self.claimable_head(&self.partition(shard), now).await?);
        }
        candidates.sort_by(|a, b| a.key.id.cmp(&b.key.id));
        for item in candidates {
            if let Some(job) = self.try_claim(worker, item).await? {
                return Ok(Some(job));
            }
        }
        Ok(None)
    }

    /// Every item in the queue (all shards, oldest first within each shard): for tools and
    /// tests, not for the hot path.
    ///
    /// # Errors
    /// [`QueueError::Store`] when a scan failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn items(&self) -> Result<Vec<StoredItem>, QueueError> {
        let mut all = Vec::new();
        for shard in 0..self.config.shards {
            let partition = self.partition(shard);
            let mut after = String::new();
            loop {
                let page = self.scan(&partition, &after).await?;
                let full = page.len() == self.config.scan_limit as usize;
                if let Some(last) = page.last() {
                    after = last.key.id.as_str().to_owned();
                }
                all.extend(page);
                if !full {
                    break;
                }
            }
        }
        Ok(all)
    }

    /// A worker that claims jobs from this queue as a stream. See [`Worker`].
    pub fn worker(&self, worker: &str) -> Result<Worker, QueueError> {
        Worker::new(self.clone(), worker)
    }

    fn partition(&self, shard: u16) -> String {
        format!("{}/{shard}", self.name)
    }

    async fn scan(&self, partition: &str, after: &str) -> Result<Vec<StoredItem>, QueueError> {
        self.store
            .scan(partition, after, self.config.scan_limit)
            .await
            .map_err(|source| QueueError::Store {
                operation: "scan",
                source,
            })
    }

    /// The first claimable items of one partition, paging past items held by others.
    async fn claimable_head(
        &self,
        partition: &str,
        now: i64,
    ) -> Result<Vec<StoredItem>, QueueError> {
        let mut after = String::new();
        loop {
            let page = self.scan(partition, &after).await?;
            let full = page.len() == self.config.scan_limit as usize;
            if let Some(last) = page.last() {
                after = last.key.id.as_str().to_owned();
            }
            let claimable: Vec<_> = page
                .into_iter()
                .filter(|i| i.claim.is_none() && i.state.is_claimable() && i.run_at <= now)
                .collect();
            if !claimable.is_empty() || !full {
                return Ok(claimable);
            }
        }
    }

    async fn try_claim(&self, worker: &str, item: StoredItem) -> Result<Option<Job>, QueueError> {
        let claim_id = format!("{worker}/{}", uuid::Uuid::new_v4().simple());
        let claim = ItemClaim {
            key: &item.key,
            claim_id: &claim_id,
            seen_attempt: item.attempt,
            ttl: self.config.claim.store_ttl(),
        };
        let timing = HoldTiming::from(&self.config.claim);
        // Armed until the claim is handed over or known not to exist: if this future is
        // dropped in between, the claim is undone (state and attempt number restored).
        let guard = AttemptGuard::new(
            Arc::new(ClaimTarget {
                store: Arc::clone(&self.store),
                key: item.key.clone(),
                claim_id: claim_id.clone(),
                ttl: claim.ttl,
                hand_back: HandBack::Undelivered {
                    state: item.state,
                    attempt: item.attempt,
                },
            }),
            timing,
        );
        let sent_at = Instant::now();
        let claimed = match self.store.claim(claim).await {
            Ok(ClaimOutcome::Claimed) => true,
            Ok(ClaimOutcome::Lost) => false,
            Err(error) if error.is_unknown() => {
                warn!(id = %item.key.id, %error, "claim answer lost; reading back");
                let read_back = until_resolved(&timing, "claim read-back", || async {
                    self.store.read(&item.key).await.map(Some)
                })
                .await;
                match read_back {
                    Ok(current) => current.is_some_and(|c| c.claim.as_deref() == Some(&claim_id)),
                    // It may hold: the armed guard undoes it if it does.
                    Err(source) => {
                        return Err(QueueError::OutcomeUnknown {
                            operation: "claim",
                            id: item.key.id.clone(),
                            source,
                        });
                    }
                }
            }
            Err(source) => {
                guard.disarm();
                return Err(QueueError::Store {
                    operation: "claim",
                    source,
                });
            }
        };
        debug!(id = %item.key.id, claimed, "claim");
        if !claimed {
            guard.disarm();
            return Ok(None);
        }
        if Instant::now() >= sent_at + self.config.claim.validity() {
            // Answered after its deadline: nobody may work on it. The guard undoes it.
            warn!(id = %item.key.id, "claim answered after its deadline; undoing it");
            return Ok(None);
        }
        guard.disarm();
        let job = Job::start(self.clone(), item, claim_id, sent_at);
        if job.attempt() > self.config.max_attempts {
            // Its last worker died mid-attempt: no attempts left.
            let _ = job
                .discard("attempts exhausted: the last worker stopped heartbeating")
                .await;
            return Ok(None);
        }
        Ok(Some(job))
    }
}
