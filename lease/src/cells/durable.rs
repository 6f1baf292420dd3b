//! The retry rule for plain cells: same cell, same timestamp, until it succeeds.
//!
//! A plain write whose answer is lost may have been applied, or may still be applied later
//! (a hint, a slow replica). Sending it again with the *same* timestamp is harmless: the
//! store keeps one version per timestamp. So a write is retried until it succeeds; if the
//! caller gives up (deadline), it deletes the cell with a later timestamp, which wins over
//! the lost write whenever that lands. Reads are retried the same way.
//!
//! Every attempt is bounded (at most the request timeout, at most half the time left before
//! the caller gives up: the rule of the lease renewals), so a request stuck on a frozen coordinator is
//! dropped with time to send it again, at once, to another one; a write so cut has an
//! unknown outcome, which sending it again settles.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Cell, CellRef, CellStore};
use crate::error::StoreError;
use crate::hold::attempt_budget;

/// A cell store wrapped with the retry rule; cheap to clone.
#[derive(Clone)]
pub struct Durable {
    store: Arc<dyn CellStore>,
    retry_interval: Duration,
    request_timeout: Duration,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("retry_interval", &self.retry_interval)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl Durable {
    /// Wraps `store`: no call waits longer than `request_timeout` (nor half the time left
    /// before its caller gives up); a call cut so is sent again at once, a failed one after
    /// `retry_interval` (jittered).
    pub fn new(
        store: Arc<dyn CellStore>,
        retry_interval: Duration,
        request_timeout: Duration,
    ) -> Self {
        Durable {
            store,
            retry_interval,
            request_timeout,
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
        self.retry(give_up_at, "write", true, at, || {
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
        self.retry(give_up_at, "delete", true, at, || {
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
        self.retry(give_up_at, "read_row", false, at, || {
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
        self.retry(give_up_at, "read_cell", false, at, || {
            self.store.read_cell(at)
        })
        .await
    }

    async fn retry<T, F, Fut>(
        &self,
        give_up_at: Instant,
        what: &'static str,
        write: bool,
        at: CellRef<'_>,
        mut call: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let mut attempt = 0u32;
        loop {
            let budget = attempt_budget(
                self.request_timeout,
                give_up_at.saturating_duration_since(Instant::now()),
            );
            let sent = Instant::now();
            let answer = crate::timed::within(budget, call()).await;
            crate::metrics::cell_request(what, write, &answer, sent);
            let (error, wake) = match answer {
                Ok(Ok(answer)) => {
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
                Ok(Err(error @ StoreError::Rejected(_))) => return Err(error),
                // Sent again at once: the driver routes it to another coordinator.
                Err(_elapsed) => {
                    let message = format!("{what}: no answer within {budget:?}");
                    let error = if write {
                        StoreError::Unknown(message)
                    } else {
                        StoreError::Unavailable(message)
                    };
                    (error, Instant::now())
                }
                Ok(Err(error)) => {
                    let jitter = rand::random_range(0.5..1.5);
                    (error, Instant::now() + self.retry_interval.mul_f64(jitter))
                }
            };
            attempt += 1;
            if wake >= give_up_at {
                warn!(lock = at.lock, row = at.row, cell = at.cell, what, %error, "giving up");
                return Err(error);
            }
            debug!(lock = at.lock, row = at.row, cell = at.cell, what, %error, "retrying with the same timestamp");
            tokio::time::sleep_until(wake).await;
            // Timers fire late (a loaded runtime, a millisecond timer wheel): nothing is sent
            // at or past the deadline the caller fenced its writes with.
            if Instant::now() >= give_up_at {
                warn!(lock = at.lock, row = at.row, cell = at.cell, what, %error, "giving up");
                return Err(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;
    use crate::cells::faulty::FaultyCellStore;
    use crate::cells::memory::{CellOp, MemoryCellStore};
    use crate::memory::{Fault, Times};

    const AT: CellRef<'static> = CellRef {
        lock: "l",
        row: "r",
        cell: "c",
    };

    /// One view of a fresh store whose next `op` hangs (a frozen coordinator), behind
    /// `Durable` with a 300 ms request timeout.
    fn frozen_once(op: CellOp) -> (FaultyCellStore, Durable) {
        let view = FaultyCellStore::new(Arc::new(MemoryCellStore::new()));
        view.inject(
            Some(op),
            Fault::Latency(Duration::from_secs(60)),
            Times::Next(1),
        );
        let durable = Durable::new(
            Arc::new(view.clone()),
            Duration::from_millis(100),
            Duration::from_millis(300),
        );
        (view, durable)
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_stuck_on_a_frozen_coordinator_is_sent_again_in_time() {
        let (view, durable) = frozen_once(CellOp::Write);
        let give_up_at = Instant::now() + Duration::from_secs(1);
        durable
            .write(AT, 7, Some(Duration::from_secs(2)), 42, give_up_at)
            .await
            .unwrap();
        assert!(Instant::now() < give_up_at, "waited on the frozen request");
        assert_eq!(view.round_trips(), 2);
        assert_eq!(view.read_cell(AT).await.unwrap(), Some(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_stuck_on_a_frozen_coordinator_is_sent_again_in_time() {
        let (view, durable) = frozen_once(CellOp::ReadCell);
        let give_up_at = Instant::now() + Duration::from_secs(1);
        assert_eq!(durable.read_cell(AT, give_up_at).await.unwrap(), None);
        assert!(Instant::now() < give_up_at, "waited on the frozen request");
        assert_eq!(view.round_trips(), 2);
    }
}
