//! From the timing flags to the libraries' configurations, checking that the command can be
//! stopped before the holder's deadline.

use std::time::Duration;

use cql_lease::{MIN_RENEW_DEADLINE, Timing};

use crate::child::KILL_MARGIN;
use crate::cli::TimingArgs;
use crate::error::CliError;

/// The longest renew interval derived from `--ttl` when `--renew-interval` is not given.
const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);

impl TimingArgs {
    /// The lease timing for a holder that runs a command stopped with `grace` between SIGTERM
    /// and SIGKILL (zero with no command). SIGTERM goes out `grace + KILL_MARGIN` before the
    /// deadline, so that must fall after the next renewal is due: `renew_interval + grace +
    /// KILL_MARGIN < validity` (`ttl - 1 s - max_clock_skew`); otherwise a healthy holder
    /// would stop its command at every term.
    ///
    /// # Errors
    /// The timing does not leave room for a renewal (exit 2), naming the flags.
    pub fn config(&self, grace: Duration) -> Result<Timing, CliError> {
        let mut config = Timing {
            lease_duration: self.ttl,
            retry_period: self.retry_interval,
            max_clock_skew: self.max_clock_skew,
            ..Timing::default()
        };
        let margin = if grace.is_zero() {
            Duration::ZERO
        } else {
            grace + KILL_MARGIN
        };
        // A derived renew interval also needs room to stop the command; an explicit one is
        // checked against that below, in terms of --renew-interval.
        let reserve = if self.renew_interval.is_some() {
            Duration::ZERO
        } else {
            margin
        };
        let room = config.renew_deadline().saturating_sub(reserve);
        // The library's own minimum validity (MIN_RENEW_DEADLINE), reported in terms of the
        // flags given rather than the library's field names.
        if self.ttl < Duration::from_secs(1) || room < MIN_RENEW_DEADLINE {
            return Err(CliError::usage(format!(
                "--ttl {} is too short: it must exceed 1s + --max-clock-skew ({}){} by at \
                 least {}, and be at least 1s",
                humantime::format_duration(self.ttl),
                humantime::format_duration(self.max_clock_skew),
                if reserve.is_zero() {
                    String::new()
                } else {
                    format!(
                        " + --kill-grace ({}) + {}ms",
                        humantime::format_duration(grace),
                        KILL_MARGIN.as_millis()
                    )
                },
                humantime::format_duration(MIN_RENEW_DEADLINE)
            )));
        }
        config.renew_period = self
            .renew_interval
            .unwrap_or_else(|| (room / 2).min(DEFAULT_RENEW_INTERVAL));
        let room = |e: String| {
            CliError::usage(format!(
                "{e} (--renew-interval + --kill-grace + {} ms must be under --ttl - 1s - --max-clock-skew)",
                KILL_MARGIN.as_millis()
            ))
        };
        config.validate().map_err(|e| room(e.to_string()))?;
        if !grace.is_zero() && config.renew_period + margin >= config.renew_deadline() {
            return Err(room(format!(
                "no room to stop the command before the deadline: validity {:?}",
                config.renew_deadline()
            )));
        }
        Ok(config)
    }

    /// The same as an election's timing.
    ///
    /// # Errors
    /// As [`TimingArgs::config`].
    pub fn election(&self, grace: Duration) -> Result<Timing, CliError> {
        self.config(grace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ttl: u64, renew: u64) -> TimingArgs {
        TimingArgs {
            ttl: Duration::from_secs(ttl),
            renew_interval: Some(Duration::from_secs(renew)),
            retry_interval: Duration::from_secs(1),
            max_clock_skew: Duration::from_millis(500),
        }
    }

    #[test]
    fn a_grace_that_leaves_no_room_to_renew_is_refused() {
        // Validity 5 s - 1 s - 0.5 s = 3.5 s: 2 s + 1 s + 0.25 s fits, 2 s + 1.5 s does not.
        let config = timing(5, 2).config(Duration::from_secs(1)).expect("valid");
        assert_eq!(config.renew_deadline(), Duration::from_millis(3500));
        let error = timing(5, 2)
            .config(Duration::from_millis(1500))
            .expect_err("no room");
        assert_eq!(error.code, crate::error::EXIT_USAGE);
        assert!(error.message.contains("--kill-grace"), "{error}");
        // Without a command (no grace) only the lease timing is checked.
        assert!(timing(5, 2).config(Duration::ZERO).is_ok());
    }

    #[test]
    fn a_derived_renew_interval_is_reported_as_the_ttl() {
        let mut short = timing(2, 0);
        short.renew_interval = None;
        let error = short.config(Duration::from_secs(2)).expect_err("too short");
        assert!(error.message.contains("--ttl 2s is too short"), "{error}");
        assert!(!error.message.contains("renew"), "{error}");
        short.ttl = Duration::from_secs(15);
        let config = short.config(Duration::from_secs(2)).expect("default");
        assert_eq!(config.renew_period, DEFAULT_RENEW_INTERVAL);
    }
}
