//! The bakery's numbering, shared by [`BakeryLock`](super::BakeryLock) and by callers that
//! only want a ticket on a name (the work queue's LWT-free claim mode): mark yourself
//! choosing, read every number, write max + 1 under your id, stop choosing, wait while
//! anyone is choosing, then compare with the live numbers (lower number, then lower id,
//! wins). Cells carry a TTL and are rewritten by the [`hold`](crate::hold) machine through
//! the contender's cells.
//!
//! A [`TicketBakery`] never waits for lower tickets to go: the caller decides (the queue
//! withdraws and tries another item). A name may also keep a **high-water mark**, a cell of
//! the number row written without TTL and with its value as its client timestamp (so it
//! never decreases): since max + 1 is taken over the whole row, a ticket drawn later is above
//! every number recorded there, even once their holders' cells have expired.

use std::sync::Arc;

use tokio::time::Instant;
use tracing::{debug, instrument};

use super::contender::Slot;
use super::numbering::{
    Chosen, ROW_LIMIT, Waited, ahead, choose_or_step_aside, hidden, read, wait_gone,
};
use super::plain::{Attempt, Cells, PlainLock};
use super::{Contenders, LockError, LockOptions};
use crate::cells::CellStore;
use crate::cells::rows::{CHOOSING, NUMBER};
use crate::hold::Holdable;

/// The name of the high-water-mark cell in a number row (no contender id has this form:
/// ids contain a `/`).
pub const HIGH_WATER: &str = "~high-water";

/// Bakery tickets on named things, with ids chosen by the caller (e.g. a work queue's claim
/// ids): [`TicketBakery::draw`] runs the bakery up to the comparison and says whether the
/// ticket won. Plain cells only, never an LWT.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::cells::memory::MemoryCellStore;
/// use cql_lease::lock::{LockOptions, ticket::{Draw, TicketBakery}};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
/// let bakery = TicketBakery::new(Arc::new(MemoryCellStore::new()), LockOptions::default())?;
/// let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
/// let Draw::Won(ticket) = bakery.draw("item-1", "w/1", 0, deadline).await? else { panic!() };
/// assert_eq!(ticket.number(), 1);
/// ticket.record_high_water().await?;
/// ticket.withdraw().await;
/// // The next ticket is above the recorded one, although its holder is gone.
/// let Draw::Won(next) = bakery.draw("item-1", "w/2", 0, deadline).await? else { panic!() };
/// assert_eq!(next.number(), 2);
/// # Ok::<(), cql_lease::lock::LockError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct TicketBakery {
    base: PlainLock,
    /// Draws step aside, before taking a number, on a name that already has a live ticket.
    step_aside: bool,
}

/// What a draw came to. A ticket that did not win is withdrawn (its cells deleted) before
/// the draw returns.
#[derive(Debug)]
pub enum Draw {
    /// No live ticket beats this one and nobody is choosing: it is the caller's, as a lease
    /// (keep it alive with [`Ticket::holdable`] through the hold machine).
    Won(Ticket),
    /// A live ticket beats it (`number` was ours), or, with
    /// [`TicketBakery::stepping_aside`], was already there when we would have taken a
    /// number (then none was written, and `number` is 0).
    Beaten {
        /// The number we drew (0 if we stepped aside).
        number: i64,
    },
    /// A chooser did not finish before the deadline, or our own cells may have expired.
    Again,
}

/// A won ticket: the contender's cells on one name.
pub struct Ticket {
    cells: Arc<Cells>,
    number: i64,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("name", &self.cells.lock)
            .field("id", &self.cells.id())
            .field("number", &self.number)
            .finish()
    }
}

/// The live tickets on a name, as one read of its number row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tickets {
    /// The high-water mark (0 if never recorded).
    pub high_water: i64,
    /// Live tickets `(id, number)`, lowest `(number, id)` first.
    pub live: Vec<(String, i64)>,
}

impl Tickets {
    /// The highest number ever recorded or live.
    pub fn highest(&self) -> i64 {
        self.live
            .iter()
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(0)
            .max(self.high_water)
    }
}

impl TicketBakery {
    /// A bakery on `store` with `options`' TTL, renewal and poll interval.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn new(store: Arc<dyn CellStore>, options: LockOptions) -> Result<Self, LockError> {
        Ok(TicketBakery {
            base: PlainLock::new(store, options, Contenders::random())?,
            step_aside: false,
        })
    }

    /// This bakery, its draws stepping aside ([`Draw::Beaten`], number 0) when, as they are
    /// about to take a number, the name already has a live ticket (below theirs: they could
    /// only win if it went away meanwhile). For callers with other names to try (a work
    /// queue's claimers): a doomed draw then costs three requests fewer and writes no
    /// number for others to wait on or compare with. Safe: it is a contender stopping
    /// between its choosing mark and its number, which the bakery tolerates.
    pub fn stepping_aside(self) -> Self {
        TicketBakery {
            step_aside: true,
            ..self
        }
    }

    /// Draws a ticket on `name` as `id` (unique per draw: a reused id could be hidden by its
    /// own earlier deletes) and compares it with the live ones. The number is above `floor`
    /// too (numbers the caller knows were used, e.g. a work item's last finished attempt,
    /// whose mark may not have landed). Waits for choosers until `deadline`.
    ///
    /// # Errors
    /// [`LockError::Store`] when the store fails (the ticket is withdrawn);
    /// [`LockError::Shadowed`] when our own cell is hidden by a newer one of the same id.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropped before it returns, the cells are deleted in a spawned task.
    #[instrument(level = "debug", skip(self, deadline))]
    pub async fn draw(
        &self,
        name: &str,
        id: &str,
        floor: i64,
        deadline: Instant,
    ) -> Result<Draw, LockError> {
        let cells = Cells::new(
            self.base.durable.clone(),
            name,
            Slot::detached(id),
            self.base.options,
        );
        let attempt = Attempt::new(&cells);
        let result = self.compare(&cells, floor, deadline).await;
        if let Ok(Draw::Won(_)) = &result {
            attempt.disarm();
        } else {
            // Withdrawn before answering: the caller backs off and looks elsewhere.
            cells.clear().await;
            attempt.disarm();
        }
        debug!(name, id, ?result, "ticket drawn");
        result
    }

    async fn compare(
        &self,
        cells: &Arc<Cells>,
        floor: i64,
        deadline: Instant,
    ) -> Result<Draw, LockError> {
        let (mine, choosing) = match choose_or_step_aside(cells, self.step_aside, floor).await? {
            Some(Chosen::Ticket { mine, choosing }) => (mine, choosing),
            Some(Chosen::Hidden) => {
                hidden(cells)?;
                return Ok(Draw::Again);
            }
            Some(Chosen::Restart) => return Ok(Draw::Again),
            None => return Ok(Draw::Beaten { number: 0 }),
        };
        for other in &choosing {
            match wait_gone(cells, CHOOSING, other, None, deadline).await? {
                Waited::Gone => {}
                Waited::Restart | Waited::TimedOut => return Ok(Draw::Again),
            }
        }
        let tickets = read(cells, NUMBER).await?;
        let id = cells.id();
        if !tickets.iter().any(|c| c.name == id && c.value == mine) {
            hidden(cells)?;
            return Ok(Draw::Again);
        }
        if !ahead(tickets, mine, id).is_empty() {
            return Ok(Draw::Beaten { number: mine });
        }
        if !cells.still_valid() {
            return Ok(Draw::Again);
        }
        Ok(Draw::Won(Ticket {
            cells: Arc::clone(cells),
            number: mine,
        }))
    }

    /// The live tickets and high-water mark on `name` (one read).
    ///
    /// # Errors
    /// [`LockError::Store`] when the read fails.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read.
    pub async fn tickets(&self, name: &str) -> Result<Tickets, LockError> {
        let cells = self
            .base
            .durable
            .read_row(name, NUMBER, "", ROW_LIMIT, self.base.read_deadline())
            .await
            .map_err(|source| LockError::Store {
                name: name.to_owned(),
                source,
            })?;
        let mut tickets = Tickets::default();
        for c in cells {
            if c.name == HIGH_WATER {
                tickets.high_water = c.value;
            } else {
                tickets.live.push((c.name, c.value));
            }
        }
        tickets.live.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        Ok(tickets)
    }
}

impl Ticket {
    /// The ticket's number: above every number live or recorded when it was drawn.
    pub fn number(&self) -> i64 {
        self.number
    }

    /// The contender id it was drawn under.
    pub fn id(&self) -> &str {
        self.cells.id()
    }

    /// Whether every cell is still certainly in the store, by the local clock.
    pub fn is_valid(&self) -> bool {
        self.cells.still_valid()
    }

    /// Until when, by the local clock, every cell is certainly in the store (`None` when
    /// none is confirmed): a write that must land while the ticket holds is sent only with
    /// its own flight time left before this.
    pub fn valid_until(&self) -> Option<Instant> {
        self.cells.valid_until()
    }

    /// Records the number as the name's high-water mark: no TTL, written with the number as
    /// its client timestamp so the mark never decreases. Sent again (same timestamp) until
    /// the ticket's validity runs out.
    ///
    /// # Errors
    /// [`LockError::Store`] if it could not be confirmed in time.
    ///
    /// # Cancel safety
    /// Cancel-safe: the write is idempotent; it may or may not land.
    pub async fn record_high_water(&self) -> Result<(), LockError> {
        let give_up_at = self
            .cells
            .valid_until()
            .unwrap_or_else(|| Instant::now() + self.cells.options.timing.resolve_timeout);
        self.record_high_water_by(give_up_at).await
    }

    /// [`record_high_water`](Self::record_high_water), sent again only until `give_up_at`
    /// (and never past the ticket's validity): a caller that must still act on the ticket
    /// after a failed mark (give its attempt back) keeps the time that takes.
    ///
    /// # Errors
    /// [`LockError::Store`] if it could not be confirmed in time.
    ///
    /// # Cancel safety
    /// Cancel-safe: the write is idempotent; it may or may not land.
    pub async fn record_high_water_by(&self, give_up_at: Instant) -> Result<(), LockError> {
        let give_up_at = self
            .cells
            .valid_until()
            .map_or(give_up_at, |until| until.min(give_up_at));
        self.cells
            .durable
            .write(
                self.cells.at(NUMBER, HIGH_WATER),
                self.number,
                None,
                self.number,
                give_up_at,
            )
            .await
            .map_err(|e| self.cells.store_error(e))
    }

    /// The ticket's cells for the [`hold`](crate::hold) machine: `renew` rewrites them with
    /// a fresh TTL (counted only if confirmed within their validity), `release` deletes them.
    pub fn holdable(&self) -> Arc<dyn Holdable> {
        Arc::clone(&self.cells) as Arc<dyn Holdable>
    }

    /// Deletes the ticket's cells.
    ///
    /// # Cancel safety
    /// Dropped early, the cells expire by their TTL.
    pub async fn withdraw(&self) {
        self.cells.clear().await;
    }
}
