//! The bakery's numbering steps, shared by [`BakeryLock`](super::BakeryLock) and
//! [`TicketBakery`](super::ticket::TicketBakery): choose max + 1 under a choosing mark, wait
//! for a cell to go, compare tickets.

use std::time::Duration;

use futures::TryFutureExt;
use tokio::time::Instant;
use tracing::debug;

use super::LockError;
use super::plain::Cells;
use super::ticket::HIGH_WATER;
use crate::cells::rows::{CHOOSING, NUMBER};
use crate::cells::{Cell, CellRef};

/// Most cells one row read returns (more contenders than this on one name is a misuse).
pub(crate) const ROW_LIMIT: usize = 100_000;

/// What choosing a number came to.
pub(crate) enum Chosen {
    /// Our ticket is written; `choosing` lists who else was choosing just after.
    Ticket { mine: i64, choosing: Vec<String> },
    /// Our own acknowledged cell was not there: see [`hidden`].
    Hidden,
    /// Our choosing mark may have expired before the ticket landed: start again.
    Restart,
}

/// The first half of the bakery: choosing mark, max + 1, ticket, mark cleared.
pub(crate) async fn choose(cells: &Cells) -> Result<Chosen, LockError> {
    // Never `None` without `step_aside`.
    Ok(choose_or_step_aside(cells, false, 0)
        .await?
        .unwrap_or(Chosen::Restart))
}

/// [`choose`]; with `step_aside`, `Ok(None)` instead of writing a number when the number
/// row already holds another live ticket (below the max + 1 we would take: while it lives
/// ours cannot win). Stepping aside there is what a contender that stopped between its
/// choosing mark and its number does, which the bakery allows: its mark is deleted (by the
/// caller's cleanup) and those waiting for it go on. No number is written, so none is
/// compared or waited for. The number taken is at least `floor + 1` (a caller's own
/// knowledge of numbers already used: a bakery stays safe with any number above every one
/// it read).
pub(crate) async fn choose_or_step_aside(
    cells: &Cells,
    step_aside: bool,
    floor: i64,
) -> Result<Option<Chosen>, LockError> {
    let id = cells.id().to_owned();
    cells.put(CHOOSING, &id, 1).await?;
    // Our choosing mark must be visible, or others would not wait for our number: read it
    // back alongside the tickets.
    let (tickets, choosing_mark) = futures::try_join!(
        read(cells, NUMBER),
        cells
            .durable
            .read_cell(cells.at(CHOOSING, &id), cells.read_deadline())
            .map_err(|e| cells.store_error(e)),
    )?;
    if choosing_mark.is_none() {
        return Ok(Some(Chosen::Hidden));
    }
    // Only live tickets, not other choosers' marks: a mark may be a contender that has
    // just stepped aside itself, so yielding to marks left items with nobody drawing
    // (measured: more draws per claimed item, not fewer).
    if step_aside && tickets.iter().any(|c| c.name != HIGH_WATER && c.name != id) {
        debug!(lock = %cells.lock, id, "a live ticket is already drawn; stepping aside");
        return Ok(None);
    }
    let mine = tickets
        .iter()
        .map(|c| c.value)
        .max()
        .unwrap_or(0)
        .max(floor)
        + 1;
    cells.put(NUMBER, &id, mine).await?;
    // Our choosing mark must have stood until the ticket landed. If it may have expired
    // meanwhile (we were slow between reading the maximum and writing), a newcomer may have
    // looked, seen neither, and drawn a ticket that ours does not exceed.
    if !cells.still_valid() {
        return Ok(Some(Chosen::Restart));
    }
    cells.remove(CHOOSING, &id).await;
    let choosing = read(cells, CHOOSING)
        .await?
        .into_iter()
        .filter(|c| c.name != id)
        .map(|c| c.name)
        .collect();
    Ok(Some(Chosen::Ticket { mine, choosing }))
}

/// Our own acknowledged cell is not there: `Ok(())` (start again) if it may just have
/// expired, else [`LockError::Shadowed`]: something newer hides it.
pub(crate) fn hidden(cells: &Cells) -> Result<(), LockError> {
    if cells
        .valid_until()
        .is_none_or(|until| Instant::now() >= until)
    {
        return Ok(());
    }
    tracing::warn!(lock = %cells.lock, id = cells.id(), "own cell hidden by a newer write or delete");
    Err(LockError::Shadowed {
        name: cells.lock.clone(),
        id: cells.id().to_owned(),
    })
}

/// Every live cell of one of the contender's rows.
pub(crate) async fn read(cells: &Cells, row: &str) -> Result<Vec<Cell>, LockError> {
    cells
        .durable
        .read_row(&cells.lock, row, "", ROW_LIMIT, cells.read_deadline())
        .await
        .map_err(|e| cells.store_error(e))
}

/// The tickets that beat `(mine, id)`: lower number, or the same number and a lower id.
pub(crate) fn ahead(tickets: Vec<Cell>, mine: i64, id: &str) -> Vec<(String, i64)> {
    tickets
        .into_iter()
        .filter(|c| c.name != HIGH_WATER && (c.value, c.name.as_str()) < (mine, id))
        .map(|c| (c.name, c.value))
        .collect()
}

/// How waiting for a cell to go ended.
pub(crate) enum Waited {
    Gone,
    Restart,
    TimedOut,
}

/// Polls one cell until it is gone (or, for a ticket, holds another number: its owner left
/// and came back behind us), keeping our own cells fresh meanwhile.
pub(crate) async fn wait_gone(
    cells: &Cells,
    row: &'static str,
    cell: &str,
    expected: Option<i64>,
    deadline: Instant,
) -> Result<Waited, LockError> {
    let at = CellRef {
        lock: &cells.lock,
        row,
        cell,
    };
    loop {
        let value = cells
            .durable
            .read_cell(at, cells.read_deadline())
            .await
            .map_err(|e| cells.store_error(e))?;
        match (value, expected) {
            (None, _) => return Ok(Waited::Gone),
            (Some(v), Some(e)) if v != e => return Ok(Waited::Gone),
            _ => {}
        }
        if !cells.keep_fresh().await {
            return Ok(Waited::Restart);
        }
        let wake = Instant::now() + poll_delay(cells.options.poll_interval);
        if wake >= deadline {
            return Ok(Waited::TimedOut);
        }
        tokio::time::sleep_until(wake).await;
    }
}

/// A poll pause, jittered between half and all of `interval`.
pub(crate) fn poll_delay(interval: Duration) -> Duration {
    interval.mul_f64(rand::random_range(0.5..1.0))
}
