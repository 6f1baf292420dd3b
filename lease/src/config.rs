//! Timing parameters and input limits, validated before anything reaches the store.

use std::time::Duration;

use crate::error::InvalidArgument;

/// Longest TTL Cassandra and ScyllaDB accept on a write (20 years), in seconds.
pub const MAX_TTL_SECS: u64 = 630_720_000;
/// Longest lease name, in bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Longest owner id, in bytes.
pub const MAX_OWNER_LEN: usize = 256;
/// Largest value, in bytes (it travels in every renewal, so keep it small).
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// Timing of a lease, in the spirit of Kubernetes' lease duration / renew period / retry period.
///
/// `ttl` is the validity a holder may assume, counted on its own monotonic clock from the moment
/// it *sent* the acquire or renew that succeeded. The store keeps the row longer than that (see
/// [`LeaseConfig::store_ttl`]) so that the holder always stops first.
///
/// ```
/// use std::time::Duration;
/// use cql_lease::LeaseConfig;
///
/// let config = LeaseConfig {
///     ttl: Duration::from_secs(10),
///     renew_interval: Duration::from_secs(3),
///     ..LeaseConfig::default()
/// };
/// config.validate().unwrap();
/// assert_eq!(config.store_ttl(), Duration::from_secs(12));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// How long a holder may act after a successful acquire or renew was sent.
    pub ttl: Duration,
    /// How often the keep-alive renews. Must be shorter than `ttl`.
    pub renew_interval: Duration,
    /// Pause between attempts: `acquire` polling, and renewal retries after an error
    /// (jittered, and never past the holder's deadline).
    pub retry_interval: Duration,
    /// Largest wall-clock difference assumed between database nodes. Cells expire by the
    /// replicas' wall clocks, so the row is kept this much longer than `ttl`.
    pub max_clock_skew: Duration,
    /// How long to keep trying to learn the outcome of a write whose answer was lost.
    pub resolve_timeout: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            ttl: Duration::from_secs(15),
            renew_interval: Duration::from_secs(5),
            retry_interval: Duration::from_secs(1),
            max_clock_skew: Duration::from_millis(500),
            resolve_timeout: Duration::from_secs(10),
        }
    }
}

impl LeaseConfig {
    /// Checks `1 s <= ttl`, the store TTL `<= 630720000 s`, `0 < renew_interval < ttl`,
    /// `retry_interval > 0` and `resolve_timeout > 0`.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let bad = |msg: String| Err(InvalidArgument::Timing(msg));
        if self.ttl < Duration::from_secs(1) {
            return bad(format!("ttl {:?} is shorter than 1 s", self.ttl));
        }
        if self.ttl > Duration::from_secs(MAX_TTL_SECS)
            || self.store_ttl() > Duration::from_secs(MAX_TTL_SECS)
        {
            return bad(format!(
                "ttl {:?} (stored as {:?}) exceeds the maximum of {MAX_TTL_SECS} s",
                self.ttl,
                self.store_ttl()
            ));
        }
        if self.renew_interval.is_zero() || self.renew_interval >= self.ttl {
            return bad(format!(
                "renew_interval {:?} must be greater than zero and less than ttl {:?}",
                self.renew_interval, self.ttl
            ));
        }
        if self.retry_interval.is_zero() {
            return bad("retry_interval must be greater than zero".into());
        }
        if self.resolve_timeout.is_zero() {
            return bad("resolve_timeout must be greater than zero".into());
        }
        Ok(())
    }

    /// The TTL written to the store: `ttl + max_clock_skew` rounded up to whole seconds, plus
    /// one second because Cassandra counts expiry in whole seconds of the replica's clock (a
    /// cell written at 10.9 s with TTL 2 expires at 12.0 s, 1.1 s later).
    pub fn store_ttl(&self) -> Duration {
        let wanted = self.ttl.saturating_add(self.max_clock_skew);
        let mut secs = wanted.as_secs();
        if wanted.subsec_nanos() > 0 {
            secs += 1;
        }
        Duration::from_secs(secs.saturating_add(1))
    }

    /// An upper bound on how long after a holder's last successful write the store may still
    /// show it as the holder: what a contender waits at most after a crash.
    pub fn takeover_bound(&self) -> Duration {
        self.store_ttl() + self.max_clock_skew
    }
}

/// Rejects empty, oversized or control-character strings.
pub(crate) fn check_text(
    field: &'static str,
    text: &str,
    max: usize,
) -> Result<(), InvalidArgument> {
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
pub(crate) fn check_len(
    field: &'static str,
    text: &str,
    max: usize,
) -> Result<(), InvalidArgument> {
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

/// Checks a lease name, an owner id and an optional value.
pub(crate) fn check_claim(
    name: &str,
    owner: &str,
    value: Option<&str>,
) -> Result<(), InvalidArgument> {
    check_text("lease name", name, MAX_NAME_LEN)?;
    check_text("owner", owner, MAX_OWNER_LEN)?;
    if let Some(value) = value {
        check_len("value", value, MAX_VALUE_LEN)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_ttl_pads_for_granularity_and_skew() {
        let c = LeaseConfig {
            ttl: Duration::from_millis(1500),
            renew_interval: Duration::from_millis(500),
            max_clock_skew: Duration::ZERO,
            ..LeaseConfig::default()
        };
        assert_eq!(c.store_ttl(), Duration::from_secs(3));
        let c = LeaseConfig {
            ttl: Duration::from_secs(2),
            renew_interval: Duration::from_millis(500),
            max_clock_skew: Duration::from_millis(500),
            ..LeaseConfig::default()
        };
        assert_eq!(c.store_ttl(), Duration::from_secs(4));
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
                ttl: Duration::from_secs(MAX_TTL_SECS),
                ..ok
            },
            LeaseConfig {
                renew_interval: Duration::ZERO,
                ..ok
            },
            LeaseConfig {
                renew_interval: ok.ttl,
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
        let longest = LeaseConfig {
            ttl: Duration::from_secs(MAX_TTL_SECS - 2),
            max_clock_skew: Duration::ZERO,
            ..ok
        };
        assert!(longest.validate().is_ok());
    }

    #[test]
    fn text_limits() {
        assert_eq!(
            check_claim("", "o", None),
            Err(InvalidArgument::Empty {
                field: "lease name"
            })
        );
        assert_eq!(
            check_claim("n", "", None),
            Err(InvalidArgument::Empty { field: "owner" })
        );
        assert!(matches!(
            check_claim(&"n".repeat(MAX_NAME_LEN + 1), "o", None),
            Err(InvalidArgument::TooLong {
                field: "lease name",
                ..
            })
        ));
        assert!(matches!(
            check_claim("n", &"o".repeat(MAX_OWNER_LEN + 1), None),
            Err(InvalidArgument::TooLong { field: "owner", .. })
        ));
        assert!(matches!(
            check_claim("n", "o", Some(&"v".repeat(MAX_VALUE_LEN + 1))),
            Err(InvalidArgument::TooLong { field: "value", .. })
        ));
        assert_eq!(
            check_claim("a\nb", "o", None),
            Err(InvalidArgument::ControlCharacter {
                field: "lease name"
            })
        );
        assert!(check_claim("n", "o", Some("")).is_ok());
    }
}
