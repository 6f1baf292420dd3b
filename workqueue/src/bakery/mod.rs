//! The LWT-free claim mode ([`ClaimMode::Bakery`](crate::ClaimMode::Bakery)): the Cassandra wiki's
//! work queue (its "Locking" page) with its open issues closed, behind the same [`QueueStore`]
//! interface the queue's claim path uses, so the public API, the index, the worker runtime
//! and the hold machine are the LWT mode's.
//!
//! - **Item rows** live in a table of their own ([`PlainItemStore`]), written only with plain
//!   writes. Each write carries this process's monotonic client timestamp, raised above the
//!   timestamp of the row version it was derived from (per row only: the process's clock
//!   is not advanced), so a finish always wins over the enqueue it follows, whatever the
//!   processes' clocks. Finishes are fenced by the row's attempt and the ticket's validity
//!   (see `finish`).
//! - **Claims** are the bakery of [`cql_lease::lock::ticket`], per item: choosing mark,
//!   max + 1 over the item's number row, wait while anyone chooses, lower ticket wins. The
//!   winner's number is the claim's fencing token and must be the item's attempt + 1
//!   (otherwise someone else is on the item: the ticket is withdrawn). The number is a
//!   lease: a TTL'd cell rewritten by the job's heartbeat through the shared hold machine,
//!   which tells the worker to stop before the cell can expire for others. Before a claim
//!   counts, its number is recorded as the item's **high-water mark** (no TTL, written with
//!   the number as timestamp, never decreasing); max + 1 is taken over the mark and the
//!   row's attempt, so it is above every delivered or given-back one, cells expired or not.
//! - A loser withdraws at once and pauses a jittered poll interval; an idle worker backs
//!   off with the worker runtime's jittered policy.
//! - **Candidates** come from the same time-bucketed index with its low-watermark cursor, so
//!   completed items are never walked. Index, cursor, buckets and dead letters are the
//!   same plain-write tables, under a queue name of their own (`{queue}~bakery`): a queue
//!   name in bakery mode is a separate queue from the same name in LWT mode.
//!
//! See the README for what this mode guarantees compared with the LWT mode and what it
//! assumes.

mod finish;
mod held;
mod parts;
mod queue_store;
mod read;

pub use parts::{BakeryParts, PlainItemStore};

use held::{HeldTickets, PendingEnqueues};

use std::sync::Arc;
use std::time::Duration;

use cql_lease::lock::ticket::{Ticket, TicketBakery};
use cql_lease::lock::{LockError, LockOptions};
use cql_lease::{StoreError, Timing};

use crate::item::ItemKey;
use crate::store::QueueStore;

/// The queue name the bakery mode's index, cursor and dead letters live under.
pub(crate) fn index_name(queue: &str) -> String {
    format!("{queue}~bakery")
}

/// The bakery's name for an item: its cells' partition.
fn ticket_name(key: &ItemKey) -> String {
    format!("{}/{}", key.partition, key.id)
}

/// How long a whole bakery claim may take before the queue gives it up as of unknown
/// outcome and reads it back: two thirds of the validity, above the half a claim waits for
/// choosers at most, so the claim usually decides itself, and leaving a third to use it.
pub(crate) fn claim_bound(timing: &Timing) -> Duration {
    timing.renew_deadline() * 2 / 3
}

/// How long a loser pauses before its claimer looks at another candidate: its poll interval.
const POLL: Duration = Duration::from_millis(10);

/// A [`QueueStore`] that sends no LWT: plain item rows, bakery claims, the inner store's
/// index tables under [`index_name`].
pub(crate) struct BakeryStore {
    inner: Arc<dyn QueueStore>,
    items: Arc<dyn PlainItemStore>,
    bakery: TicketBakery,
    timing: Timing,
    held: HeldTickets,
    pending: PendingEnqueues,
}

impl BakeryStore {
    pub(crate) fn new(
        inner: Arc<dyn QueueStore>,
        parts: BakeryParts,
        timing: Timing,
    ) -> Result<Self, LockError> {
        let options = LockOptions {
            timing,
            poll_interval: POLL,
        };
        Ok(BakeryStore {
            inner,
            items: parts.items,
            // A claimer has other candidates: a draw that meets a live ticket steps aside.
            bakery: TicketBakery::new(parts.cells, options)?.stepping_aside(),
            timing,
            held: HeldTickets::default(),
            pending: PendingEnqueues::default(),
        })
    }

    /// A recorded ticket of this process.
    fn ticket(&self, claim_id: &str) -> Option<Arc<Ticket>> {
        self.held.recorded_ticket(claim_id)
    }

    fn forget(&self, claim_id: &str) {
        self.held.forget(claim_id);
    }
}

fn lock_error(error: LockError) -> StoreError {
    match error {
        LockError::Store { source, .. } => source,
        other => StoreError::Unavailable(other.to_string()),
    }
}
