//! Work-queue settings: sharding, claim timing, retries.

use std::time::Duration;

use cql_lease::{InvalidArgument, LeaseConfig};

/// Largest payload accepted by `enqueue`, in bytes (a row is not a blob store).
pub const MAX_PAYLOAD_LEN: usize = 64 * 1024;

/// How a queue is laid out and how its claims behave.
///
/// A claim is a lease on one item: `claim.ttl` is how long the store keeps a silent worker's
/// claim, `claim.renew_interval` is the heartbeat period, `claim.retry_interval` is how often
/// an idle worker looks for work (jittered), and the worker stops acting `1 s + max_clock_skew`
/// before the TTL can run out, exactly as a lease holder does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    /// Partitions per queue. Claims on different partitions never contend in Paxos; an idle
    /// worker reads the head of every partition, so more shards cost more reads per poll.
    pub shards: u16,
    /// Claim timing.
    pub claim: LeaseConfig,
    /// Claims an item may have; a failure on the last one discards it.
    pub max_attempts: i32,
    /// Wait before the second attempt; doubled for each later one.
    pub retry_backoff: Duration,
    /// Longest wait between attempts.
    pub max_retry_backoff: Duration,
    /// Rows read per partition per scan.
    pub scan_limit: u32,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            shards: 4,
            claim: LeaseConfig::default(),
            max_attempts: 5,
            retry_backoff: Duration::from_secs(1),
            max_retry_backoff: Duration::from_secs(3600),
            scan_limit: 32,
        }
    }
}

impl QueueConfig {
    /// Checks every setting.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.claim.validate()?;
        let bad = |reason: String| {
            Err(InvalidArgument::Invalid {
                field: "queue config",
                reason,
            })
        };
        if !(1..=1024).contains(&self.shards) {
            return bad(format!("shards must be 1..=1024, not {}", self.shards));
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_and_backs_off() {
        assert!(QueueConfig::default().validate().is_ok());
        for bad in [
            QueueConfig {
                shards: 0,
                ..QueueConfig::default()
            },
            QueueConfig {
                max_attempts: 0,
                ..QueueConfig::default()
            },
            QueueConfig {
                scan_limit: 0,
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
