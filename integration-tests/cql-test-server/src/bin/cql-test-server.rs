//! Runs the CQL test server as a process, accepting any statement it can parse, so programs
//! and the real-cluster suite can be pointed at it:
//! `cargo run -p cql-test-server -- [--scylla-mode] [--tombstone-warn N] [--tombstone-fail N]
//! [--user U --password P] [--tls-dir DIR [--require-client-cert]]`, then use the address it
//! prints. It starts in Cassandra mode unless `--scylla-mode` is given (`--help` lists the
//! flags). With `--tls-dir`, it writes there the CA certificate clients must trust
//! (`ca.pem`) and a client certificate and key of that CA (`client.pem`, `client.key`).

use cql_test_server::{CqlTestServer, Flavor, ServerOptions, TestCa, TlsOptions};

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    about = "A CQL test server: an in-memory engine with Cassandra's semantics, accepting any \
             statement it can parse. Prints the address it listens on, serves until Ctrl-C.",
    long_about = None
)]
struct Cli {
    /// Imitate ScyllaDB where it differs (every LWT returns `[applied]` plus the old values).
    /// Default: Cassandra mode (a failed LWT returns the conditioned columns, an applied one
    /// only `[applied]`).
    #[arg(long)]
    scylla_mode: bool,
    /// Tombstones scanned by one read past which it warns (as Cassandra's
    /// tombstone_warn_threshold).
    #[arg(long, value_name = "N")]
    tombstone_warn: Option<u64>,
    /// Tombstones scanned by one read past which it fails.
    #[arg(long, value_name = "N")]
    tombstone_fail: Option<u64>,
    /// Password authentication: the one user name (with --password).
    #[arg(long, requires = "password")]
    user: Option<String>,
    /// Password authentication: the password (with --user).
    #[arg(long, requires = "user")]
    password: Option<String>,
    /// TLS: write a fresh CA (`ca.pem`) and a client certificate and key of that CA
    /// (`client.pem`, `client.key`) to DIR, and serve TLS only.
    #[arg(long, value_name = "DIR")]
    tls_dir: Option<std::path::PathBuf>,
    /// With --tls-dir: require a client certificate of that CA.
    #[arg(long, requires = "tls_dir")]
    require_client_cert: bool,
}

#[tokio::main]
async fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let flavor = if cli.scylla_mode {
        Flavor::Scylla
    } else {
        Flavor::Cassandra
    };
    let mut options = ServerOptions::lenient(flavor);
    if let Some(n) = cli.tombstone_warn {
        options.tombstone_warn_threshold = n;
    }
    if let Some(n) = cli.tombstone_fail {
        options.tombstone_failure_threshold = n;
    }
    if let (Some(user), Some(password)) = (&cli.user, &cli.password) {
        options = options.with_password_auth(user, password);
    }
    if let Some(dir) = &cli.tls_dir {
        match tls_files(dir) {
            Ok(ca) => {
                let tls = TlsOptions::new(ca);
                options = options.with_tls(if cli.require_client_cert {
                    tls.with_client_auth()
                } else {
                    tls
                });
            }
            Err(e) => {
                eprintln!("--tls-dir {}: {e}", dir.display());
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
