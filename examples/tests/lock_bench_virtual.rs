//! `lock_bench --virtual` and its flag checks: the binary run as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `--memory --virtual --latency-us 0` is refused at once, with an error naming the delay,
/// rather than run forever. With no delay the embedded stores answer without ever waiting,
/// so a lone contender's lock → release loop never yields to a timer; on the current-thread
/// runtime with a paused clock the clock only moves when every task waits, so the 1 s
/// window would never close and the bench would spin one core forever (with
/// `--latency-us 1000` the same command ends in 0.1 s).
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

/// Runs lock_bench with `args` to its end: (success, stdout, stderr).
fn run_bench(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lock_bench"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("lock_bench runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The table's columns, a row per algorithm and count, and the scaling summary with a
/// verdict for the algorithms that have targets; the embedded stores have no Paxos counters,
/// so that column says `n/a` and the header says why.
#[test]
fn virtual_bench_prints_the_table_and_the_scaling_summary() {
    let (ok, stdout, stderr) = run_bench(&[
        "--memory",
        "--virtual",
        "--latency-us",
        "1000",
        "--algorithms",
        "fair,shadow,acquire",
        "--contenders",
        "1,64",
        "--seconds",
        "1",
    ]);
    assert!(ok, "lock_bench failed: {stderr}");
    assert!(
        stdout.contains(
            "| algorithm | contenders | acquisitions/s | wait p50 | wait p99 | round trips/acq \
             | LWTs/acq | Paxos rounds/acq | Jain |"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("Paxos rounds/acq: n/a: the embedded stores run no Paxos"),
        "{stdout}"
    );
    for algorithm in ["fair", "shadow", "acquire"] {
        for n in [1, 64] {
            let prefix = format!("| {algorithm} | {n} | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no row {prefix}: {stdout}"));
            assert!(row.ends_with('|') && row.contains("| n/a |"), "{row}");
        }
    }
    assert!(
        !stdout.contains("shadow, 64"),
        "the old goal is gone: {stdout}"
    );
    let summary = stdout
        .split_once("Scaling, 64 contenders against 1")
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("no scaling summary: {stdout}"));
    let summary_row = |algorithm: &str| {
        summary
            .lines()
            .find(|l| l.starts_with(&format!("| {algorithm} | ")))
            .unwrap_or_else(|| panic!("no summary row for {algorithm}: {summary}"))
            .to_owned()
    };
    // The verdict's wording depends on the figures; that there is one does not.
    for algorithm in ["fair", "acquire"] {
        let row = summary_row(algorithm);
        assert!(
            ["| met |", "| missed: ", "| not judged: "]
                .iter()
                .any(|v| row.contains(v)),
            "{row}"
        );
    }
    let acquire = summary_row("acquire");
    assert!(
        acquire.contains("not judged: no figure for ≤ 4 Paxos rounds/acq")
            || acquire.contains("| missed: "),
        "without Paxos counters that target cannot be met: {acquire}"
    );
    assert!(summary_row("shadow").ends_with("| none | - |"), "{summary}");
}

/// `--nodetool` reads a real node's JMX counters: without `--scylla` it is refused before
/// anything runs.
#[test]
fn nodetool_needs_a_real_cluster() {
    let (ok, _, stderr) = run_bench(&["--nodetool", "/bin/false", "--contenders", "1"]);
    assert!(!ok, "refused");
    assert!(stderr.contains("--scylla"), "{stderr}");
}
