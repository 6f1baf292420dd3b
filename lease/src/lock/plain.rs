//! What the three plain-cell locks share: one contender's cells, written with client
//! timestamps and a TTL, kept alive while it waits, cleaned up by later-timestamped deletes,
//! and handed to the [`hold`](crate::hold) machine once the lock is held.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, instrument};

use super::contender::Slot;
use super::{Contenders, LockError, LockGuard, LockOptions};
use crate::cells::durable::Durable;
use crate::cells::{CellRef, CellStore, ClientClock};
use crate::error::StoreError;
use crate::hold::{Hold, HoldTiming};

#[derive(Debug, Clone)]
struct Owned {
    row: &'static str,
    cell: String,
    value: i64,
    /// When the last confirmed write of it was sent.
    sent_at: Instant,
}

/// What every plain-cell lock object holds: the store with its retry rule, the contender
/// ids it hands out, its options.
#[derive(Debug, Clone)]
pub(crate) struct PlainLock {
    pub(crate) durable: Durable,
    pub(crate) contenders: Contenders,
    pub(crate) options: LockOptions,
}

impl PlainLock {
    /// Validates `options` before anything is written.
    pub(crate) fn new(
        store: Arc<dyn CellStore>,
        options: LockOptions,
        contenders: Contenders,
    ) -> Result<Self, LockError> {
        options.validate()?;
        Ok(PlainLock {
            durable: Durable::new(
                store,
                options.timing.retry_period,
                options.timing.effective_request_timeout(),
            ),
            contenders,
            options,
        })
    }

    /// A new contender (its own id) on lock `name`.
    pub(crate) fn contender(&self, name: &str) -> Arc<Cells> {
        Cells::new(
            self.durable.clone(),
            name,
            self.contenders.take(),
            self.options,
        )
    }

    /// A read's deadline outside a contender: the resolve timeout from now.
    pub(crate) fn read_deadline(&self) -> Instant {
        Instant::now() + self.options.timing.resolve_timeout
    }
}

/// One contender's cells on one lock.
pub(crate) struct Cells {
    pub(crate) durable: Durable,
    pub(crate) lock: String,
    pub(crate) slot: Slot,
    pub(crate) options: LockOptions,
    owned: Mutex<Vec<Owned>>,
    /// Set once a release began: from then on `still_held` means "a cell still stands".
    releasing: AtomicBool,
    /// Told when this contender's main-row cell was written (`true`) and when its delete
    /// was confirmed or given up (`false`): how the fair lock's waiters in this process
    /// learn that the contender ahead of them left without reading the row.
    pub(crate) on_main: std::sync::OnceLock<MainHook>,
}

/// See [`Cells::on_main`].
pub(crate) type MainHook = Box<dyn Fn(bool) + Send + Sync>;

impl Cells {
    pub(crate) fn new(durable: Durable, lock: &str, slot: Slot, options: LockOptions) -> Arc<Self> {
        Arc::new(Cells {
            durable,
            lock: lock.to_owned(),
            slot,
            options,
            owned: Mutex::new(Vec::new()),
            releasing: AtomicBool::new(false),
            on_main: std::sync::OnceLock::new(),
        })
    }

    pub(crate) fn id(&self) -> &str {
        self.slot.id.as_str()
    }

    pub(crate) fn at<'a>(&'a self, row: &'a str, cell: &'a str) -> CellRef<'a> {
        CellRef {
            lock: &self.lock,
            row,
            cell,
        }
    }

    /// Whether this contender has a cell at `row`/`cell` (written and not deleted since).
    pub(crate) fn has(&self, row: &str, cell: &str) -> bool {
        self.owned
            .lock()
            .is_ok_and(|owned| owned.iter().any(|o| o.row == row && o.cell == cell))
    }

    /// Sets the value an owned cell is rewritten with from now on; `false` if not owned.
    pub(crate) fn set_value(&self, row: &str, cell: &str, value: i64) -> bool {
        let Ok(mut owned) = self.owned.lock() else {
            return false;
        };
        owned
            .iter_mut()
            .find(|o| o.row == row && o.cell == cell)
            .map(|o| o.value = value)
            .is_some()
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.options.timing.store_ttl()
    }

    pub(crate) fn validity(&self) -> Duration {
        self.options.timing.renew_deadline()
    }

    /// The latest moment every owned cell is certainly still in the store (minus skew).
    pub(crate) fn valid_until(&self) -> Option<Instant> {
        let owned = self.owned.lock().ok()?;
        owned.iter().map(|o| o.sent_at + self.validity()).min()
    }

    /// Whether every owned cell is still certainly in the store. Checked right after a
    /// write is confirmed, it says the cells written before stood until that write landed.
    pub(crate) fn still_valid(&self) -> bool {
        self.valid_until()
            .is_some_and(|until| Instant::now() < until)
    }

    /// Writes (or rewrites) one of this contender's cells, retrying with the same timestamp
    /// while the cell's previous write is still valid. On giving up, deletes it with a later
    /// timestamp so the lost write cannot surface later.
    ///
    /// The cell is tracked *before* the write is sent: if this future is dropped, or gives
    /// up, while the write is in flight, the cleanup ([`Cells::clear`]) still deletes it with
    /// a later timestamp, so a write that lands before that delete is confirmed loses to it
    /// (one that lands after the delete was given up stays until its TTL runs out). Its
    /// `sent_at` is only relied upon once the write is confirmed (the caller continues).
    #[instrument(level = "debug", skip(self), fields(lock = %self.lock, id = self.id()))]
    pub(crate) async fn put(
        &self,
        row: &'static str,
        cell: &str,
        value: i64,
    ) -> Result<(), LockError> {
        let sent_at = Instant::now();
        let timestamp = ClientClock::next();
        let give_up_at = sent_at + self.validity();
        if let Ok(mut owned) = self.owned.lock() {
            owned.retain(|o| !(o.row == row && o.cell == cell));
            owned.push(Owned {
                row,
                cell: cell.to_owned(),
                value,
                sent_at,
            });
        }
        match self
            .durable
            .write(
                self.at(row, cell),
                value,
                Some(self.ttl()),
                timestamp,
                give_up_at,
            )
            .await
        {
            Ok(()) => {
                self.main_changed(row, true);
                Ok(())
            }
            Err(source) => {
                self.remove(row, cell).await;
                Err(self.store_error(source))
            }
        }
    }

    /// Deletes one cell with a fresh (later) timestamp; retried until the cell would have
    /// expired anyway (the takeover bound, `ttl + max_clock_skew`). The cell stays tracked
    /// until the delete is confirmed or given up, so a cleanup after this future is dropped
    /// deletes it again. Once given up, a write of the cell still in flight may land later:
    /// that cell then stands until its own TTL runs out.
    #[instrument(level = "debug", skip(self), fields(lock = %self.lock, id = self.id()))]
    pub(crate) async fn remove(&self, row: &'static str, cell: &str) {
        let timestamp = ClientClock::next();
        let give_up_at = Instant::now() + self.options.timing.takeover_bound();
        if let Err(error) = self
            .durable
            .delete(self.at(row, cell), timestamp, give_up_at)
            .await
        {
            debug!(%error, "delete gave up; the cell, if it stands, expires within its TTL");
        }
        if let Ok(mut owned) = self.owned.lock() {
            owned.retain(|o| !(o.row == row && o.cell == cell));
        }
        self.main_changed(row, false);
    }

    /// Tells [`Cells::on_main`] that our cell in `row` was written or is gone, if that row
    /// is the main row.
    pub(crate) fn main_changed(&self, row: &str, written: bool) {
        if row == crate::cells::rows::MAIN
            && let Some(hook) = self.on_main.get()
        {
            hook(written);
        }
    }

    /// Deletes every owned cell.
    pub(crate) async fn clear(&self) {
        let owned: Vec<Owned> = self.owned.lock().map(|o| o.clone()).unwrap_or_default();
        for o in owned {
            self.remove(o.row, &o.cell).await;
        }
    }

    /// Rewrites every owned cell (a fresh timestamp each), one after the other.
    ///
    /// A rewrite counts only if its answer arrives while the cell's previous write is still
    /// valid: once that validity has run out the cell may have expired, and a newcomer may
    /// have read the row without it, so a later rewrite cannot vouch for the gap. Until
    /// then a rewrite is sent again with the same timestamp whenever it fails or times out
    /// (each attempt bounded by the [`Durable`] rule, so one stuck on a frozen coordinator
    /// leaves time to go elsewhere), rather than failing the whole renewal. Past it, the
    /// cell keeps its old `sent_at` (the contender must start again); if a cut-off write
    /// lands later, the restart's delete (later timestamp) covers it. A rewrite that landed
    /// twice has one timestamp: one version, its TTL counted from no earlier than `sent_at`.
    async fn rewrite_all(&self) -> Result<(), StoreError> {
        let owned: Vec<Owned> = self.owned.lock().map(|o| o.clone()).unwrap_or_default();
        for o in owned {
            let sent_at = Instant::now();
            let valid_until = o.sent_at + self.validity();
            let write = self.durable.write(
                self.at(o.row, &o.cell),
                o.value,
                Some(self.ttl()),
                ClientClock::next(),
                valid_until,
            );
            match tokio::time::timeout_at(valid_until, write).await {
                Ok(Ok(())) if Instant::now() < valid_until => {}
                Ok(Err(error)) => return Err(error),
                Ok(Ok(())) | Err(_) => {
                    debug!(lock = %self.lock, cell = %o.cell, "rewrite answered after the cell's validity; not counted");
                    return Err(StoreError::Unknown(format!(
                        "rewrite of {}/{} not confirmed within its validity",
                        o.row, o.cell
                    )));
                }
            }
            if let Ok(mut owned) = self.owned.lock()
                && let Some(slot) = owned
                    .iter_mut()
                    .find(|x| x.row == o.row && x.cell == o.cell)
            {
                slot.sent_at = sent_at;
            }
        }
        Ok(())
    }

    /// While waiting: rewrites the cells when the oldest is `renew_period` old. Returns
    /// `false` if a cell's validity ran out (the contender must start again).
    pub(crate) async fn keep_fresh(&self) -> bool {
        let Some(until) = self.valid_until() else {
            return true;
        };
        let now = Instant::now();
        if now >= until {
            return false;
        }
        let oldest = until - self.validity();
        if now >= oldest + self.options.timing.renew_period
            && let Err(error) = self.rewrite_all().await
        {
            debug!(lock = %self.lock, %error, "refresh while waiting failed; will retry");
        }
        self.still_valid()
    }

    pub(crate) fn store_error(&self, source: StoreError) -> LockError {
        LockError::Store {
            name: self.lock.clone(),
            source,
        }
    }

    /// A read's deadline: reads retry for at most the resolve timeout.
    pub(crate) fn read_deadline(&self) -> Instant {
        Instant::now() + self.options.timing.resolve_timeout
    }

    /// Hands the cells to the hold machine: the guard's deadline counts from the oldest
    /// cell's last confirmed write.
    pub(crate) fn into_guard(self: Arc<Self>, algorithm: &'static str) -> LockGuard {
        let timing = HoldTiming::from(&self.options.timing);
        let sent_at = self
            .valid_until()
            .map(|until| until - timing.validity)
            .unwrap_or_else(Instant::now);
        let name = self.lock.clone();
        let hold = Hold::start(self, timing, sent_at, None);
        LockGuard::new(name, algorithm, None, hold)
    }
}

/// Removes the contender's cells if an acquisition is abandoned (error, timeout, or the
/// future dropped) before it became a guard.
pub(crate) struct Attempt(Option<Arc<Cells>>);

impl Attempt {
    pub(crate) fn new(cells: &Arc<Cells>) -> Self {
        Attempt(Some(Arc::clone(cells)))
    }

    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if let Some(cells) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { cells.clear().await });
        }
    }
}

#[path = "plain_hold.rs"]
mod hold;
