//! The lease client: acquire, wait, inspect, with outcome resolution for lost answers.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::config::{LeaseConfig, MAX_NAME_LEN, check_claim, check_text};
use crate::error::{LeaseError, LossReason, StoreError};
use crate::hold::{AttemptGuard, HoldTiming, jittered, until_resolved};
use crate::lease::Lease;
use crate::orphans::{Attempt, Orphans};
use crate::store::{AcquireOutcome, Claim, LeaseStore, StoredLease};
use crate::target::LeaseTarget;

/// How many fresh attempts `try_acquire` makes when an answer is lost and the read-back shows
/// the lease free (the attempt did not apply, so trying again is safe).
const MAX_ACQUIRE_ATTEMPTS: usize = 3;

/// The result of [`LeaseClient::try_acquire`].
#[derive(Debug)]
pub enum TryAcquire {
    /// The caller now holds the lease.
    Acquired(Lease),
    /// Somebody else holds it.
    Held(StoredLease),
}

/// Entry point: acquires leases on one store with one timing configuration. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::{LeaseClient, LeaseConfig, MemoryStore, TryAcquire};
///
/// # tokio_test_block(async {
/// let client = LeaseClient::new(Arc::new(MemoryStore::new()), LeaseConfig::default())?;
/// let TryAcquire::Acquired(lease) = client.try_acquire("reports", "node-a", Some("10.0.0.1:80")).await? else {
///     unreachable!("the store is empty");
/// };
/// // Somebody else is told who holds it, and until when roughly.
/// let TryAcquire::Held(holder) = client.try_acquire("reports", "node-b", None).await? else {
///     unreachable!("node-a holds it");
/// };
/// assert_eq!(holder.owner, "node-a");
/// assert_eq!(holder.token, lease.token());
/// lease.release().await?;
/// # Ok::<(), cql_lease::LeaseError>(())
/// # });
/// # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct LeaseClient {
    store: Arc<dyn LeaseStore>,
    config: LeaseConfig,
    orphans: Arc<Orphans>,
}

impl std::fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl LeaseClient {
    /// Creates a client after validating `config`.
    pub fn new(store: Arc<dyn LeaseStore>, config: LeaseConfig) -> Result<Self, LeaseError> {
        config.validate()?;
        Ok(LeaseClient {
            store,
            config,
            orphans: Arc::default(),
        })
    }

    /// The timing configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The store behind this client.
    pub fn store(&self) -> &Arc<dyn LeaseStore> {
        &self.store
    }

    /// One attempt: acquire `name` for `owner` if it is free, else report who holds it.
    ///
    /// Costs one LWT when the answer arrives. If the answer is lost (write timeout, broken
    /// connection after sending), linearizable reads tell whether this attempt's unique
    /// holder id is the one stored, so the caller always learns the truth. An error raised
    /// before the request was sent ([`StoreError::Unavailable`]) is a definite "not applied"
    /// and is returned at once, without reading back.
    ///
    /// The returned lease's deadline counts from when this attempt was sent. Nothing is
    /// handed out past its deadline: an answer that arrives after the validity (a slow LWT,
    /// a long resolution) is released in the background and reported as
    /// [`LeaseError::Lost`] with [`LossReason::Expired`].
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] before any store call; [`LeaseError::Store`] when the
    /// store failed definitely; [`LeaseError::OutcomeUnknown`] when the outcome could not be
    /// settled within `resolve_timeout` (the claim is then released in the background, if it
    /// applied); [`LeaseError::Lost`] for an answer that came after the deadline.
    ///
    /// # Cancel safety
    /// Cancel-safe: if the future is dropped after the LWT was sent and before the lease is
    /// returned, the conditional release of this attempt's holder id is spawned, so no lease
    /// is left blocked for a TTL.
    #[instrument(skip(self, value), fields(store_calls))]
    pub async fn try_acquire(
        &self,
        name: &str,
        owner: &str,
        value: Option<&str>,
    ) -> Result<TryAcquire, LeaseError> {
        check_claim(name, owner, value)?;
        let timing = HoldTiming::from(&self.config);
        let mut last_error = None;
        for _ in 0..MAX_ACQUIRE_ATTEMPTS {
            let holder_id = new_holder_id();
            let claim = Claim {
                name,
                holder_id: &holder_id,
                owner,
                value,
                ttl: self.config.store_ttl(),
            };
            let target = Arc::new(LeaseTarget::new(Arc::clone(&self.store), claim));
            // Armed until the claim is handed over or known not to exist: a drop in between
            // gives it back.
            let guard = Attempt {
                guard: Some(AttemptGuard::new(target.clone(), timing)),
                orphans: &self.orphans,
                holder_id: &holder_id,
            };
            // Measured before sending: the store cannot expire the claim before this plus the
            // validity.
            let sent_at = Instant::now();
            let outcome = match self.store.try_acquire(claim).await {
                Ok(outcome) => outcome,
                Err(error) if error.is_unknown() => {
                    match self.resolve_acquire(name, &holder_id, error).await? {
                        Some(outcome) => outcome,
                        None => {
                            guard.disarm();
                            last_error = Some(StoreError::Unavailable(
                                "answers lost; read-back shows the claim was not applied".into(),
                            ));
                            continue;
                        }
                    }
                }
                Err(error) => {
                    // Never sent, or refused: nothing to resolve or give back.
                    guard.disarm();
                    return Err(LeaseError::store(name, error));
                }
            };
            let token = match outcome {
                AcquireOutcome::Acquired { token } => token,
                AcquireOutcome::Held(current) if current.holder_id == holder_id => current.token,
                AcquireOutcome::Held(current) if self.orphans.contains(&current.holder_id) => {
                    guard.disarm();
                    self.release_orphan(name, &current.holder_id).await?;
                    continue;
                }
                AcquireOutcome::Held(current) => {
                    guard.disarm();
                    debug!(lease = name, holder = %current.owner, token = %current.token, "lease held");
                    return Ok(TryAcquire::Held(current));
                }
            };
            let must_stop_by = sent_at + self.config.validity();
            if Instant::now() >= must_stop_by {
                // Held in the store but already past its deadline: give it back (the armed
                // guard does, on drop) rather than hand out a lease nobody may act on.
                warn!(lease = name, %token, "acquired after its deadline; giving it back");
                drop(guard);
                return Err(LeaseError::Lost {
                    name: name.to_owned(),
                    reason: LossReason::Expired,
                });
            }
            guard.disarm();
            info!(lease = name, owner, %token, "lease acquired");
            return Ok(TryAcquire::Acquired(Lease::new(
                self.clone(),
                target,
                token,
                must_stop_by,
            )));
        }
        // Every attempt was lost and is known not to have applied: a definite failure.
        Err(LeaseError::store(
            name,
            last_error.unwrap_or_else(|| StoreError::Unavailable("no answer".into())),
        ))
    }

    /// Waits until `name` is acquired, polling every `retry_interval` (jittered between half and all of it), for at most
    /// `timeout` when given.
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] before any store call; [`LeaseError::Timeout`] when
    /// `timeout` passes; [`LeaseError::Store`] when the store refuses the request. Other
    /// failures of single attempts are logged and retried.
    ///
    /// # Cancel safety
    /// Cancel-safe: each attempt is [`LeaseClient::try_acquire`], which gives back a claim
    /// that was sent but not handed over; between attempts it only sleeps.
    #[instrument(skip(self, value))]
    pub async fn acquire(
        &self,
        name: &str,
        owner: &str,
        value: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Lease, LeaseError> {
        check_claim(name, owner, value)?;
        let started = Instant::now();
        let give_up_at = timeout.map(|t| started + t);
        let mut delays = self.poll_delays();
        let mut last_holder = None;
        loop {
            match self.try_acquire(name, owner, value).await {
                Ok(TryAcquire::Acquired(lease)) => return Ok(lease),
                Ok(TryAcquire::Held(holder)) => last_holder = Some(Box::new(holder)),
                Err(LeaseError::InvalidArgument(e)) => return Err(e.into()),
                Err(LeaseError::Store {
                    source: StoreError::Rejected(e),
                    ..
                }) => {
                    return Err(LeaseError::store(name, StoreError::Rejected(e)));
                }
                Err(error) => warn!(lease = name, %error, "acquire attempt failed; will retry"),
            }
            let delay = delays.next().unwrap_or(self.config.retry_interval);
            let wake = Instant::now() + delay;
            if let Some(limit) = give_up_at.filter(|limit| wake >= *limit) {
                tokio::time::sleep_until(limit).await;
                return Err(LeaseError::Timeout {
                    name: name.to_owned(),
                    waited: started.elapsed(),
                    last_holder,
                });
            }
            tokio::time::sleep_until(wake).await;
        }
    }

    /// Marks `holder_id` (an acquisition of this process that nobody acts on any more, e.g.
    /// an ended term whose background release may have failed) as abandoned: when
    /// [`LeaseClient::try_acquire`] finds it holding a lease, it releases it (one conditional
    /// LWT) and tries again, instead of reporting it as another holder. The client
    /// remembers the last 64 such ids.
    pub fn release_on_sight(&self, holder_id: &str) {
        self.orphans.insert(holder_id);
    }

    /// Releases an abandoned acquisition of this process found holding `name`.
    async fn release_orphan(&self, name: &str, holder_id: &str) -> Result<(), LeaseError> {
        info!(
            lease = name,
            holder_id, "found an abandoned claim of ours; releasing it"
        );
        match self.store.release(name, holder_id).await {
            Ok(_) => {
                self.orphans.remove(holder_id);
                Ok(())
            }
            Err(error) => Err(LeaseError::store(name, error)),
        }
    }

    /// Who seems to hold `name`: one plain read at the regular consistency level (no Paxos
    /// round). A hint for polling (it may lag a claim or release still being committed);
    /// decide nothing on it, use [`LeaseClient::try_acquire`] or [`LeaseClient::holder`].
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] for a bad name; [`LeaseError::Store`] when the read
    /// failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    #[instrument(skip(self))]
    pub async fn peek(&self, name: &str) -> Result<Option<StoredLease>, LeaseError> {
        check_text("lease name", name, MAX_NAME_LEN)?;
        self.store
            .peek(name)
            .await
            .map_err(|e| LeaseError::store(name, e))
    }

    /// Whether `holder_id` is an acquisition this client gave up on (see
    /// [`LeaseClient::release_on_sight`]).
    pub fn is_abandoned(&self, holder_id: &str) -> bool {
        self.orphans.contains(holder_id)
    }

    /// Who holds `name` now: one linearizable read.
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] for a bad name; [`LeaseError::Store`] when the read
    /// failed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    #[instrument(skip(self))]
    pub async fn holder(&self, name: &str) -> Result<Option<StoredLease>, LeaseError> {
        check_text("lease name", name, MAX_NAME_LEN)?;
        self.store
            .read(name)
            .await
            .map_err(|e| LeaseError::store(name, e))
    }

    /// Delays drawn uniformly between half and all of `retry_interval`, for polling and
    /// retries: jitter keeps contenders from moving in lockstep.
    pub fn poll_delays(&self) -> impl Iterator<Item = Duration> + use<> {
        jittered(self.config.retry_interval)
    }

    /// Learns whether a lost acquire applied. `Ok(None)`: it did not, and the lease is free.
    /// An armed [`AttemptGuard`] in the caller gives the claim back if this fails.
    async fn resolve_acquire(
        &self,
        name: &str,
        holder_id: &str,
        error: StoreError,
    ) -> Result<Option<AcquireOutcome>, LeaseError> {
        warn!(lease = name, %error, "acquire answer lost; reading back");
        let timing = HoldTiming::from(&self.config);
        let read_back = until_resolved(&timing, "acquire read-back", || async {
            self.store.read(name).await.map(Some)
        })
        .await;
        match read_back {
            Ok(Some(current)) if current.holder_id == holder_id => {
                info!(lease = name, "read-back: the lost acquire applied");
                Ok(Some(AcquireOutcome::Acquired {
                    token: current.token,
                }))
            }
            Ok(Some(current)) => Ok(Some(AcquireOutcome::Held(current))),
            Ok(None) => Ok(None),
            Err(read_error) => Err(LeaseError::OutcomeUnknown {
                name: name.to_owned(),
                operation: "acquire",
                source: read_error,
            }),
        }
    }
}

fn new_holder_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
