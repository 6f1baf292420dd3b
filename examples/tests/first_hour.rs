//! `first_hour`, the newcomer's tour of the README (election, typed work queue, lease lock),
//! run as a user would: it must exit 0.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn first_hour_exits_zero() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_first_hour"))
        .args(["--jobs", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("first_hour starts");
    // Generous on a busy machine: the run itself takes a couple of seconds.
    let started = Instant::now();
    let finished = loop {
        if child.try_wait().expect("first_hour waited on").is_some() {
            break true;
        }
        if started.elapsed() > Duration::from_secs(180) {
            child.kill().expect("first_hour killed");
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = child.wait_with_output().expect("first_hour output read");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        finished,
        "first_hour still running after 180 s\n{stdout}\n{stderr}"
    );
    assert!(
        output.status.success(),
        "first_hour failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("every one of the 100 jobs done exactly once"),
        "{stdout}"
    );
}
