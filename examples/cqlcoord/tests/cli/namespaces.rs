//! Plain leases, lease locks and elections of the same name do not meet: `lease acquire X`
//! makes nobody leader of `X`, and `lock X` and `elect X` are held at once.

use cql_test_server::Flavor;
use nix::sys::signal::{Signal, kill};

use crate::common::{run, server, text};
use crate::etcdlike::{exit_code, first_line, pid};
use crate::lock::TIMING;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lease_makes_nobody_leader_of_the_election_of_that_name() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let out = run(&hosts, &["lease", "acquire", "x", "--owner", "ops"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(&hosts, &["leader", "x"], None).await;
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "no leader");
    for of in ["election", "lock"] {
        let out = run(&hosts, &["lease", "get", "x", "--of", of], None).await;
        assert_eq!(text(&out.stdout).trim(), "x is free", "--of {of}");
    }
    let out = run(&hosts, &["lease", "get", "x"], None).await;
    assert!(
        text(&out.stdout).contains("owner=ops"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_and_an_election_of_the_same_name_are_held_at_once() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut lock = vec!["lock", "both"];
    lock.extend(TIMING);
    let (locker, line) = first_line(&hosts, &lock).await;
    assert!(line.starts_with("both token "), "{line}");
    let mut elect = vec!["elect", "both", "--candidate", "a"];
    elect.extend(TIMING);
    let (leader, line) = first_line(&hosts, &elect).await;
    assert!(line.starts_with("both term "), "{line}");

    let out = run(&hosts, &["leader", "both"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("leader=a "),
        "{}",
        text(&out.stdout)
    );
    // The plain lease of that name is free, and can be taken too.
    let out = run(
        &hosts,
        &["lease", "acquire", "both", "--owner", "ops"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    for child in [locker, leader] {
        kill(pid(&child), Signal::SIGTERM).expect("SIGTERM");
        let (code, stderr) = exit_code(child).await;
        assert_eq!(code, Some(0), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_name_with_a_reserved_prefix_is_refused_with_the_usage_code() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    for args in [
        vec!["lease", "acquire", "lock/x", "--owner", "ops"],
        vec!["lease", "get", "election/x"],
        vec!["lease", "release", "lock/x"],
    ] {
        let out = run(&hosts, &args, None).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("is reserved"), "{args:?}: {stderr}");
    }
    // Nothing was written: the lock of that name is free.
    let out = run(&hosts, &["lock", "x", "--try", "--", "true"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // With `--of`, the name is the lock's or the election's own.
    let out = run(&hosts, &["lease", "get", "x", "--of", "lock"], None).await;
    assert_eq!(text(&out.stdout).trim(), "x is free");
}
