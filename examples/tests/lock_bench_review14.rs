//! Review 14 of `lock_bench --virtual`: the binary run as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Finding (review 14): `--memory --virtual --latency-us 0` is accepted, and then never ends.
/// With no delay the embedded stores answer without ever waiting, so a lone contender's
/// lock → release loop never yields to a timer; on the current-thread runtime with a paused
/// clock the clock only moves when every task waits, so the 1 s window never closes and the
/// bench spins one core forever (seen: still at 100 % CPU after 60 s of wall time, no row
/// printed; with `--latency-us 1000` the same command ends in 0.1 s). It should either
/// reject a zero delay under `--virtual` or keep time some other way.
#[test]
fn finding_virtual_bench_with_zero_latency_never_ends() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lock_bench"))
        .args([
            "--memory",
            "--virtual",
            "--latency-us",
            "0",
            "--algorithms",
            "fair",
            "--contenders",
            "1",
            "--seconds",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lock_bench starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("lock_bench waited on") {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().expect("lock_bench killed");
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.is_some(),
        "lock_bench --memory --virtual --latency-us 0 (1 s of virtual time, one contender) \
         still running after 20 s of wall time: the paused clock never advances"
    );
}
