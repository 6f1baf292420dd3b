//! From the timing flags to the libraries' configurations, with the kill grace taken out of
//! the holder's deadline.

use std::time::Duration;

use cql_election::ElectionConfig;
use cql_lease::LeaseConfig;

use crate::cli::Timing;
use crate::error::CliError;

impl Timing {
    /// The lease timing for a holder that runs a command: the kill grace is added to the
    /// assumed clock skew, so the holder's token fires `grace` before its real deadline and
    /// SIGKILL (one grace after SIGTERM) still lands before it. With no command, pass zero.
    ///
    /// # Errors
    /// The timing does not leave room for a renewal (exit 2), naming the flags.
    pub fn config(&self, grace: Duration) -> Result<LeaseConfig, CliError> {
        let config = LeaseConfig {
            ttl: self.ttl,
            renew_interval: self.renew_interval,
            retry_interval: self.retry_interval,
            max_clock_skew: self.max_clock_skew + grace,
            ..LeaseConfig::default()
        };
        config.validate().map_err(|e| {
            CliError::usage(format!(
                "{e} (here: --renew-interval must be under --ttl - 1s - --max-clock-skew - --kill-grace)"
            ))
        })?;
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
    fn the_grace_comes_out_of_the_holders_validity() {
        let config = timing(15, 5).config(Duration::from_secs(2)).expect("valid");
        // 15 s - 1 s - 0.5 s skew - 2 s grace.
        assert_eq!(config.validity(), Duration::from_millis(11_500));
        assert_eq!(config.store_ttl(), Duration::from_secs(15));
    }

    #[test]
    fn a_grace_that_leaves_no_room_to_renew_is_refused() {
        assert!(timing(5, 2).config(Duration::from_secs(1)).is_ok());
        let error = timing(5, 2)
            .config(Duration::from_secs(2))
            .expect_err("no room");
        assert_eq!(error.code, crate::error::EXIT_USAGE);
        assert!(error.message.contains("--kill-grace"), "{error}");
    }
}
