//! Election timing, modeled on Kubernetes' leader election.

use std::time::Duration;

use cql_lease::{InvalidArgument, LeaseConfig};

/// Timing of an election: lease duration, renew period, retry period.
///
/// The defaults ([`ElectionConfig::default`]): `lease_ttl` 15 s, `renew_interval` 5 s,
/// `retry_interval` 2 s, `max_clock_skew` 0.5 s, `request_timeout` derived. A crashed leader
/// is replaced within `lease_ttl + max_clock_skew + retry_interval` (17.5 s).
///
/// ```
/// use std::time::Duration;
/// use cql_election::ElectionConfig;
///
/// let config = ElectionConfig {
///     lease_ttl: Duration::from_secs(10),
///     renew_interval: Duration::from_secs(2),
///     retry_interval: Duration::from_secs(1),
///     ..ElectionConfig::default()
/// };
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    /// The lease's TTL in the store (Kubernetes' lease duration): the longest followers wait
    /// for a crashed leader, plus `max_clock_skew`. The leader itself stops acting
    /// `1 s + max_clock_skew` sooner after its last successful renewal was sent.
    pub lease_ttl: Duration,
    /// How often the leader renews (Kubernetes' renew period); shorter than
    /// `lease_ttl - 1 s - max_clock_skew`.
    pub renew_interval: Duration,
    /// How often followers try to take over and observers look (Kubernetes' retry period),
    /// jittered between half and all of it.
    pub retry_interval: Duration,
    /// Largest wall-clock difference assumed between database nodes.
    pub max_clock_skew: Duration,
    /// Longest wait for one store request; `None` (the default) derives it from the lease
    /// timing (see [`LeaseConfig::effective_request_timeout`]: a third of
    /// `lease_ttl - 1 s - max_clock_skew`).
    pub request_timeout: Option<Duration>,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_ttl: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
            retry_interval: Duration::from_secs(2),
            max_clock_skew: Duration::from_millis(500),
            request_timeout: None,
        }
    }
}

impl ElectionConfig {
    /// The lease configuration behind the election.
    pub fn lease_config(&self) -> LeaseConfig {
        LeaseConfig {
            ttl: self.lease_ttl,
            renew_interval: self.renew_interval,
            retry_interval: self.retry_interval,
            max_clock_skew: self.max_clock_skew,
            resolve_timeout: self.lease_ttl,
            request_timeout: self.request_timeout,
        }
    }

    /// Validates the timing (see [`LeaseConfig::validate`]).
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.lease_config().validate()
    }

    /// The longest a crashed leader can keep the others waiting after its last renewal: the
    /// stored TTL plus the assumed skew.
    pub fn takeover_bound(&self) -> Duration {
        self.lease_config().takeover_bound()
    }
}
