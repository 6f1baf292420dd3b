//! A lease acquisition as a [`Holdable`]: the claim the hold machine renews and releases.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::acquire::{LEASE_LOOKS, LeaseSeen};
use crate::error::StoreError;
use crate::hold::Holdable;
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
        }
    }

    /// Tells this process's waiters for the lease that it is held here: they wait for its
    /// release to wake them rather than read back to back.
    pub(crate) fn held_here(&self) {
        let here = LEASE_LOOKS.of(self.store_id, &self.key);
        here.holding(&self.holder_id);
        let _ = self.here.set(here);
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
