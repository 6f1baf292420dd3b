//! The narrow storage interface every lease backend implements.
//!
//! Each method is exactly one round trip to the store: one LWT for the three writes, one
//! linearizable (SERIAL) read for [`LeaseStore::read`], one plain read for
//! [`LeaseStore::peek`]. Retries, outcome resolution and
//! timing live above it, in [`crate::LeaseClient`], so every backend gets them the same way.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::cells::CellStore;
use crate::error::StoreError;
use crate::fencing::FencingToken;

/// The stored state of a held lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLease {
    /// Unique id of the acquisition that holds it (one per acquire attempt).
    pub holder_id: String,
    /// The owner the holder declared (a process or node id).
    pub owner: String,
    /// The holder's value, e.g. its address.
    pub value: Option<String>,
    /// The acquisition's fencing token.
    pub token: FencingToken,
    /// The store expires it within this long: the exact time left from
    /// [`LeaseStore::read`] (whole seconds on Cassandra/ScyllaDB), and the holder's full TTL,
    /// an upper bound, from a failed [`LeaseStore::try_acquire`].
    pub expires_within: Duration,
}

/// One claim on a lease: who, what, and for how long the store should keep it.
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// The lease name.
    pub name: &'a str,
    /// Unique id of this acquisition; conditions on renew/release compare it.
    pub holder_id: &'a str,
    /// The declared owner.
    pub owner: &'a str,
    /// The value to store with it.
    pub value: Option<&'a str>,
    /// The TTL to write, whole seconds.
    pub ttl: Duration,
}

/// The answer to a conditional acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// The claim was written; here is its token.
    Acquired {
        /// The new fencing token.
        token: FencingToken,
    },
    /// Someone holds it (possibly this very claim, when an earlier attempt applied).
    Held(StoredLease),
}

/// The answer to a conditional renew or release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CasOutcome {
    /// The condition held and the write applied.
    Applied,
    /// The claim no longer holds the lease.
    NotApplied,
}

/// A lease backend. Object safe: use it as `Arc<dyn LeaseStore>`.
#[async_trait]
pub trait LeaseStore: Send + Sync + 'static {
    /// Writes `claim` if nobody holds `claim.name`, with a token above every earlier one.
    ///
    /// # Errors
    /// [`StoreError::Unknown`] when the write may or may not have applied (settle it by
    /// [`LeaseStore::read`]: the claim's unique holder id tells); [`StoreError::Unavailable`]
    /// when it certainly did not; [`StoreError::Rejected`] for a request the store refuses.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown, as [`StoreError::Unknown`] does: the
    /// write may still apply. Callers send it from a task of their own
    /// ([`crate::hold::AttemptGuard::send`]) so that a drop cannot skip the settling.
    async fn try_acquire(&self, claim: Claim<'_>) -> Result<AcquireOutcome, StoreError>;

    /// Rewrites `claim` (new TTL and value) only if `claim.holder_id` still holds it.
    ///
    /// # Errors
    /// As [`LeaseStore::try_acquire`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown; the write is conditional on the holder
    /// id, so sending it again is safe, and a holder that did not see the answer keeps its
    /// old deadline.
    async fn renew(&self, claim: Claim<'_>) -> Result<CasOutcome, StoreError>;

    /// Deletes the lease only if `holder_id` holds it. The token history is kept.
    ///
    /// # Errors
    /// As [`LeaseStore::try_acquire`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown; the delete is conditional on the
    /// holder id, so sending it again is safe.
    async fn release(&self, name: &str, holder_id: &str) -> Result<CasOutcome, StoreError>;

    /// Hands the lease from `from_holder_id`, which holds it with `from_token`, straight to
    /// `to` in one conditional write: the release and the next claim at once, with a token
    /// above `from_token`. Returns the new token, or `None` when `from_holder_id` no longer
    /// holds it with that token (nothing was written). Counted and faulted as a release:
    /// it is the release's one LWT.
    ///
    /// # Errors
    /// As [`LeaseStore::try_acquire`]: after [`StoreError::Unknown`] either holder may hold
    /// it ([`LeaseStore::read`] tells, by holder id).
    ///
    /// # Cancel safety
    /// Dropping the future leaves the outcome unknown: `to` may hold the lease. Callers keep
    /// `to` under an armed [`crate::hold::AttemptGuard`] until it is handed to its waiter.
    async fn hand_over(
        &self,
        from_holder_id: &str,
        from_token: FencingToken,
        to: Claim<'_>,
    ) -> Result<Option<FencingToken>, StoreError>;

    /// Linearizable read of the current holder; `None` when free.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] (or `Unknown`) when the read failed; nothing changed.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read. (On Cassandra a SERIAL read may complete an in-progress Paxos
    /// round; that happens whether or not the answer is awaited.)
    async fn read(&self, name: &str) -> Result<Option<StoredLease>, StoreError>;

    /// A plain read of the current holder at the regular consistency level: no Paxos round,
    /// so it does not contend with the holder's renewals. A hint only (it may miss a claim
    /// whose commit has not reached the replicas read yet); never the basis of a decision.
    /// Followers and observers poll with it and send an LWT only when the lease looks free.
    /// The default sends [`LeaseStore::read`] (correct, not cheaper).
    ///
    /// # Errors
    /// As [`LeaseStore::read`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a read.
    async fn peek(&self, name: &str) -> Result<Option<StoredLease>, StoreError> {
        self.read(name).await
    }

    /// Where waiters on this store's leases stand in line: plain cells, never the lease's
    /// own (no cell is written both with and without Paxos). With a line,
    /// [`crate::LeaseClient::acquire`] lets only the first waiter of a lease propose;
    /// without one (`None`) every waiter proposes when the lease reads free.
    /// Wrappers forward it (wrapped as they wrap the lease calls, where that matters): it
    /// has no default, so that a wrapper cannot drop the line by forgetting it.
    fn waiting_line(&self) -> Option<Arc<dyn CellStore>>;
}
