//! The server's TCP front door: it accepts the driver's connections itself, with Nagle's
//! algorithm off, and hands each one to its proxy node over an in-memory stream.
//!
//! Why not let the proxy listen: `scylla-proxy` writes a response frame as two writes (header,
//! then body) on a socket that keeps Nagle's algorithm on, so the body waits for the
//! driver's delayed acknowledgement of the header: about 40 ms per response on Linux. Every
//! store call of a wire test paid that; with the front door a round trip on loopback takes
//! well under a millisecond, as on a real node (which sets `TCP_NODELAY`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use scylla_proxy::TransportFactory;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::gate::{Gate, admit};

/// Accepts connections on one address for one proxy node, until dropped.
pub(crate) struct FrontDoor {
    accept: JoinHandle<()>,
}

impl Drop for FrontDoor {
    fn drop(&mut self) {
        // Open connections end with the proxy's workers, which close their side.
        self.accept.abort();
    }
}

impl FrontDoor {
    /// Relays every connection accepted by `listener` to the proxy node at `node` (the
    /// address the node was created with) through `transport`, once it passed `gate`.
    pub(crate) fn open(
        listener: TcpListener,
        transport: Arc<TransportFactory>,
        node: SocketAddr,
        gate: Arc<Gate>,
    ) -> FrontDoor {
        let accept = tokio::spawn(async move {
            loop {
                let (driver, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors or an aborted handshake: try again shortly.
                        tracing::warn!(error = %e, "cql-test-server: accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                match transport.connect(node, Some(peer.ip()), Some(peer.port())) {
                    Ok(proxy) => {
                        tokio::spawn(admit(Arc::clone(&gate), driver, proxy));
                    }
                    Err(e) => {
                        // The proxy has shut down: nothing to serve any more.
                        tracing::debug!(error = %e, "cql-test-server: proxy node gone");
                        return;
                    }
                }
            }
        });
        FrontDoor { accept }
    }
}

/// Copies bytes both ways until either side closes.
pub(crate) async fn relay(
    mut driver: impl AsyncRead + AsyncWrite + Unpin,
    mut proxy: tokio::io::DuplexStream,
) {
    if let Err(e) = tokio::io::copy_bidirectional(&mut driver, &mut proxy).await {
        tracing::debug!(error = %e, "cql-test-server: connection closed");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::relay;

    /// Bytes pass both ways, and a proxy that hangs up closes the driver's connection (the
    /// connection faults rely on it).
    #[tokio::test]
    async fn relays_both_ways_and_passes_the_hang_up_on() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut driver = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let (front, mut proxy) = tokio::io::duplex(64);
        let relayed = tokio::spawn(relay(accepted, front));

        driver.write_all(b"query").await.unwrap();
        let mut buf = [0; 5];
        proxy.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"query");
        proxy.write_all(b"rows").await.unwrap();
        let mut buf = [0; 4];
        driver.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"rows");

        drop(proxy);
        let mut rest = Vec::new();
        driver.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "{rest:?}");
        // The relay ends once the driver closes its side too.
        drop(driver);
        relayed.await.unwrap();
    }
}
