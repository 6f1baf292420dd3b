//! The shadow-row lock: the algorithm the fair queue lock replaced, kept as the
//! measured baseline.
//!
//! Per lock name, a `main` row (who owns the lock) and a `shadow` row (where contenders
//! meet). TryLock: read the main row; one cell there means another owner
//! ([`TryLockResult::AnotherThreadIsOwner`]); otherwise write your shadow cell and read the
//! shadow row back; alone there and the main row still empty, write the main row, delete
//! your shadow cell: [`TryLockResult::Success`]. Otherwise delete your shadow cell:
//! [`TryLockResult::ConcurrentAttempt`]. GetLock repeats TryLock, sleeping a random
//! `0..owner_backoff` after AnotherThreadIsOwner and `0..50 ms × attempt` after
//! ConcurrentAttempt, as the original design describes.
//!
//! # Guarantees
//! Mutual exclusion under QUORUM reads and writes: two contenders that each write a shadow
//! cell and then read the row cannot both see themselves alone, and one that sees itself
//! alone after another's completed main write sees that write. Both rest on the shadow
//! cell standing until the main cell has landed: a contender whose shadow cell may have
//! expired by the time its main write is confirmed does not enter (ConcurrentAttempt). Owners keep their main cell
//! alive through the hold machine; a crashed owner is freed by the TTL.
//!
//! # Limits
//! - **No fencing token.**
//! - Unfair and slow under contention: contenders do not agree on an order, they collide
//!   and sleep; the releasing contender tends to win again. That is what the benchmark shows.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::{debug, info};

use super::plain::{Attempt, PlainLock};
use super::transient::{Trouble, until_deadline, within_budget};
use super::{Contenders, Lock, LockError, LockGuard, LockOptions, check_request};
use crate::cells::CellStore;
use crate::cells::rows::{MAIN, SHADOW};

/// The original design's three answers of one TryLock.
#[derive(Debug)]
pub enum TryLockResult {
    /// The lock is ours.
    Success(LockGuard),
    /// Someone owns it.
    AnotherThreadIsOwner,
    /// Someone else was trying at the same time; nobody may have won.
    ConcurrentAttempt,
}

/// How often each answer occurred, for tests and the benchmark.
#[derive(Debug, Default)]
pub struct ShadowStats {
    /// Successful TryLocks.
    pub successes: AtomicU64,
    /// AnotherThreadIsOwner answers.
    pub owned_by_another: AtomicU64,
    /// ConcurrentAttempt answers.
    pub concurrent_attempts: AtomicU64,
}

/// The shadow-row lock.
#[derive(Debug, Clone)]
pub struct ShadowLock {
    base: PlainLock,
    owner_backoff: Duration,
    stats: Arc<ShadowStats>,
}

impl ShadowLock {
    /// A shadow-row lock on `store` with the original design's 1 s back-off after
    /// AnotherThreadIsOwner.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn new(store: Arc<dyn CellStore>, options: LockOptions) -> Result<Self, LockError> {
        Ok(ShadowLock {
            base: PlainLock::new(store, options, Contenders::random())?,
            owner_backoff: Duration::from_secs(1),
            stats: Arc::default(),
        })
    }

    /// Sets the longest sleep after AnotherThreadIsOwner (the original design: 1000 ms).
    pub fn with_owner_backoff(mut self, backoff: Duration) -> Self {
        self.owner_backoff = backoff;
        self
    }

    /// Counts of the answers so far.
    pub fn stats(&self) -> &ShadowStats {
        &self.stats
    }

    /// One TryLock, with its three answers. Unlike [`Lock::try_lock`], a store error is not
    /// tried again here.
    ///
    /// # Errors
    /// Bad input, or [`LockError::Store`] when a request failed beyond the store's own
    /// retries (the contender's cells are then deleted in the background; see
    /// [`Lock::lock`]'s cancel safety for one whose delete cannot be confirmed).
    ///
    /// # Cancel safety
    /// As [`Lock::lock`]: dropping it deletes the contender's cells in the background.
    pub async fn try_lock_once(&self, name: &str) -> Result<TryLockResult, LockError> {
        check_request(name, None)?;
        let read_deadline = || self.base.read_deadline();
        let store_error = |source| LockError::Store {
            name: name.to_owned(),
            source,
        };
        let main = self
            .base
            .durable
            .read_row(name, MAIN, "", 2, read_deadline())
            .await
            .map_err(store_error)?;
        if !main.is_empty() {
            self.stats.owned_by_another.fetch_add(1, Ordering::Relaxed);
            return Ok(TryLockResult::AnotherThreadIsOwner);
        }
        let cells = self.base.contender(name);
        let attempt = Attempt::new(&cells);
        let id = cells.id().to_owned();
        cells.put(SHADOW, &id, 1).await?;
        let shadow = self
            .base
            .durable
            .read_row(name, SHADOW, "", 2, read_deadline())
            .await
            .map_err(store_error)?;
        if shadow.len() == 1 && shadow[0].name == id {
            let main = self
                .base
                .durable
                .read_row(name, MAIN, "", 1, read_deadline())
                .await
                .map_err(store_error)?;
            if main.is_empty() {
                cells.put(MAIN, &id, 1).await?;
                // The shadow cell must have stood until the main cell landed: if it may
                // have expired meanwhile (a slow read, a pause), a newcomer may have found
                // the shadow row empty and the main row not yet written, and entered.
                if cells.still_valid() {
                    cells.remove(SHADOW, &id).await;
                    if cells.keep_fresh().await {
                        attempt.disarm();
                        self.stats.successes.fetch_add(1, Ordering::Relaxed);
                        info!(lock = name, id, "shadow-row lock held");
                        return Ok(TryLockResult::Success(cells.into_guard("shadow")));
                    }
                }
            }
        }
        cells.clear().await;
        attempt.disarm();
        self.stats
            .concurrent_attempts
            .fetch_add(1, Ordering::Relaxed);
        debug!(lock = name, id, "concurrent attempt");
        Ok(TryLockResult::ConcurrentAttempt)
    }
}

#[async_trait]
impl Lock for ShadowLock {
    fn algorithm(&self) -> &'static str {
        "shadow"
    }

    async fn lock_until(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        super::check_request(name, None)?;
        let acquisition = async {
            let mut trouble = Trouble::new(name, self.base.options.timing.retry_period);
            let mut attempt = 1u32;
            loop {
                // A failed TryLock has given its cells back (in the background when it
                // returned early): the next one starts afresh.
                let wake = match self.try_lock_once(name).await {
                    Ok(TryLockResult::Success(guard)) => return Ok(guard),
                    Ok(answer) => {
                        trouble.recovered();
                        let pause = match answer {
                            TryLockResult::AnotherThreadIsOwner => self.owner_backoff,
                            _ => {
                                attempt += 1;
                                Duration::from_millis(50) * (attempt - 1)
                            }
                        };
                        let wake = Instant::now() + pause.mul_f64(rand::random_range(0.0..1.0));
                        if wake >= deadline {
                            return Err(LockError::Timeout {
                                name: name.to_owned(),
                                waited: started.elapsed(),
                            });
                        }
                        wake
                    }
                    // Transient: again after a retry interval, until the deadline cuts it.
                    Err(error) => trouble.failed(error)?,
                };
                tokio::time::sleep_until(wake).await;
            }
        };
        until_deadline(name, started, deadline, acquisition).await
    }

    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        check_request(name, None)?;
        within_budget(name, &self.base.options.timing, || async {
            Ok(match self.try_lock_once(name).await? {
                TryLockResult::Success(guard) => Some(guard),
                _ => None,
            })
        })
        .await
    }
}
