//! The `cql-test-server` binary's flags: `--help` describes them (and the true default mode)
//! without starting a server; an unknown flag is a usage error (exit 2).

use std::process::Command;

#[test]
fn help_names_the_default_mode_and_unknown_flags_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_cql-test-server"))
        .arg("--help")
        .output()
        .expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{help}");
    assert!(help.contains("--scylla-mode"), "{help}");
    assert!(help.contains("Default: Cassandra mode"), "{help}");
    let out = Command::new(env!("CARGO_BIN_EXE_cql-test-server"))
        .arg("--no-such-flag")
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
