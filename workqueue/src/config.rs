//! Work-queue settings: index layout, claim timing, retries.

use std::time::Duration;

use cql_lease::{InvalidArgument, MAX_DURATION, MAX_TTL_SECS, Timing};

/// Largest payload accepted by `enqueue`, in bytes (a row is not a blob store).
pub const MAX_PAYLOAD_LEN: usize = 64 * 1024;

/// How a queue's claims are decided. A queue is in one mode for its lifetime: the modes keep
/// their items in different tables and their index under different names, so the same
/// queue name in the other mode is another, empty queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClaimMode {
    /// One Paxos LWT per claim on the item's own row (the default): exact unique keys,
    /// conditional finishes, a SERIAL read-back of lost answers.
    #[default]
    Lwt,
    /// No LWT at all: the Cassandra wiki's bakery numbering per item on plain cells, for stores
    /// without LWTs (ScyllaDB 6.0–2025.3 tablet keyspaces, some Cassandra-compatible
    /// services). No unique keys; see the crate's `bakery` docs and the README for what it
    /// guarantees and assumes.
    Bakery,
}

/// Which available item a claim takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClaimOrder {
    /// At random among the first [`QueueConfig::choice`] candidates (the default), so
    /// claimers in different processes rarely race for the same item; items are not taken
    /// in a strict order.
    #[default]
    Spread,
    /// Strictly the oldest candidate first: by position, which is the enqueue time of an
    /// immediate item and the `run_at` of a delayed or retrying one. One worker so
    /// processes items in enqueue order; several run them concurrently, so they finish in
    /// any order, and processes sharing a queue each take the oldest of their own share and
    /// race more for the head (see the crate docs' convoys).
    OldestFirst,
}

/// How a queue is laid out and how its claims behave.
///
/// A claim is a lease on one item: `timing.lease_duration` is how long the store keeps a
/// silent worker's claim, `timing.renew_period` is the heartbeat period, `timing.retry_period`
/// (1 s by default, as River's fetch poll) is how often
/// an idle worker looks for work (each pause drawn between half and all of it, the shared
/// `cql_lease::hold::jittered` policy), and the worker stops acting `1 s + max_clock_skew`
/// before the TTL can run out, exactly as a lease holder does. `timing.request_timeout`
/// (derived from the claim timing when `None`: a third of the validity) bounds every store
/// request of the queue, scans, candidate reads and stats included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Claim timing: the same [`Timing`] as leases, elections and locks.
    pub timing: Timing,
    /// Claims an item may have; a failure on the last one discards it.
    pub max_attempts: i32,
    /// Wait before the second attempt; doubled for each later one.
    pub retry_backoff: Duration,
    /// Longest wait between attempts.
    pub max_retry_backoff: Duration,
    /// Index rows read per scan (one read fills the process's candidate buffer).
    pub scan_limit: u32,
    /// Width of one index partition (time bucket of positions).
    pub bucket_width: Duration,
    /// Which item a claim takes: [`ClaimOrder::Spread`] (default) or
    /// [`ClaimOrder::OldestFirst`].
    pub order: ClaimOrder,
    /// With [`ClaimOrder::Spread`], a claimer picks at random among the first `choice`
    /// buffered candidates, so claimers in different processes rarely race for the same
    /// item (1: strictly the first, as [`ClaimOrder::OldestFirst`]).
    pub choice: u32,
    /// A process rescans from the shared low-watermark cursor at least this often (it finds
    /// entries written behind its own position, and moves the cursor on).
    pub cursor_refresh: Duration,
    /// Where the first scan of a queue whose cursor was never written starts: this long
    /// before the scanner's clock (enqueues never place items earlier than their clock).
    pub cold_start: Duration,
    /// How long a completed item's `done` state is kept (its row marker and attempt number
    /// stay for good): the window after completion during which a new enqueue of the same
    /// unique key is still reported as a duplicate (whole seconds, at least 1 s).
    pub done_retention: Duration,
    /// How claims are decided: [`ClaimMode::Lwt`] (default) or [`ClaimMode::Bakery`].
    pub claim_mode: ClaimMode,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            timing: Timing {
                retry_period: Duration::from_secs(1),
                ..Timing::default()
            },
            max_attempts: 5,
            retry_backoff: Duration::from_secs(1),
            max_retry_backoff: Duration::from_secs(3600),
            scan_limit: 64,
            bucket_width: Duration::from_secs(60),
            order: ClaimOrder::Spread,
            choice: 4,
            cursor_refresh: Duration::from_secs(5),
            cold_start: Duration::from_secs(600),
            done_retention: Duration::from_secs(24 * 3600),
            claim_mode: ClaimMode::Lwt,
        }
    }
}

impl QueueConfig {
    /// Checks every setting: the timing ([`Timing::validate`]), and every other duration at
    /// most 630720000 s (20 years, [`MAX_DURATION`], the timing's own bound), so that no
    /// deadline or clock reading derived from one overflows.
    ///
    /// # Errors
    /// [`InvalidArgument::Timing`] for the timing, else [`InvalidArgument::Invalid`] naming
    /// the setting.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.timing.validate()?;
        let bad = |reason: String| {
            Err(InvalidArgument::Invalid {
                field: "queue config",
                reason,
            })
        };
        for (field, value) in [
            ("retry_backoff", self.retry_backoff),
            ("max_retry_backoff", self.max_retry_backoff),
            ("bucket_width", self.bucket_width),
            ("cursor_refresh", self.cursor_refresh),
            ("cold_start", self.cold_start),
            ("done_retention", self.done_retention),
        ] {
            if value > MAX_DURATION {
                return bad(format!(
                    "{field} {value:?} must be at most {MAX_TTL_SECS} s"
                ));
            }
        }
        if self.max_attempts < 1 {
            return bad(format!(
                "max_attempts must be at least 1, not {}",
                self.max_attempts
            ));
        }
        if !(1..=10_000).contains(&self.scan_limit) {
            return bad(format!(
                "scan_limit must be 1..=10000, not {}",
                self.scan_limit
            ));
        }
        if !(1..=self.scan_limit).contains(&self.choice) {
            return bad(format!(
                "choice must be 1..=scan_limit, not {}",
                self.choice
            ));
        }
        if self.bucket_width < Duration::from_secs(1) {
            return bad("bucket_width must be at least 1 s".into());
        }
        // Zero would make every claim pass rescan from the cursor.
        if self.cursor_refresh < Duration::from_millis(10) {
            return bad("cursor_refresh must be at least 10 ms".into());
        }
        // A resent enqueue is recognised by its origin, not by the marker's lifetime.
        if self.done_retention < Duration::from_secs(1) {
            return bad("done_retention must be at least 1 s (a TTL in whole seconds)".into());
        }
        if self.retry_backoff > self.max_retry_backoff {
            return bad("retry_backoff exceeds max_retry_backoff".into());
        }
        Ok(())
    }

    /// The wait after failed attempt number `attempt` (1 for the first).
    pub fn backoff(&self, attempt: i32) -> Duration {
        let doublings = u32::try_from(attempt.saturating_sub(1))
            .unwrap_or(0)
            .min(30);
        self.retry_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_retry_backoff)
    }

    /// How far behind its own clock a scanner keeps the cursor: `1 s + 2 x max_clock_skew`.
    /// An enqueue whose write lands within `lag - 2 x skew` of its clock reading can never be
    /// passed by the cursor (see the crate docs).
    pub fn cursor_lag(&self) -> Duration {
        Duration::from_secs(1) + self.timing.max_clock_skew * 2
    }

    /// How many of the first buffered candidates a claim picks among.
    pub(crate) fn pick_among(&self) -> usize {
        match self.order {
            ClaimOrder::OldestFirst => 1,
            ClaimOrder::Spread => usize::try_from(self.choice).unwrap_or(usize::MAX),
        }
    }

    pub(crate) fn bucket_micros(&self) -> i64 {
        micros(self.bucket_width).max(1)
    }
}

/// A duration in whole microseconds, saturating.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_and_backs_off() {
        assert!(QueueConfig::default().validate().is_ok());
        // Spread is the default; oldest-first picks only the first candidate.
        assert_eq!(QueueConfig::default().order, ClaimOrder::Spread);
        assert_eq!(QueueConfig::default().pick_among(), 4);
        let oldest = QueueConfig {
            order: ClaimOrder::OldestFirst,
            ..QueueConfig::default()
        };
        assert_eq!(oldest.pick_among(), 1);
        for bad in [
            QueueConfig {
                max_attempts: 0,
                ..QueueConfig::default()
            },
            QueueConfig {
                scan_limit: 0,
                ..QueueConfig::default()
            },
            QueueConfig {
                choice: 100,
                ..QueueConfig::default()
            },
            QueueConfig {
                bucket_width: Duration::ZERO,
                ..QueueConfig::default()
            },
            QueueConfig {
                retry_backoff: Duration::from_secs(7200),
                ..QueueConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let c = QueueConfig::default();
        assert_eq!(c.backoff(1), Duration::from_secs(1));
        assert_eq!(c.backoff(3), Duration::from_secs(4));
        assert_eq!(c.backoff(40), Duration::from_secs(3600));
    }
}
