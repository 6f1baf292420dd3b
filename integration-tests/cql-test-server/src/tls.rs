//! TLS at the front door (client-to-node encryption), with certificates made up at start:
//! a test CA ([`TestCa`], rcgen) signs the server's certificate for the very addresses the
//! server bound (the driver checks the node's IP address), and, for mutual TLS (Cassandra's
//! `require_client_auth`), the clients' certificates. Nothing is checked in, so nothing
//! expires. Served with rustls and its aws-lc-rs provider, as the driver's `rustls-023`
//! feature uses it.

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A certificate authority made up for a test: its certificate (PEM) is what a client
/// trusts (`--tls-ca`), and it issues the server's and clients' certificates.
#[derive(Clone)]
pub struct TestCa {
    inner: Arc<CaInner>,
}

struct CaInner {
    params: CertificateParams,
    key: KeyPair,
    cert: CertificateDer<'static>,
    pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// An issued certificate: its PEM chain (the certificate alone) and private key (PKCS#8 PEM).
type Issued = (CertificateDer<'static>, String, KeyPair);

impl TestCa {
    /// A new CA with common name `name` (a fresh key each time: two CAs never trust each
    /// other's certificates).
    ///
    /// # Errors
    /// rcgen's message, if key generation or signing failed.
    pub fn new(name: &str) -> Result<TestCa, String> {
        let key = KeyPair::generate().map_err(|e| format!("CA key: {e}"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("CA certificate: {e}"))?;
        Ok(TestCa {
            inner: Arc::new(CaInner {
                pem: cert.pem(),
                cert: cert.der().clone(),
                params,
                key,
            }),
        })
    }

    /// The CA's certificate, PEM: what clients trust.
    pub fn cert_pem(&self) -> String {
        self.inner.pem.clone()
    }

    /// A client certificate with common name `name`, signed by this CA: `(certificate PEM,
    /// private key PEM)`, for `--tls-cert` / `--tls-key`.
    ///
    /// # Errors
    /// rcgen's message, if key generation or signing failed.
    pub fn issue_client(&self, name: &str) -> Result<(String, String), String> {
        let (_, pem, key) = self.issue(name, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth)?;
        Ok((pem, key.serialize_pem()))
    }

    fn issue(
        &self,
        name: &str,
        names: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Issued, String> {
        let key = KeyPair::generate().map_err(|e| format!("key: {e}"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.subject_alt_names = names;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let issuer = Issuer::from_params(&self.inner.params, &self.inner.key);
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(|e| format!("certificate for {name}: {e}"))?;
        Ok((cert.der().clone(), cert.pem(), key))
    }
}

/// TLS on a server (see `ServerOptions::with_tls`): the CA that issues the server's
/// certificate at start, and whether clients must present a certificate of the same CA.
#[derive(Debug, Clone)]
pub struct TlsOptions {
    /// Issues the server's certificate (and, with `client_auth`, is the one CA whose client
    /// certificates are accepted).
    pub ca: TestCa,
    /// Mutual TLS: a client without a certificate of `ca` fails the handshake.
    pub client_auth: bool,
}

impl TlsOptions {
    /// TLS with a server certificate of `ca`; clients need no certificate.
    pub fn new(ca: TestCa) -> Self {
        TlsOptions {
            ca,
            client_auth: false,
        }
    }

    /// Requires client certificates issued by the same CA (mutual TLS).
    pub fn with_client_auth(self) -> Self {
        TlsOptions {
            client_auth: true,
            ..self
        }
    }

    /// The acceptor of a server bound to `addresses`: a certificate for those IP addresses.
    pub(crate) fn acceptor(&self, addresses: &[IpAddr]) -> Result<ServerTls, String> {
        let names = addresses.iter().map(|ip| SanType::IpAddress(*ip)).collect();
        let (cert, _, key) = self.ca.issue(
            "cql-test-server",
            names,
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS versions: {e}"))?;
        let builder = if self.client_auth {
            let mut roots = RootCertStore::empty();
            roots
                .add(self.ca.inner.cert.clone())
                .map_err(|e| format!("client CA: {e}"))?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("client verifier: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(vec![cert], key)
            .map_err(|e| format!("server certificate: {e}"))?;
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// A server's TLS acceptor.
pub(crate) struct ServerTls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// Runs the server side of the handshake on an accepted connection.
    pub(crate) async fn accept(&self, driver: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        self.acceptor.accept(driver).await
    }
}
