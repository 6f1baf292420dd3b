//! Every program parses its flags with clap: `--help` describes them and exits 0 without
//! running anything, and an unknown flag is a usage error (exit 2).

use std::process::Command;

/// Each program with a flag its help must list.
const PROGRAMS: [(&str, &str); 6] = [
    (env!("CARGO_BIN_EXE_lock_bench"), "--latency-us"),
    (env!("CARGO_BIN_EXE_queue_bench"), "--claim-mode"),
    (env!("CARGO_BIN_EXE_election_bench"), "--frozen"),
    (env!("CARGO_BIN_EXE_election_demo"), "--candidate"),
    (env!("CARGO_BIN_EXE_lease_demo"), "--scylla"),
    (env!("CARGO_BIN_EXE_queue_demo"), "--scylla"),
];

#[test]
fn help_works_and_unknown_flags_exit_2() {
    for (program, flag) in PROGRAMS {
        let out = Command::new(program).arg("--help").output().expect("run");
        let help = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{program}: {help}");
        assert!(help.contains("Usage:"), "{program}: {help}");
        assert!(help.contains(flag), "{program} --help lacks {flag}: {help}");
        let out = Command::new(program)
            .arg("--no-such-flag")
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{program}: {stderr}");
        assert!(stderr.contains("--no-such-flag"), "{program}: {stderr}");
    }
}

/// lock_bench keeps every flag the README documents.
#[test]
fn lock_bench_keeps_its_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_lock_bench"))
        .arg("--help")
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--scylla",
        "--nodetool",
        "--contenders",
        "--seconds",
        "--algorithms",
        "--runs",
        "--hold-ms",
        "--think-ms",
        "--latency-ms",
        "--memory",
        "--virtual",
        "--latency-us",
        "--jitter-pct",
    ] {
        assert!(help.contains(flag), "{flag} missing: {help}");
    }
}
