//! What the embedded store counts: round trips by kind, tombstones passed over by scans,
//! and LWTs per partition (as the CQL test server counts Paxos rounds per partition).

use std::collections::HashMap;

/// Store calls so far, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StoreCounts {
    /// `enqueue` LWTs.
    pub enqueue_lwts: u64,
    /// `claim` LWTs.
    pub claim_lwts: u64,
    /// `heartbeat` LWTs.
    pub heartbeat_lwts: u64,
    /// `complete`, `reschedule`, `requeue` and `purge` LWTs.
    pub finish_lwts: u64,
    /// Linearizable (SERIAL) reads.
    pub serial_reads: u64,
    /// Plain item reads.
    pub peeks: u64,
    /// Index scans (one read of one bucket).
    pub index_scans: u64,
    /// Cursor and dead-letter reads.
    pub other_reads: u64,
    /// Plain write requests (index, cursor, dead letters; an entry's move, one batch on
    /// CQL, is one).
    pub plain_writes: u64,
    /// Deleted index rows passed over by scans (Cassandra's "tombstone cells read").
    pub tombstones_scanned: u64,
    /// Most tombstones one scan passed over: the figure Cassandra warns about past its
    /// `tombstone_warn_threshold` (1,000) and fails the read for past its failure threshold.
    pub max_tombstones_scanned: u64,
    /// Scans that passed over more than 1,000 tombstones (Cassandra's default warning
    /// threshold): each would be a warning in a node's log.
    pub tombstone_warnings: u64,
    /// Range deletions of index entries (each one tombstone covering many rows).
    pub range_deletes: u64,
    /// Live index entries a range deletion deleted: a scanner range-deletes only ranges it
    /// found dead that no entry can land in any more, so this stays zero.
    pub live_entries_range_deleted: u64,
    /// LWTs on the partition that had the most.
    pub hottest_partition_lwts: u64,
    /// Partitions that had at least one LWT.
    pub lwt_partitions: u64,
}

impl StoreCounts {
    /// Every LWT.
    pub fn lwts(&self) -> u64 {
        self.enqueue_lwts + self.claim_lwts + self.heartbeat_lwts + self.finish_lwts
    }

    /// Every read.
    pub fn reads(&self) -> u64 {
        self.serial_reads + self.peeks + self.index_scans + self.other_reads
    }
}

#[derive(Debug, Default)]
pub(super) struct Counter {
    pub(super) counts: StoreCounts,
    pub(super) per_partition: HashMap<String, u64>,
}

impl Counter {
    pub(super) fn lwt(&mut self, partition: String) {
        let n = self.per_partition.entry(partition).or_default();
        *n += 1;
        let n = *n;
        self.counts.hottest_partition_lwts = self.counts.hottest_partition_lwts.max(n);
        self.counts.lwt_partitions = self.per_partition.len() as u64;
    }
}
