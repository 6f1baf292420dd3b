//! When a periodic job ticks, and what each tick enqueues.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use cql_lease::{InvalidArgument, check_text};

use crate::error::QueueError;
use crate::new_item::{MAX_UNIQUE_KEY_LEN, NewItem};

/// Shortest interval of [`Schedule::every`].
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Longest interval of [`Schedule::every`]: a year.
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);
/// Longest periodic job name, in bytes (its ticks' unique keys add the prefix and the time).
pub const MAX_JOB_NAME_LEN: usize = MAX_UNIQUE_KEY_LEN - 40;

/// When a periodic job ticks: every interval, or by a cron expression. Tick times follow from
/// the schedule and the wall clock alone, so every process agrees on them without asking.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// At every whole multiple of the interval since the Unix epoch (in milliseconds): an
    /// hourly job ticks on the hour (UTC), whoever leads.
    Every(Duration),
    /// The times a cron expression gives, in UTC.
    Cron(Box<cron::Schedule>),
}

impl Schedule {
    /// Ticks every `interval`, at its whole multiples since the Unix epoch.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] for an interval outside [`MIN_INTERVAL`] ..=
    /// [`MAX_INTERVAL`] or not a whole number of milliseconds.
    pub fn every(interval: Duration) -> Result<Self, QueueError> {
        if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&interval)
            || !interval.subsec_nanos().is_multiple_of(1_000_000)
        {
            return Err(invalid(
                "interval",
                format!(
                    "{interval:?}: it must be a whole number of milliseconds from {MIN_INTERVAL:?} to {MAX_INTERVAL:?}"
                ),
            ));
        }
        Ok(Schedule::Every(interval))
    }

    /// Ticks at the times of the cron expression `expression` (the `cron` crate's syntax:
    /// seconds, minutes, hours, day of month, month, day of week, optional year; for example
    /// `0 */5 * * * *` every five minutes), in UTC.
    ///
    /// # Errors
    ///
    /// [`QueueError::InvalidArgument`] when the expression does not parse, or never ticks.
    pub fn cron(expression: &str) -> Result<Self, QueueError> {
        let schedule = cron::Schedule::from_str(expression).map_err(|error| {
            // The parser's message is the expression again with a caret under the fault.
            let caret = error.to_string().lines().last().unwrap_or_default().trim_end().len();
            invalid(
                "cron expression",
                format!(
                    "{expression:?} does not parse (near column {caret}); it takes six or seven fields: seconds, minutes, hours, day of month, month, day of week, optional year"
                ),
            )
        })?;
        if schedule.upcoming(Utc).next().is_none() {
            return Err(invalid(
                "cron expression",
                format!("{expression:?} has no time to come"),
            ));
        }
        Ok(Schedule::Cron(Box::new(schedule)))
    }

    /// The last tick strictly before `before` (milliseconds since the epoch), if any.
    pub(crate) fn previous_before(&self, before: i64) -> Option<i64> {
        match self {
            Schedule::Every(interval) => {
                let every = i64::try_from(interval.as_millis()).ok()?.max(1);
                before.checked_sub(1)?.div_euclid(every).checked_mul(every)
            }
            Schedule::Cron(schedule) => {
                let at = DateTime::<Utc>::from_timestamp_millis(before)?;
                schedule
                    .after(&at)
                    .next_back()
                    .map(|tick| tick.timestamp_millis())
            }
        }
    }

    /// The first tick strictly after `after` (milliseconds since the epoch), if any.
    pub(crate) fn next_after(&self, after: i64) -> Option<i64> {
        match self {
            Schedule::Every(interval) => {
                let every = i64::try_from(interval.as_millis()).ok()?.max(1);
                after.div_euclid(every).checked_add(1)?.checked_mul(every)
            }
            Schedule::Cron(schedule) => {
                let at = DateTime::<Utc>::from_timestamp_millis(after)?;
                schedule
                    .after(&at)
                    .next()
                    .map(|tick| tick.timestamp_millis())
            }
        }
    }
}

/// What a periodic job does about ticks that came while nobody led (the leader crashed and
/// its lease had not expired yet, or the whole fleet was down).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MissedTicks {
    /// Enqueued late by the next leader, as far back as the scheduler's catch-up window.
    #[default]
    RunLate,
    /// Skipped: a new leader enqueues only the ticks from its election on.
    Skip,
}

/// Builds a tick's item from its time.
type Make = Arc<dyn Fn(SystemTime) -> Result<NewItem, QueueError> + Send + Sync>;

/// A job enqueued at every tick of its [`Schedule`] by whichever process leads the
/// scheduler's election (see [`Scheduler`](super::Scheduler)), each tick one item: its
/// unique key is the job's name and the tick's time.
#[derive(Clone)]
pub struct PeriodicJob {
    pub(crate) name: String,
    pub(crate) schedule: Schedule,
    pub(crate) make: Make,
    pub(crate) missed: MissedTicks,
}

impl std::fmt::Debug for PeriodicJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeriodicJob")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl PeriodicJob {
    /// The job `name`, enqueued at every tick of `schedule` as the item `make` builds from the
    /// tick's time (its payload and `run_at`; the unique key is the scheduler's). `make` is
    /// called once per tick enqueued, by the leader; it should be quick.
    pub fn new(
        name: &str,
        schedule: Schedule,
        make: impl Fn(SystemTime) -> Result<NewItem, QueueError> + Send + Sync + 'static,
    ) -> Self {
        PeriodicJob {
            name: name.to_owned(),
            schedule,
            make: Arc::new(make),
            missed: MissedTicks::default(),
        }
    }

    /// What to do about ticks missed while nobody led ([`MissedTicks::RunLate`] unless set).
    #[must_use]
    pub fn missed(mut self, missed: MissedTicks) -> Self {
        self.missed = missed;
        self
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn check(&self) -> Result<(), QueueError> {
        check_text("periodic job name", &self.name, MAX_JOB_NAME_LEN)?;
        Ok(())
    }

    /// The unique key of the tick at `tick` (milliseconds since the epoch).
    pub(crate) fn key(&self, tick: i64) -> String {
        format!("periodic/{}/{tick}", self.name)
    }

    /// The item of the tick at `tick`, with its unique key.
    pub(crate) fn item(&self, tick: i64) -> Result<NewItem, QueueError> {
        let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(tick).unwrap_or(0));
        let item = (self.make)(at)?;
        if item.unique_key.is_some() {
            return Err(invalid(
                "periodic job item",
                format!(
                    "job {:?}: its items get their unique key from their tick; set none",
                    self.name
                ),
            ));
        }
        Ok(item.unique(&self.key(tick)))
    }
}

fn invalid(field: &'static str, reason: String) -> QueueError {
    InvalidArgument::Invalid { field, reason }.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interval ticks fall on whole multiples of the interval, strictly after the time given.
    #[test]
    fn interval_ticks_fall_on_multiples_of_the_interval() {
        let every = Schedule::every(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(every.next_after(0), Some(60_000));
        assert_eq!(every.next_after(59_999), Some(60_000));
        assert_eq!(every.next_after(60_000), Some(120_000));
    }

    /// The tick before a time is the last one strictly before it, for both kinds.
    #[test]
    fn the_previous_tick_is_strictly_before() {
        let every = Schedule::every(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(every.previous_before(120_000), Some(60_000));
        assert_eq!(every.previous_before(120_001), Some(120_000));
        let hourly = Schedule::cron("0 0 * * * *").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hourly.previous_before(7_200_000), Some(3_600_000));
        assert_eq!(hourly.previous_before(7_200_001), Some(7_200_000));
    }

    /// Cron ticks are the expression's times in UTC.
    #[test]
    fn cron_ticks_are_the_expressions_times() {
        let hourly = Schedule::cron("0 0 * * * *").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(hourly.next_after(0), Some(3_600_000));
        assert_eq!(hourly.next_after(3_600_000), Some(7_200_000));
    }

    /// Bad schedules are refused with a typed error.
    #[test]
    fn bad_schedules_are_refused() {
        for interval in [
            Duration::ZERO,
            Duration::from_millis(99),
            Duration::from_micros(100_500),
        ] {
            assert!(matches!(
                Schedule::every(interval),
                Err(QueueError::InvalidArgument(_))
            ));
        }
        let Err(five_fields) = Schedule::cron("*/2 * * * *") else {
            panic!("a five-field expression parsed");
        };
        let five_fields = five_fields.to_string();
        assert!(five_fields.contains("six or seven fields"), "{five_fields}");
        for expression in ["", "every minute", "0 0 0 30 2 *"] {
            assert!(
                matches!(
                    Schedule::cron(expression),
                    Err(QueueError::InvalidArgument(_))
                ),
                "{expression:?}"
            );
        }
    }
}
