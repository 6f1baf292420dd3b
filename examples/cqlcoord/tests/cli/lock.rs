//! `lock NAME -- CMD`: mutual exclusion between two processes, the fencing token, the
//! command's status, release on exit, and the command stopped before a lease held through a
//! paused store can lapse.

use std::process::Stdio;

use cql_test_server::Flavor;

use crate::common::{cqlcoord, run, scratch, server, text};

/// Fast timing for tests: TTL 4 s, renew every 0.5 s, waiters poll every 0.2 s.
pub const TIMING: [&str; 8] = [
    "--ttl",
    "4s",
    "--renew-interval",
    "500ms",
    "--retry-interval",
    "200ms",
    "--kill-grace",
    "500ms",
];

/// Each run appends `start NAME TOKEN` and, 0.6 s later, `end NAME`.
const CRITICAL: &str = "echo \"start $0 ${CQLCOORD_FENCING_TOKEN:-none}\" >> \"$1\"; sleep 0.6; echo \"end $0\" >> \"$1\"";

async fn two_at_once(hosts: &str, algorithm: &str, log: &str) {
    let spawn = |who: &str| {
        let mut command = cqlcoord(hosts);
        command
            .args([
                "lock",
                "shared",
                "--algorithm",
                algorithm,
                "--timeout",
                "30s",
            ])
            .args(TIMING)
            .args(["--", "sh", "-c", CRITICAL, who, log])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        command.spawn().expect("spawn")
    };
    let (a, b) = (spawn("a"), spawn("b"));
    let (a, b) = tokio::join!(a.wait_with_output(), b.wait_with_output());
    for out in [a.expect("a"), b.expect("b")] {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
}

/// The log of two critical sections: `start X`, `end X`, `start Y`, `end Y`; the tokens.
fn sections(log: &str) -> Vec<String> {
    let lines: Vec<String> = std::fs::read_to_string(log)
        .expect("log")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    let who = |l: &str| l.split(' ').nth(1).map(str::to_owned).expect("name");
    assert!(
        lines[0].starts_with("start ") && lines[2].starts_with("start "),
        "{lines:?}"
    );
    assert_eq!(
        lines[1],
        format!("end {}", who(&lines[0])),
        "overlap: {lines:?}"
    );
    assert_eq!(
        lines[3],
        format!("end {}", who(&lines[2])),
        "overlap: {lines:?}"
    );
    assert_ne!(who(&lines[0]), who(&lines[2]), "{lines:?}");
    vec![lines[0].clone(), lines[2].clone()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_hold_the_lock_at_once() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("lock-mutex");
    let lease_log = dir.join("lease.log");
    let lease_log = lease_log.to_str().expect("utf-8");
    two_at_once(&hosts, "lease", lease_log).await;
    let starts = sections(lease_log);
    let token = |l: &str| {
        l.split(' ')
            .nth(2)
            .expect("token")
            .parse::<i64>()
            .expect("a token")
    };
    assert!(
        token(&starts[1]) > token(&starts[0]),
        "tokens grow: {starts:?}"
    );
    // Released on exit: free at once, not after the TTL.
    let out = run(&hosts, &["lease", "get", "shared", "--of", "lock"], None).await;
    assert_eq!(text(&out.stdout).trim(), "shared is free");

    let fair_log = dir.join("fair.log");
    let fair_log = fair_log.to_str().expect("utf-8");
    two_at_once(&hosts, "fair", fair_log).await;
    let starts = sections(fair_log);
    assert!(
        starts.iter().all(|l| l.ends_with(" none")),
        "no token: {starts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_status_is_the_exit_status() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["lock", "status", "--algorithm", "bakery"];
    args.extend(TIMING);
    args.extend(["--", "sh", "-c", "exit 7"]);
    let out = run(&hosts, &args, None).await;
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    // Held by someone else past the timeout: exit 124, the command never ran.
    let mut holding = vec!["lock", "busy"];
    holding.extend(TIMING);
    let (holder, _) = crate::etcdlike::first_line(&hosts, &holding).await;
    let dir = scratch("lock-status");
    let ran = dir.join("ran");
    let mut args = vec!["lock", "busy", "--timeout", "1s"];
    args.extend(TIMING);
    let touch = format!("touch {}", ran.display());
    args.extend(["--", "sh", "-c", &touch]);
    let out = run(&hosts, &args, None).await;
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("timed out"),
        "{}",
        text(&out.stderr)
    );
    assert!(!ran.exists(), "the command ran without the lock");
    nix::sys::signal::kill(
        crate::etcdlike::pid(&holder),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let (code, stderr) = crate::etcdlike::exit_code(holder).await;
    assert_eq!(code, Some(0), "{stderr}");
}

/// The store stops answering the holder's renewals (a paused store): the command gets
/// SIGTERM, ignores it, and is SIGKILLed before the lease is free for anyone else (the lease
/// library gives a claim back as soon as its holder's deadline passes, so killing at the
/// deadline or later would be too late); cqlcoord exits 125.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_is_stopped_before_the_lease_lapses() {
    let stderr = crate::paused::stopped_in_time("lock", "lock/paused", |command| {
        command.args(["lock", "paused"]);
    })
    .await;
    assert!(stderr.contains("lock \"paused\" lost"), "{stderr}");
}

/// Whether `pid` is a live process (not gone, not a zombie waiting to be reaped).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // `pid (comm) S ...`: the state follows the last ')'.
            let (_, rest) = stat.rsplit_once(')')?;
            rest.split_whitespace().next().map(|s| s != "Z" && s != "X")
        })
        .unwrap_or(false)
}

/// The command is a shell that started a worker of its own (`sh -c 'work & wait'`, a
/// pipeline, a script running a program that forks). When the lock is lost, stopping the
/// command must stop that worker too: otherwise the work goes on, unfenced, while another
/// process takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_own_children_are_stopped_when_the_lock_is_lost() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("lock-children");
    let pid_file = dir.join("worker.pid");
    let script = format!(
        "sh -c 'while :; do sleep 0.05; done' & echo $! > {}; wait",
        pid_file.display()
    );
    // stderr to a file: a surviving child would keep a pipe open after cqlcoord exits.
    let stderr_path = dir.join("stderr");
    let stderr_file = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut command = cqlcoord(&hosts);
    command
        .args(["lock", "grandchild"])
        .args(TIMING)
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(stderr_file);
    let mut holder = command.spawn().expect("spawn");
    let line = crate::common::wait_for_line(&pid_file, |l| !l.is_empty()).await;
    let worker: i32 = line[0].trim().parse().expect("a pid");
    assert!(alive(worker), "the worker runs under the lock");

    // Repair: the holder's next renewal is refused, the lock is lost, the command stopped.
    let out = run(
        &hosts,
        &["lease", "release", "grandchild", "--of", "lock"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), holder.wait())
        .await
        .expect("cqlcoord exits")
        .expect("wait");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(status.code(), Some(125), "{stderr}");
    // The lock is free for others now: the worker must be gone.
    let out = run(
        &hosts,
        &["lease", "get", "grandchild", "--of", "lock"],
        None,
    )
    .await;
    assert_eq!(text(&out.stdout).trim(), "grandchild is free");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let survived = alive(worker);
    if survived {
        let _ = kill(Pid::from_raw(worker), Signal::SIGKILL); // don't leak it
    }
    assert!(
        !survived,
        "the command's child {worker} still runs after the lock was lost and freed"
    );
}
