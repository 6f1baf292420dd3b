//! Review 14 of `lock_bench --virtual`: the binary run as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Review 14's finding: `--memory --virtual --latency-us 0` was accepted, and then never ended.
/// With no delay the embedded stores answer without ever waiting, so a lone contender's
/// lock → release loop never yields to a timer; on the current-thread runtime with a paused
/// clock the clock only moves when every task waits, so the 1 s window never closes and the
/// bench spins one core forever (seen: still at 100 % CPU after 60 s of wall time, no row
/// printed; with `--latency-us 1000` the same command ends in 0.1 s). Now it is refused at
/// once with an error naming the delay.
#[test]
fn virtual_bench_refuses_a_zero_delay() {
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
        .stderr(Stdio::piped())
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
    let status = status.expect(
        "lock_bench --memory --virtual --latency-us 0 (1 s of virtual time, one contender) \
         still running after 20 s of wall time: the paused clock never advances",
    );
    assert!(
        !status.success(),
        "a zero delay under --virtual must be refused"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr piped"), &mut stderr)
        .expect("stderr read");
    assert!(
        stderr.contains("--latency-us"),
        "error names the delay: {stderr}"
    );
}
