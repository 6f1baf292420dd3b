//! What a driver's connection passes at the front door before its requests reach the proxy
//! node: the TLS handshake, then password authentication, each when the server has it.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream};
use tokio::net::TcpStream;

use crate::auth::{self, Credentials};
use crate::deferred::Parked;
use crate::front::relay;
use crate::tls::ServerTls;

/// The server's TLS and authentication settings, shared by its front doors.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    pub tls: Option<ServerTls>,
    pub credentials: Option<Credentials>,
}

/// Lets `driver` through to `proxy` (TLS, then authentication), then relays until either side
/// closes. A connection that fails either step is closed.
pub(crate) async fn admit(
    gate: Arc<Gate>,
    driver: TcpStream,
    proxy: DuplexStream,
    parked: Arc<Parked>,
) {
    if let Err(e) = driver.set_nodelay(true) {
        tracing::warn!(error = %e, "cql-test-server: could not turn Nagle's algorithm off");
    }
    match &gate.tls {
        None => authenticate(&gate, driver, proxy, parked).await,
        Some(tls) => match tls.accept(driver).await {
            Ok(driver) => authenticate(&gate, driver, proxy, parked).await,
            Err(e) => tracing::debug!(error = %e, "cql-test-server: TLS handshake failed"),
        },
    }
}

async fn authenticate(
    gate: &Gate,
    mut driver: impl AsyncRead + AsyncWrite + Unpin,
    mut proxy: DuplexStream,
    parked: Arc<Parked>,
) {
    if let Some(expected) = &gate.credentials {
        match auth::handshake(&mut driver, &mut proxy, expected).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::debug!(error = %e, "cql-test-server: closed during authentication");
                return;
            }
        }
    }
    relay(driver, proxy, &parked).await;
}
