//! A strict CQL test server that knows every statement of the three stores, and helpers to
//! run the binary against it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use cql_lease::cells::scylla as cells;
use cql_lease::scylla::cql;
use cql_test_server::{CqlTestServer, Flavor, ServerOptions};
use tokio::process::Command;

pub const KEYSPACE: &str = "coordination";

/// Teaches `server` every statement of the lease, cell and queue stores for the CLI's
/// default tables, from each crate's own statement list.
fn register(server: &CqlTestServer) {
    let mut lease_like: Vec<(&str, &str, &str)> = Vec::new();
    lease_like.extend(cql::ALL.iter().map(|t| ("lease", "leases", *t)));
    // The leases' waiting line, the lock cells, and the work queue's bakery-mode cells.
    for table in ["leases_waiting", "lock_cells", "work_items_cells"] {
        lease_like.extend(
            [
                cells::CREATE_TABLE,
                cells::WRITE,
                cells::DELETE,
                cells::READ_ROW,
                cells::READ_CELL,
            ]
            .map(|t| ("cells", table, t)),
        );
    }
    lease_like.extend(
        cql_workqueue::scylla::cql::ALL
            .iter()
            .map(|t| ("queue", "work_items", *t)),
    );
    // The driver's own queries in its light metadata mode (the CLI's), which the server
    // does not know by default.
    for query in [
        "SELECT keyspace_name, table_name FROM system_schema.tables",
        "SELECT keyspace_name, view_name, base_table_name FROM system_schema.views",
        "SELECT keyspace_name, table_name, partitioner FROM system_schema.scylla_tables",
    ] {
        server.register("driver", query);
    }
    for (label, table, template) in lease_like {
        let rendered = cql::render(template, KEYSPACE, table);
        match rendered.split_once(cql::REPLICATION) {
            Some((prefix, _)) => server.register_prefix(label, prefix),
            None => server.register(label, &rendered),
        }
    }
}

/// A strict server with the statements registered and the schema created through the CLI.
pub async fn server(flavor: Flavor, replication: &str) -> (CqlTestServer, String) {
    server_with(ServerOptions::strict(flavor), replication, &[]).await
}

/// A server started with `options`, the statements registered, and the schema created
/// through the CLI with the connection flags `connect` (credentials, TLS files).
pub async fn server_with(
    options: ServerOptions,
    replication: &str,
    connect: &[&str],
) -> (CqlTestServer, String) {
    let server = CqlTestServer::start(options)
        .await
        .expect("start the CQL test server");
    register(&server);
    let hosts = server.address().to_string();
    let mut args = connect.to_vec();
    args.extend(["schema", "create", "--replication", replication]);
    let out = run(&hosts, &args, None).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "schema create: {}",
        text(&out.stderr)
    );
    (server, hosts)
}

/// The binary with `--hosts`, killed if the test drops it.
pub fn cqlcoord(hosts: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cqlcoord"));
    command
        .arg("--hosts")
        .arg(hosts)
        .env_remove("CQLCOORD_HOSTS")
        .env_remove("CQLCOORD_USER")
        .env_remove("CQLCOORD_PASSWORD")
        .env_remove("CQLCOORD_TLS_CA")
        .env_remove("CQLCOORD_TLS_CERT")
        .env_remove("CQLCOORD_TLS_KEY")
        .kill_on_drop(true);
    command
}

/// Runs the binary to completion, with `stdin` fed to it.
pub async fn run(hosts: &str, args: &[&str], stdin: Option<&str>) -> Output {
    run_env(hosts, args, &[], stdin).await
}

/// [`run`] with the variables `env` set.
pub async fn run_env(
    hosts: &str,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut command = cqlcoord(hosts);
    command
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn cqlcoord");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).await.expect("write stdin");
    }
    drop(pipe);
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("cqlcoord did not finish within a minute")
        .expect("wait for cqlcoord")
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh, empty directory for one test's files.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cqlcoord-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Waits (up to a minute, polling) until `path` holds a line satisfying `done`; returns
/// its lines.
pub async fn wait_for_line(path: &Path, done: impl Fn(&str) -> bool) -> Vec<String> {
    for _ in 0..1200 {
        let lines: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.iter().any(|l| done(l)) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no such line in {} within a minute", path.display());
}

/// Starts `cqlcoord ui --listen 127.0.0.1:0 ARGS` (killed when dropped); returns it and the
/// `host:port` it serves on, once it printed its URL (within a minute).
pub async fn start_ui(hosts: &str, args: &[&str]) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut command = cqlcoord(hosts);
    command
        .args(["ui", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = command.spawn().expect("spawn cqlcoord ui");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("cqlcoord ui printed no URL within a minute")
        .expect("read stdout")
        .expect("cqlcoord ui exited before printing its URL");
    let addr = line
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix('/'))
        .unwrap_or_else(|| panic!("not a URL: {line:?}"))
        .to_owned();
    (child, addr)
}

/// One HTTP/1.1 request to `addr` (closing the connection): the status and the body.
pub async fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_owned())
}
