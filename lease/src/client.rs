//! The lease client: acquire, wait, inspect, with outcome resolution for lost answers.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, instrument};

use crate::config::{Timing, check_claim};
use crate::error::{LeaseError, LossReason, StoreError};
use crate::hold::{AttemptGuard, Claimed, HoldTiming, claim_attempt, jittered};
use crate::lease::{Lease, hold_error};
use crate::namespace::Namespace;
use crate::orphans::Orphans;
use crate::shared_looks::StoreId;
use crate::store::{AcquireOutcome, Claim, LeaseStore, StoredLease};
use crate::target::LeaseTarget;
use crate::waiting_line::Line;

/// How many fresh attempts `try_acquire` makes when an answer is lost and the read-back shows
/// the lease free (the attempt has not applied; it may still, and is then released on sight,
/// so trying again with a new holder id is safe).
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
/// use cql_lease::{LeaseClient, Timing, MemoryStore, TryAcquire};
///
/// # tokio_test_block(async {
/// let client = LeaseClient::new(Arc::new(MemoryStore::new()), Timing::default())?;
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
    config: Timing,
    orphans: Arc<Orphans>,
    line: Option<Line>,
    namespace: Namespace,
    /// The store as given, before this client's timeouts wrap it: clients on one store share
    /// their waiters' looks (`shared_looks.rs`).
    store_id: StoreId,
}

impl std::fmt::Debug for LeaseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseClient")
            .field("config", &self.config)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl LeaseClient {
    /// Creates a client of plain leases ([`Namespace::Lease`]) after validating its `timing`.
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] for a timing that does not validate.
    pub fn new(store: Arc<dyn LeaseStore>, config: Timing) -> Result<Self, LeaseError> {
        config.validate()?;
        let line = store.waiting_line().map(|cells| {
            Line::new(
                cells,
                config.store_ttl(),
                config.retry_period,
                config.effective_request_timeout(),
            )
        });
        let store_id = StoreId::of(&store);
        Ok(LeaseClient {
            store_id,
            line,
            store: Arc::new(crate::timed::TimedStore::new(
                store,
                config.effective_request_timeout(),
            )),
            config,
            orphans: Arc::default(),
            namespace: Namespace::Lease,
        })
    }

    /// The same client (store, timing, abandoned claims) in another name space: every name
    /// it is given is stored with `namespace`'s prefix, and reported as given. Lease locks
    /// and elections use it; so can tools that read their leases (the election `X` is
    /// `client.in_namespace(Namespace::Election).holder("X")`). See [`crate::namespace`].
    pub fn in_namespace(&self, namespace: Namespace) -> LeaseClient {
        LeaseClient {
            namespace,
            ..self.clone()
        }
    }

    /// The name space of the names this client is given ([`Namespace::Lease`] unless made
    /// with [`LeaseClient::in_namespace`]).
    pub fn namespace(&self) -> Namespace {
        self.namespace
    }

    /// Checks `name` in this client's name space and returns the row it is stored under.
    pub(crate) fn key<'a>(
        &self,
        name: &'a str,
    ) -> Result<std::borrow::Cow<'a, str>, crate::error::InvalidArgument> {
        self.namespace.check_name(name)?;
        Ok(self.namespace.stored_name(name))
    }

    /// Which store this client is on, as given to [`LeaseClient::new`].
    pub(crate) fn store_id(&self) -> StoreId {
        self.store_id
    }

    /// The waiting line of this client's store, if it keeps one.
    pub(crate) fn line(&self) -> Option<&Line> {
        self.line.as_ref()
    }

    /// The timing configuration.
    pub fn config(&self) -> &Timing {
        &self.config
    }

    /// The store behind this client, every call bounded by
    /// [`Timing::effective_request_timeout`].
    pub fn store(&self) -> &Arc<dyn LeaseStore> {
        &self.store
    }

    /// One attempt: acquire `name` for `owner` if it is free, else report who holds it.
    ///
    /// Costs one LWT when the answer arrives. If the answer is lost (write timeout, broken
    /// connection after sending), linearizable reads tell whether this attempt's unique
    /// holder id is the one stored, so the caller learns whether it holds the lease. If it
    /// does not, the attempt may still apply later (a coordinator can finish a CAS after the
    /// read-back): its holder id is remembered (see [`LeaseClient::release_on_sight`]), so
    /// that when this client later finds it holding the lease it releases it instead of
    /// reporting it as another holder; if the read-back showed the lease free, a fresh
    /// attempt is made at once. An error raised before the request was sent
    /// ([`StoreError::Unavailable`]) is a definite "not applied" and is returned at once,
    /// without reading back. The steps are [`crate::hold::claim_attempt`]'s.
    ///
    /// The returned lease's deadline counts from when this attempt was sent. Nothing is
    /// handed out past its deadline: an answer that arrives after the validity (a slow LWT,
    /// a long resolution) is released in the background and reported as
    /// [`LeaseError::Lost`] with [`LossReason::Expired`].
    ///
    /// # Errors
    /// [`LeaseError::InvalidArgument`] before any store call; [`LeaseError::Store`] when the
    /// store failed definitely; [`LeaseError::OutcomeUnknown`] when the outcome could not be
    /// settled within `resolve_timeout`, or the store refused the read-back
    /// ([`StoreError::Rejected`]; see [`LeaseError::is_refusal`]) (the claim is then
    /// remembered for release on sight and released in the background, if it applied), or
    /// when every attempt's answer was lost and each read-back showed the lease free
    /// (`source` is [`StoreError::Unknown`]: the claims may still apply, and are released on
    /// sight), or when releasing an abandoned claim of ours found holding the lease lost its
    /// answer;
    /// [`LeaseError::Lost`] for an answer that came after the deadline.
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
        check_claim(self.namespace, name, owner, value)?;
        let key = self.namespace.stored_name(name);
        let key = key.as_ref();
        let timing = HoldTiming::from(&self.config);
        let mut last_error = None;
        for _ in 0..MAX_ACQUIRE_ATTEMPTS {
            let holder_id = new_holder_id();
            let claim = Claim {
                name: key,
                holder_id: &holder_id,
                owner,
                value,
                ttl: self.config.store_ttl(),
            };
            let target = Arc::new(LeaseTarget::new(
                Arc::clone(&self.store),
                self.store_id,
                name,
                claim,
                Arc::clone(&self.orphans),
            ));
            // Armed until the claim is handed over or known not to exist: a drop in between
            // gives it back (and remembers it as an orphan).
            let guard = AttemptGuard::new(target.clone(), timing);
            let request = {
                let store = Arc::clone(&self.store);
                let (key, holder_id, owner) = (key.to_owned(), holder_id.clone(), owner.to_owned());
                let (value, ttl) = (value.map(str::to_owned), claim.ttl);
                async move {
                    let claim = Claim {
                        name: &key,
                        holder_id: &holder_id,
                        owner: &owner,
                        value: value.as_deref(),
                        ttl,
                    };
                    store.try_acquire(claim).await
                }
            };
            let read_back = || async {
                Ok(self.store.read(key).await?.map(|current| {
                    if current.holder_id == holder_id {
                        AcquireOutcome::Acquired {
                            token: current.token,
                        }
                    } else {
                        AcquireOutcome::Held(current)
                    }
                }))
            };
            let ours = |outcome: &AcquireOutcome| match outcome {
                AcquireOutcome::Acquired { .. } => true,
                AcquireOutcome::Held(current) => current.holder_id == holder_id,
            };
            let attempt = claim_attempt(guard, &timing, request, read_back, ours).await;
            let (outcome, sent_at, guard) = match attempt {
                Ok(Claimed::Won {
                    outcome,
                    sent_at,
                    guard,
                }) => (outcome, sent_at, guard),
                Ok(Claimed::NotWon(Some(AcquireOutcome::Held(current)))) => {
                    if self.orphans.contains(&current.holder_id) {
                        if let Err(error) = self.release_orphan(name, key, &current.holder_id).await
                        {
                            return Err(after_lost(name, last_error, error));
                        }
                        continue;
                    }
                    debug!(lease = name, holder = %current.owner, token = %current.token, "lease held");
                    return Ok(TryAcquire::Held(current));
                }
                Ok(Claimed::NotWon(_)) => {
                    // The read-back showed the lease free. This attempt may still apply later
                    // (it is remembered as an orphan, released when seen); a fresh attempt
                    // with a new holder id is safe.
                    last_error = Some(StoreError::Unknown(
                        "answer lost; the read-back shows the lease free, but the claim may \
                         still apply (it is released on sight)"
                            .into(),
                    ));
                    continue;
                }
                Ok(Claimed::Expired(_)) => {
                    return Err(LeaseError::Lost {
                        name: name.to_owned(),
                        reason: LossReason::Expired,
                    });
                }
                Err(error) => {
                    return Err(after_lost(
                        name,
                        last_error,
                        hold_error(name, "acquire", error),
                    ));
                }
            };
            let token = match outcome {
                AcquireOutcome::Acquired { token } => token,
                AcquireOutcome::Held(current) => current.token,
            };
            info!(lease = name, owner, %token, "lease acquired");
            target.held_here();
            let lease = Lease::new(
                self.clone(),
                target,
                token,
                sent_at + self.config.renew_deadline(),
            );
            guard.disarm();
            return Ok(TryAcquire::Acquired(lease));
        }
        // Every attempt's answer was lost and the lease read back free: the claims may still
        // apply (they are remembered for release on sight), so the outcome is unknown.
        Err(LeaseError::OutcomeUnknown {
            name: name.to_owned(),
            operation: "acquire",
            source: last_error.unwrap_or_else(|| StoreError::Unknown("no answer".into())),
        })
    }

    /// Marks `holder_id` (an acquisition of this process that nobody acts on any more) as
    /// abandoned: when [`LeaseClient::try_acquire`] finds it holding a lease, it releases it
    /// (one conditional LWT) and tries again, instead of reporting it as another holder. The
    /// client does this by itself for every acquisition of its own that may outlive its
    /// holder: an attempt whose answer was lost (even when the read-back showed it not
    /// applied: it may still apply), a dropped or expired attempt, and every release that
    /// does not end `Ok` (of a [`Lease`], a [`crate::LeaseGuard`], on drop or at the
    /// deadline). It remembers the last 64 such ids.
    pub fn release_on_sight(&self, holder_id: &str) {
        self.orphans.insert(holder_id);
    }

    /// Releases an abandoned acquisition of this process found holding `name` (stored as
    /// `key`).
    async fn release_orphan(
        &self,
        name: &str,
        key: &str,
        holder_id: &str,
    ) -> Result<(), LeaseError> {
        info!(
            lease = name,
            holder_id, "found an abandoned claim of ours; releasing it"
        );
        match self.store.release(key, holder_id).await {
            Ok(_) => {
                self.orphans.remove(holder_id);
                Ok(())
            }
            Err(source @ StoreError::Unknown(_)) => Err(LeaseError::OutcomeUnknown {
                name: name.to_owned(),
                operation: "release",
                source,
            }),
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
        let key = self.key(name)?;
        self.store
            .peek(&key)
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
        let key = self.key(name)?;
        self.store
            .read(&key)
            .await
            .map_err(|e| LeaseError::store(name, e))
    }

    /// Delays drawn uniformly between half and all of `retry_period`, for polling and
    /// retries: jitter keeps contenders from moving in lockstep.
    pub fn poll_delays(&self) -> impl Iterator<Item = Duration> + use<> {
        jittered(self.config.retry_period)
    }
}

fn new_holder_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The error of a `try_acquire` that ends in `error` after an earlier attempt's answer was
/// lost (`lost`): that attempt may still apply, so a definite error would say too much.
fn after_lost(name: &str, lost: Option<StoreError>, error: LeaseError) -> LeaseError {
    match (lost, error) {
        (_, error @ LeaseError::OutcomeUnknown { .. }) | (None, error) => error,
        (Some(source), error) => {
            debug!(lease = name, %error, "attempt failed after an earlier one's answer was lost");
            LeaseError::OutcomeUnknown {
                name: name.to_owned(),
                operation: "acquire",
                source,
            }
        }
    }
}
