//! A memory queue store whose bakery item-row reads can answer late: a QUORUM read whose
//! response is slow on the network (its data as of when the replicas answered).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cql_lease::StoreError;
use cql_workqueue::bakery::PlainItemStore;
use cql_workqueue::memory::MemoryQueueStore;
use cql_workqueue::{ItemKey, StoredItem};
use integration_tests::tweaked::Tweaked;

/// The embedded plain item rows, except that one armed read is executed at once and its
/// answer delivered `delay` later (a QUORUM read whose response is slow on the network: the
/// data is as of when the replicas answered, not as of when the client gets it).
pub(crate) struct SlowAnswers {
    inner: Arc<dyn PlainItemStore>,
    pub(crate) armed: AtomicBool,
    delay: Duration,
}

#[async_trait]
impl PlainItemStore for SlowAnswers {
    async fn write_item(&self, item: &StoredItem, ts: i64) -> Result<(), StoreError> {
        self.inner.write_item(item, ts).await
    }

    async fn read_item(&self, key: &ItemKey) -> Result<Option<(StoredItem, i64)>, StoreError> {
        let answer = self.inner.read_item(key).await;
        if self.armed.swap(false, Ordering::SeqCst) {
            tokio::time::sleep(self.delay).await;
        }
        answer
    }
}

/// A [`MemoryQueueStore`] seen through a [`Tweaked`] whose bakery parts read item rows
/// through [`SlowAnswers`].
pub(crate) struct Wrapped {
    /// What the queues are built on.
    pub(crate) tweaked: Arc<Tweaked>,
    pub(crate) inner: Arc<MemoryQueueStore>,
    pub(crate) items: Arc<SlowAnswers>,
}

/// A fresh embedded store whose armed item-row read answers `delay` late.
pub(crate) fn wrapped(delay: Duration) -> Wrapped {
    let inner = Arc::new(MemoryQueueStore::new());
    let items = Arc::new(SlowAnswers {
        inner: Arc::clone(inner.plain_items()) as _,
        armed: AtomicBool::new(false),
        delay,
    });
    let seen = Arc::clone(&items);
    let tweaked = Arc::new(Tweaked {
        // The same rows as the bakery parts' own (the embedded store's plain items).
        wrap_items: Some(Box::new(move |_| Arc::clone(&seen) as _)),
        ..Tweaked::new(Arc::clone(&inner) as _)
    });
    Wrapped {
        tweaked,
        inner,
        items,
    }
}
