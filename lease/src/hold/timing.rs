//! [`HoldTiming`], the local-clock timing a [`Hold`](super::Hold) runs on, and [`jittered`],
//! the one retry and polling delay policy.

use std::time::Duration;

use backon::BackoffBuilder;
use tracing::warn;

use crate::config::Timing;
use crate::error::StoreError;

/// The timing a [`Hold`](super::Hold) runs on, all measured on the local monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldTiming {
    /// How long the holder may act after sending the write that succeeded.
    pub validity: Duration,
    /// How often to renew.
    pub renew_interval: Duration,
    /// Pause between retries (jittered between half and all of it).
    pub retry_interval: Duration,
    /// How long to keep settling a lost answer before reporting it unknown.
    pub resolve_timeout: Duration,
    /// Longest wait for one request (a claim, a renewal, a read-back step): past it, the
    /// request is given up as of unknown outcome and retried or read back, on another
    /// coordinator. See [`Timing::effective_request_timeout`].
    pub request_timeout: Duration,
    /// How long past the holder's deadline the store keeps the claim when nothing else
    /// happens: the store TTL ([`Timing::store_ttl`], the lease duration rounded up to whole
    /// seconds) − `validity`: one second plus the clock skew allowed, plus what the rounding
    /// added. A claim that was
    /// handed out and lost at its deadline is given back only this long after it
    /// (see [`Holdable::handed_out`](super::Holdable::handed_out)).
    pub ttl_margin: Duration,
}

impl From<&Timing> for HoldTiming {
    fn from(config: &Timing) -> Self {
        HoldTiming {
            validity: config.renew_deadline(),
            renew_interval: config.renew_period,
            retry_interval: config.retry_period,
            resolve_timeout: config.resolve_timeout,
            request_timeout: config.effective_request_timeout(),
            ttl_margin: config.store_ttl().saturating_sub(config.renew_deadline()),
        }
    }
}

impl From<Timing> for HoldTiming {
    fn from(config: Timing) -> Self {
        HoldTiming::from(&config)
    }
}

impl HoldTiming {
    /// Runs `request` for at most `request_timeout`. When time runs out the request is
    /// dropped (a coordinator may still apply a write: its outcome is unknown) and
    /// [`StoreError::Unknown`] is returned, so the caller reads back or asks again, which
    /// the driver sends to the next coordinator.
    ///
    /// # Errors
    /// The request's own error, or [`StoreError::Unknown`] when it timed out.
    ///
    /// # Cancel safety
    /// As cancel-safe as `request`.
    pub async fn bounded<T>(
        &self,
        what: &str,
        request: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match crate::timed::within(self.request_timeout, request).await {
            Ok(result) => result,
            Err(_) => {
                warn!(what, timeout = ?self.request_timeout, "request timed out; outcome unknown");
                Err(StoreError::Unknown(format!(
                    "{what}: no answer within {:?}",
                    self.request_timeout
                )))
            }
        }
    }

    /// Retry delays drawn uniformly between half and all of `retry_interval`: jitter keeps
    /// contenders from moving in lockstep.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send + use<> {
        jittered(self.retry_interval)
    }
}

/// Delays drawn uniformly between half and all of `interval`: the one retry and polling
/// delay policy of the workspace (hold renewals, read-backs, acquire polls, election follower
/// and observer polls; other crates' pollers should use it too, so that `retry_interval`
/// means the same bound everywhere, e.g. the failover bound "TTL + skew + one retry
/// interval"). Jitter keeps contenders from moving in lockstep.
///
/// ```
/// use std::time::Duration;
/// let mut delays = cql_lease::hold::jittered(Duration::from_secs(2));
/// let d = delays.next().unwrap_or_default();
/// assert!(d >= Duration::from_secs(1) && d <= Duration::from_secs(2));
/// ```
pub fn jittered(interval: Duration) -> impl Iterator<Item = Duration> + Send + use<> {
    backon::ConstantBuilder::default()
        .with_delay(interval / 2)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TTL margin counts from the TTL the store is given (the lease duration rounded up to
    /// whole seconds), not from the lease duration: 3 s − 1 s for a 2.5 s lease.
    #[test]
    fn the_ttl_margin_is_the_store_ttl_less_the_validity() {
        let config = Timing {
            lease_duration: Duration::from_millis(2500),
            renew_period: Duration::from_millis(500),
            ..Timing::default()
        };
        let timing = HoldTiming::from(&config);
        assert_eq!(config.store_ttl(), Duration::from_secs(3));
        assert_eq!(timing.validity, Duration::from_secs(1));
        assert_eq!(timing.ttl_margin, Duration::from_secs(2));
    }
}
