//! The server's controllable clock: real time plus an offset tests can advance.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall-clock microseconds as the server sees them. TTLs expire by this clock, so a test
/// can make them run out without sleeping.
#[derive(Debug)]
pub struct ServerClock {
    start_wall_micros: i64,
    start: std::time::Instant,
    offset_micros: AtomicI64,
}

impl Default for ServerClock {
    fn default() -> Self {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        ServerClock {
            start_wall_micros: i64::try_from(wall.as_micros()).unwrap_or(i64::MAX / 2),
            start: std::time::Instant::now(),
            offset_micros: AtomicI64::new(0),
        }
    }
}

impl ServerClock {
    /// Now, in microseconds since the epoch.
    pub fn now_micros(&self) -> i64 {
        let elapsed = i64::try_from(self.start.elapsed().as_micros()).unwrap_or(i64::MAX / 4);
        self.start_wall_micros + elapsed + self.offset_micros.load(Ordering::SeqCst)
    }

    /// Now, in whole seconds: the granularity of cell expiry.
    pub fn now_secs(&self) -> i64 {
        self.now_micros().div_euclid(1_000_000)
    }

    /// Jumps the clock forward.
    pub fn advance(&self, by: Duration) {
        let micros = i64::try_from(by.as_micros()).unwrap_or(i64::MAX / 4);
        self.offset_micros.fetch_add(micros, Ordering::SeqCst);
    }
}
