//! A cell store seen through a test's hooks, for the fair lock's tests: a write may be
//! delayed or refused, a row read's answer delayed, each as the test decides per call.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::cells::{Cell, CellRef, CellStore};
use crate::error::StoreError;

/// Decides, per write (where, value), how long it waits before it is sent, or refuses it.
type WriteHook = Box<dyn Fn(CellRef<'_>, i64) -> Result<Duration, StoreError> + Send + Sync>;

/// Decides, per row read (the row's name), how late its answer is delivered.
type ReadHook = Box<dyn Fn(&str) -> Duration + Send + Sync>;

/// A cell store seen through hooks.
pub(super) struct Hooked {
    inner: Arc<dyn CellStore>,
    on_write: WriteHook,
    on_read_row: ReadHook,
}

impl Hooked {
    /// `inner` as it is, until hooks are added.
    pub(super) fn new(inner: Arc<dyn CellStore>) -> Self {
        Hooked {
            inner,
            on_write: Box::new(|_, _| Ok(Duration::ZERO)),
            on_read_row: Box::new(|_| Duration::ZERO),
        }
    }

    /// Writes wait as long as `hook` says before they are sent, or fail with its error.
    pub(super) fn on_write(
        mut self,
        hook: impl Fn(CellRef<'_>, i64) -> Result<Duration, StoreError> + Send + Sync + 'static,
    ) -> Self {
        self.on_write = Box::new(hook);
        self
    }

    /// Row reads are served at once and delivered as late as `hook` says.
    pub(super) fn on_read_row(
        mut self,
        hook: impl Fn(&str) -> Duration + Send + Sync + 'static,
    ) -> Self {
        self.on_read_row = Box::new(hook);
        self
    }
}

#[async_trait]
impl CellStore for Hooked {
    async fn write(
        &self,
        at: CellRef<'_>,
        value: i64,
        ttl: Option<Duration>,
        timestamp: i64,
    ) -> Result<(), StoreError> {
        let delay = (self.on_write)(at, value)?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.inner.write(at, value, ttl, timestamp).await
    }

    async fn delete(&self, at: CellRef<'_>, timestamp: i64) -> Result<(), StoreError> {
        self.inner.delete(at, timestamp).await
    }

    async fn read_row(
        &self,
        lock: &str,
        row: &str,
        from: &str,
        limit: usize,
    ) -> Result<Vec<Cell>, StoreError> {
        let answer = self.inner.read_row(lock, row, from, limit).await;
        let delay = (self.on_read_row)(row);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        answer
    }

    async fn read_cell(&self, at: CellRef<'_>) -> Result<Option<i64>, StoreError> {
        self.inner.read_cell(at).await
    }
}
