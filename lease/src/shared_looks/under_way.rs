//! Making a look, or waiting for the one under way, without waiting on a waiter that is no
//! longer polled.
//!
//! The waiter making a look makes it in its own future. A waiter whose future is kept but
//! not awaited any more (a task stuck elsewhere, a future set aside) would hold every other
//! waiter of its process up for as long as it is not polled; so a look under way is waited
//! for at most `patience` from its start (more than a polled look takes: a look that is
//! just slow is not duplicated), after which the next waiter makes its own and stands as
//! the look under way instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::{Look, SharedLooks};

/// Tells one look under way from the next.
static LOOKS: AtomicU64 = AtomicU64::new(0);

/// The look under way at one lease or lock.
#[derive(Debug)]
pub(crate) struct UnderWay {
    id: u64,
    /// Waited for until then at most.
    overdue_at: Instant,
    /// Changes (or closes) when the look is recorded or given up.
    done: watch::Receiver<()>,
}

/// The waiter making the look: its drop, however the look ends, frees the place for the
/// next look and wakes those waiting for this one.
struct Making<'a, T> {
    shared: &'a SharedLooks<T>,
    id: u64,
    _done: watch::Sender<()>,
}

/// What a waiter wanting a look does.
enum Turn<'a, T> {
    /// Waits for the look under way (until it is recorded or given up), at most until then.
    Wait(watch::Receiver<()>, Instant),
    /// Makes one.
    Make(Making<'a, T>),
}

impl<T> Drop for Making<'_, T> {
    fn drop(&mut self) {
        let mut under_way = self
            .shared
            .looking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if under_way.as_ref().is_some_and(|u| u.id == self.id) {
            *under_way = None;
        }
        // `_done` is dropped after this: the waiters wake to a free place.
    }
}

impl<T> SharedLooks<T> {
    /// A look sent after `after` (any look when `None`): the latest one if it is, else the
    /// one under way (waited for until `patience` after its start), else one made now
    /// with `make`.
    ///
    /// # Cancel safety
    /// Cancel-safe: a look dropped half-way is not recorded; another waiter makes its own.
    pub(crate) async fn look<F>(
        &self,
        after: Option<Instant>,
        patience: Duration,
        make: F,
    ) -> Arc<Look<T>>
    where
        F: AsyncFnOnce() -> T,
    {
        loop {
            if let Some(look) = self.latest_after(after) {
                return look;
            }
            match self.join_or_start(patience) {
                Turn::Wait(mut done, overdue_at) => {
                    // Recorded, given up, or overdue: look again at what there is.
                    let _ = tokio::time::timeout_at(overdue_at, done.changed()).await;
                }
                Turn::Make(making) => {
                    let sent = Instant::now();
                    let seen = make().await;
                    let look = Arc::new(Look {
                        sent,
                        took: sent.elapsed(),
                        seen,
                    });
                    if let Ok(mut last) = self.last.lock()
                        && last.as_ref().is_none_or(|l| l.sent < look.sent)
                    {
                        *last = Some(Arc::clone(&look));
                    }
                    drop(making);
                    return look;
                }
            }
        }
    }

    /// The look under way to wait for, and until when; or, when there is none or it is
    /// overdue, this waiter's own, now under way.
    fn join_or_start(&self, patience: Duration) -> Turn<'_, T> {
        let now = Instant::now();
        let mut under_way = self
            .looking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match under_way.as_ref() {
            Some(u) if now < u.overdue_at => return Turn::Wait(u.done.clone(), u.overdue_at),
            Some(u) => debug!(look = u.id, "the look under way is overdue; making another"),
            None => {}
        }
        let id = LOOKS.fetch_add(1, Ordering::Relaxed);
        let (done, receiver) = watch::channel(());
        *under_way = Some(UnderWay {
            id,
            overdue_at: now + patience,
            done: receiver,
        });
        Turn::Make(Making {
            shared: self,
            id,
            _done: done,
        })
    }
}
