//! `cqlcoord dev`: the bundled server with the schema, and the environment to use it.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::text;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_serves_a_ready_cluster_until_interrupted() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cqlcoord"));
    command
        .arg("dev")
        .env_remove("CQLCOORD_HOSTS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut dev = command.spawn().expect("spawn");
    let mut lines = BufReader::new(dev.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("a line within a minute")
        .expect("read")
        .expect("a line");
    let hosts = line
        .strip_prefix("export CQLCOORD_HOSTS=")
        .unwrap_or_else(|| panic!("not an export line: {line}"))
        .to_owned();
    // The environment it printed is all a command needs: the schema is there.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cqlcoord"));
    let out = command
        .env("CQLCOORD_HOSTS", &hosts)
        .args([
            "lock",
            "tried",
            "--",
            "sh",
            "-c",
            "echo $CQLCOORD_FENCING_TOKEN",
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).trim().parse::<i64>().is_ok(),
        "{}",
        text(&out.stdout)
    );
    let pid = Pid::from_raw(i32::try_from(dev.id().expect("running")).expect("pid"));
    kill(pid, Signal::SIGINT).expect("SIGINT");
    let status = tokio::time::timeout(Duration::from_secs(60), dev.wait())
        .await
        .expect("exits")
        .expect("wait");
    assert_eq!(status.code(), Some(0));
}
