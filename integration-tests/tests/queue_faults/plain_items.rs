//! Plain item-row wrappers of the bakery mode (late, lost or slow writes and reads), for
//! `Tweaked::wrap_items`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_workqueue::bakery::PlainItemStore;
use cql_workqueue::{ItemKey, StoredItem};
use integration_tests::tweaked::WrapItems;

/// Plain item rows whose first write answers "unknown" at once and lands `delay` later (a
/// cut write a coordinator still applies, or a hint delivered late); later writes fail
/// before they are sent.
pub(crate) struct LatePlainWrite {
    inner: Arc<dyn PlainItemStore>,
    delay: Duration,
    writes: AtomicUsize,
}

impl LatePlainWrite {
    /// `Tweaked::wrap_items` for plain item rows whose first write lands `delay` late.
    pub(crate) fn wrapper(delay: Duration) -> WrapItems {
        Box::new(move |inner| {
            Arc::new(Self {
                inner,
                delay,
                writes: AtomicUsize::new(0),
            })
        })
    }
}

#[async_trait]
impl PlainItemStore for LatePlainWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) > 0 {
            return Err(StoreError::Unavailable("replicas unreachable".into()));
        }
        let (inner, item, delay) = (Arc::clone(&self.inner), item.clone(), self.delay);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = inner.write_item(&item, ts).await;
        });
        Err(StoreError::Unknown("write timed out".into()))
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose first write is lost before it reaches any replica (answered
/// "unknown"); later writes pass through.
pub(crate) struct LostFirstWrite {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for LostFirstWrite {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(StoreError::Unknown("write timed out".into()));
        }
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose first write applies and its answer is lost; later writes pass
/// through.
pub(crate) struct AppliedAnswerLost {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) writes: Arc<AtomicUsize>,
}

#[async_trait]
impl PlainItemStore for AppliedAnswerLost {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        let first = self.writes.fetch_add(1, Ordering::SeqCst) == 0;
        self.inner.write_item(item, ts).await?;
        if first {
            return Err(StoreError::Unknown("answer lost".into()));
        }
        Ok(())
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}

/// Plain item rows whose reads, once `armed`, answer "no row" `delay` after the replicas
/// were read (an answer slow on its way back): the process acts on a read that was true
/// when it was served.
pub(crate) struct SlowMiss {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) armed: Arc<AtomicBool>,
    pub(crate) missed: Arc<AtomicBool>,
    pub(crate) delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowMiss {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let read = self.inner.read_item(key).await?;
        if read.is_none() && self.armed.load(Ordering::SeqCst) {
            self.missed.store(true, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
        }
        Ok(read)
    }
}

/// Plain item rows whose writes each wait `delay` before they are sent (a slow client or
/// coordinator; within the request timeout).
pub(crate) struct SlowWrites {
    pub(crate) inner: Arc<dyn PlainItemStore>,
    pub(crate) delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowWrites {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.write_item(item, ts).await
    }
    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        self.inner.read_item(key).await
    }
}
