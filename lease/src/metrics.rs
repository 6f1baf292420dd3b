//! The workspace's metrics: every name, its labels and its meaning, defined once here and
//! recorded through the [`metrics`] facade (cql-election and cql-workqueue record through
//! this module too).
//!
//! Nothing is exported from the libraries: until an application installs a recorder (the
//! `cqlcoord` CLI installs the Prometheus exporter behind `--metrics-addr`), every call is a
//! no-op costing a thread-local look-up. Labels are `&'static str` kinds (operation,
//! outcome, algorithm, claim kind) or the election's or queue's name, shared, never
//! copied; never ids or tokens, so label sets stay bounded.
//!
//! ```
//! use cql_lease::metrics;
//! // An application that installed a recorder describes the metrics once, at start-up.
//! metrics::describe();
//! assert!(metrics::ALL.iter().all(|m| m.name.starts_with("cqlcoord_")));
//! ```

use std::sync::Arc;
use std::time::Duration;

use ::metrics::{Unit, counter, gauge, histogram};
use tokio::time::Instant;

use crate::error::{LossReason, StoreError};
use crate::store::CasOutcome;

/// Store round trips: one per request sent (a retry is another), by `store` (`lease`,
/// `cells`, `queue`), `operation` and `outcome`.
pub const STORE_REQUESTS: &str = "cqlcoord_store_requests_total";
/// Latency of each store round trip, same labels as [`STORE_REQUESTS`].
pub const STORE_REQUEST_SECONDS: &str = "cqlcoord_store_request_duration_seconds";
/// Lost answers (unknown outcomes) settled by the shared read-back loop: `result` is
/// `resolved` or `unresolved` (still unknown after `resolve_timeout`).
pub const UNKNOWN_OUTCOMES: &str = "cqlcoord_unknown_outcomes_total";
/// Claims held now by this process, by `kind` (`lease`, `lock`, `queue_claim`).
pub const HELD: &str = "cqlcoord_leases_held";
/// Latency of each keep-alive renewal of a held claim, by `kind` and `outcome`.
pub const RENEW_SECONDS: &str = "cqlcoord_keepalive_renew_duration_seconds";
/// Held claims lost before their holder let go, by `kind` and `reason` (`not_holder`,
/// `expired`, `unreachable`).
pub const LOSSES: &str = "cqlcoord_keepalive_losses_total";
/// 1 while this process leads the election `election`, else 0 (counted up and down per
/// term, so two candidates of one process handing over never leave it wrong).
pub const IS_LEADER: &str = "cqlcoord_election_is_leader";
/// Terms this process started (was elected), by `election`.
pub const TERMS: &str = "cqlcoord_election_terms_started_total";
/// Items enqueued (new ones, not duplicates), by `queue`.
pub const ENQUEUED: &str = "cqlcoord_queue_items_enqueued_total";
/// Enqueues whose item was written but whose index upkeep after it failed (retried in the
/// background; the enqueue reported success), by `queue`.
pub const ENQUEUE_UPKEEP_DEFERRED: &str = "cqlcoord_queue_enqueue_upkeep_deferred_total";
/// Items claimed by this process's workers, by `queue`.
pub const CLAIMED: &str = "cqlcoord_queue_items_claimed_total";
/// Items completed, by `queue`.
pub const COMPLETED: &str = "cqlcoord_queue_items_completed_total";
/// Failed attempts rescheduled for a retry, by `queue`.
pub const FAILED: &str = "cqlcoord_queue_items_failed_total";
/// Items discarded to the dead letters (by hand or out of attempts), by `queue`.
pub const DISCARDED: &str = "cqlcoord_queue_items_discarded_total";
/// Candidates tried per successful claim (each at most one claim LWT), by `queue`.
pub const CLAIM_ATTEMPTS: &str = "cqlcoord_queue_claim_attempts";
/// Items by `queue` and `state` (`available`, `scheduled`, `running`, `dead`), as of the
/// last read of the queue's stats.
pub const DEPTH: &str = "cqlcoord_queue_items";
/// Age of the oldest available item, by `queue`, as of the last stats read (0 when none).
pub const OLDEST_AGE: &str = "cqlcoord_queue_oldest_available_age_seconds";
/// Time spent in `Lock::lock` (until the lock was held, or the call gave up), by
/// `algorithm`.
pub const LOCK_WAIT: &str = "cqlcoord_lock_wait_duration_seconds";
/// Locks acquired (`lock` or `try_lock`), by `algorithm`.
pub const LOCKS_ACQUIRED: &str = "cqlcoord_locks_acquired_total";

/// What a metric is, for [`describe`] and the README.
#[derive(Debug, Clone, Copy)]
pub struct MetricInfo {
    /// Its name.
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// What it measures.
    pub help: &'static str,
}

const fn info(name: &'static str, kind: &'static str, help: &'static str) -> MetricInfo {
    MetricInfo { name, kind, help }
}

/// Every metric of the workspace.
pub const ALL: &[MetricInfo] = &[
    info(
        STORE_REQUESTS,
        "counter",
        "Store round trips by store, operation and outcome.",
    ),
    info(
        STORE_REQUEST_SECONDS,
        "histogram",
        "Store round-trip latency.",
    ),
    info(
        UNKNOWN_OUTCOMES,
        "counter",
        "Lost answers settled by reading back, by result.",
    ),
    info(HELD, "gauge", "Claims held by this process, by kind."),
    info(
        RENEW_SECONDS,
        "histogram",
        "Keep-alive renewal latency, by kind and outcome.",
    ),
    info(
        LOSSES,
        "counter",
        "Held claims lost before release, by kind and reason.",
    ),
    info(
        IS_LEADER,
        "gauge",
        "1 while this process leads the election.",
    ),
    info(TERMS, "counter", "Terms this process started, by election."),
    info(ENQUEUED, "counter", "Items enqueued, by queue."),
    info(
        ENQUEUE_UPKEEP_DEFERRED,
        "counter",
        "Enqueued items whose index upkeep failed and went on in the background, by queue.",
    ),
    info(CLAIMED, "counter", "Items claimed, by queue."),
    info(COMPLETED, "counter", "Items completed, by queue."),
    info(
        FAILED,
        "counter",
        "Failed attempts rescheduled for a retry, by queue.",
    ),
    info(
        DISCARDED,
        "counter",
        "Items discarded to the dead letters, by queue.",
    ),
    info(
        CLAIM_ATTEMPTS,
        "histogram",
        "Candidates tried per successful claim.",
    ),
    info(DEPTH, "gauge", "Items by state, as of the last stats read."),
    info(
        OLDEST_AGE,
        "gauge",
        "Age of the oldest available item at the last stats read.",
    ),
    info(
        LOCK_WAIT,
        "histogram",
        "Time spent waiting in Lock::lock, by algorithm.",
    ),
    info(LOCKS_ACQUIRED, "counter", "Locks acquired, by algorithm."),
];

/// Describes every metric to the installed recorder (help text and unit). Call once after
/// installing one; metrics are recorded whether or not this is called.
pub fn describe() {
    for metric in ALL {
        let unit = metric.name.ends_with("_seconds").then_some(Unit::Seconds);
        let help = metric.help;
        match (metric.kind, unit) {
            ("counter", _) => ::metrics::describe_counter!(metric.name, help),
            ("gauge", Some(unit)) => ::metrics::describe_gauge!(metric.name, unit, help),
            ("gauge", None) => ::metrics::describe_gauge!(metric.name, help),
            (_, Some(unit)) => ::metrics::describe_histogram!(metric.name, unit, help),
            (_, None) => ::metrics::describe_histogram!(metric.name, help),
        }
    }
}

/// How a store round trip ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The write applied, or the read or plain write was answered.
    Applied,
    /// The conditional write was answered and did not apply.
    NotApplied,
    /// No answer: the write may or may not have applied.
    Unknown,
    /// A definite failure (not sent, refused, unavailable).
    Error,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::NotApplied => "not_applied",
            Outcome::Unknown => "unknown",
            Outcome::Error => "error",
        }
    }

    /// The outcome of `result`; `applied` tells an answered conditional write's fate.
    pub fn of<T>(result: &Result<T, StoreError>, applied: impl FnOnce(&T) -> bool) -> Self {
        match result {
            Ok(answer) if applied(answer) => Outcome::Applied,
            Ok(_) => Outcome::NotApplied,
            Err(error) if error.is_unknown() => Outcome::Unknown,
            Err(_) => Outcome::Error,
        }
    }
}

/// Records one round trip to `store` sent at `sent`.
pub fn store_request(
    store: &'static str,
    operation: &'static str,
    outcome: Outcome,
    sent: Instant,
) {
    let outcome = outcome.as_str();
    let labels = [
        ("store", store),
        ("operation", operation),
        ("outcome", outcome),
    ];
    counter!(STORE_REQUESTS, &labels).increment(1);
    histogram!(STORE_REQUEST_SECONDS, &labels).record(sent.elapsed());
}

/// Sends `call` and records it as one round trip to `store` (see [`store_request`]).
///
/// # Errors
/// `call`'s own.
///
/// # Cancel safety
/// As cancel-safe as `call`. A call dropped before its answer (cut by a caller's budget, such
/// as a renewal given up on a frozen node) is recorded as `unknown`: it was sent and got no
/// answer.
pub async fn timed<T>(
    store: &'static str,
    operation: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
    applied: impl FnOnce(&T) -> bool,
) -> Result<T, StoreError> {
    let mut pending = Pending {
        store,
        operation,
        sent: Instant::now(),
        answered: false,
    };
    let result = call.await;
    pending.answered = true;
    store_request(
        store,
        operation,
        Outcome::of(&result, applied),
        pending.sent,
    );
    result
}

/// A round trip in flight: recorded as `unknown` if dropped before its answer.
struct Pending {
    store: &'static str,
    operation: &'static str,
    sent: Instant,
    answered: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.answered {
            store_request(self.store, self.operation, Outcome::Unknown, self.sent);
        }
    }
}

/// Records one plain-cell round trip (a `write` or a read), cut at its budget when
/// `answer` is `Err`: a write so cut is of unknown outcome, a read an error.
pub(crate) fn cell_request<T, E>(
    operation: &'static str,
    write: bool,
    answer: &Result<Result<T, StoreError>, E>,
    sent: Instant,
) {
    let outcome = match answer {
        Ok(result) => Outcome::of(result, |_| true),
        Err(_) if write => Outcome::Unknown,
        Err(_) => Outcome::Error,
    };
    store_request("cells", operation, outcome, sent);
}

/// A lost answer was settled (`resolved`) or given up on as unknown.
pub fn unknown_outcome(resolved: bool) {
    let result = if resolved { "resolved" } else { "unresolved" };
    counter!(UNKNOWN_OUTCOMES, "result" => result).increment(1);
}

/// A claim of `kind` started being held (`+1`) or stopped (`-1`).
pub(crate) fn held(kind: &'static str, delta: f64) {
    gauge!(HELD, "kind" => kind).increment(delta);
}

/// One keep-alive renewal of a `kind` claim, sent at `sent`; `Err`: cut at its budget.
pub(crate) fn renewal<E>(
    kind: &'static str,
    answer: &Result<Result<CasOutcome, StoreError>, E>,
    sent: Instant,
) {
    let outcome = match answer {
        Ok(result) => Outcome::of(result, |o| *o == CasOutcome::Applied),
        Err(_) => Outcome::Unknown,
    };
    histogram!(RENEW_SECONDS, "kind" => kind, "outcome" => outcome.as_str()).record(sent.elapsed());
}

/// A held `kind` claim ended for `reason`; counted when it was a loss.
pub(crate) fn hold_ended(kind: &'static str, reason: &LossReason) {
    held(kind, -1.0);
    let reason = match reason {
        LossReason::Released => return,
        LossReason::NotHolder => "not_holder",
        LossReason::Expired => "expired",
        LossReason::Unreachable => "unreachable",
    };
    counter!(LOSSES, "kind" => kind, "reason" => reason).increment(1);
}

/// While alive, this process leads `election`: the term counter went up by one and the
/// `is_leader` gauge to 1; dropped, the gauge goes back to 0.
#[derive(Debug)]
pub struct Leading(Arc<str>);

impl Leading {
    /// A term of `election` starts.
    pub fn start(election: impl Into<Arc<str>>) -> Self {
        let election = election.into();
        counter!(TERMS, "election" => Arc::clone(&election)).increment(1);
        gauge!(IS_LEADER, "election" => Arc::clone(&election)).increment(1.0);
        Leading(election)
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        gauge!(IS_LEADER, "election" => Arc::clone(&self.0)).decrement(1.0);
    }
}

/// A queue event: one of [`ENQUEUED`], [`ENQUEUE_UPKEEP_DEFERRED`], [`CLAIMED`],
/// [`COMPLETED`], [`FAILED`], [`DISCARDED`] for `queue`.
pub fn queue_event(name: &'static str, queue: &Arc<str>) {
    counter!(name, "queue" => Arc::clone(queue)).increment(1);
}

/// A claim succeeded after trying `candidates` candidates.
pub fn claim_attempts(queue: &Arc<str>, candidates: usize) {
    histogram!(CLAIM_ATTEMPTS, "queue" => Arc::clone(queue)).record(candidates as f64);
}

/// The queue's stats were read: item counts by state, and the oldest available item's age.
pub fn queue_depth(queue: &Arc<str>, by_state: [(&'static str, u64); 4], oldest: Option<Duration>) {
    for (state, count) in by_state {
        gauge!(DEPTH, "queue" => Arc::clone(queue), "state" => state).set(count as f64);
    }
    gauge!(OLDEST_AGE, "queue" => Arc::clone(queue)).set(oldest.unwrap_or_default());
}

/// Times one `Lock::lock` call: records [`LOCK_WAIT`] when dropped, however the call ended.
#[derive(Debug)]
pub(crate) struct LockWait {
    algorithm: &'static str,
    started: Instant,
}

impl LockWait {
    pub(crate) fn start(algorithm: &'static str) -> Self {
        LockWait {
            algorithm,
            started: Instant::now(),
        }
    }
}

impl Drop for LockWait {
    fn drop(&mut self) {
        histogram!(LOCK_WAIT, "algorithm" => self.algorithm).record(self.started.elapsed());
    }
}

/// A lock of `algorithm` was acquired.
pub(crate) fn lock_acquired(algorithm: &'static str) {
    counter!(LOCKS_ACQUIRED, "algorithm" => algorithm).increment(1);
}

#[cfg(feature = "test-metrics")]
pub mod capture;
#[cfg(test)]
mod tests;
