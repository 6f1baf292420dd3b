//! The guard every lock returns: a held lock kept alive by the shared hold machine.

use tokio::time::Instant;

use super::LockError;
use crate::fencing::FencingToken;
use crate::hold::Hold;

/// A held lock. Its cells are rewritten in the background every `renew_period`; when a
/// rewrite cannot be confirmed in time, [`LockGuard::held`] turns `false` and the
/// [`LockGuard::cancellation_token`] fires, at the local deadline at the latest, which is
/// before the store can let anyone else in. Dropping it releases the lock in the background;
/// [`LockGuard::release`] waits for the release.
#[derive(Debug)]
pub struct LockGuard {
    name: String,
    algorithm: &'static str,
    token: Option<FencingToken>,
    hold: Hold,
}

impl LockGuard {
    pub(crate) fn new(
        name: String,
        algorithm: &'static str,
        token: Option<FencingToken>,
        hold: Hold,
    ) -> Self {
        crate::metrics::lock_acquired(algorithm);
        LockGuard {
            name,
            algorithm,
            token,
            hold,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The algorithm that granted it.
    pub fn algorithm(&self) -> &'static str {
        self.algorithm
    }

    /// The fencing token: `Some` for the lease lock only (see the [module docs](super)).
    pub fn token(&self) -> Option<FencingToken> {
        self.token
    }

    crate::hold::hold_accessors!();

    /// Stops acting, then releases the lock and waits for the store to confirm.
    ///
    /// # Errors
    /// [`LockError::Release`] when it was already lost or the release failed (the TTL then
    /// frees it).
    ///
    /// # Cancel safety
    /// Cancel safe: the release goes on in the background.
    pub async fn release(self) -> Result<(), LockError> {
        let name = self.name;
        self.hold
            .release()
            .await
            .map_err(|source| LockError::Release { name, source })
    }

    /// Stops without touching the store, as a crash would: the lock stays taken until its
    /// TTL. Returns when the holder was told to stop.
    pub fn abandon(self) -> Instant {
        self.hold.abandon()
    }
}
