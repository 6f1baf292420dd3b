//! Lamport's bakery lock on plain cells, as the Cassandra wiki's "Locking" page gives it,
//! with the refinements of libQtCassandra's QCassandraLock.
//!
//! Per lock name, two rows: `choosing` (who is picking a number) and `number` (the tickets),
//! each cell keyed by the contender id ([`ContenderId`](super::ContenderId): unique per
//! incarnation, ordered by process key like 002's tie-break). To lock: mark yourself choosing; read every ticket and take max + 1; stop
//! choosing; then, as 002 does, read the list of choosing cells **once** and poll only those
//! cells until each is gone, and read the tickets **once** and poll only the cells that beat
//! yours (lower number, or equal number and lower id) until each is gone or renumbered.
//! Nobody who starts choosing after your ticket was written can draw a number as low as
//! yours, which is why the lists need not be read again.
//!
//! From 002: named locks, a configurable table (the cell store's), a lock timeout, a
//! consistency level on the store (QUORUM default, LOCAL_QUORUM within a data centre, ONE
//! only when every contender uses the same node), a short TTL on every cell.
//!
//! # Guarantees
//! Mutual exclusion while every read sees every write that completed before it began (QUORUM
//! reads and writes) and while holders stop at their local deadline; a waiting contender's
//! own cells are rewritten while it waits, and if one ever outlives its validity the
//! contender starts again. In particular the choosing mark must still be valid when the
//! ticket's write is confirmed (Lamport's proof needs the mark visible from before the
//! maximum is read until the ticket is in place); a contender that was slower than that
//! starts again. Crashed holders and stuck choosers are freed by the TTL.
//! Requests are served roughly in ticket order. A contender reads its own choosing cell and
//! ticket back before relying on them: one hidden by a newer write or delete of the same id
//! is [`LockError::Shadowed`], never an entry.
//!
//! # Limits
//! - **No fencing token**: tickets restart at 1 whenever the bakery empties.
//! - Each acquisition reads the whole `number` row and waits on every lower ticket: cost
//!   grows with the number of contenders; a crashed contender blocks the rest for a TTL.
//! - [`Lock::try_lock`] gives up if anyone holds a ticket or is choosing.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::time::Instant;
use tracing::{debug, info, instrument};

pub(crate) use super::numbering::poll_delay;
use super::numbering::{self, Chosen, Waited};
use super::plain::{Attempt, Cells, PlainLock};
use super::transient::{Trouble, transient_cause, until_deadline, within_budget};
use super::{Contenders, Lock, LockError, LockGuard, LockOptions, check_request};
use crate::cells::CellStore;
use crate::cells::rows::{CHOOSING, NUMBER};

/// The bakery lock. One object serves any number of concurrent acquisitions (each gets its
/// own contender id).
#[derive(Debug, Clone)]
pub struct BakeryLock {
    base: PlainLock,
}

enum Entry {
    Entered,
    Held,
    Restart,
    TimedOut,
}

impl BakeryLock {
    /// A bakery lock on `store`, with a random process key.
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn new(store: Arc<dyn CellStore>, options: LockOptions) -> Result<Self, LockError> {
        Self::with_contenders(store, options, Contenders::random())
    }

    /// As [`BakeryLock::new`] with ids under the given process key (see [`Contenders::new`]).
    ///
    /// # Errors
    /// [`LockError::InvalidArgument`] for bad timing.
    pub fn with_contenders(
        store: Arc<dyn CellStore>,
        options: LockOptions,
        contenders: Contenders,
    ) -> Result<Self, LockError> {
        Ok(BakeryLock {
            base: PlainLock::new(store, options, contenders)?,
        })
    }

    async fn acquire(
        &self,
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<LockGuard>, LockError> {
        let started = Instant::now();
        let cells = self.base.contender(name);
        let attempt = Attempt::new(&cells);
        loop {
            let entry = self.enter(&cells, deadline).await;
            match entry {
                Ok(Entry::Entered) => {
                    attempt.disarm();
                    info!(lock = name, id = cells.id(), "bakery lock held");
                    return Ok(Some(cells.into_guard("bakery")));
                }
                Ok(Entry::Restart) => {
                    debug!(
                        lock = name,
                        id = cells.id(),
                        "own cells outlived their validity; starting again"
                    );
                    cells.clear().await;
                }
                Ok(Entry::Held) => {
                    cells.clear().await;
                    attempt.disarm();
                    return Ok(None);
                }
                Ok(Entry::TimedOut) => {
                    cells.clear().await;
                    attempt.disarm();
                    return Err(LockError::Timeout {
                        name: name.to_owned(),
                        waited: started.elapsed(),
                    });
                }
                // Transient: the caller tries again with a new contender while this one's
                // cells are removed in the background (`attempt` drops armed).
                Err(error) if transient_cause(&error).is_some() => return Err(error),
                Err(error) => {
                    cells.clear().await;
                    attempt.disarm();
                    return Err(error);
                }
            }
        }
    }

    /// One pass of the bakery. `deadline == None` is `try_lock`: never wait.
    #[instrument(level = "debug", skip(self, cells), fields(lock = %cells.lock, id = cells.id()))]
    async fn enter(&self, cells: &Cells, deadline: Option<Instant>) -> Result<Entry, LockError> {
        let (mine, choosing) = match numbering::choose(cells).await? {
            Chosen::Ticket { mine, choosing } => (mine, choosing),
            Chosen::Hidden => return hidden(cells),
            Chosen::Restart => return Ok(Entry::Restart),
        };
        // 002's optimisation: the list once, then only those cells.
        if deadline.is_none() && !choosing.is_empty() {
            return Ok(Entry::Held);
        }
        for other in &choosing {
            match self
                .wait_gone(cells, CHOOSING, other, None, deadline)
                .await?
            {
                Entry::Entered => {}
                other => return Ok(other),
            }
        }
        let id = cells.id();
        let tickets = numbering::read(cells, NUMBER).await?;
        // The read-back of our ticket, for free: absent means hidden (or expired).
        if !tickets.iter().any(|c| c.name == id && c.value == mine) {
            return hidden(cells);
        }
        let ahead = numbering::ahead(tickets, mine, id);
        if deadline.is_none() && !ahead.is_empty() {
            return Ok(Entry::Held);
        }
        debug!(
            ticket = mine,
            ahead = ahead.len(),
            "waiting for lower tickets"
        );
        for (other, number) in &ahead {
            match self
                .wait_gone(cells, NUMBER, other, Some(*number), deadline)
                .await?
            {
                Entry::Entered => {}
                other => return Ok(other),
            }
        }
        // Entering on a ticket that may have expired would break exclusion.
        Ok(if cells.keep_fresh().await {
            Entry::Entered
        } else {
            Entry::Restart
        })
    }

    /// Polls one cell until it is gone (see [`numbering::wait_gone`]). `Entered` means "gone".
    async fn wait_gone(
        &self,
        cells: &Cells,
        row: &'static str,
        cell: &str,
        expected: Option<i64>,
        deadline: Option<Instant>,
    ) -> Result<Entry, LockError> {
        let Some(deadline) = deadline else {
            return Ok(Entry::Held);
        };
        Ok(
            match numbering::wait_gone(cells, row, cell, expected, deadline).await? {
                Waited::Gone => Entry::Entered,
                Waited::Restart => Entry::Restart,
                Waited::TimedOut => Entry::TimedOut,
            },
        )
    }
}

/// Our own acknowledged cell is not there: start again if it may just have expired, else
/// something newer hides it.
fn hidden(cells: &Cells) -> Result<Entry, LockError> {
    numbering::hidden(cells).map(|()| Entry::Restart)
}

#[async_trait]
impl Lock for BakeryLock {
    fn algorithm(&self) -> &'static str {
        "bakery"
    }

    async fn lock_until(
        &self,
        name: &str,
        started: Instant,
        deadline: Instant,
    ) -> Result<LockGuard, LockError> {
        super::check_request(name, None)?;
        let acquisition = async {
            let mut trouble = Trouble::new(name, self.base.options.timing.retry_period);
            loop {
                match self.acquire(name, Some(deadline)).await {
                    Ok(Some(guard)) => return Ok(guard),
                    Ok(None) => {
                        return Err(LockError::Timeout {
                            name: name.to_owned(),
                            waited: started.elapsed(),
                        });
                    }
                    // Transient: again after a retry interval with a new contender, until
                    // the deadline cuts it.
                    Err(error) => {
                        let wake = trouble.failed(error)?;
                        tokio::time::sleep_until(wake).await;
                    }
                }
            }
        };
        until_deadline(name, started, deadline, acquisition).await
    }

    async fn try_lock(&self, name: &str) -> Result<Option<LockGuard>, LockError> {
        check_request(name, None)?;
        within_budget(name, &self.base.options.timing, || async {
            let deadline = self.base.read_deadline();
            let tickets = self
                .base
                .durable
                .read_row(name, NUMBER, "", 1, deadline)
                .await
                .map_err(|source| LockError::Store {
                    name: name.to_owned(),
                    source,
                })?;
            if !tickets.is_empty() {
                return Ok(None);
            }
            self.acquire(name, None).await
        })
        .await
    }
}
