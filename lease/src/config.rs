//! Timing parameters and input limits, validated before anything reaches the store.

use std::time::Duration;

use crate::error::InvalidArgument;
use crate::namespace::Namespace;

/// Longest TTL Cassandra and ScyllaDB accept on a write (20 years), in seconds.
pub const MAX_TTL_SECS: u64 = 630_720_000;
/// Longest lease, lock or election name a user gives, in bytes. A lease lock's or an
/// election's row adds its name space's prefix (see [`crate::namespace`]), up to
/// [`crate::namespace::MAX_STORED_NAME_LEN`] bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Longest owner id, in bytes.
pub const MAX_OWNER_LEN: usize = 256;
/// Largest value, in bytes (it travels in every renewal, so keep it small).
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// Timing of a lease, in the spirit of Kubernetes' lease duration / renew deadline / retry
/// period.
///
/// `ttl` is the TTL written to the store (whole seconds, rounded up): the longest anyone waits
/// for a crashed holder (plus `max_clock_skew`). The holder itself assumes less, counted on its
/// own monotonic clock from the moment it *sent* the acquire or renew that succeeded:
/// [`LeaseConfig::validity`] is `ttl - 1 s - max_clock_skew`, because Cassandra expires cells in
/// whole seconds of a replica's wall clock (a cell written at 10.9 s with TTL 2 is gone at
/// 12.0 s, 1.1 s later) and a replica's clock may run ahead.
///
/// ```
/// use std::time::Duration;
/// use cql_lease::LeaseConfig;
///
/// let config = LeaseConfig {
///     ttl: Duration::from_secs(10),
///     renew_interval: Duration::from_secs(3),
///     max_clock_skew: Duration::from_millis(500),
///     ..LeaseConfig::default()
/// };
/// config.validate().unwrap();
/// assert_eq!(config.store_ttl(), Duration::from_secs(10));
/// assert_eq!(config.validity(), Duration::from_millis(8500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The TTL written to the store (rounded up to whole seconds).
    pub ttl: Duration,
    /// How often the keep-alive renews. Must be shorter than [`LeaseConfig::validity`].
    pub renew_interval: Duration,
    /// Pause between attempts: `acquire` polling, and renewal retries after an error
    /// (jittered, and never past the holder's deadline).
    pub retry_interval: Duration,
    /// Largest wall-clock difference assumed between database nodes. Cells expire by the
    /// replicas' wall clocks, so the holder stops this much earlier.
    pub max_clock_skew: Duration,
    /// How long to keep trying to learn the outcome of a write whose answer was lost.
    pub resolve_timeout: Duration,
    /// Longest wait for one store request. `None` (the default) derives it from the lease
    /// timing: a third of [`LeaseConfig::validity`] (see
    /// [`LeaseConfig::effective_request_timeout`]). More than the validity only makes a
    /// request wait for an answer that can no longer be acted on. A frozen or overloaded coordinator then
    /// costs at most this long before the request is given up (a write's outcome is unknown
    /// and settled by asking again or reading back, on another coordinator), so there is
    /// time left to retry before the holder must stop. A renewal is bounded further by half
    /// the time left before the holder's deadline.
    pub request_timeout: Option<Duration>,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
            retry_interval: Duration::from_secs(1),
            max_clock_skew: Duration::from_millis(500),
            resolve_timeout: Duration::from_secs(10),
            request_timeout: None,
        }
    }
}

impl LeaseConfig {
    /// Checks `1 s <= ttl <= 630720000 s`, `0 < renew_interval < validity`,
    /// `retry_interval > 0`, `resolve_timeout > 0` and, when set, `request_timeout > 0`.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let bad = |msg: String| Err(InvalidArgument::Timing(msg));
        if self.ttl < Duration::from_secs(1) || self.store_ttl() > Duration::from_secs(MAX_TTL_SECS)
        {
            return bad(format!(
                "ttl {:?} must be between 1 s and {MAX_TTL_SECS} s",
                self.ttl
            ));
        }
        if self.renew_interval.is_zero() || self.renew_interval >= self.validity() {
            return bad(format!(
                "renew_interval {:?} must be greater than zero and less than the holder's validity \
                 {:?} (ttl {:?} - 1 s - max_clock_skew {:?})",
                self.renew_interval,
                self.validity(),
                self.ttl,
                self.max_clock_skew
            ));
        }
        if self.retry_interval.is_zero() {
            return bad("retry_interval must be greater than zero".into());
        }
        if self.resolve_timeout.is_zero() {
            return bad("resolve_timeout must be greater than zero".into());
        }
        if self.request_timeout.is_some_and(|t| t.is_zero()) {
            return bad("request_timeout must be greater than zero".into());
        }
        Ok(())
    }

    /// The TTL written to the store: `ttl` rounded up to whole seconds.
    pub fn store_ttl(&self) -> Duration {
        let mut secs = self.ttl.as_secs();
        if self.ttl.subsec_nanos() > 0 {
            secs += 1;
        }
        Duration::from_secs(secs)
    }

    /// How long a holder may act after sending the acquire or renew that succeeded:
    /// `ttl - 1 s - max_clock_skew` (zero if that is negative).
    pub fn validity(&self) -> Duration {
        self.ttl
            .saturating_sub(Duration::from_secs(1) + self.max_clock_skew)
    }

    /// The longest one store request may take: [`LeaseConfig::request_timeout`] if set,
    /// else a third of [`LeaseConfig::validity`], so that a request stuck on a frozen
    /// coordinator leaves time for a retry elsewhere before the holder's deadline (with the
    /// defaults, 13.5 s / 3 = 4.5 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cql_lease::LeaseConfig;
    /// let config = LeaseConfig { ttl: Duration::from_secs(4), ..LeaseConfig::default() };
    /// assert_eq!(config.effective_request_timeout(), Duration::from_millis(833));
    /// ```
    pub fn effective_request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or_else(|| Duration::from_millis((self.validity().as_millis() / 3) as u64))
    }

    /// The longest the store may keep a crashed holder's lease after its last successful write:
    /// what a contender waits at most.
    pub fn takeover_bound(&self) -> Duration {
        self.store_ttl() + self.max_clock_skew
    }
}

/// Rejects empty, oversized or control-character strings.
/// Checks a user-supplied string: not empty, at most `max` bytes, no control characters.
pub fn check_text(field: &'static str, text: &str, max: usize) -> Result<(), InvalidArgument> {
    if text.is_empty() {
        return Err(InvalidArgument::Empty { field });
    }
    check_len(field, text, max)?;
    if text.chars().any(char::is_control) {
        return Err(InvalidArgument::ControlCharacter { field });
    }
    Ok(())
}

/// Rejects oversized strings (values may be empty and may hold any text).
/// Checks that `text` is at most `max` bytes long.
pub fn check_len(field: &'static str, text: &str, max: usize) -> Result<(), InvalidArgument> {
    if text.len() > max {
        return Err(InvalidArgument::TooLong {
            field,
            len: text.len(),
            max,
        });
    }
    Ok(())
}

/// Checks a lease name: non-empty, at most [`MAX_NAME_LEN`] bytes, no control characters.
pub fn check_name(name: &str) -> Result<(), InvalidArgument> {
    check_text("lease name", name, MAX_NAME_LEN)
}

/// Checks an owner (candidate) id and an optional value.
pub fn check_owner_and_value(owner: &str, value: Option<&str>) -> Result<(), InvalidArgument> {
    check_text("owner", owner, MAX_OWNER_LEN)?;
    if let Some(value) = value {
        check_len("value", value, MAX_VALUE_LEN)?;
    }
    Ok(())
}

/// Checks a name in `namespace` (see [`Namespace::check_name`]), an owner id and an
/// optional value.
pub(crate) fn check_claim(
    namespace: Namespace,
    name: &str,
    owner: &str,
    value: Option<&str>,
) -> Result<(), InvalidArgument> {
    namespace.check_name(name)?;
    check_owner_and_value(owner, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_assumes_less_than_the_store_keeps() {
        let c = LeaseConfig {
            ttl: Duration::from_millis(2500),
            renew_interval: Duration::from_millis(500),
            max_clock_skew: Duration::from_millis(250),
            ..LeaseConfig::default()
        };
        assert_eq!(c.store_ttl(), Duration::from_secs(3));
        assert_eq!(c.validity(), Duration::from_millis(1250));
        assert_eq!(c.takeover_bound(), Duration::from_millis(3250));
    }

    #[test]
    fn timing_is_validated() {
        let ok = LeaseConfig::default();
        assert!(ok.validate().is_ok());
        for bad in [
            LeaseConfig {
                ttl: Duration::from_millis(999),
                ..ok
            },
            LeaseConfig {
                ttl: Duration::from_secs(MAX_TTL_SECS + 1),
                ..ok
            },
            LeaseConfig {
                renew_interval: Duration::ZERO,
                ..ok
            },
            LeaseConfig {
                renew_interval: ok.validity(),
                ..ok
            },
            LeaseConfig {
                ttl: Duration::from_secs(1),
                renew_interval: Duration::from_millis(1),
                ..ok
            },
            LeaseConfig {
                retry_interval: Duration::ZERO,
                ..ok
            },
            LeaseConfig {
                resolve_timeout: Duration::ZERO,
                ..ok
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(InvalidArgument::Timing(_))),
                "{bad:?}"
            );
        }
        assert!(
            LeaseConfig {
                ttl: Duration::from_secs(MAX_TTL_SECS),
                ..ok
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn text_limits() {
        assert_eq!(
            check_claim(Namespace::Lease, "", "o", None),
            Err(InvalidArgument::Empty {
                field: "lease name"
            })
        );
        assert_eq!(
            check_claim(Namespace::Lease, "n", "", None),
            Err(InvalidArgument::Empty { field: "owner" })
        );
        assert!(matches!(
            check_claim(Namespace::Lease, &"n".repeat(MAX_NAME_LEN + 1), "o", None),
            Err(InvalidArgument::TooLong {
                field: "lease name",
                ..
            })
        ));
        assert!(matches!(
            check_claim(Namespace::Lease, "n", &"o".repeat(MAX_OWNER_LEN + 1), None),
            Err(InvalidArgument::TooLong { field: "owner", .. })
        ));
        assert!(matches!(
            check_claim(
                Namespace::Lease,
                "n",
                "o",
                Some(&"v".repeat(MAX_VALUE_LEN + 1))
            ),
            Err(InvalidArgument::TooLong { field: "value", .. })
        ));
        assert_eq!(
            check_claim(Namespace::Lease, "a\nb", "o", None),
            Err(InvalidArgument::ControlCharacter {
                field: "lease name"
            })
        );
        assert!(check_claim(Namespace::Lease, "n", "o", Some("")).is_ok());
    }
}
