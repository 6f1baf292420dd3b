//! Counters tests and benchmarks assert on: tombstones scanned by reads, Paxos rounds and
//! their contention per partition, consistency levels used.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use scylla_cql::Consistency;
use scylla_cql::frame::types::SerialConsistency;

/// Tombstones scanned by reads, counted as Cassandra counts them for its thresholds: every
/// row tombstone, range tombstone bound, deleted cell and expired TTL cell a read walks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TombstoneStats {
    /// Per read, in order: (statement text, tombstones scanned, live rows returned).
    pub reads: Vec<(std::sync::Arc<str>, u64, u64)>,
    /// Most tombstones one read scanned.
    pub max: u64,
    /// Tombstones scanned by all reads.
    pub total: u64,
    /// Warnings recorded for reads over `tombstone_warn_threshold`, worded as Cassandra
    /// logs them.
    pub warnings: Vec<String>,
    /// Reads failed for crossing `tombstone_failure_threshold`.
    pub failures: u64,
}

impl TombstoneStats {
    /// Tombstones scanned by the last read, if any.
    pub fn last(&self) -> Option<u64> {
        self.reads.last().map(|r| r.1)
    }
}

/// A partition: `(keyspace, table, partition key as text)`.
pub type PartitionId = (String, String, String);

/// LWTs per partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaxosStats {
    /// Paxos rounds (LWTs, conditional batches, SERIAL reads) per partition.
    pub rounds: HashMap<PartitionId, u64>,
    /// Rounds that overlapped another round of the same partition.
    pub contended: HashMap<PartitionId, u64>,
    /// Rounds answered with a CAS `WriteTimeout` because of contention.
    pub timeouts: u64,
}

impl PaxosStats {
    /// Rounds on all partitions.
    pub fn total_rounds(&self) -> u64 {
        self.rounds.values().sum()
    }
    /// Contended rounds on all partitions.
    pub fn total_contended(&self) -> u64 {
        self.contended.values().sum()
    }
}

/// The levels one request was sent at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsistencyUse {
    /// The statement (the first one of a batch), shared with every other use of it.
    pub statement: std::sync::Arc<str>,
    /// Its consistency.
    pub consistency: Consistency,
    /// Its serial consistency, when set.
    pub serial: Option<SerialConsistency>,
}

/// Open Paxos rounds per partition. A round holds its partition from its start until the
/// answer is sent; a round starting while another is open is contended.
#[derive(Debug, Default)]
pub struct PaxosTracker {
    inner: Mutex<(PaxosStats, HashMap<PartitionId, Vec<Instant>>)>,
}

impl PaxosTracker {
    /// Opens a round on `partition`, lasting at least `min_round`; returns how many other
    /// rounds were open.
    pub fn begin(&self, partition: PartitionId, min_round: Duration) -> usize {
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        let (stats, open) = &mut *g;
        let now = Instant::now();
        let rounds = open.entry(partition.clone()).or_default();
        rounds.retain(|end| *end > now);
        let others = rounds.len();
        rounds.push(now + min_round);
        *stats.rounds.entry(partition.clone()).or_default() += 1;
        if others > 0 {
            *stats.contended.entry(partition).or_default() += 1;
        }
        others
    }

    /// Counts a round answered with a contention timeout.
    pub fn timed_out(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.0.timeouts += 1;
        }
    }

    /// A snapshot of the counts.
    pub fn stats(&self) -> PaxosStats {
        self.inner.lock().map(|g| g.0.clone()).unwrap_or_default()
    }
}
