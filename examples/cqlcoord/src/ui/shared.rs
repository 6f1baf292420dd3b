//! One read shared by every request that wants it: open tabs refreshing together cost the
//! cluster one read, not one each.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// The last answer of a read, kept for `reuse`. A request finding it younger gets a copy; a
/// request arriving while a read is in flight waits for that read and gets its answer.
#[derive(Debug)]
pub struct Shared<T> {
    reuse: Duration,
    /// Held for the whole of a read, so requests queue behind the one in flight.
    last: Mutex<Option<(Instant, T)>>,
}

impl<T: Clone> Shared<T> {
    /// Answers kept for `reuse` (zero: every request reads, still one at a time).
    pub fn new(reuse: Duration) -> Self {
        Shared {
            reuse,
            last: Mutex::new(None),
        }
    }

    /// The answer read less than `reuse` ago, or a new one from `read`.
    pub async fn get<F: Future<Output = T>>(&self, read: impl FnOnce() -> F) -> T {
        let mut last = self.last.lock().await;
        if let Some((at, value)) = last.as_ref()
            && at.elapsed() < self.reuse
        {
            return value.clone();
        }
        let value = read().await;
        *last = Some((Instant::now(), value.clone()));
        value
    }

    /// Forgets the kept answer (after a write changed what it shows): the next request reads.
    pub async fn forget(&self) {
        *self.last.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Requests arriving while a read is in flight wait for it and share its answer; after
    /// `forget` the next request reads again.
    #[tokio::test]
    async fn concurrent_requests_share_the_read_in_flight_until_forgotten() {
        let shared = Arc::new(Shared::new(Duration::from_secs(60)));
        let reads = Arc::new(AtomicUsize::new(0));
        let read = |reads: Arc<AtomicUsize>| async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            reads.fetch_add(1, Ordering::SeqCst)
        };
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (shared, reads) = (shared.clone(), reads.clone());
                tokio::spawn(async move { shared.get(|| read(reads)).await })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), 0);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        shared.forget().await;
        assert_eq!(shared.get(|| read(reads.clone())).await, 1);
    }
}
