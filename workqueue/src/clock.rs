//! The wall clock the queue stamps items with: the process's start time on the system clock
//! plus its monotonic (tokio) clock since then.
//!
//! It never goes backwards inside a process, so one producer's items keep their order, and it
//! follows tokio's paused clock in tests, so retry back-off and scheduled items can be tested
//! without sleeping. Across machines it is only as good as their clocks: it orders items and
//! schedules retries, it never decides who holds what.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

static ORIGIN: OnceLock<(Instant, i64)> = OnceLock::new();
static LAST: AtomicI64 = AtomicI64::new(0);

/// Microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    let (start, start_micros) =
        *ORIGIN.get_or_init(|| (Instant::now(), micros_of(SystemTime::now())));
    let elapsed = i64::try_from(Instant::now().saturating_duration_since(start).as_micros())
        .unwrap_or(i64::MAX);
    start_micros.saturating_add(elapsed)
}

/// A reading strictly above every earlier one of this process: ids made from it are unique
/// in time and keep the order they were made in.
pub fn next_micros() -> i64 {
    let now = now_micros();
    let previous = LAST.fetch_max(now, Ordering::SeqCst);
    if now > previous {
        now
    } else {
        LAST.fetch_add(1, Ordering::SeqCst) + 1
    }
}

/// A system time in microseconds since the epoch.
pub fn micros_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
