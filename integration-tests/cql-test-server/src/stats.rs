//! Counters tests and benchmarks assert on: tombstones scanned by reads, Paxos rounds and
//! their contention per partition, consistency levels used.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
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

/// Paxos per partition: operations, the ballots they took, and what contention cost them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaxosStats {
    /// Paxos operations (LWTs, conditional batches, SERIAL reads) per partition: one per
    /// request, however many ballots it took.
    pub rounds: HashMap<PartitionId, u64>,
    /// Ballots prepared per partition: one per Paxos round, retries after contention
    /// included (Cassandra retries a pre-empted round with a new ballot). Without the
    /// contention model (`ServerOptions::paxos_contention` off) each operation is one round.
    pub attempts: HashMap<PartitionId, u64>,
    /// Contended rounds per partition. With the contention model: rounds pre-empted by a
    /// newer ballot of the partition before they could propose, each then retried after a
    /// back-off (Cassandra's `contentions`). Without it: rounds that started while another
    /// round of the partition was open.
    pub contended: HashMap<PartitionId, u64>,
    /// Operations answered with a timeout because of contention (a CAS `WriteTimeout`, or a
    /// `ReadTimeout` for a SERIAL read).
    pub timeouts: u64,
}

impl PaxosStats {
    /// Paxos operations on all partitions.
    pub fn total_rounds(&self) -> u64 {
        self.rounds.values().sum()
    }
    /// Ballots prepared on all partitions (rounds, retries included).
    pub fn total_attempts(&self) -> u64 {
        self.attempts.values().sum()
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

/// Paxos state per partition, and the counts.
///
/// Two ways to use it. Without the contention model, [`PaxosTracker::begin`] opens a round
/// that holds its partition for a fixed time and reports the rounds it overlaps. With it, an
/// operation is counted once ([`PaxosTracker::operation`]) and each of its rounds prepares a
/// fresh ballot ([`PaxosTracker::prepare`]), which is the partition's newest promise until
/// another round prepares; the round's proposal ([`Ballot::propose`]) is accepted only if
/// its ballot is still the newest, as replicas refuse a proposal below their promise.
#[derive(Debug, Default)]
pub struct PaxosTracker {
    inner: Mutex<Tracker>,
}

#[derive(Debug, Default)]
struct Tracker {
    stats: PaxosStats,
    /// Without the model: when the open rounds of each partition end.
    open: HashMap<PartitionId, Vec<Instant>>,
    /// With the model: partitions with rounds between prepare and propose.
    promised: HashMap<PartitionId, Promise>,
    last_ballot: u64,
}

/// A partition's newest promised ballot, and how many rounds wait to propose.
#[derive(Debug, Default)]
struct Promise {
    newest: u64,
    in_flight: usize,
}

/// A prepared round: its ballot was the partition's newest when prepared. Dropped without
/// proposing (a timed-out or cancelled round), it leaves the partition.
#[derive(Debug)]
pub struct Ballot {
    tracker: Arc<PaxosTracker>,
    partition: PartitionId,
    ballot: u64,
    /// Other rounds of the partition between their prepare and propose when this one
    /// prepared.
    pub others: usize,
    done: bool,
}

impl Ballot {
    /// Proposes: accepted when no round of the partition prepared since this one (its ballot
    /// is still the newest promise); otherwise the round is counted as contended.
    pub fn propose(mut self) -> bool {
        self.done = true;
        let Ok(mut g) = self.tracker.inner.lock() else {
            return false;
        };
        let accepted = g.leave(&self.partition) == Some(self.ballot);
        if !accepted {
            *g.stats.contended.entry(self.partition.clone()).or_default() += 1;
        }
        accepted
    }
}

impl Drop for Ballot {
    fn drop(&mut self) {
        if !self.done
            && let Ok(mut g) = self.tracker.inner.lock()
        {
            g.leave(&self.partition);
        }
    }
}

impl Tracker {
    /// One round of `partition` stops waiting to propose; returns the newest ballot it saw.
    fn leave(&mut self, partition: &PartitionId) -> Option<u64> {
        let promise = self.promised.get_mut(partition)?;
        let newest = promise.newest;
        promise.in_flight = promise.in_flight.saturating_sub(1);
        if promise.in_flight == 0 {
            // Nobody left to propose: the promise no longer matters.
            self.promised.remove(partition);
        }
        Some(newest)
    }
}

impl PaxosTracker {
    /// Without the contention model: opens a round on `partition`, lasting at least
    /// `min_round`; returns how many other rounds were open.
    pub fn begin(&self, partition: PartitionId, min_round: Duration) -> usize {
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        let Tracker { stats, open, .. } = &mut *g;
        let now = Instant::now();
        let rounds = open.entry(partition.clone()).or_default();
        rounds.retain(|end| *end > now);
        let others = rounds.len();
        rounds.push(now + min_round);
        *stats.rounds.entry(partition.clone()).or_default() += 1;
        *stats.attempts.entry(partition.clone()).or_default() += 1;
        if others > 0 {
            *stats.contended.entry(partition).or_default() += 1;
        }
        others
    }

    /// With the contention model: counts one Paxos operation on `partition` (its rounds are
    /// counted by [`PaxosTracker::prepare`]).
    pub fn operation(&self, partition: &PartitionId) {
        if let Ok(mut g) = self.inner.lock() {
            *g.stats.rounds.entry(partition.clone()).or_default() += 1;
        }
    }

    /// With the contention model: prepares a round of `partition` with a ballot newer than
    /// every other, which pre-empts every round of the partition that has not proposed yet.
    pub fn prepare(self: &Arc<Self>, partition: &PartitionId) -> Ballot {
        let (ballot, others) = match self.inner.lock() {
            Ok(mut g) => {
                g.last_ballot += 1;
                let ballot = g.last_ballot;
                *g.stats.attempts.entry(partition.clone()).or_default() += 1;
                let promise = g.promised.entry(partition.clone()).or_default();
                let others = promise.in_flight;
                promise.newest = ballot;
                promise.in_flight += 1;
                (ballot, others)
            }
            Err(_) => (0, 0),
        };
        Ballot {
            tracker: Arc::clone(self),
            partition: partition.clone(),
            ballot,
            others,
            done: false,
        }
    }

    /// With the contention model, an operation run at once (an injected fault's execution):
    /// one round that pre-empts the rounds in flight and is never pre-empted itself;
    /// returns how many rounds it pre-empted.
    pub fn at_once(&self, partition: &PartitionId) -> usize {
        let Ok(mut g) = self.inner.lock() else {
            return 0;
        };
        g.last_ballot += 1;
        let ballot = g.last_ballot;
        *g.stats.rounds.entry(partition.clone()).or_default() += 1;
        *g.stats.attempts.entry(partition.clone()).or_default() += 1;
        match g.promised.get_mut(partition) {
            Some(promise) => {
                promise.newest = ballot;
                promise.in_flight
            }
            None => 0,
        }
    }

    /// Counts an operation answered with a contention timeout.
    pub fn timed_out(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.stats.timeouts += 1;
        }
    }

    /// A snapshot of the counts.
    pub fn stats(&self) -> PaxosStats {
        self.inner
            .lock()
            .map(|g| g.stats.clone())
            .unwrap_or_default()
    }
}
