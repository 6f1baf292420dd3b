//! GlobalTime (from the fair queue lock's design): a cluster time that never goes backwards, on one plain cell.
//!
//! Each writer (a time-service replica) reads the cell and, when its local clock is ahead,
//! writes its local time into the cell **with that same value as the write timestamp**
//! (`USING TIMESTAMP`). The store keeps the version with the highest timestamp, which is
//! the highest value, whatever order the writes land in, so the value never decreases.
//! Readers simply read it ([`GlobalTime::now`]).
//!
//! # Guarantees
//! Non-decreasing across writers with arbitrarily skewed clocks, as long as reads see
//! completed writes (QUORUM).
//!
//! # Limits (the original design names the first)
//! - **A writer whose clock ran ahead and then died freezes the value**: every other
//!   writer's time is lower, so their writes lose, and the value stands still until their
//!   clocks catch up with it (for as long as that clock was ahead). Time stays
//!   non-decreasing but stops. [`GlobalTime::lag`] shows how far the cell is ahead of the
//!   local clock, so an operator can see it.
//! - Between updates the value is stale by up to the update period; it is a floor, not a
//!   clock.
//! - The cell carries no TTL (it must outlive everything); it takes no LWT.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, instrument};

use crate::cells::rows::TIME;
use crate::cells::{CellRef, CellStore, wall_micros};
use crate::error::StoreError;

/// The name of the one cell.
const CELL: &str = "global";

/// A local clock, microseconds since the Unix epoch.
pub type LocalClock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// One writer or reader of the cluster time `name`.
///
/// ```
/// use std::sync::Arc;
/// use cql_lease::cells::memory::MemoryCellStore;
/// use cql_lease::global_time::GlobalTime;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let store = Arc::new(MemoryCellStore::new());
/// let ahead = GlobalTime::with_clock(store.clone(), "clock", Arc::new(|| 2_000));
/// let behind = GlobalTime::with_clock(store, "clock", Arc::new(|| 1_000));
/// ahead.try_update().await?;
/// behind.try_update().await?; // its time is lower: no effect
/// assert_eq!(behind.now().await?, 2_000);
/// # Ok::<(), cql_lease::StoreError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct GlobalTime {
    store: Arc<dyn CellStore>,
    name: String,
    clock: LocalClock,
}

impl std::fmt::Debug for GlobalTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalTime")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl GlobalTime {
    /// The time `name` on `store`, with this machine's wall clock.
    pub fn new(store: Arc<dyn CellStore>, name: &str) -> Self {
        Self::with_clock(store, name, Arc::new(wall_micros))
    }

    /// As [`GlobalTime::new`] with another local clock (tests skew it).
    pub fn with_clock(store: Arc<dyn CellStore>, name: &str, clock: LocalClock) -> Self {
        GlobalTime {
            store,
            name: name.to_owned(),
            clock,
        }
    }

    fn at(&self) -> CellRef<'_> {
        CellRef {
            lock: &self.name,
            row: TIME,
            cell: CELL,
        }
    }

    /// The cluster time: the cell's value (0 before any update).
    ///
    /// # Errors
    /// The store's read error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn now(&self) -> Result<i64, StoreError> {
        Ok(self.store.read_cell(self.at()).await?.unwrap_or(0))
    }

    /// The original design's TryUpdateGlobalTime: read; if the local clock is ahead, write it with
    /// itself as the timestamp. Returns the local time when written, `None` otherwise.
    ///
    /// # Errors
    /// The store's error; a lost write answer is harmless (the same value and timestamp may
    /// land later, and can only move the time forward).
    ///
    /// # Cancel safety
    /// Cancel safe for the same reason.
    #[instrument(level = "debug", skip(self), fields(time = %self.name))]
    pub async fn try_update(&self) -> Result<Option<i64>, StoreError> {
        let local = (self.clock)();
        let global = self.now().await?;
        if local <= global {
            debug!(local, global, "local clock not ahead; nothing written");
            return Ok(None);
        }
        self.store.write(self.at(), local, None, local).await?;
        debug!(local, "global time moved forward");
        Ok(Some(local))
    }

    /// How far the cell is ahead of the local clock (zero when behind): a frozen value
    /// shows as a lag that grows.
    ///
    /// # Errors
    /// The store's read error.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lag(&self) -> Result<Duration, StoreError> {
        let ahead = self.now().await? - (self.clock)();
        Ok(Duration::from_micros(u64::try_from(ahead).unwrap_or(0)))
    }

    /// Runs [`GlobalTime::try_update`] every `period` until `stop` (a replica of the time
    /// service). Errors are logged and the next period tries again.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn run(&self, period: Duration, stop: CancellationToken) {
        loop {
            if let Err(error) = self.try_update().await {
                debug!(%error, "global time update failed; next period retries");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
        }
    }
}
