//! A cell store whose every call waits a round trip drawn around a mean, for `lock_bench
//! --virtual`: with a fixed delay on a paused clock every answer lands on the same tick, and
//! contenders collide or tie far more often than they would on a network.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_lease::cells::{Cell, CellRef, CellStore};

/// Waits `mean × U(1 − spread, 1 + spread)` (on tokio's clock), then calls the inner store:
/// the call lands at the end of its round trip, as the embedded store's injected latency does.
#[derive(Clone)]
pub struct Jittered {
    inner: Arc<dyn CellStore>,
    mean: Duration,
    spread: f64,
}

impl std::fmt::Debug for Jittered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jittered")
            .field("mean", &self.mean)
            .field("spread", &self.spread)
            .finish_non_exhaustive()
    }
}

impl Jittered {
    /// `spread` is a fraction of `mean`, clamped to `0.0..=1.0`.
    pub fn new(inner: Arc<dyn CellStore>, mean: Duration, spread: f64) -> Self {
        Jittered {
            inner,
            mean,
            spread: spread.clamp(0.0, 1.0),
        }
    }

    async fn wait(&self) {
        let factor = if self.spread > 0.0 {
            rand::random_range(1.0 - self.spread..1.0 + self.spread)
        } else {
            1.0
        };
        tokio::time::sleep(self.mean.mul_f64(factor)).await;
    }
}

#[async_trait]
impl CellStore for Jittered {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        self.wait().await;
        self.inner.write(at, value, ttl, timestamp).await
    }

    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        self.wait().await;
        self.inner.delete(at, timestamp).await
    }

    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        self.wait().await;
        self.inner.read_row(lock, row, from, limit).await
    }

    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.wait().await;
        self.inner.read_cell(at).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cql_lease::cells::memory::MemoryCellStore;

    /// Every call waits within the spread around the mean, and reaches the inner store.
    #[tokio::test(start_paused = true)]
    async fn calls_wait_within_the_spread_and_land() {
        let store = Jittered::new(
            Arc::new(MemoryCellStore::new()),
            Duration::from_millis(10),
            0.2,
        );
        let at = CellRef {
            lock: "l",
            row: "main",
            cell: "a",
        };
        for _ in 0..20 {
            let started = tokio::time::Instant::now();
            store.write(at, 1, None, 1).await.unwrap();
            let took = started.elapsed();
            assert!(took >= Duration::from_millis(8), "{took:?}");
            // The timer rounds up to its next millisecond tick.
            assert!(took <= Duration::from_millis(13), "{took:?}");
        }
        assert_eq!(store.read_cell(at).await.unwrap(), Some(1));
    }
}
