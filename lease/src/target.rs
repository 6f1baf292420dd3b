//! A lease acquisition as a [`Holdable`]: the claim the hold machine renews and releases.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::acquire::{LEASE_LOOKS, LeaseSeen};
use crate::error::StoreError;
use crate::fencing::FencingToken;
use crate::hold::{AttemptGuard, Holdable};
use crate::orphans::Orphans;
use crate::shared_looks::{SharedLooks, StoreId};
use crate::store::{CasOutcome, Claim, LeaseStore};

/// One acquisition of a lease, identified by its unique holder id.
pub(crate) struct LeaseTarget {
    store: Arc<dyn LeaseStore>,
    /// The store as its client was given it: where this process's waiters share their looks.
    store_id: StoreId,
    /// The name its user gave (reported in errors, logs and `name()`).
    pub name: String,
    /// The row it is stored under: `name` with its name space's prefix.
    pub key: String,
    pub holder_id: String,
    pub owner: String,
    value: Mutex<Option<String>>,
    ttl: Duration,
    /// The client's abandoned claims, where this one goes if it may outlive its holder.
    orphans: Arc<Orphans>,
    /// This process's waiters' looks at the lease, kept while it is held here, so that
    /// waiters arriving later know it is held here.
    here: std::sync::OnceLock<Arc<SharedLooks<LeaseSeen>>>,
    /// The token, once the claim was handed to its user: a release may then hand the lease
    /// to a waiter of this process ([`crate::hand_over`]).
    token: std::sync::OnceLock<FencingToken>,
}

impl LeaseTarget {
    /// The acquisition `claim` (whose `name` is the stored row) of the lease its user calls
    /// `name`.
    pub fn new(
        store: Arc<dyn LeaseStore>,
        store_id: StoreId,
        name: &str,
        claim: Claim<'_>,
        orphans: Arc<Orphans>,
    ) -> Self {
        LeaseTarget {
            store,
            store_id,
            name: name.to_owned(),
            key: claim.name.to_owned(),
            holder_id: claim.holder_id.to_owned(),
            owner: claim.owner.to_owned(),
            value: Mutex::new(claim.value.map(str::to_owned)),
            ttl: claim.ttl,
            orphans,
            here: std::sync::OnceLock::new(),
            token: std::sync::OnceLock::new(),
        }
    }

    /// Tells this process's waiters for the lease that it is held here, with `token`: they
    /// wait for its release to wake them (or to hand it over) rather than read back to back.
    pub(crate) fn held_here(&self, token: FencingToken) {
        let here = LEASE_LOOKS.of(self.store_id, &self.key);
        here.holding(&self.holder_id);
        let _ = self.here.set(here);
        let _ = self.token.set(token);
    }

    /// Hands the lease to the offer of a waiter of this process, if one is posted and this
    /// acquisition was handed to its user: `None` when nothing was written (no offer, or a
    /// definite failure: release the plain way), else the release's outcome. The LWT, and
    /// the grant or give-back that follows it, run in a task of their own, so a caller
    /// dropped or no longer polled leaves neither the waiter waiting nor the claim untended.
    /// After a lost answer the offered claim is given back by its guard; whether this one
    /// still holds is for the caller's read-back.
    async fn hand_over(&self) -> Option<Result<CasOutcome, StoreError>> {
        let from_token = *self.token.get()?;
        // The latest look of this process's waiters: the first tickets of the line.
        let look = self.here.get()?.latest()?;
        let line = look.seen.line.as_deref()?;
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let offer = crate::hand_over::take(self.store_id, &self.key, line)?;
        let (store, name, from) = (
            Arc::clone(&self.store),
            self.name.clone(),
            self.holder_id.clone(),
        );
        let task = runtime.spawn(async move {
            let next = Arc::clone(&offer.target);
            // Armed from before the LWT: whatever happens next, the claim is never left.
            let guard = AttemptGuard::new(next.clone(), offer.timing);
            let value = next.value();
            let claim = Claim {
                name: &next.key,
                holder_id: &next.holder_id,
                owner: &next.owner,
                value: value.as_deref(),
                ttl: next.ttl,
            };
            let sent_at = Instant::now();
            let outcome = store.hand_over(&from, from_token, claim).await;
            match &outcome {
                Ok(Some(token)) => {
                    info!(lease = %name, %from, to = %next.holder_id, %token, "lease handed over");
                    // Held here from now on: a give-back (waiter gone or not polled) may hand
                    // it on to the next waiter in turn.
                    next.held_here(*token);
                    offer.grant(*token, sent_at, guard);
                }
                Err(error) if error.is_unknown() => {
                    warn!(lease = %name, %error, "hand-over answer lost; giving the offered claim back");
                    drop(guard);
                }
                Ok(None) | Err(_) => guard.disarm(),
            }
            outcome
        });
        let outcome = task.await.unwrap_or_else(|error| {
            Err(StoreError::Unknown(format!(
                "hand-over task failed: {error}"
            )))
        });
        match outcome {
            Ok(Some(_)) => Some(Ok(CasOutcome::Applied)),
            Ok(None) => Some(Ok(CasOutcome::NotApplied)),
            Err(error) if error.is_unknown() => Some(Err(error)),
            Err(error) => {
                debug!(lease = %self.name, %error, "hand-over failed; releasing");
                None
            }
        }
    }

    /// The value the next renewal writes.
    pub fn value(&self) -> Option<String> {
        self.value.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Replaces the value the next renewal writes; returns the previous one.
    pub fn replace_value(&self, value: Option<String>) -> Option<String> {
        match self.value.lock() {
            Ok(mut slot) => std::mem::replace(&mut *slot, value),
            Err(_) => None,
        }
    }

    /// Renews with `value`; on success it becomes the value of later renewals.
    ///
    /// # Errors
    /// The store's error, as [`LeaseStore::renew`].
    ///
    /// # Cancel safety
    /// As [`LeaseStore::renew`]: dropped, the renewal may or may not apply, and the value of
    /// later renewals stays the old one.
    pub async fn renew_with(&self, value: Option<String>) -> Result<CasOutcome, StoreError> {
        let claim = Claim {
            name: &self.key,
            holder_id: &self.holder_id,
            owner: &self.owner,
            value: value.as_deref(),
            ttl: self.ttl,
        };
        let outcome = self.store.renew(claim).await?;
        if outcome == CasOutcome::Applied {
            self.replace_value(value);
        }
        Ok(outcome)
    }
}

#[async_trait]
impl Holdable for LeaseTarget {
    fn describe(&self) -> String {
        format!("lease {:?} ({})", self.name, self.holder_id)
    }

    async fn renew(&self) -> Result<CasOutcome, StoreError> {
        self.renew_with(self.value()).await
    }

    async fn still_held(&self) -> Result<bool, StoreError> {
        let current = self.store.read(&self.key).await?;
        Ok(current.is_some_and(|c| c.holder_id == self.holder_id))
    }

    async fn release(&self) -> Result<CasOutcome, StoreError> {
        if let Some(outcome) = self.hand_over().await {
            if let Some(here) = self.here.get() {
                here.let_go(&self.holder_id);
            }
            return outcome;
        }
        let outcome = self.store.release(&self.key, &self.holder_id).await;
        if let Some(here) = self.here.get() {
            here.let_go(&self.holder_id);
        }
        let outcome = outcome?;
        if outcome == CasOutcome::Applied {
            // This process's waiters need not read to learn it is free.
            LEASE_LOOKS.released(self.store_id, &self.key);
        }
        Ok(outcome)
    }

    fn orphaned(&self) {
        tracing::debug!(lease = %self.name, holder_id = %self.holder_id, "remembered for release on sight");
        self.orphans.insert(&self.holder_id);
    }
}
