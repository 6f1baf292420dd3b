//! `--metrics-addr`: the libraries' metrics served for Prometheus while the command runs.

use std::net::SocketAddr;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::error::CliError;

/// Latency buckets, in seconds: a LAN round trip to a stalled request timeout.
const SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Buckets of candidates tried per claim.
const CANDIDATES: &[f64] = &[1.0, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 128.0];

/// Installs the Prometheus exporter as the process's recorder, listening on `addr` (every
/// path answers with the text exposition format, `/metrics` included), and describes every
/// metric the libraries record ([`cql_lease::metrics::ALL`]). Histograms are exported as
/// Prometheus histograms (buckets aggregate across processes; quantile summaries do not).
/// Call from within the runtime.
///
/// # Errors
/// A usage error when the address cannot be listened on.
pub fn serve(addr: SocketAddr) -> Result<(), CliError> {
    let failed = |e: metrics_exporter_prometheus::BuildError| {
        CliError::usage(format!("--metrics-addr {addr}: {e}"))
    };
    let attempts = Matcher::Full(cql_lease::metrics::CLAIM_ATTEMPTS.to_owned());
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets(SECONDS)
        .and_then(|b| b.set_buckets_for_metric(attempts, CANDIDATES))
        .map_err(failed)?
        .install()
        .map_err(failed)?;
    cql_lease::metrics::describe();
    Ok(())
}
