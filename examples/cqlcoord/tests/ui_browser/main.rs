//! `cqlcoord ui` in a real headless Chromium (through chromedriver): what an operator sees
//! change as leaders, lock holders, queues and dead letters change. Each test saves a
//! screenshot of its view.
//!
//! Needs `/usr/bin/chromium` and `/usr/bin/chromedriver` (Debian's `chromium` and
//! `chromium-driver`). Without them each test says so on stderr and ends, unless
//! `CQLCOORD_BROWSER_TESTS=require` is set: then it fails (`.ci/run` installs both and sets
//! it). Screenshots go to the test target's temporary directory, or to
//! `CQLCOORD_UI_SCREENSHOTS` when set (`docs/ui` refreshes the docs' images).

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod browser;
#[path = "../cli/common.rs"]
#[allow(dead_code)] // each test binary uses part of the helpers
mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cql_test_server::{CqlTestServer, Flavor, NodeFault};
use fantoccini::Locator;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use browser::{Browser, PATIENCE, pid_of};
use common::{cqlcoord, run, scratch, server, start_ui, text, wait_for_line};

/// The write token of the tests that requeue.
const TOKEN: &str = "browser-test-token-0123456789";

/// One browser at a time: each brings a Chromium, and CI has two cores.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The CQL test server with the schema, and a dashboard on it showing `args`.
async fn dashboard(args: &[&str]) -> (CqlTestServer, String, tokio::process::Child, String) {
    let (server, hosts) = server(Flavor::Cassandra, "simple:1").await;
    let mut all = vec!["--refresh", "1s"];
    all.extend_from_slice(args);
    let (ui, addr) = start_ui(&hosts, &all).await;
    (server, hosts, ui, format!("http://{addr}"))
}

/// `cqlcoord elect primary --candidate ID`, leading until SIGTERM; its stdout to `log`.
fn candidate(hosts: &str, id: &str, log: &Path) -> tokio::process::Child {
    let mut command = cqlcoord(hosts);
    command
        .args([
            "elect",
            "primary",
            "--candidate",
            id,
            "--value",
            &format!("{id}.internal:5432"),
        ])
        .args(["--retry-interval", "200ms"])
        .stdout(std::fs::File::create(log).expect("log"))
        .stderr(Stdio::null());
    command.spawn().expect("spawn a candidate")
}

/// `cqlcoord lock db-migration --owner migrator-1`, holding until killed; its stdout to `log`.
fn lock(hosts: &str, log: &Path) -> tokio::process::Child {
    let mut command = cqlcoord(hosts);
    command
        .args(["lock", "db-migration", "--owner", "migrator-1"])
        .args(["--retry-interval", "200ms"])
        .stdout(std::fs::File::create(log).expect("log"))
        .stderr(Stdio::null());
    command.spawn().expect("spawn lock")
}

fn pid(child: &tokio::process::Child) -> Pid {
    pid_of(child.id().expect("running"))
}

/// When the leader resigns and the other candidate wins, the overview shows the new leader
/// and its higher term at the latest on the first refresh that starts after the win.
#[tokio::test]
async fn the_overview_shows_a_new_leader_within_one_refresh_of_the_win() {
    let _one = ONE_BROWSER.lock().await;
    let (_server, hosts, _ui, url) = dashboard(&[
        "--election",
        "primary",
        "--lock",
        "db-migration",
        "--queue",
        "jobs",
    ])
    .await;
    let dir = scratch("ui-leader");
    let alpha = candidate(&hosts, "alpha", &dir.join("alpha"));
    wait_for_line(&dir.join("alpha"), |l| l.starts_with("primary term")).await;
    // A lock held and work waiting, for the screenshot.
    let _lock = lock(&hosts, &dir.join("lock"));
    let out = run(&hosts, &["queue", "push", "jobs"], Some("a\nb\nc\n")).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let Some(browser) = Browser::start().await else {
        return;
    };
    browser.client.goto(&url).await.expect("open the overview");
    let leader = r#"[data-election="primary"] .leader"#;
    browser.wait_text(leader, |t| t == "alpha").await;
    let first_term = browser
        .text(r#"[data-election="primary"] .term"#)
        .await
        .expect("term");

    let _beta = candidate(&hosts, "beta", &dir.join("beta"));
    kill(pid(&alpha), Signal::SIGTERM).expect("alpha resigns");
    wait_for_line(&dir.join("beta"), |l| l.starts_with("primary term")).await;
    let won_at = browser.refreshes().await;
    browser.wait_text(leader, |t| t == "beta").await;
    let shown_at = browser.refreshes().await;
    // One refresh may have been on its way when beta won; the next one shows beta.
    assert!(
        shown_at <= won_at + 2,
        "shown at refresh {shown_at}, won at {won_at}"
    );
    let term = browser
        .text(r#"[data-election="primary"] .term"#)
        .await
        .expect("term");
    assert!(term.parse::<i64>().unwrap() > first_term.parse::<i64>().unwrap());
    browser.screenshot("overview.png").await;
    browser.close().await;
}

/// A lease lock taken with `cqlcoord lock` appears on the overview with its holder and
/// fencing token.
#[tokio::test]
async fn the_overview_shows_a_locks_holder_and_fencing_token() {
    let _one = ONE_BROWSER.lock().await;
    let (_server, hosts, _ui, url) = dashboard(&["--lock", "db-migration"]).await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    browser.client.goto(&url).await.expect("open the overview");
    let holder = r#"[data-lease="lock/db-migration"] .holder"#;
    browser.wait_text(holder, |t| t == "free").await;
    let log = scratch("ui-lock").join("lock");
    let _lock = lock(&hosts, &log);
    let lines = wait_for_line(&log, |l| l.contains("token")).await;
    let token = lines[0].rsplit(' ').next().expect("token").to_owned();
    browser.wait_text(holder, |t| t == "migrator-1").await;
    let shown = browser
        .text(r#"[data-lease="lock/db-migration"] .token"#)
        .await;
    assert_eq!(shown.as_deref(), Some(token.as_str()));
    browser.screenshot("lock.png").await;
    browser.close().await;
}

/// With the cluster out of reach, the overview keeps its last figures, greyed out, under a
/// banner that says when they were read; once it is back, the banner goes.
#[tokio::test]
async fn the_overview_greys_out_its_last_figures_when_the_cluster_is_gone() {
    let _one = ONE_BROWSER.lock().await;
    let (server, _hosts, _ui, url) = dashboard(&["--lock", "db-migration"]).await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    browser.client.goto(&url).await.expect("open the overview");
    let holder = r#"[data-lease="lock/db-migration"] .holder"#;
    browser.wait_text(holder, |t| t == "free").await;
    assert!(browser.text("#main.stale").await.is_none());
    server.node_fault(0, NodeFault::Down);
    browser
        .wait_text("#error", |t| t.starts_with("Cannot read"))
        .await;
    assert!(
        browser.text("#main.stale").await.is_some(),
        "not greyed out"
    );
    assert_eq!(browser.text(holder).await.as_deref(), Some("free"));
    // Back: the banner goes and the figures are live again.
    server.heal(0);
    browser.wait_text("#error", str::is_empty).await;
    assert!(
        browser.text("#main.stale").await.is_none(),
        "still greyed out"
    );
    browser.close().await;
}

/// A queue's counts on the overview move as workers complete its jobs: 5 available, then 3
/// after two jobs, then none.
#[tokio::test]
async fn the_overview_shows_a_queues_counts_moving_as_jobs_complete() {
    let _one = ONE_BROWSER.lock().await;
    let (_server, hosts, _ui, url) = dashboard(&["--queue", "jobs", "--queue", "mail"]).await;
    let out = run(&hosts, &["queue", "push", "jobs"], Some("a\nb\nc\nd\ne\n")).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let Some(browser) = Browser::start().await else {
        return;
    };
    browser.client.goto(&url).await.expect("open the overview");
    let available = r#"[data-queue="jobs"] .available"#;
    browser.wait_text(available, |t| t == "5").await;
    for (jobs, left) in [("2", "3"), ("3", "0")] {
        let work = ["queue", "work", "jobs", "--max-jobs", jobs, "--", "true"];
        let out = run(&hosts, &work, None).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        browser.wait_text(available, |t| t == left).await;
        if left == "3" {
            browser.screenshot("queues.png").await;
        }
    }
    browser.close().await;
}

/// With the write token typed in, clicking a dead letter's Requeue button puts it back in
/// the queue: it leaves the page's dead list and `queue dead` lists nothing.
#[tokio::test]
async fn clicking_requeue_with_the_write_token_takes_a_dead_letter_off_the_list() {
    let _one = ONE_BROWSER.lock().await;
    let (_server, hosts, _ui, url) = dashboard(&["--queue", "jobs", "--write-token", TOKEN]).await;
    let out = run(&hosts, &["queue", "push", "jobs", "resize image 42"], None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fail = [
        "queue",
        "work",
        "jobs",
        "--max-jobs",
        "1",
        "--max-attempts",
        "1",
        "--",
        "false",
    ];
    let out = run(&hosts, &fail, None).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let Some(browser) = Browser::start().await else {
        return;
    };
    browser
        .client
        .goto(&format!("{url}/queue/jobs"))
        .await
        .expect("open the queue");
    browser
        .wait_text("[data-dead] .error", |t| t.contains("exit status 1"))
        .await;
    browser
        .client
        .find(Locator::Css("#token"))
        .await
        .expect("the token field")
        .send_keys(TOKEN)
        .await
        .expect("type the token");
    browser.screenshot("queue.png").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    // The list is drawn again on every refresh: a button found just before may be gone.
    while let Err(e) = click_requeue(&browser).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "cannot click Requeue: {e}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser
        .wait_text("main", |t| t.contains("No dead letters."))
        .await;
    assert_eq!(browser.text("#error").await.as_deref(), Some(""));
    let out = run(&hosts, &["queue", "dead", "jobs"], None).await;
    assert_eq!(text(&out.stdout), "", "still a dead letter");
    let stats = run(&hosts, &["queue", "stats", "jobs"], None).await;
    assert!(
        text(&stats.stdout).contains("available=1"),
        "{}",
        text(&stats.stdout)
    );
    browser.close().await;
}

async fn click_requeue(browser: &Browser) -> Result<(), fantoccini::error::CmdError> {
    let button = browser
        .client
        .find(Locator::Css("[data-dead] button.requeue"))
        .await?;
    button.click().await
}
