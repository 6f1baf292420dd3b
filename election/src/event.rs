//! What a campaign or an observer reports.

use cql_lease::{FencingToken, LossReason, StoredLease};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A leader: who, its value, and its term. Reported by [`ElectionEvent::LeaderChanged`],
/// [`crate::Election::leader`] and [`crate::Election::observe`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    /// The candidate id it campaigned with.
    pub candidate: String,
    /// Its proclaimed value (e.g. its address).
    pub value: Option<String>,
    /// Its term: the fencing token of its lease, strictly increasing across terms.
    pub term: FencingToken,
}

impl From<StoredLease> for Leader {
    fn from(l: StoredLease) -> Self {
        Leader {
            candidate: l.owner,
            value: l.value,
            term: l.token,
        }
    }
}

/// Why a leader stopped being one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeposeReason {
    /// A renewal was refused: the lease is held by someone else, or gone.
    RenewalRejected,
    /// No renewal completed before the deadline (slow store, paused process).
    Expired,
    /// Renewals failed with store errors until the deadline.
    StoreUnreachable,
    /// The leader resigned.
    Resigned,
}

impl From<&LossReason> for DeposeReason {
    fn from(r: &LossReason) -> Self {
        match r {
            LossReason::NotHolder => DeposeReason::RenewalRejected,
            LossReason::Expired => DeposeReason::Expired,
            LossReason::Unreachable => DeposeReason::StoreUnreachable,
            LossReason::Released => DeposeReason::Resigned,
        }
    }
}

/// An event of a [`crate::Campaign`].
#[derive(Debug, Clone)]
pub enum ElectionEvent {
    /// This candidate leads from now on, for `term`.
    Elected {
        /// The term (the lease's fencing token); fence every leader-only write with it.
        term: FencingToken,
        /// The value it leads with.
        value: Option<String>,
        /// The local instant by which it must stop acting unless renewed, when elected; the
        /// `deadline` watch follows it as renewals move it forward.
        must_stop_by: Instant,
        /// This term's local deadline (monotonic clock), moved forward by each successful
        /// renewal; it keeps its last value after the term ends. A leader that must be done
        /// *before* the deadline (stop a process, flush) waits on it instead of polling
        /// the store. Also [`crate::CampaignHandle::term_deadline`].
        deadline: watch::Receiver<Instant>,
        /// Cancelled when this term ends, before the lease can expire for anyone else.
        stop: CancellationToken,
    },
    /// This candidate's `term` ended; it has already stopped acting (its token is cancelled).
    Deposed {
        /// The term that ended.
        term: FencingToken,
        /// Why.
        reason: DeposeReason,
        /// When the leader was told to stop (just before its token was cancelled).
        stopped_at: Instant,
    },
    /// Another candidate leads (seen while following).
    LeaderChanged {
        /// The leader.
        leader: Option<Leader>,
    },
}
