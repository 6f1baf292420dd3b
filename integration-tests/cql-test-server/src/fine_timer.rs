//! Waits timed to a fraction of a millisecond, for Paxos rounds: Tokio's timers fire on whole
//! milliseconds, so a round of a few hundred microseconds (as on a local node) would last until
//! the next millisecond tick, and every round started within one millisecond would end at the
//! same tick. One thread, shared by every server of the process, sleeps until the earliest
//! wait is due. It runs on the real clock: Tokio's paused time does not move it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// A wait: when it is due, and whom to wake.
struct Due {
    at: Instant,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
    }
}

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at.cmp(&other.at)
    }
}

/// The timer thread's inbox, once started (`None` if it could not be).
fn inbox() -> Option<&'static Mutex<Sender<Due>>> {
    static INBOX: OnceLock<Option<Mutex<Sender<Due>>>> = OnceLock::new();
    INBOX
        .get_or_init(|| {
            let (tx, rx) = channel();
            std::thread::Builder::new()
                .name("cql-test-server-timer".into())
                .spawn(move || serve(&rx))
                .ok()
                .map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// Waits `duration`, to within the operating system's timer slack (tens of microseconds).
pub(crate) async fn sleep(duration: Duration) {
    let (wake, woken) = oneshot::channel();
    let due = Due {
        at: Instant::now() + duration,
        wake,
    };
    let sent = inbox()
        .and_then(|inbox| inbox.lock().ok())
        .is_some_and(|inbox| inbox.send(due).is_ok());
    if sent {
        let _ = woken.await;
    } else {
        tokio::time::sleep(duration).await;
    }
}

/// Wakes each wait when due, earliest first, until every sender is gone.
fn serve(inbox: &Receiver<Due>) {
    let mut waits = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while waits
            .peek()
            .is_some_and(|Reverse(d): &Reverse<Due>| d.at <= now)
        {
            if let Some(Reverse(due)) = waits.pop() {
                let _ = due.wake.send(());
            }
        }
        let next = match waits.peek() {
            Some(Reverse(due)) => inbox.recv_timeout(due.at - now),
            None => inbox.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(due) => waits.push(Reverse(due)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wait ends no earlier than asked, and a short one is not held up behind a longer one
    /// asked for first.
    #[tokio::test]
    async fn waits_end_when_due_and_not_before() {
        let long = Duration::from_secs(1);
        let started = Instant::now();
        let waiting = tokio::spawn(async move {
            sleep(long).await;
            started.elapsed()
        });
        tokio::task::yield_now().await; // the long wait is asked for first
        sleep(Duration::from_micros(300)).await;
        let short = started.elapsed();
        assert!(short >= Duration::from_micros(300), "{short:?}");
        assert!(short < long, "{short:?}");
        let waited = waiting.await.unwrap_or_default();
        assert!(waited >= long, "{waited:?}");
    }
}
