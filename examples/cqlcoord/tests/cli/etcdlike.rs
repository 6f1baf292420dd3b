//! The CLI as a new user meets it: help layout, holding a lock or a term without a command,
//! exit codes that cannot be mistaken for a command's, messages naming the right thing.

use std::process::Stdio;
use std::time::Duration;

use cql_test_server::Flavor;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::common::{cqlcoord, run, server, text};
use crate::lock::TIMING;

/// Nothing listens there: a command that tried to connect would fail with exit 1, not 2.
const NOWHERE: &str = "127.0.0.1:1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_puts_the_commands_own_flags_first_and_no_arguments_print_full_help() {
    let out = run(NOWHERE, &["lock", "--help"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing from:\n{help}"))
    };
    assert!(at("--try") < at("Timing options:"), "{help}");
    assert!(at("--ttl") < at("Global options:"), "{help}");
    assert!(at("Global options:") < at("--hosts"), "{help}");
    assert!(at("Global options:") < at("--consistency"), "{help}");

    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cqlcoord"));
    let out = command.output().await.expect("run");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.lines().count() > 10, "not the full help: {stderr}");
    for needle in ["Usage:", "Commands:", "lock", "Exit codes", "124", "125"] {
        assert!(
            stderr.contains(needle),
            "{needle:?} missing from:\n{stderr}"
        );
    }
}

/// Runs each case where nothing listens and checks it is a usage error (exit 2) whose stderr
/// contains the case's text and none of `absent`.
async fn usage_errors(cases: Vec<(Vec<&str>, &str)>, absent: &[&str]) {
    let outs =
        futures::future::join_all(cases.iter().map(|(args, _)| run(NOWHERE, args, None))).await;
    for ((args, needle), out) in cases.into_iter().zip(outs) {
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: {stderr} lacks {needle:?}"
        );
        for unwanted in absent {
            assert!(!stderr.contains(unwanted), "{args:?}: {stderr}");
        }
    }
}

/// A negative duration is refused as negative whether it follows its flag after a space or
/// an equals sign; a flag given where a duration belongs is named as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_durations_are_refused_as_negative_in_either_spelling() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["lease", "acquire", "j", "--owner", "a", "--ttl", "-5s"],
            "\"-5s\": durations cannot be negative",
        ),
        (
            vec!["lease", "acquire", "j", "--owner", "a", "--ttl=-5s"],
            "\"-5s\": durations cannot be negative",
        ),
        (
            vec!["lock", "x", "--timeout", "-1s"],
            "\"-1s\": durations cannot be negative",
        ),
        (
            vec!["queue", "push", "q", "x", "--delay", "-1s"],
            "\"-1s\": durations cannot be negative",
        ),
        (
            vec!["lock", "x", "--timeout", "--try"],
            "give the value right after the flag",
        ),
    ];
    usage_errors(cases, &["unexpected argument"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_name_the_argument_the_user_gave() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["lock", ""], "lock name must not be empty"),
        (
            vec!["elect", "", "--candidate", "c"],
            "election name must not be empty",
        ),
        (vec!["leader", ""], "election name must not be empty"),
        (
            vec!["elect", "e", "--candidate", ""],
            "candidate must not be empty",
        ),
        (
            vec!["queue", "push", "", "x"],
            "queue name must not be empty",
        ),
        (
            vec!["queue", "push", "q", ""],
            "item payload must not be empty",
        ),
        (vec!["lease", "get", ""], "lease name must not be empty"),
        (
            vec!["lock", "x", "--ttl=-5s"],
            "durations cannot be negative",
        ),
        (vec!["lock", "x", "--ttl", "1.5"], "add one, e.g. 1.5s"),
        (
            vec!["lock", "x", "--ttl", "2s", "--", "true"],
            "--ttl 2s is too short",
        ),
        (
            vec!["lock", "x", "--ttl", "1200ms"],
            "--ttl 1s 200ms is too short",
        ),
        (
            vec!["lock", "x", "--ttl", "1550ms", "--renew-interval", "10ms"],
            "--ttl 1s 550ms is too short",
        ),
        (
            vec!["lease", "acquire", "x", "--owner", "o", "--ttl", "1550ms"],
            "--ttl 1s 550ms is out of range",
        ),
        (
            vec!["--consistency", "any", "leader", "x"],
            "ANY cannot be used",
        ),
        (
            vec!["lock", "x", "--try", "--timeout", "1s"],
            "cannot be used",
        ),
    ];
    // Only flags of the command are named, never the library's fields behind them.
    let fields = ["renew_interval", "renew_period", "lease_duration", "owner"];
    usage_errors(cases, &fields).await;
}

/// `lease acquire --ttl 2s` is taken: its renew period is derived from the renew deadline
/// (0.5 s with the assumed 0.5 s clock skew), not a quarter of the TTL, which the library
/// would refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_acquire_takes_a_short_ttl() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let out = run(
        &hosts,
        &[
            "lease", "acquire", "short", "--owner", "ops", "--ttl", "2s", "--json",
        ],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let acquired: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(acquired["ttl_secs"], 2);
    let out = run(&hosts, &["lease", "get", "short", "--json"], None).await;
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["owner"], "ops");
    assert_eq!(got["token"], acquired["token"]);
}

/// Spawns `cqlcoord ARGS` with stdout piped and returns it with its first stdout line.
pub async fn first_line(hosts: &str, args: &[&str]) -> (tokio::process::Child, String) {
    let mut command = cqlcoord(hosts);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("a line within a minute")
        .expect("read")
        .expect("a line before EOF");
    (child, line)
}

pub fn pid(child: &tokio::process::Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id().expect("running")).expect("pid"))
}

pub async fn exit_code(child: tokio::process::Child) -> (Option<i32>, String) {
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("exits within a minute")
        .expect("wait");
    (out.status.code(), text(&out.stderr))
}

/// A `lock` that finds the lock held says once on stderr that it waits, naming the lease
/// lock's holder and token; one that takes a free lock says nothing of waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lock_says_it_waits_once() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["lock", "w1", "--owner", "keeper"];
    args.extend(TIMING);
    let (holder, line) = first_line(&hosts, &args).await;
    let token = line.strip_prefix("w1 token ").expect(&line).to_owned();
    let mut waiter = vec!["lock", "w1", "--timeout", "4s"];
    waiter.extend(TIMING);
    waiter.extend(["--", "true"]);
    let out = run(&hosts, &waiter, None).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{stderr}");
    let expected = format!("cqlcoord: waiting for lock \"w1\" (held by \"keeper\", token {token})");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("cqlcoord: waiting for lock"))
            .collect::<Vec<_>>(),
        [expected.as_str()],
        "{stderr}"
    );
    kill(pid(&holder), Signal::SIGINT).expect("SIGINT");
    let (code, stderr) = exit_code(holder).await;
    assert_eq!(code, Some(0), "{stderr}");

    // A lock nobody holds or waits for (the timed-out waiter's place in `w1`'s line may
    // outlive its process by up to a TTL).
    let out = run(&hosts, &["lock", "w2", "--", "true"], None).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("waiting"), "{stderr}");
}

/// `lock NAME` with no command holds until SIGINT, printing the name and token; `--try` and
/// `--timeout 0` give up at once with the "not obtained" code; after SIGINT it is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_without_a_command_holds_until_interrupted() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["lock", "held"];
    args.extend(TIMING);
    let (holder, line) = first_line(&hosts, &args).await;
    let token = line.strip_prefix("held token ").expect(&line);
    assert!(token.parse::<i64>().is_ok(), "{line}");
    for attempt in [
        vec!["lock", "held", "--try", "--", "true"],
        vec!["lock", "held", "--timeout", "0", "--", "true"],
        vec!["lock", "held", "--try"],
    ] {
        let out = run(&hosts, &attempt, None).await;
        assert_eq!(
            out.status.code(),
            Some(124),
            "{attempt:?}: {}",
            text(&out.stderr)
        );
    }
    // Still held: the holder renews, and nobody else got it.
    let out = run(
        &hosts,
        &["lease", "get", "held", "--of", "lock", "--json"],
        None,
    )
    .await;
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["token"].to_string(), token);

    kill(pid(&holder), Signal::SIGINT).expect("SIGINT");
    let (code, stderr) = exit_code(holder).await;
    assert_eq!(code, Some(0), "{stderr}");
    let out = run(&hosts, &["lease", "get", "held", "--of", "lock"], None).await;
    assert_eq!(text(&out.stdout).trim(), "held is free");
    let out = run(&hosts, &["lock", "held", "--try", "--", "true"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// `elect NAME` with no command leads until SIGTERM, printing the term; then resigns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_without_a_command_leads_until_interrupted() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["elect", "primary", "--candidate", "a"];
    args.extend(TIMING);
    let (leader, line) = first_line(&hosts, &args).await;
    let term = line.strip_prefix("primary term ").expect(&line);
    let out = run(&hosts, &["leader", "primary"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("leader=a term={term}")),
        "{}",
        text(&out.stdout)
    );
    kill(pid(&leader), Signal::SIGTERM).expect("SIGTERM");
    let (code, stderr) = exit_code(leader).await;
    assert_eq!(code, Some(0), "{stderr}");
    let out = run(&hosts, &["leader", "primary"], None).await;
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stdout));
}

/// A lock lost while held without a command: exit 125, reported at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lost_while_held_exits_125() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut args = vec!["lock", "taken"];
    args.extend(TIMING);
    let (holder, _) = first_line(&hosts, &args).await;
    let out = run(&hosts, &["lease", "release", "taken", "--of", "lock"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (code, stderr) = exit_code(holder).await;
    assert_eq!(code, Some(125), "{stderr}");
    assert!(stderr.contains("lock \"taken\" lost"), "{stderr}");
}

/// A command's own status passes through, except the reserved 124-127 (reported as 123), so
/// 124 and 125 always mean "not obtained" and "lost"; a command that cannot start is 126.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_status_never_looks_like_cqlcoords_own() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    for (script, expected) in [("exit 3", 3), ("exit 124", 123), ("exit 125", 123)] {
        let out = run(&hosts, &["lock", "codes", "--", "sh", "-c", script], None).await;
        assert_eq!(
            out.status.code(),
            Some(expected),
            "{script}: {}",
            text(&out.stderr)
        );
    }
    let out = run(&hosts, &["lock", "codes", "--", "/nonexistent/cmd"], None).await;
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
}

/// A keyspace that does not exist is named, with the command that creates it; no template
/// placeholder is left in the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_keyspace_is_named_with_the_fix() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let out = run(
        &hosts,
        &["--keyspace", "nothere", "lease", "get", "x"],
        None,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains('{'), "{stderr}");
    assert!(stderr.contains("nothere"), "{stderr}");
    assert!(
        stderr.contains("cqlcoord --keyspace nothere schema create"),
        "{stderr}"
    );
}
