//! Timing parameters and input limits, validated before anything reaches the store.

use std::time::Duration;

use crate::error::InvalidArgument;
use crate::namespace::Namespace;

/// Largest TTL value Cassandra and ScyllaDB accept on a write (20 years), in seconds. It is
/// not always usable: Cassandra up to 4.1, and 5.0 by default
/// (`storage_compatibility_mode`), stores expiry times as 32-bit seconds and with its default
/// `expiration_date_overflow_policy` (`REJECT`) refuses any write whose expiry would fall
/// after 2038-01-19T03:14:07Z, so the longest TTL it accepts shrinks as that date nears.
pub const MAX_TTL_SECS: u64 = 630_720_000;
/// Longest duration any setting accepts: [`MAX_TTL_SECS`] (20 years). Far beyond any real
/// need, and short enough that adding it to a clock reading never overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(MAX_TTL_SECS);
/// Shortest [`Timing::renew_deadline`] accepted: below it the derived request timeout (a
/// third of it) is too short for any store to answer, so nothing could ever be held.
pub const MIN_RENEW_DEADLINE: Duration = Duration::from_millis(100);
/// Longest lease, lock or election name a user gives, in bytes. A lease lock's or an
/// election's row adds its name space's prefix (see [`crate::namespace`]), up to
/// [`crate::namespace::MAX_STORED_NAME_LEN`] bytes.
pub const MAX_NAME_LEN: usize = 256;
/// Longest owner id, in bytes.
pub const MAX_OWNER_LEN: usize = 256;
/// Largest value, in bytes (it travels in every renewal, so keep it small).
pub const MAX_VALUE_LEN: usize = 64 * 1024;

/// Timing of every primitive: leases, elections, locks and queue claims, with the names of
/// Kubernetes' leader election (lease duration, renew deadline, retry period).
///
/// `lease_duration` is the TTL written to the store (whole seconds, rounded up): the longest
/// anyone waits for a crashed holder (plus `max_clock_skew`). The holder itself assumes less,
/// counted on its own monotonic clock from the moment it *sent* the acquire or renew that
/// succeeded: it stops acting at [`Timing::renew_deadline`], `lease_duration - 1 s -
/// max_clock_skew` after that moment, because Cassandra expires cells in whole seconds of a
/// replica's wall clock (a cell written at 10.9 s with TTL 2 is gone at 12.0 s, 1.1 s later)
/// and a replica's clock may run ahead. It renews every `renew_period` and retries a failed
/// renewal every `retry_period` until then. Waiters (followers, lock contenders, observers)
/// look every `retry_period` at most.
///
/// The defaults: lease duration 15 s, renew period 5 s, retry period 2 s, clock skew 0.5 s,
/// so a holder stops 13.5 s after its last successful renewal was sent and a crashed holder
/// is replaced within 15.5 s plus one retry period.
///
/// ```
/// use std::time::Duration;
/// use cql_lease::Timing;
///
/// let timing = Timing {
///     lease_duration: Duration::from_secs(10),
///     renew_period: Duration::from_secs(3),
///     max_clock_skew: Duration::from_millis(500),
///     ..Timing::default()
/// };
/// timing.validate().unwrap();
/// assert_eq!(timing.store_ttl(), Duration::from_secs(10));
/// assert_eq!(timing.renew_deadline(), Duration::from_millis(8500));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The TTL written to the store (rounded up to whole seconds): Kubernetes' lease duration.
    pub lease_duration: Duration,
    /// How often a holder renews. Must be shorter than [`Timing::renew_deadline`].
    pub renew_period: Duration,
    /// Pause between attempts: waiters' polls (jittered) and renewal retries after an error
    /// (never past the holder's deadline): Kubernetes' retry period.
    pub retry_period: Duration,
    /// Largest wall-clock difference assumed between database nodes. Cells expire by the
    /// replicas' wall clocks, so the holder stops this much earlier.
    pub max_clock_skew: Duration,
    /// How long to keep trying to learn the outcome of a write whose answer was lost.
    pub resolve_timeout: Duration,
    /// Longest wait for one store request. `None` (the default) derives it from the lease
    /// timing: a third of [`Timing::renew_deadline`] (see
    /// [`Timing::effective_request_timeout`]). More than that only makes a request wait for
    /// an answer that can no longer be acted on. A frozen or overloaded coordinator then
    /// costs at most this long before the request is given up (a write's outcome is unknown
    /// and settled by asking again or reading back, on another coordinator), so there is
    /// time left to retry before the holder must stop. A renewal is bounded further by half
    /// the time left before the holder's deadline.
    pub request_timeout: Option<Duration>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_period: Duration::from_secs(5),
            retry_period: Duration::from_secs(2),
            max_clock_skew: Duration::from_millis(500),
            resolve_timeout: Duration::from_secs(10),
            request_timeout: None,
        }
    }
}

impl Timing {
    /// Checks `1 s <= lease_duration <= 630720000 s`, `renew_deadline >= 100 ms`
    /// ([`MIN_RENEW_DEADLINE`]), `0 < renew_period < renew_deadline`, `retry_period > 0`,
    /// `resolve_timeout > 0`, when set `request_timeout >= 1 ms`, and that no duration exceeds
    /// 630720000 s (20 years, [`MAX_DURATION`]), so that deadlines never overflow.
    ///
    /// # Errors
    /// [`InvalidArgument::Timing`], naming the field.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let bad = |msg: String| Err(InvalidArgument::Timing(msg));
        let longest = MAX_DURATION;
        for (field, value) in [
            ("lease_duration", Some(self.lease_duration)),
            ("renew_period", Some(self.renew_period)),
            ("retry_period", Some(self.retry_period)),
            ("max_clock_skew", Some(self.max_clock_skew)),
            ("resolve_timeout", Some(self.resolve_timeout)),
            ("request_timeout", self.request_timeout),
        ] {
            if value.is_some_and(|value| value > longest) {
                return bad(format!(
                    "{field} {value:?} must be at most {MAX_TTL_SECS} s"
                ));
            }
        }
        if self.lease_duration < Duration::from_secs(1) || self.store_ttl() > longest {
            return bad(format!(
                "lease_duration {:?} must be between 1 s and {MAX_TTL_SECS} s",
                self.lease_duration
            ));
        }
        // A shorter validity derives a request timeout of a few milliseconds or zero: every
        // request would be cut before it could answer.
        if self.renew_deadline() < MIN_RENEW_DEADLINE {
            return bad(format!(
                "lease_duration {:?} leaves a renew deadline of {:?} (lease_duration - 1 s - \
                 max_clock_skew {:?}); it must be at least {MIN_RENEW_DEADLINE:?}",
                self.lease_duration,
                self.renew_deadline(),
                self.max_clock_skew
            ));
        }
        if self.renew_period.is_zero() || self.renew_period >= self.renew_deadline() {
            return bad(format!(
                "renew_period {:?} must be greater than zero and less than the renew deadline \
                 {:?} (lease_duration {:?} - 1 s - max_clock_skew {:?})",
                self.renew_period,
                self.renew_deadline(),
                self.lease_duration,
                self.max_clock_skew
            ));
        }
        if self.retry_period.is_zero() {
            return bad("retry_period must be greater than zero".into());
        }
        if self.resolve_timeout.is_zero() {
            return bad("resolve_timeout must be greater than zero".into());
        }
        if let Some(timeout) = self
            .request_timeout
            .filter(|t| *t < Duration::from_millis(1))
        {
            return bad(format!("request_timeout {timeout:?} must be at least 1 ms"));
        }
        Ok(())
    }

    /// The TTL written to the store: `lease_duration` rounded up to whole seconds.
    pub fn store_ttl(&self) -> Duration {
        let mut secs = self.lease_duration.as_secs();
        if self.lease_duration.subsec_nanos() > 0 {
            secs += 1;
        }
        Duration::from_secs(secs)
    }

    /// How long a holder may act after sending the acquire or renew that succeeded:
    /// `lease_duration - 1 s - max_clock_skew` (zero if that is negative).
    /// Kubernetes' renew deadline: a holder that has not renewed by then stops.
    pub fn renew_deadline(&self) -> Duration {
        self.lease_duration
            .saturating_sub(Duration::from_secs(1) + self.max_clock_skew)
    }

    /// The longest one store request may take: [`Timing::request_timeout`] if set,
    /// else a third of [`Timing::renew_deadline`], so that a request stuck on a frozen
    /// coordinator leaves time for a retry elsewhere before the holder's deadline (with the
    /// defaults, 13.5 s / 3 = 4.5 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use cql_lease::Timing;
    /// let config = Timing { lease_duration: Duration::from_secs(4), ..Timing::default() };
    /// assert_eq!(config.effective_request_timeout(), Duration::from_millis(833));
    /// ```
    pub fn effective_request_timeout(&self) -> Duration {
        self.request_timeout.unwrap_or_else(|| {
            Duration::from_millis((self.renew_deadline().as_millis() / 3) as u64)
        })
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
        let c = Timing {
            lease_duration: Duration::from_millis(2500),
            renew_period: Duration::from_millis(500),
            max_clock_skew: Duration::from_millis(250),
            ..Timing::default()
        };
        assert_eq!(c.store_ttl(), Duration::from_secs(3));
        assert_eq!(c.renew_deadline(), Duration::from_millis(1250));
        assert_eq!(c.takeover_bound(), Duration::from_millis(3250));
    }

    /// Durations so long that a deadline would overflow are refused, not a panic.
    #[test]
    fn overlong_durations_are_refused_without_overflow() {
        let ok = Timing::default();
        for bad in [
            Timing {
                lease_duration: Duration::MAX,
                ..ok
            },
            Timing {
                max_clock_skew: Duration::MAX,
                ..ok
            },
            Timing {
                resolve_timeout: Duration::MAX,
                ..ok
            },
            Timing {
                retry_period: Duration::MAX,
                ..ok
            },
            Timing {
                request_timeout: Some(Duration::MAX),
                ..ok
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(InvalidArgument::Timing(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn timing_is_validated() {
        let ok = Timing::default();
        assert!(ok.validate().is_ok());
        for bad in [
            Timing {
                lease_duration: Duration::from_millis(999),
                ..ok
            },
            Timing {
                lease_duration: Duration::from_secs(MAX_TTL_SECS + 1),
                ..ok
            },
            Timing {
                renew_period: Duration::ZERO,
                ..ok
            },
            Timing {
                renew_period: ok.renew_deadline(),
                ..ok
            },
            Timing {
                lease_duration: Duration::from_secs(1),
                renew_period: Duration::from_millis(1),
                ..ok
            },
            Timing {
                retry_period: Duration::ZERO,
                ..ok
            },
            Timing {
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
            Timing {
                lease_duration: Duration::from_secs(MAX_TTL_SECS),
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
