//! `elect`, `observe` and `leader`: the command runs only while elected, and another
//! candidate's command takes over when the leader's process is killed.

use std::process::Stdio;
use std::time::Duration;

use cql_test_server::Flavor;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{cqlcoord, run, scratch, server, text, wait_for_line};

/// TTL 3 s, renew every 0.5 s, followers try every 0.2 s, SIGKILL 0.5 s after SIGTERM.
const TIMING: [&str; 10] = [
    "--ttl",
    "3s",
    "--renew-interval",
    "500ms",
    "--retry-interval",
    "200ms",
    "--kill-grace",
    "500ms",
    "--max-clock-skew",
    "0s",
];

fn candidate(hosts: &str, id: &str, log: &str) -> tokio::process::Child {
    let script = "echo \"$CQLCOORD_CANDIDATE $CQLCOORD_TERM\" >> \"$0\"; exec sleep 60";
    let mut command = cqlcoord(hosts);
    command
        .args(["elect", "jobs", "--candidate", id, "--value", id])
        .args(TIMING)
        .args(["--", "sh", "-c", script, log])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        // Its own process group: killing the group kills cqlcoord and its command at once,
        // as a crashed machine would (a SIGKILLed cqlcoord cannot stop its command).
        .process_group(0);
    command.spawn().expect("spawn")
}

fn pid(child: &tokio::process::Child) -> i32 {
    i32::try_from(child.id().expect("running")).expect("pid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_leader_takes_over_when_the_leaders_process_is_killed() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let dir = scratch("elect");
    let log = dir.join("leaders");
    let log_path = log.to_str().expect("utf-8");

    let mut observer = cqlcoord(&hosts);
    observer
        .args(["observe", "jobs", "--json", "--retry-interval", "100ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut observer = observer.spawn().expect("spawn observer");
    let mut seen = BufReader::new(observer.stdout.take().expect("stdout")).lines();

    let a = candidate(&hosts, "a", log_path);
    let first = wait_for_line(&log, |l| l.starts_with("a ")).await;
    let b = candidate(&hosts, "b", log_path);
    // b follows: its command must not run while a leads. a leads longer than one validity
    // (3 s - 1 s): a healthy leader's command is never stopped.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut a = a;
    assert!(
        a.try_wait().expect("a").is_none(),
        "a's cqlcoord exited while healthy"
    );
    let lines = std::fs::read_to_string(&log).expect("log");
    assert_eq!(lines.lines().count(), 1, "only the leader runs: {lines}");
    let out = run(&hosts, &["leader", "jobs"], None).await;
    assert!(
        text(&out.stdout).starts_with("leader=a ") && text(&out.stdout).contains(" value=a"),
        "{}",
        text(&out.stdout)
    );
    // `observe` without --json: one plain line per change, the current leader first.
    let mut plain = cqlcoord(&hosts);
    plain
        .args(["observe", "jobs"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut plain = plain.spawn().expect("spawn plain observer");
    let mut plain_lines = BufReader::new(plain.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), plain_lines.next_line())
        .await
        .expect("a plain line")
        .expect("read")
        .expect("a line");
    assert!(
        line.starts_with("leader=a term=") && line.ends_with(" value=a"),
        "{line}"
    );
    kill(Pid::from_raw(pid(&plain)), Signal::SIGTERM).expect("signal plain observer");
    assert_eq!(plain.wait().await.expect("exits").code(), Some(0));

    killpg(Pid::from_raw(pid(&a)), Signal::SIGKILL).expect("kill a's group");
    let lines = wait_for_line(&log, |l| l.starts_with("b ")).await;
    let term = |l: &str| {
        l.split(' ')
            .nth(1)
            .expect("term")
            .parse::<i64>()
            .expect("term")
    };
    assert!(term(&lines[1]) > term(&first[0]), "terms grow: {lines:?}");

    // The observer saw a, then b (possibly with nobody in between), as JSON lines.
    let mut leaders = Vec::new();
    while leaders.last().map(String::as_str) != Some("b") {
        let line = tokio::time::timeout(Duration::from_secs(30), seen.next_line())
            .await
            .expect("an observed change")
            .expect("read")
            .expect("a line");
        let change: serde_json::Value = serde_json::from_str(&line).expect("json line");
        if let Some(leader) = change["leader"].as_str() {
            // Each candidate campaigns with its id as its value (`--value`).
            assert_eq!(change["value"].as_str(), Some(leader), "{line}");
            leaders.push(leader.to_owned());
        }
    }
    assert_eq!(leaders, ["a", "b"]);

    // SIGTERM to b's cqlcoord: it stops its command, resigns, exits with the status.
    kill(Pid::from_raw(pid(&b)), Signal::SIGTERM).expect("signal b");
    let out = tokio::time::timeout(Duration::from_secs(30), b.wait_with_output())
        .await
        .expect("b exits")
        .expect("wait");
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    let out = run(&hosts, &["leader", "jobs"], None).await;
    assert_eq!(
        out.status.code(),
        Some(124),
        "resigned: {}",
        text(&out.stdout)
    );
    kill(Pid::from_raw(pid(&observer)), Signal::SIGTERM).expect("signal observer");
    let status = observer.wait().await.expect("observer exits");
    assert_eq!(status.code(), Some(0));
}

/// The leader's store stops answering its renewals: its command is SIGKILLed before the term
/// can lapse (on the deadline the campaign's renewals move), and cqlcoord exits 125.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaders_command_is_stopped_before_its_term_lapses() {
    let stderr = crate::paused::stopped_in_time("elect", "election/paused", |command| {
        command.args(["elect", crate::paused::NAME, "--candidate", "a"]);
    })
    .await;
    assert!(stderr.contains("of \"paused\" ended"), "{stderr}");
}

/// An operator releases the leader's lease by hand (`lease release`, a repair): the leader's
/// next renewal is refused, its command is stopped, and with `--recampaign` it campaigns
/// again and restarts the command in a new, higher term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_deposed_by_a_repair_campaigns_again() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let log = scratch("recampaign").join("terms");
    let script = "echo \"$CQLCOORD_TERM\" >> \"$0\"; exec sleep 60";
    let mut command = cqlcoord(&hosts);
    command
        .args(["elect", "jobs", "--candidate", "a", "--recampaign"])
        .args(TIMING)
        .args(["--", "sh", "-c", script, log.to_str().expect("utf-8")])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let leader = command.spawn().expect("spawn");
    wait_for_line(&log, |l| !l.is_empty()).await;
    let out = run(
        &hosts,
        &["lease", "release", "jobs", "--of", "election"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = std::fs::read_to_string(&log).expect("log");
    let first = first.lines().next().expect("a term").to_owned();
    let terms = wait_for_line(&log, |l| !l.is_empty() && l != first).await;
    let term = |l: &str| l.parse::<i64>().expect("term");
    assert!(term(&terms[1]) > term(&terms[0]), "{terms:?}");
    kill(Pid::from_raw(pid(&leader)), Signal::SIGTERM).expect("signal");
    let out = tokio::time::timeout(Duration::from_secs(30), leader.wait_with_output())
        .await
        .expect("exits")
        .expect("wait");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("campaigning again"), "{stderr}");
}

/// An idle election costs only the leader's renewals: one LWT per renew interval (the
/// follower polls with plain reads, and the leader learns its deadline from the campaign,
/// not from extra proclaims).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_election_sends_only_the_leaders_renewals() {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let log = scratch("idle").join("leaders");
    let log_path = log.to_str().expect("utf-8");
    let mut a = candidate(&hosts, "a", log_path);
    wait_for_line(&log, |l| l.starts_with("a ")).await;
    let mut b = candidate(&hosts, "b", log_path);
    // Let b start following, then count over a window of several renew intervals.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let window = Duration::from_secs(4);
    let before = server.paxos().total_rounds();
    tokio::time::sleep(window).await;
    let rounds = server.paxos().total_rounds() - before;
    // Renewals are due every 500 ms after the previous one ended, so at most one per
    // interval in the window plus one at its edge; timers only fire late under load.
    let most = u64::try_from(window.as_millis() / 500).expect("small") + 1;
    assert!(
        (1..=most).contains(&rounds),
        "{rounds} LWTs in {window:?}: expected the leader's renewals only (1..={most})"
    );
    assert!(a.try_wait().expect("a").is_none(), "a still leads");
    assert_eq!(
        std::fs::read_to_string(&log).expect("log").lines().count(),
        1
    );
    eprintln!("idle election: {rounds} LWTs in {window:?}");
    for child in [&a, &b] {
        kill(Pid::from_raw(pid(child)), Signal::SIGTERM).expect("signal");
    }
    let _ = a.wait().await;
    let _ = b.wait().await;
}
