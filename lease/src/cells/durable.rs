//! The retry rule for plain cells: same cell, same timestamp, until it succeeds.
//!
//! A plain write whose answer is lost may have been applied, or may still be applied later
//! (a hint, a slow replica). Sending it again with the *same* timestamp is harmless: the
//! store keeps one version per timestamp. So a write is retried until it succeeds; if the
//! caller gives up (deadline), it deletes the cell with a later timestamp, which wins over
//! the lost write whenever that lands. Reads are retried the same way.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Cell, CellRef, CellStore};
use crate::error::StoreError;

/// A cell store wrapped with the retry rule; cheap to clone.
#[derive(Clone)]
pub struct Durable {
    store: Arc<dyn CellStore>,
    retry_interval: Duration,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("retry_interval", &self.retry_interval)
            .finish_non_exhaustive()
    }
}

impl Durable {
    /// Wraps `store`; failed calls are sent again after `retry_interval` (jittered).
    pub fn new(store: Arc<dyn CellStore>, retry_interval: Duration) -> Self {
        Durable {
            store,
            retry_interval,
        }
    }

    /// The wrapped store.
    pub fn store(&self) -> &Arc<dyn CellStore> {
        &self.store
    }

    /// Writes until the store confirms, or until `give_up_at` (then the last error is
    /// returned and the write may still land: delete it with a later timestamp).
    ///
    /// # Errors
    /// [`StoreError::Rejected`] at once; otherwise the last error once `give_up_at` passed.
    ///
    /// # Cancel safety
    /// Cancel safe in the sense that dropping it leaves at most a write that may land; the
    /// caller's later-timestamped delete covers it.
    pub async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
        give_up_at: Instant,
    ) -> Result<(), StoreError> {
        self.retry(give_up_at, "write", at, || {
            self.store.write(at, value, ttl, timestamp)
        })
        .await
    }

    /// Deletes until the store confirms, or until `give_up_at`.
    ///
    /// # Errors
    /// As [`Durable::write`].
    ///
    /// # Cancel safety
    /// Dropping it may leave the cell in place until its TTL.
    pub async fn delete(
        &self,
        at: CellRef<'_>,
        timestamp: i64,
        give_up_at: Instant,
    ) -> Result<(), StoreError> {
        self.retry(give_up_at, "delete", at, || {
            self.store.delete(at, timestamp)
        })
        .await
    }

    /// Reads a row (see [`CellStore::read_row`]), retrying failures until `give_up_at`.
    ///
    /// # Errors
    /// As [`Durable::write`].
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
        give_up_at: Instant,
    ) -> Result<Vec<Cell>, StoreError> {
        let at = CellRef {
            lock,
            row,
            cell: from,
        };
        self.retry(give_up_at, "read_row", at, || {
            self.store.read_row(lock, row, from, limit)
        })
        .await
    }

    /// Reads one cell, retrying failures until `give_up_at`.
    ///
    /// # Errors
    /// As [`Durable::write`].
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn read_cell(
        &self,
        at: CellRef<'_>,
        give_up_at: Instant,
    ) -> Result<Option<i64>, StoreError> {
        self.retry(give_up_at, "read_cell", at, || self.store.read_cell(at))
            .await
    }

    async fn retry<T, F, Fut>(
        &self,
        give_up_at: Instant,
        what: &'static str,
        at: CellRef<'_>,
        mut call: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let mut attempt = 0u32;
        loop {
            match call().await {
                Ok(answer) => {
                    if attempt > 0 {
                        debug!(
                            lock = at.lock,
                            row = at.row,
                            cell = at.cell,
                            what,
                            attempt,
                            "succeeded after retries"
                        );
                    }
                    return Ok(answer);
                }
                Err(error @ StoreError::Rejected(_)) => return Err(error),
                Err(error) => {
                    attempt += 1;
                    let jitter = rand::random_range(0.5..1.5);
                    let wake = Instant::now() + self.retry_interval.mul_f64(jitter);
                    if wake >= give_up_at {
                        warn!(lock = at.lock, row = at.row, cell = at.cell, what, %error, "giving up");
                        return Err(error);
                    }
                    debug!(lock = at.lock, row = at.row, cell = at.cell, what, %error, "retrying with the same timestamp");
                    tokio::time::sleep_until(wake).await;
                }
            }
        }
    }
}
