//! The lease client: acquire, wait, inspect, with outcome resolution for lost answers.

use std::sync::Arc;
use std::time::Duration;

use backon::BackoffBuilder;
use tokio::time::Instant;
use tracing::{debug, info, instrument, warn};

use crate::config::{LeaseConfig, MAX_NAME_LEN, check_claim, check_text};
use crate::error::{LeaseError, StoreError};
use crate::lease::Lease;
use crate::store::{AcquireOutcome, Claim, LeaseStore, StoredLease};

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
        Ok(LeaseClient { store, config })
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
    /// connection), a linearizable read tells whether this attempt's unique holder id is the
    /// one stored, so the caller always learns the truth.
    ///
    /// The returned lease's deadline counts from when this attempt was sent. An answer that
    /// took longer than the validity still means the lease is held in the store, but it is
    /// already past its deadline: check [`Lease::is_valid`] before acting (a keep-alive
    /// reports such a lease as lost at once).
    #[instrument(skip(self, value), fields(store_calls))]
    pub async fn try_acquire(
        &self,
        name: &str,
        owner: &str,
        value: Option<&str>,
    ) -> Result<TryAcquire, LeaseError> {
        check_claim(name, owner, value)?;
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
            // Measured before sending: the store cannot expire the claim before this plus the
            // validity.
            let sent_at = Instant::now();
            let outcome = match self.store.try_acquire(claim).await {
                Ok(outcome) => outcome,
                Err(StoreError::Rejected(e)) => {
                    return Err(LeaseError::store(name, StoreError::Rejected(e)));
                }
                Err(error) => match self.resolve_acquire(name, &holder_id, error).await? {
                    Some(outcome) => outcome,
                    None => {
                        last_error = Some(StoreError::Unavailable(
                            "answers lost; read-back shows the claim was not applied".into(),
                        ));
                        continue;
                    }
                },
            };
            return Ok(match outcome {
                AcquireOutcome::Acquired { token } => {
                    TryAcquire::Acquired(self.acquired(claim, token, sent_at))
                }
                AcquireOutcome::Held(current) if current.holder_id == holder_id => {
                    TryAcquire::Acquired(self.acquired(claim, current.token, sent_at))
                }
                AcquireOutcome::Held(current) => {
                    debug!(lease = name, holder = %current.owner, token = %current.token, "lease held");
                    TryAcquire::Held(current)
                }
            });
        }
        // Every attempt was lost and is known not to have applied: a definite failure.
        Err(LeaseError::store(
            name,
            last_error.unwrap_or_else(|| StoreError::Unavailable("no answer".into())),
        ))
    }

    /// Waits until `name` is acquired, polling every `retry_interval` (jittered between half and all of it), for at most
    /// `timeout` when given.
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

    /// Who holds `name` now: one linearizable read.
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
        backon::ConstantBuilder::default()
            .with_delay(self.config.retry_interval / 2)
            .with_jitter()
            .without_max_times()
            .build()
    }

    fn acquired(&self, claim: Claim<'_>, token: crate::FencingToken, sent_at: Instant) -> Lease {
        let lease = Lease::new(self.clone(), claim, token, sent_at + self.config.validity());
        info!(lease = claim.name, owner = claim.owner, %token, "lease acquired");
        lease
    }

    /// Learns whether a lost acquire applied. `Ok(None)`: it did not, and the lease is free.
    async fn resolve_acquire(
        &self,
        name: &str,
        holder_id: &str,
        error: StoreError,
    ) -> Result<Option<AcquireOutcome>, LeaseError> {
        warn!(lease = name, %error, "acquire answer lost; reading back");
        let give_up_at = Instant::now() + self.config.resolve_timeout;
        let mut delays = self.poll_delays();
        loop {
            match self.store.read(name).await {
                Ok(Some(current)) if current.holder_id == holder_id => {
                    info!(lease = name, "read-back: the lost acquire applied");
                    return Ok(Some(AcquireOutcome::Acquired {
                        token: current.token,
                    }));
                }
                Ok(Some(current)) => return Ok(Some(AcquireOutcome::Held(current))),
                Ok(None) => return Ok(None),
                Err(read_error) => {
                    let wake = Instant::now() + delays.next().unwrap_or(self.config.retry_interval);
                    if wake >= give_up_at {
                        // If it applied, nobody will ever use it: ask the store to drop it.
                        self.spawn_cleanup(name, holder_id);
                        return Err(LeaseError::OutcomeUnknown {
                            name: name.to_owned(),
                            operation: "acquire",
                            source: read_error,
                        });
                    }
                    tokio::time::sleep_until(wake).await;
                }
            }
        }
    }

    /// Best-effort conditional delete of a claim nobody will use.
    pub(crate) fn spawn_cleanup(&self, name: &str, holder_id: &str) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let store = Arc::clone(&self.store);
        let (name, holder_id) = (name.to_owned(), holder_id.to_owned());
        handle.spawn(async move {
            let result = store.release(&name, &holder_id).await;
            debug!(lease = %name, ?result, "cleanup of an abandoned claim");
        });
    }
}

fn new_holder_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
