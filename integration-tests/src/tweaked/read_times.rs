//! `ReadTimes`: how long each read a `Tweaked` store sent took, and how many were cut.

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cql_lease::StoreError;
use tokio::time::Instant;

/// Times every read sent through a [`super::Tweaked`] store (each send on its own: it sits
/// below the queue's own bound), counting the ones cut before they were answered.
#[derive(Debug, Default)]
pub struct ReadTimes {
    longest: Mutex<Duration>,
    cut: AtomicUsize,
    answered: AtomicUsize,
}

impl ReadTimes {
    /// The longest any read waited so far, answered or cut.
    pub fn longest(&self) -> Duration {
        self.longest.lock().map(|l| *l).unwrap_or_default()
    }

    /// How many reads were cut (dropped before their answer came).
    pub fn cut(&self) -> usize {
        self.cut.load(Ordering::Relaxed)
    }

    /// How many reads were answered.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::Relaxed)
    }

    /// Awaits `read`, recording its time when it ends, answered or dropped.
    pub(super) async fn timed<T>(
        &self,
        read: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let mut watch = Watch {
            reads: self,
            sent: Instant::now(),
            answered: false,
        };
        let answer = read.await;
        watch.answered = true;
        answer
    }
}

/// Records one read's time when it ends, answered or dropped.
struct Watch<'a> {
    reads: &'a ReadTimes,
    sent: Instant,
    answered: bool,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if let Ok(mut longest) = self.reads.longest.lock() {
            *longest = (*longest).max(self.sent.elapsed());
        }
        let count = if self.answered {
            &self.reads.answered
        } else {
            &self.reads.cut
        };
        count.fetch_add(1, Ordering::Relaxed);
    }
}
