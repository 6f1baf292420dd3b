//! From the timing flags to the libraries' configurations, checking that the command can be
//! stopped before the holder's deadline.

use std::time::Duration;

use cql_election::ElectionConfig;
use cql_lease::LeaseConfig;

use crate::child::KILL_MARGIN;
use crate::cli::Timing;
use crate::error::CliError;

impl Timing {
    /// The lease timing for a holder that runs a command stopped with `grace` between SIGTERM
    /// and SIGKILL (zero with no command). SIGTERM goes out `grace + KILL_MARGIN` before the
    /// deadline, so that must fall after the next renewal is due: `renew_interval + grace +
    /// KILL_MARGIN < validity` (`ttl - 1 s - max_clock_skew`); otherwise a healthy holder
    /// would stop its command at every term.
    ///
    /// # Errors
    /// The timing does not leave room for a renewal (exit 2), naming the flags.
    pub fn config(&self, grace: Duration) -> Result<LeaseConfig, CliError> {
        let config = LeaseConfig {
            ttl: self.ttl,
            renew_interval: self.renew_interval,
            retry_interval: self.retry_interval,
            max_clock_skew: self.max_clock_skew,
            ..LeaseConfig::default()
        };
        let room = |e: String| {
            CliError::usage(format!(
                "{e} (--renew-interval + --kill-grace + {} ms must be under --ttl - 1s - --max-clock-skew)",
                KILL_MARGIN.as_millis()
            ))
        };
        config.validate().map_err(|e| room(e.to_string()))?;
        if !grace.is_zero() && self.renew_interval + grace + KILL_MARGIN >= config.validity() {
            return Err(room(format!(
                "no room to stop the command before the deadline: validity {:?}",
                config.validity()
            )));
        }
        Ok(config)
    }

    /// The same as an election's timing.
    ///
    /// # Errors
    /// As [`Timing::config`].
    pub fn election(&self, grace: Duration) -> Result<ElectionConfig, CliError> {
        let lease = self.config(grace)?;
        Ok(ElectionConfig {
            lease_ttl: lease.ttl,
            renew_interval: lease.renew_interval,
            retry_interval: lease.retry_interval,
            max_clock_skew: lease.max_clock_skew,
            request_timeout: lease.request_timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ttl: u64, renew: u64) -> Timing {
        Timing {
            ttl: Duration::from_secs(ttl),
            renew_interval: Duration::from_secs(renew),
            retry_interval: Duration::from_secs(1),
            max_clock_skew: Duration::from_millis(500),
        }
    }

    #[test]
    fn a_grace_that_leaves_no_room_to_renew_is_refused() {
        // Validity 5 s - 1 s - 0.5 s = 3.5 s: 2 s + 1 s + 0.25 s fits, 2 s + 1.5 s does not.
        let config = timing(5, 2).config(Duration::from_secs(1)).expect("valid");
        assert_eq!(config.validity(), Duration::from_millis(3500));
        let error = timing(5, 2)
            .config(Duration::from_millis(1500))
            .expect_err("no room");
        assert_eq!(error.code, crate::error::EXIT_USAGE);
        assert!(error.message.contains("--kill-grace"), "{error}");
        // Without a command (no grace) only the lease timing is checked.
        assert!(timing(5, 2).config(Duration::ZERO).is_ok());
    }
}
