//! Bad flags and unusable settings: one line on stderr, a non-zero exit, nothing sent.
//! Schema: `schema print` offline, `schema create` turning tablets off on ScyllaDB.

use cql_test_server::Flavor;

use crate::common::{run, scratch, server, text};

/// Nothing listens there: a command that tried to connect would fail with exit 1, not 2.
const NOWHERE: &str = "127.0.0.1:1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_flags_are_one_line_and_exit_2() {
    let dir = scratch("flags");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let empty = empty.to_str().expect("utf-8 path");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["lock", "x", "--algorithm", "nope", "--", "true"],
            "--algorithm",
        ),
        (
            vec!["lock", "x", "--timeout", "5 parsecs", "--", "true"],
            "--timeout",
        ),
        (vec!["lease", "get"], "required"),
        (
            vec!["lease", "acquire", "x"],
            "required arguments were not provided: --owner <OWNER>",
        ),
        (
            vec!["queue", "dead", "q", "--requeue", "id", "--purge"],
            "cannot be used",
        ),
        (vec!["frobnicate"], "unrecognized subcommand"),
        (
            vec!["--consistency", "local-quorum", "lease", "get", "x"],
            "--local-dc",
        ),
        (
            vec!["--serial-consistency", "local-serial", "leader", "x"],
            "--local-dc",
        ),
        (
            vec![
                "--consistency",
                "one",
                "lock",
                "x",
                "--algorithm",
                "bakery",
                "--",
                "true",
            ],
            "too weak",
        ),
        (
            vec!["--keyspace", "bad-name", "lease", "get", "x"],
            "keyspace",
        ),
        (
            vec![
                "--tls-cert",
                "c.pem",
                "--tls-key",
                "k.pem",
                "lease",
                "get",
                "x",
            ],
            "--tls-ca",
        ),
        (
            vec!["--tls-ca", "/nonexistent/ca.pem", "lease", "get", "x"],
            "ca.pem",
        ),
        (
            vec!["--tls-ca", empty, "lease", "get", "x"],
            "no certificate",
        ),
        (vec!["--user", "ops", "lease", "get", "x"], "--password"),
        (
            vec![
                "lock",
                "x",
                "--ttl",
                "3s",
                "--renew-interval",
                "1s",
                "--kill-grace",
                "1s",
                "--",
                "true",
            ],
            "--kill-grace",
        ),
        (
            vec!["schema", "print", "--replication", "simple:x"],
            "--replication",
        ),
    ];
    // All at once: none of them may reach the network.
    let outs =
        futures::future::join_all(cases.iter().map(|(args, _)| run(NOWHERE, args, None))).await;
    for ((args, needle), out) in cases.into_iter().zip(outs) {
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "{args:?}: not one line: {stderr}"
        );
        assert!(stderr.starts_with("cqlcoord: "), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: {stderr} lacks {needle:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_one_line_and_exit_1() {
    let out = run(
        NOWHERE,
        &["--request-timeout", "1s", "lease", "get", "x"],
        None,
    )
    .await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("connecting to 127.0.0.1:1"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_print_shows_what_create_sends() {
    let out = run(
        NOWHERE,
        &[
            "--keyspace",
            "ops",
            "schema",
            "print",
            "--replication",
            "dc1:3,dc2:3",
        ],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "CREATE KEYSPACE IF NOT EXISTS ops WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 3};",
        "tablets = {'enabled': false}",
        "CREATE TABLE IF NOT EXISTS ops.leases (",
        "CREATE TABLE IF NOT EXISTS ops.lock_cells (",
        "CREATE TABLE IF NOT EXISTS ops.work_items_dead (",
    ] {
        assert!(
            stdout.contains(needle),
            "{needle:?} missing from:\n{stdout}"
        );
    }
}

/// `schema print` names every table `schema create` creates (as the server saw them
/// created), and the "ready" line of `schema create` names them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_print_names_every_table_schema_create_creates() {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let created: Vec<String> = server
        .executed()
        .iter()
        .filter_map(|statement| {
            let rest = statement.strip_prefix("CREATE TABLE IF NOT EXISTS coordination.")?;
            Some(rest.split([' ', '(']).next()?.to_owned())
        })
        .collect();
    for table in ["work_items_buckets", "work_items_plain", "work_items_cells"] {
        assert!(
            created.iter().any(|t| t == table),
            "{table} not created: {created:?}"
        );
    }
    let printed = run(
        NOWHERE,
        &["schema", "print", "--replication", "simple:1"],
        None,
    )
    .await;
    assert_eq!(printed.status.code(), Some(0), "{}", text(&printed.stderr));
    let printed = text(&printed.stdout);
    let again = run(
        &hosts,
        &["schema", "create", "--replication", "simple:1"],
        None,
    )
    .await;
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let ready = text(&again.stdout);
    for table in &created {
        assert!(
            printed.contains(&format!(
                "CREATE TABLE IF NOT EXISTS coordination.{table} ("
            )),
            "{table} missing from schema print:\n{printed}"
        );
        assert!(
            ready.contains(&format!(" {table},"))
                || ready.trim_end().ends_with(&format!(" {table}")),
            "{table} missing from the ready line: {ready}"
        );
    }
}

/// On ScyllaDB a NetworkTopologyStrategy keyspace gets tablets by default, and (before
/// 2025.4) LWTs are refused on them: the keyspace `schema create` makes must take LWTs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_create_turns_tablets_off_on_scylla() {
    let (_server, hosts) = server(Flavor::Scylla, "datacenter1:1").await;
    let out = run(
        &hosts,
        &["lease", "acquire", "report", "--owner", "ops", "--json"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let acquired: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let out = run(&hosts, &["lease", "get", "report", "--json"], None).await;
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["owner"], "ops");
    assert_eq!(got["token"], acquired["token"]);
    // Held: a second acquisition is refused (exit 124) and names the holder.
    let out = run(
        &hosts,
        &["lease", "acquire", "report", "--owner", "other"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("\"ops\""),
        "{}",
        text(&out.stderr)
    );
    // Repair: release whoever holds it; then it is free and can be taken again.
    let out = run(&hosts, &["lease", "release", "report"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(&hosts, &["lease", "get", "report"], None).await;
    assert_eq!(text(&out.stdout).trim(), "report is free");
    let out = run(
        &hosts,
        &["lease", "acquire", "report", "--owner", "other", "--json"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(
        again["token"].as_i64() > acquired["token"].as_i64(),
        "tokens only grow"
    );
    // A release naming another holder changes nothing (exit 124).
    let out = run(
        &hosts,
        &["lease", "release", "report", "--holder", "nobody"],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
}

/// `--local-dc` with the LOCAL_* levels against the server's data centre (`datacenter1`):
/// a lease taken, read and a fair lock run with them. The same flags naming a data centre the
/// cluster does not have reach no node (the policy does not fail over), which shows the flag
/// is used, not ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_levels_work_in_the_local_dc_and_not_elsewhere() {
    let (_server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let local = |dc: &'static str| {
        vec![
            "--local-dc",
            dc,
            "--consistency",
            "local-quorum",
            "--serial-consistency",
            "local-serial",
            "--request-timeout",
            "2s",
        ]
    };
    let mut acquire = local("datacenter1");
    acquire.extend(["lease", "acquire", "dc-local", "--owner", "ops", "--json"]);
    let out = run(&hosts, &acquire, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut get = local("datacenter1");
    get.extend(["lease", "get", "dc-local", "--json"]);
    let out = run(&hosts, &get, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["owner"], "ops");
    let mut lock = local("datacenter1");
    lock.extend([
        "lock",
        "dc-fair",
        "--algorithm",
        "fair",
        "--",
        "sh",
        "-c",
        "exit 5",
    ]);
    let out = run(&hosts, &lock, None).await;
    assert_eq!(out.status.code(), Some(5), "{}", text(&out.stderr));

    let mut elsewhere = local("nowhere");
    elsewhere.extend(["lease", "get", "dc-local"]);
    let out = run(&hosts, &elsewhere, None).await;
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
}

/// `--keyspace` is used, not ignored: the schema created in a keyspace of the operator's
/// choosing serves a lease there, and the default keyspace (never created on this server)
/// does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_keyspace_is_created_and_used() {
    let keyspace = ["--keyspace", "ops_coordination"];
    let (_server, hosts) = crate::common::server_with(
        cql_test_server::ServerOptions::lenient(Flavor::Cassandra),
        "datacenter1:1",
        &keyspace,
    )
    .await;
    let with = |args: &[&'static str]| [&keyspace[..], args].concat();
    let out = run(
        &hosts,
        &with(&["lease", "acquire", "nightly", "--owner", "ops"]),
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = run(&hosts, &with(&["lease", "get", "nightly", "--json"]), None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(got["owner"], "ops");
    // Without the flag the CLI looks in the default keyspace, which does not exist here.
    let out = run(&hosts, &["lease", "get", "nightly"], None).await;
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr).trim().lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
}
