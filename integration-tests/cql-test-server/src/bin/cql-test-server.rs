//! Runs the CQL test server as a process, accepting any statement it can parse, so programs
//! and the real-cluster suite can be pointed at it:
//! `cargo run -p cql-test-server -- [--scylla-mode] [--tombstone-warn N] [--tombstone-fail N]
//! [--user U --password P] [--tls-dir DIR [--require-client-cert]]`, then use the address it
//! prints. With `--tls-dir`, it writes there the CA certificate clients must trust
//! (`ca.pem`) and a client certificate and key of that CA (`client.pem`, `client.key`).

use cql_test_server::{CqlTestServer, Flavor, ServerOptions, TestCa, TlsOptions};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| -> Option<&String> {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1)
    };
    let number = |flag: &str| -> Option<u64> { value(flag)?.parse().ok() };
    let flavor = if args.iter().any(|a| a == "--scylla-mode") {
        Flavor::Scylla
    } else {
        Flavor::Cassandra
    };
    let mut options = ServerOptions::lenient(flavor);
    if let Some(n) = number("--tombstone-warn") {
        options.tombstone_warn_threshold = n;
    }
    if let Some(n) = number("--tombstone-fail") {
        options.tombstone_failure_threshold = n;
    }
    if let (Some(user), Some(password)) = (value("--user"), value("--password")) {
        options = options.with_password_auth(user, password);
    }
    if let Some(dir) = value("--tls-dir") {
        match tls_files(std::path::Path::new(dir)) {
            Ok(ca) => {
                let tls = TlsOptions::new(ca);
                options = options.with_tls(if args.iter().any(|a| a == "--require-client-cert") {
                    tls.with_client_auth()
                } else {
                    tls
                });
            }
            Err(e) => {
                eprintln!("--tls-dir {dir}: {e}");
                std::process::exit(1);
            }
        }
    }
    let server = match CqlTestServer::start(options).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    println!("{}", server.address());
    let _ = tokio::signal::ctrl_c().await;
    let stats = server.tombstones();
    eprintln!(
        "tombstones scanned: total {}, max per read {}, {} warnings",
        stats.total,
        stats.max,
        stats.warnings.len()
    );
}

/// A fresh CA, its certificate and a client certificate written to `dir`.
fn tls_files(dir: &std::path::Path) -> Result<TestCa, String> {
    let ca = TestCa::new("cql-test-server CA")?;
    let (cert, key) = ca.issue_client("client")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for (name, pem) in [
        ("ca.pem", ca.cert_pem()),
        ("client.pem", cert),
        ("client.key", key),
    ] {
        std::fs::write(dir.join(name), pem).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(ca)
}
