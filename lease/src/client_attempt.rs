//! [`LeaseClient::try_acquire`]: one acquisition, its lost answers and the claims of ours it
//! finds abandoned.

use std::sync::Arc;

use tracing::{debug, info, instrument};

use super::{LeaseClient, TryAcquire, new_holder_id};
use crate::config::check_claim;
use crate::error::{LeaseError, LossReason, StoreError};
use crate::hold::{AttemptGuard, Claimed, HoldTiming, claim_attempt};
use crate::lease::{Lease, hold_error};
use crate::store::{AcquireOutcome, Claim};
use crate::target::LeaseTarget;

/// How many fresh attempts `try_acquire` makes when an answer is lost and the read-back shows
/// the lease free (the attempt has not applied; it may still, and is then released on sight,
/// so trying again with a new holder id is safe).
const MAX_ACQUIRE_ATTEMPTS: usize = 3;

impl LeaseClient {
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
            target.held_here(token);
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
