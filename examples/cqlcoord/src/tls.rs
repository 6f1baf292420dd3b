//! TLS through the driver's rustls support: a `rustls::ClientConfig` from PEM files.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use crate::error::CliError;

/// A client configuration that trusts the certificates of `ca` and, with `cert` and `key`,
/// authenticates the client (mutual TLS). Nodes are verified by the name or IP address they
/// were reached at.
///
/// # Errors
/// A one-line [`CliError`] naming the file that could not be read or used.
pub fn client_config(
    ca: &Path,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Arc<ClientConfig>, CliError> {
    let mut roots = RootCertStore::empty();
    let mut any = false;
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| pem_error(ca, e))? {
        roots
            .add(cert.map_err(|e| pem_error(ca, e))?)
            .map_err(|e| CliError::usage(format!("--tls-ca {}: {e}", ca.display())))?;
        any = true;
    }
    if !any {
        return Err(CliError::usage(format!(
            "--tls-ca {}: no certificate in the file",
            ca.display()
        )));
    }
    // Explicit provider: the driver's dependency tree may enable more than one.
    let builder = ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| CliError::usage(format!("TLS: {e}")))?
    .with_root_certificates(roots);
    let config = match (cert, key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| pem_error(cert, e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| pem_error(cert, e))?;
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| pem_error(key, e))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| CliError::usage(format!("--tls-cert/--tls-key: {e}")))?
        }
        _ => {
            return Err(CliError::usage(
                "--tls-cert and --tls-key go together".to_owned(),
            ));
        }
    };
    Ok(Arc::new(config))
}

fn pem_error(path: &Path, e: rustls::pki_types::pem::Error) -> CliError {
    CliError::usage(format!("{}: {e}", path.display()))
}
