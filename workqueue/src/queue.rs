//! The queue handle: enqueue, claim, list.

use std::sync::Arc;
use std::time::SystemTime;

use cql_lease::{CasOutcome, StoreError, check_name, check_text};
use rand::Rng;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

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

    /// Adds an item, available now. One LWT.
    pub async fn enqueue(&self, payload: &str) -> Result<ItemId, QueueError> {
        self.enqueue_at(payload, None).await
    }

    /// Adds an item that no worker takes before `run_at` (wall clock; `None`: now). One LWT.
    ///
    /// A lost answer is settled by sending the same insert again: it is conditional on the
    /// item's fresh unique key, so it can apply at most once.
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
        let give_up_at = Instant::now() + self.config.claim.resolve_timeout;
        let mut first = true;
        loop {
            match self.store.enqueue(&key, payload, run_at).await {
                Ok(CasOutcome::Applied) => {}
                // Only an earlier send of this very insert can have created the key.
                Ok(CasOutcome::NotApplied) if !first => {}
                Ok(CasOutcome::NotApplied) => {
                    return Err(QueueError::Store {
                        operation: "enqueue",
                        source: StoreError::Rejected(format!("item id {id} already exists")),
                    });
                }
                Err(error @ (StoreError::Unknown(_) | StoreError::Unavailable(_)))
                    if Instant::now() < give_up_at =>
                {
                    warn!(%id, %error, "enqueue failed; sending it again");
                    first = first && matches!(error, StoreError::Unavailable(_));
                    tokio::time::sleep(self.config.claim.retry_interval / 2).await;
                    continue;
                }
                Err(source @ StoreError::Unknown(_)) => {
                    return Err(QueueError::OutcomeUnknown {
                        operation: "enqueue",
                        id,
                        source,
                    });
                }
                Err(source) => {
                    return Err(QueueError::Store {
                        operation: "enqueue",
                        source,
                    });
                }
            }
            info!(queue = %self.name, %id, shard, "enqueued");
            return Ok(id);
        }
    }

    /// One pass over the queue: claims the oldest claimable item for `worker`, or returns
    /// `None` when there is nothing to do now. Costs one read per shard plus one LWT per
    /// item tried (another worker may win an item; the next one is tried).
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
        let sent_at = Instant::now();
        let claimed = match self.store.claim(claim).await {
            Ok(ClaimOutcome::Claimed) => true,
            Ok(ClaimOutcome::Lost) => false,
            Err(error @ StoreError::Unknown(_)) => {
                warn!(id = %item.key.id, %error, "claim answer lost; reading back");
                match self.store.read(&item.key).await {
                    Ok(current) => current.is_some_and(|c| c.claim.as_deref() == Some(&claim_id)),
                    Err(read_error) => {
                        // It may hold: hand the item back if it does, and move on.
                        self.spawn_unclaim(item.key.clone(), claim_id);
                        return Err(QueueError::Store {
                            operation: "claim",
                            source: read_error,
                        });
                    }
                }
            }
            Err(source) => {
                return Err(QueueError::Store {
                    operation: "claim",
                    source,
                });
            }
        };
        debug!(id = %item.key.id, claimed, "claim");
        if !claimed {
            return Ok(None);
        }
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

    /// Hands an item back (conditionally on `claim_id`) in the background.
    pub(crate) fn spawn_unclaim(&self, key: ItemKey, claim_id: String) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = Arc::clone(&self.store);
        runtime.spawn(async move {
            let to = crate::store::Reschedule {
                state: crate::item::JobState::Available,
                run_at: 0,
                error: None,
            };
            let result = store.reschedule(&key, &claim_id, to).await;
            debug!(id = %key.id, ?result, "claim handed back");
        });
    }
}
