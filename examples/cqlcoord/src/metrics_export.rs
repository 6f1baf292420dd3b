//! `--metrics-addr`: the libraries' metrics served for Prometheus while the command runs.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::CliError;

/// Latency buckets, in seconds: a LAN round trip to a stalled request timeout.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets of candidates tried per claim.
const CANDIDATES: &[f64] = &[1.0, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 128.0];

/// The exporter's settings: histograms as Prometheus histograms (buckets aggregate across
/// processes; quantile summaries do not), with the buckets above.
fn builder() -> Result<PrometheusBuilder, metrics_exporter_prometheus::BuildError> {
    let attempts = Matcher::Full(cql_lease::metrics::CLAIM_ATTEMPTS.to_owned());
    PrometheusBuilder::new()
        .set_buckets(SECONDS)
        .and_then(|b| b.set_buckets_for_metric(attempts, CANDIDATES))
}

/// Installs the Prometheus exporter as the process's recorder, listening on `addr` (every
/// path answers with the text exposition format, `/metrics` included), and describes every
/// metric the libraries record ([`cql_lease::metrics::ALL`]). Call from within the runtime.
///
/// # Errors
/// A usage error when the address cannot be listened on.
pub fn serve(addr: SocketAddr) -> Result<(), CliError> {
    let failed = |e: metrics_exporter_prometheus::BuildError| {
        CliError::usage(format!("--metrics-addr {addr}: {e}"))
    };
    builder()
        .map_err(failed)?
        .with_http_listener(addr)
        .install()
        .map_err(failed)?;
    cql_lease::metrics::describe();
    Ok(())
}

/// Installs the same recorder without a listener of its own (`ui --metrics` serves its
/// exposition beside the pages), describes the metrics, and keeps its histograms trimmed
/// (upkeep every 5 s, as the exporter's own listener does). Call from within the runtime.
///
/// # Errors
/// A usage error when a recorder is installed already.
pub fn recorder() -> Result<PrometheusHandle, CliError> {
    let failed =
        |e: metrics_exporter_prometheus::BuildError| CliError::usage(format!("--metrics: {e}"));
    let handle = builder()
        .map_err(failed)?
        .install_recorder()
        .map_err(failed)?;
    cql_lease::metrics::describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
