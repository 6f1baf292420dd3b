//! Distributed locks behind one object-safe API: the classic designs for Cassandra, by name.
//!
//! | algorithm | module | store | fencing token |
//! |---|---|---|---|
//! | Lamport's bakery (as the Cassandra wiki and libQtCassandra give it) | [`bakery`] | plain cells | **no** |
//! | fair queue lock | [`fair_lock`] | plain cells | **no** |
//! | shadow-row lock (the baseline) | [`shadow`] | plain cells | **no** |
//! | lease lock (the LWT lease) | [`lease_lock`] | one LWT per acquisition | **yes** |
//!
//! Every lock is a lease: its cells carry a TTL, a [`LockGuard`] keeps them alive through the
//! shared [`hold`](crate::hold) machine (rewriting them every `renew_period`, TTL/2 or
//! less), tells the holder to stop (the `held` watch turns `false`, then the
//! cancellation token fires) before the TTL can run out for anyone else, and releases on
//! drop. A rewrite answered after the deadline counts for nothing (a waiter starts again).
//! The store forgets a crashed holder's or waiter's cells within `ttl + max_clock_skew`;
//! the others notice at their next poll or back-off.
//!
//! Only the lease lock gives a fencing token. The plain-cell algorithms cannot: their
//! numbers (bakery tickets, queue times) restart or depend on wall clocks, so a holder that
//! stalled past its TTL cannot be fenced off by a resource; use them only where the holder's
//! own deadline (the `held` watch) is enough.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use cql_lease::cells::memory::MemoryCellStore;
//! use cql_lease::lock::{FairLock, Lock, LockOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
//! let store = Arc::new(MemoryCellStore::new());
//! let lock: Arc<dyn Lock> = Arc::new(FairLock::new(store, LockOptions::default())?);
//! let guard = lock.lock("users::snap", Some(Duration::from_secs(5))).await?;
//! assert!(guard.is_held() && guard.token().is_none());
//! assert!(lock.try_lock("users::snap").await?.is_none()); // held: answered at once
//! guard.release().await?;
//! # Ok::<(), cql_lease::lock::LockError>(())
//! # }).unwrap();
//! ```

pub mod bakery;
mod contender;
mod fair_claim;
pub mod fair_lock;
mod fair_pace;
mod guard;
pub mod lease_lock;
mod numbering;
mod plain;
pub mod shadow;
pub mod ticket;
mod transient;

use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;

pub use bakery::BakeryLock;
pub use contender::{ContenderId, Contenders};
pub use fair_lock::FairLock;
pub use guard::LockGuard;
pub use lease_lock::LeaseLock;
pub use shadow::{ShadowLock, ShadowStats, TryLockResult};

use crate::config::{MAX_DURATION, MAX_TTL_SECS, Timing};
use crate::error::{InvalidArgument, LeaseError, StoreError};
use crate::hold::HoldError;

/// Timing of every lock: the TTL on its cells, renewal, polling, assumed clock skew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockOptions {
    /// TTL, renewal interval (at most half the TTL is wise), retry pause, clock skew and
    /// resolve timeout, with [`Timing`]'s meaning and validation.
    pub timing: Timing,
    /// How often a waiting contender polls the cells it waits on.
    pub poll_interval: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            timing: Timing::default(),
            poll_interval: Duration::from_millis(20),
        }
    }
}

impl LockOptions {
    /// Checks the timing ([`Timing::validate`]) and `0 < poll_interval <= 630720000 s`
    /// ([`MAX_DURATION`], the bound of every timing field), so that a poll deadline never
    /// overflows.
    ///
    /// # Errors
    /// [`InvalidArgument::Timing`], naming the field.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.timing.validate()?;
        if self.poll_interval.is_zero() {
            return Err(InvalidArgument::Timing(
                "poll_interval must be greater than zero".into(),
            ));
        }
        if self.poll_interval > MAX_DURATION {
            return Err(InvalidArgument::Timing(format!(
                "poll_interval {:?} must be at most {MAX_TTL_SECS} s",
                self.poll_interval
            )));
        }
        Ok(())
    }
}

/// Why a lock operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LockError {
    /// Bad input; nothing was written.
    #[error(transparent)]
    InvalidArgument(#[from] InvalidArgument),
    /// `lock` gave up waiting at its timeout (the lock was held, or the store did not
    /// answer in time); nothing is held: the contender's cells were deleted, or are being
    /// deleted in the background if the store does not answer. A cell whose delete cannot be
    /// confirmed (the store stays unreachable, or a write still in flight lands after the
    /// delete was given up) expires within its TTL (`ttl + max_clock_skew`); until then it
    /// may keep others waiting.
    #[error("timed out after {waited:?} waiting for lock {name:?}")]
    Timeout {
        /// The lock name.
        name: String,
        /// How long it waited.
        waited: Duration,
    },
    /// The store refused a request ([`StoreError::Rejected`]: syntax, schema, permissions),
    /// or, from helpers outside [`Lock`] (e.g. [`ticket::TicketBakery`]), failed beyond its
    /// retries. Nothing is held: the contender's cells are deleted (in the background if the
    /// store does not answer; any whose delete cannot be confirmed expire within their TTL,
    /// `ttl + max_clock_skew`).
    #[error("store error on lock {name:?}: {source}")]
    Store {
        /// The lock name.
        name: String,
        /// The store's error.
        source: StoreError,
    },
    /// The contender's own cell was written and acknowledged but reads back absent: a newer
    /// write or delete of the same cell hides it (a contender id shared with another
    /// process whose clock is ahead). Entering would break mutual exclusion, so nothing was
    /// entered and the contender's cells were removed. Ids from [`Contenders`] carry a random
    /// incarnation, which makes this a misuse or a bug, not a race.
    #[error("lock {name:?}: contender {id}'s own cell is hidden by a newer write or delete")]
    Shadowed {
        /// The lock name.
        name: String,
        /// The contender id whose cell is hidden.
        id: String,
    },
    /// [`Lock::try_lock`] met only transient store errors (request timeouts, unavailable
    /// replicas, unknown outcomes) until its budget ran out, so it cannot say whether the
    /// lock is free. Nothing is held: what its attempts wrote is deleted, in the background
    /// if the store still does not answer; what cannot be confirmed deleted (the store stays
    /// unreachable, or a write still in flight lands after its delete was given up) expires
    /// within its TTL (`ttl + max_clock_skew`), and may keep others waiting until then. A
    /// lease claim that may have applied is also released on sight by its client. Trying
    /// again later is safe.
    #[error("lock {name:?}: store unreachable for {waited:?}, nothing is held: {source}")]
    Unreachable {
        /// The lock name.
        name: String,
        /// How long `try_lock` kept trying.
        waited: Duration,
        /// The last store error.
        source: StoreError,
    },
    /// The lease lock's lease layer refused (see [`LeaseError::is_refusal`]): a definite
    /// store refusal of the claim ([`LeaseError::Store`] with [`StoreError::Rejected`]) or of
    /// the read-back settling a claim whose answer was lost ([`LeaseError::OutcomeUnknown`]
    /// with [`StoreError::Rejected`]: that claim may have been written; it is released in the
    /// background and on sight, and its TTL bounds it), or bad input.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// Releasing failed, or the lock was already lost.
    #[error("releasing lock {name:?}: {source}")]
    Release {
        /// The lock name.
        name: String,
        /// What the hold machine said.
        source: HoldError,
    },
}

/// A distributed lock: one contender per call. Object safe: use `Arc<dyn Lock>`.
#[async_trait]
pub trait Lock: Send + Sync {
    /// The algorithm's name, for reports.
    fn algorithm(&self) -> &'static str;

    /// Waits until the lock is held (the original design's GetLock), as
    /// [`LeaseClient::acquire`](crate::LeaseClient::acquire) waits for a lease: `None` waits
    /// until it is held (for at most [`MAX_LOCK_TIMEOUT`], a year), `Some(timeout)` at most
    /// `timeout` (at most [`MAX_LOCK_TIMEOUT`]). `Some(Duration::ZERO)` is one attempt, as
    /// Curator's `acquire(0, unit)` and Java's `tryLock(0, unit)`: [`Lock::try_lock`],
    /// answering a held lock with [`LockError::Timeout`]. That one attempt is not instant:
    /// it waits for the store's answer, and rides through transient errors within
    /// [`Lock::try_lock`]'s budget, so it may take longer than a short nonzero timeout.
    ///
    /// # Errors
    /// - [`LockError::InvalidArgument`] for a bad name or a timeout over
    ///   [`MAX_LOCK_TIMEOUT`] (nothing written);
    /// - [`LockError::Timeout`] when `timeout` passes, whatever the store was doing (with
    ///   `Some(Duration::ZERO)`: the lock is held; see [`Lock::try_lock`] for its errors): a
    ///   `lock` that meets transient store errors (request timeouts, unavailable replicas,
    ///   answers lost with their outcome unknown) keeps trying, one jittered
    ///   `retry_period` apart, until its timeout, as the election and the work queue's
    ///   workers do. A plain cell write is sent again with the same cell, value and
    ///   timestamp, and deleted with a later timestamp if given up; a lease claim whose
    ///   answer was lost is read back by its unique holder id and released if not handed
    ///   over. So nothing is held when it times out (see [`LockError::Timeout`] for cells
    ///   whose delete cannot be confirmed);
    /// - a definite refusal, which ends it at once: [`LockError::Store`] or
    ///   [`LockError::Lease`] carrying [`StoreError::Rejected`] (syntax, schema,
    ///   permissions; for the lease lock, also a refused read-back of a lost claim), and
    ///   [`LockError::Shadowed`] (a plain-cell contender whose own cell is hidden by a newer
    ///   write or delete).
    ///
    /// # Cancel safety
    /// Dropping the future deletes the contender's cells in the background with
    /// later-timestamped deletes, including a cell whose write was still in flight (cells
    /// are tracked before their write is sent, so a write that lands before the delete is
    /// confirmed loses to it). Deletes are retried for at most `ttl + max_clock_skew`; a
    /// cell whose delete cannot be confirmed in that time (the store stays unreachable, or
    /// a write lands after its delete was given up) expires within its TTL
    /// (`ttl + max_clock_skew`) instead, and may keep others waiting until then. The caller
    /// never holds a lock it did not get; a lease claim is given back as for
    /// [`LeaseClient::try_acquire`](crate::LeaseClient::try_acquire).
    async fn lock(&self, name: &str, timeout: Option<Duration>) -> Result<LockGuard, LockError> {
        let _wait = crate::metrics::LockWait::start(self.algorithm());
        check_request(name, timeout)?;
        let started = Instant::now();
        match timeout {
            Some(timeout) if timeout.is_zero() => {
                self.try_lock(name)
                    .await?
                    .ok_or_else(|| LockError::Timeout {
                        name: name.to_owned(),
                        waited: started.elapsed(),
                    })
            }
            _ => {
                let deadline = started + timeout.unwrap_or(MAX_LOCK_TIMEOUT);
                self.lock_until(name, started, deadline).await
            }
        }
    }

    /// The waiting part of [`Lock::lock`], which each algorithm implements: waits from
    /// `started` until the lock is held or `deadline` passes. Call [`Lock::lock`] instead;
    /// implementations check `name` again (nothing is written for a bad one).
    ///
    /// # Errors
    /// As [`Lock::lock`].
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    async fn lock_until(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError>;

    /// Takes the lock only if nobody holds it (TryGetLock): `Ok(None)` when held. Never
    /// waits for a holder (the fair lock's may wait for a waiter's early claim to give way:
    /// see its docs).
    ///
    /// Within one budget, [`Timing::resolve_timeout`] from the call (the time the
    /// library gives any lost answer to be settled), transient store errors are retried as
    /// [`Lock::lock`] retries them; a held lock is still answered at once. The budget bounds
    /// the attempts themselves: one still under way when it runs out (a write or delete
    /// being sent again) is dropped there, its cells deleted in the background (see Cancel
    /// safety), so `try_lock` answers within the budget (plus scheduling).
    ///
    /// # Errors
    /// - [`LockError::InvalidArgument`] for a bad name (nothing written);
    /// - [`LockError::Unreachable`] when the budget ran out with only transient store errors:
    ///   whether the lock is free is unknown, and nothing is held;
    /// - a definite refusal, as for [`Lock::lock`].
    ///
    /// # Cancel safety
    /// As [`Lock::lock`].
    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError>;
}

/// The longest [`Lock::lock`] timeout accepted, and how long `None` waits: a year. Longer
/// is a misuse (and `Duration::MAX` cannot be added to a clock reading at all).
pub const MAX_LOCK_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// Checks a lock name and a wait timeout before anything is written.
pub(crate) fn check_request(name: &str, timeout: Option<Duration>) -> Result<(), InvalidArgument> {
    crate::namespace::Namespace::Lock.check_name(name)?;
    match timeout {
        Some(t) if t > MAX_LOCK_TIMEOUT => Err(InvalidArgument::Timing(format!(
            "lock timeout {t:?} is longer than {MAX_LOCK_TIMEOUT:?}"
        ))),
        _ => Ok(()),
    }
}
