//! `cqlcoord`: the operators' command-line tool for leases, elections, locks, work queues
//! and schema on ScyllaDB / Cassandra. See docs/cli.md.

mod child;
mod cli;
mod connect;
mod dev;
mod duration;
mod elect;
mod error;
mod lease_cmd;
mod lock_cmd;
mod metrics_export;
mod queue_cmd;
mod schema;
mod stores;
mod timing;
mod tls;
mod ui;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::error::CliError;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version, and the full help when no arguments are given.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("cqlcoord: {}", one_line(&e.render().to_string()));
            std::process::exit(error::EXIT_USAGE);
        }
    };
    // Library logs go to stderr (stdout stays parseable): by default the libraries'
    // warnings only (a worker's failing claims, a campaign's failing attempts: connection
    // trouble the tool keeps retrying through must not look like silence); RUST_LOG for more.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(
                    "off,cql_workqueue::worker=warn,cql_election=warn",
                )
            }),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
    let code = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(run(cli)).unwrap_or_else(|e| {
            eprintln!("cqlcoord: {e}");
            e.code
        }),
        Err(e) => {
            eprintln!("cqlcoord: cannot start the runtime: {e}");
            error::EXIT_ERROR
        }
    };
    std::process::exit(code);
}

/// clap's multi-line usage error as one line: its message and hints, without the usage
/// block and the pointer to `--help`.
fn one_line(rendered: &str) -> String {
    let mut lines = rendered.lines().map(str::trim).filter(|l| {
        !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information")
    });
    let first = lines.next().unwrap_or("bad arguments");
    let mut out = first.strip_prefix("error: ").unwrap_or(first).to_owned();
    for hint in lines {
        // A line ending in a colon introduces what follows ("...not provided: --owner").
        out.push_str(if out.ends_with(':') { " " } else { "; " });
        out.push_str(hint);
    }
    out.push_str(" (see --help)");
    out
}

async fn run(cli: Cli) -> Result<i32, CliError> {
    if let Some(addr) = cli.metrics_addr {
        metrics_export::serve(addr)?;
    }
    let connection = &cli.connection;
    match cli.command {
        Command::Schema(command) => schema::run(connection, command).await,
        Command::Lease(command) => lease_cmd::run(connection, command).await,
        Command::Leader { name, json } => elect::leader(connection, &name, json).await,
        Command::Observe {
            name,
            json,
            retry_interval,
        } => elect::observe(connection, &name, json, retry_interval).await,
        Command::Elect {
            name,
            candidate,
            value,
            recampaign,
            timing,
            stopping,
            command,
        } => {
            let args = elect::Elect {
                name,
                candidate,
                value,
                recampaign,
                timing,
                stopping,
                command,
            };
            elect::elect(connection, args).await
        }
        Command::Lock {
            name,
            timeout,
            try_once,
            algorithm,
            owner,
            timing,
            stopping,
            command,
        } => {
            let args = lock_cmd::LockArgs {
                name,
                timeout,
                try_once,
                algorithm,
                owner,
                timing,
                stopping,
                command,
            };
            lock_cmd::run(connection, args).await
        }
        Command::Queue(command) => queue_cmd::run(connection, command).await,
        Command::Dev { scylla_mode } => dev::run(connection, scylla_mode).await,
        Command::Ui(args) => ui::run(connection, args, cli.metrics_addr).await,
    }
}
