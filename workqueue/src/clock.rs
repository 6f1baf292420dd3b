//! Wall-clock readings for ordering and scheduling (never for deciding who holds what).
//!
//! The system clock is read fresh on every call, so a clock stepped by NTP is followed at
//! once. Under tokio's paused test clock it moves with tokio's clock (the time tokio skipped
//! is added, the real time spent computing is not), so retry back-off and delayed items can
//! be tested without sleeping, however slow the machine; outside tests that drift is zero.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    // Per thread, not per process: a paused test runtime lives on its test's thread, and
    // its tokio clock is not comparable with another test's.
    static ORIGIN: (std::time::Instant, tokio::time::Instant) =
        (std::time::Instant::now(), tokio::time::Instant::now());
}
static LAST: AtomicI64 = AtomicI64::new(0);

/// Microseconds since the Unix epoch, read now.
pub fn now_micros() -> i64 {
    micros_of(SystemTime::now()).saturating_add(paused_drift())
}

/// How far tokio's clock is from the real monotonic clock: zero outside paused test time.
/// Under paused time it is negative while the test computes (real time passes, tokio's
/// clock stands still), so the wall clock moves with tokio's clock alone, as every timer
/// and TTL of the test does; clamped at zero, the wall clock would run in real time through
/// a loaded machine's slow stretches and drift away from the TTLs and cursors it is
/// compared with.
fn paused_drift() -> i64 {
    let (std_origin, tokio_origin) = ORIGIN.with(|origin| *origin);
    let tokio_elapsed = tokio::time::Instant::now().saturating_duration_since(tokio_origin);
    let real_elapsed = std_origin.elapsed();
    let micros = |d: std::time::Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    micros(tokio_elapsed).saturating_sub(micros(real_elapsed))
}

/// A reading strictly above every earlier one of this process: unique ids and the client
/// timestamps of plain writes (so one process's later write always wins over its earlier).
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

/// The wall clock a queue handle reads: the fresh system clock, optionally skewed (to test
/// what a process with a wrong clock does to the queue). Its readings never go backwards
/// (a clock stepped back stalls until it catches up).
#[derive(Debug, Clone, Default)]
pub struct WallClock {
    offset_micros: i64,
    highest: std::sync::Arc<AtomicI64>,
}

impl WallClock {
    /// The system clock.
    pub fn system() -> Self {
        WallClock::default()
    }

    /// The system clock shifted by `offset_micros` (negative: behind).
    pub fn skewed(offset_micros: i64) -> Self {
        WallClock {
            offset_micros,
            highest: std::sync::Arc::default(),
        }
    }

    /// Microseconds since the epoch on this clock.
    pub fn now_micros(&self) -> i64 {
        let fresh = now_micros().saturating_add(self.offset_micros);
        self.highest.fetch_max(fresh, Ordering::SeqCst).max(fresh)
    }

    /// A reading strictly above every earlier one of this clock.
    pub fn next_micros(&self) -> i64 {
        let fresh = now_micros().saturating_add(self.offset_micros);
        let previous = self.highest.fetch_max(fresh, Ordering::SeqCst);
        if fresh > previous {
            fresh
        } else {
            self.highest.fetch_add(1, Ordering::SeqCst) + 1
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn follows_paused_time_and_skew() {
        let before = now_micros();
        tokio::time::sleep(Duration::from_secs(3600)).await;
        let after = now_micros();
        // The system and monotonic clocks are read at slightly different instants (and a
        // VM's may be stepped apart), so a little slack here too: the hour is what counts.
        let skipped = after - before;
        assert!(
            (3_599_000_000..=3_601_000_000).contains(&skipped),
            "skipped {skipped} µs"
        );
        let behind = WallClock::skewed(-5_000_000).now_micros();
        // A little slack: the system clock may be stepped (NTP, a resumed VM) between reads.
        let gap = now_micros() - behind;
        assert!((4_900_000..=5_100_000).contains(&gap), "skew of {gap} µs");
        assert!(next_micros() < next_micros());
    }

    /// Real time spent computing (a loaded machine) does not move the paused wall clock,
    /// so a paused test's sleeps move it by exactly what they sleep.
    #[tokio::test(start_paused = true)]
    async fn stands_still_while_paused_test_computes() {
        let before = now_micros();
        std::thread::sleep(Duration::from_millis(300));
        let busy = now_micros() - before;
        // The system clock read twice a few microseconds apart (or stepped by NTP).
        assert!(
            busy < 50_000,
            "moved {busy} µs while tokio's clock stood still"
        );
        let start = now_micros();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let slept = now_micros() - start;
        assert!(
            (950_000..=1_050_000).contains(&slept),
            "moved {slept} µs over a 1 s sleep"
        );
    }
}
