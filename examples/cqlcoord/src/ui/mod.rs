//! `cqlcoord ui`: a web dashboard of elections, leases, locks and work queues, read-only
//! unless started with a write token. See docs/ui.md.

mod model;
mod origin;
mod queues;
mod routes;
mod shared;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use cql_lease::namespace::Namespace;
use cql_lease::{LeaseClient, Timing};
use cql_workqueue::{QueueConfig, WorkQueue};

use crate::cli::{Connection, text_of};
use crate::duration::parse_duration;
use crate::error::CliError;

pub use model::{Sources, Watched};
pub use origin::PublicOrigin;
pub use routes::{UiState, router};

/// The shortest write token taken.
const MIN_TOKEN_LEN: usize = 16;
/// The refresh interval's range.
const REFRESH: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(3600));

/// `cqlcoord ui`'s flags.
#[derive(Debug, Clone, Args)]
pub struct UiArgs {
    /// Address to serve the dashboard on (port 0: any free port; the URL is printed).
    /// Non-loopback addresses need --allow-remote.
    #[arg(
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:8080",
        value_parser = parse_listen
    )]
    pub listen: SocketAddr,
    /// An election to show (repeat for more).
    #[arg(long = "election", value_name = "NAME", value_parser = text_of("election name"))]
    pub elections: Vec<String>,
    /// A lease lock to show (`lock --algorithm lease`; repeat for more).
    #[arg(long = "lock", value_name = "NAME", value_parser = text_of("lock name"))]
    pub locks: Vec<String>,
    /// A plain lease to show (repeat for more).
    #[arg(long = "lease", value_name = "NAME", value_parser = text_of("lease name"))]
    pub leases: Vec<String>,
    /// A work queue to show, with its dead letters (repeat for more).
    #[arg(long = "queue", value_name = "NAME", value_parser = text_of("queue name"))]
    pub queues: Vec<String>,
    /// Enables the Requeue and Purge buttons: each write must carry this token (at least 16
    /// visible ASCII characters; prefer the environment variable, which `ps` does not
    /// show). Without it, or when it is empty, the dashboard is read-only.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "CQLCOORD_UI_TOKEN",
        hide_env_values = true
    )]
    pub write_token: Option<String>,
    /// Serve on a non-loopback address too (plain HTTP: put it behind a TLS proxy).
    #[arg(long)]
    pub allow_remote: bool,
    /// The address users open through a TLS proxy (e.g. `https://dash.example`): writes from
    /// that origin are taken, and its host is taken as the Host of a loopback listener.
    #[arg(long, value_name = "URL", value_parser = parse_public_origin)]
    pub public_origin: Option<PublicOrigin>,
    /// How often the page reads again (500ms to 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub refresh: Duration,
    /// Serve the libraries' metrics for Prometheus at /metrics beside the pages (not with
    /// --metrics-addr).
    #[arg(long)]
    pub metrics: bool,
}

/// An IP address and port; `localhost:PORT` is 127.0.0.1.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Some(port) = text.strip_prefix("localhost:") {
        return format!("127.0.0.1:{port}")
            .parse()
            .map_err(|_| format!("{text:?}: the port must be a number"));
    }
    text.parse().map_err(|_| {
        format!("{text:?}: an IP address and a port, e.g. 127.0.0.1:8080 or [::1]:8080")
    })
}

fn parse_public_origin(text: &str) -> Result<PublicOrigin, String> {
    PublicOrigin::parse(text)
}

/// Whether `token` can be a write token: at least [`MIN_TOKEN_LEN`] characters, each
/// visible ASCII (`!` to `~`), so it is typed and sent in a header as it is.
fn token_ok(token: &str) -> bool {
    token.len() >= MIN_TOKEN_LEN && token.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The flags checked before anything is sent: the listen address, the token, the refresh
/// interval and the names.
///
/// # Errors
/// A usage error (exit 2).
fn check(args: &UiArgs) -> Result<(), CliError> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(CliError::usage(format!(
            "--listen {}: not a loopback address; the dashboard serves plain HTTP to anyone \
             who can reach it, so it listens on 127.0.0.1 unless --allow-remote is given",
            args.listen
        )));
    }
    if let Some(token) = &args.write_token
        && !token_ok(token)
    {
        return Err(CliError::usage(format!(
            "--write-token (or CQLCOORD_UI_TOKEN): at least {MIN_TOKEN_LEN} characters, each \
             visible ASCII (letters, digits, punctuation; no spaces, control or non-ASCII \
             characters), e.g. `openssl rand -hex 16`"
        )));
    }
    if args.refresh < REFRESH.0 || args.refresh > REFRESH.1 {
        return Err(CliError::usage(format!(
            "--refresh {}: from {} to {}",
            humantime::format_duration(args.refresh),
            humantime::format_duration(REFRESH.0),
            humantime::format_duration(REFRESH.1)
        )));
    }
    let names = [
        (Namespace::Election, &args.elections),
        (Namespace::Lock, &args.locks),
        (Namespace::Lease, &args.leases),
    ];
    for (namespace, list) in names {
        for name in list {
            namespace.check_name(name)?;
        }
    }
    for name in &args.queues {
        cql_lease::check_name(name).map_err(|e| {
            CliError::usage(format!("--queue: {}", routes::queue_words(&e.to_string())))
        })?;
    }
    Ok(())
}

/// Serves the dashboard until SIGINT/SIGTERM (then exit 0). Prints its URL on stdout.
///
/// # Errors
/// Bad flags or an address that cannot be listened on (2), no connection (1).
pub async fn run(
    connection: &Connection,
    args: UiArgs,
    metrics_addr: Option<SocketAddr>,
) -> Result<i32, CliError> {
    let mut args = args;
    // `CQLCOORD_UI_TOKEN=` (set but empty) means no token, as an unset variable does.
    if args.write_token.as_deref() == Some("") {
        args.write_token = None;
    }
    check(&args)?;
    if [&args.elections, &args.locks, &args.leases, &args.queues]
        .iter()
        .all(|names| names.is_empty())
    {
        eprintln!(
            "cqlcoord: nothing to show yet: name what to watch with --election, --lock, \
             --lease or --queue (each may be repeated)"
        );
    }
    if args.metrics && metrics_addr.is_some() {
        return Err(CliError::usage(
            "ui --metrics serves /metrics beside the pages: drop --metrics-addr",
        ));
    }
    let watched = Watched {
        elections: args.elections.clone(),
        locks: args.locks.clone(),
        leases: args.leases.clone(),
        queues: args.queues.clone(),
    };
    let shutdown = crate::child::shutdown_on_signals()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::usage(format!("--listen {}: {e}", args.listen)))?;
    let leases = if watched.elections.len() + watched.locks.len() + watched.leases.len() > 0 {
        let store = crate::stores::leases(connection).await?;
        Some(LeaseClient::new(store, Timing::default())?)
    } else {
        None
    };
    let mut queues = BTreeMap::new();
    if !watched.queues.is_empty() {
        let store = crate::stores::queue(connection).await?;
        for name in &watched.queues {
            let queue = WorkQueue::new(store.clone(), name, QueueConfig::default())?;
            queues.insert(name.clone(), queue);
        }
    }
    let metrics = if args.metrics {
        Some(crate::metrics_export::recorder()?)
    } else {
        None
    };
    let cost = watched.overview_cost();
    let state = Arc::new(UiState {
        sources: Sources::new(watched, leases, queues, args.refresh / 2),
        token: args.write_token.clone(),
        refresh: args.refresh,
        loopback: args.listen.ip().is_loopback(),
        public_origin: args.public_origin.clone(),
        metrics,
    });
    let local = listener
        .local_addr()
        .map_err(|e| CliError::store(format!("--listen {}: {e}", args.listen)))?;
    println!("http://{local}/");
    eprintln!(
        "cqlcoord: dashboard on http://{local}/ ({}), refreshing every {}: at most {cost} \
         requests to the cluster per read of the overview (open pages share reads)",
        if args.write_token.is_some() {
            "Requeue and Purge need the write token"
        } else {
            "read-only"
        },
        humantime::format_duration(args.refresh)
    );
    if args.allow_remote && args.write_token.is_some() && !args.listen.ip().is_loopback() {
        eprintln!(
            "cqlcoord: warning: the write token travels in plain HTTP; serve the dashboard \
             behind a TLS proxy"
        );
    }
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(|e| CliError::store(format!("serving the dashboard: {e}")))?;
    Ok(0)
}
