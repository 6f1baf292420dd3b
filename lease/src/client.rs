//! The lease client: acquire, wait, inspect, with outcome resolution for lost answers.

use std::sync::Arc;
use std::time::Duration;

use tracing::instrument;

use crate::config::Timing;
use crate::error::LeaseError;
use crate::hold::jittered;
use crate::lease::Lease;
use crate::namespace::Namespace;
use crate::orphans::Orphans;
use crate::shared_looks::StoreId;
use crate::store::{LeaseStore, StoredLease};
use crate::waiting_line::Line;

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

    /// The acquisitions this client gave up on (see [`LeaseClient::release_on_sight`]).
    pub(crate) fn orphans(&self) -> &Arc<Orphans> {
        &self.orphans
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

pub(crate) fn new_holder_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[path = "client_attempt.rs"]
mod attempt;
