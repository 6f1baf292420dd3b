//! The server's TCP front door: it accepts the driver's connections itself, with Nagle's
//! algorithm off, and hands each one to its proxy node over an in-memory stream.
//!
//! Why not let the proxy listen: `scylla-proxy` writes a response frame as two writes (header,
//! then body) on a socket that keeps Nagle's algorithm on, so the body waits for the
//! driver's delayed acknowledgement of the header: about 40 ms per response on Linux. Every
//! store call of a wire test paid that; with the front door a round trip on loopback takes
//! well under a millisecond, as on a real node (which sets `TCP_NODELAY`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_proxy::TransportFactory;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

use crate::gate::{Gate, admit};

/// Accepts connections on one address for one proxy node, until dropped.
pub(crate) struct FrontDoor {
    accept: Mutex<Option<JoinHandle<()>>>,
    door: Door,
}

/// What it takes to listen again after [`FrontDoor::shut`].
#[derive(Clone)]
struct Door {
    address: SocketAddr,
    transport: Arc<TransportFactory>,
    node: SocketAddr,
    /// What a connection passes before it is relayed (TLS, login).
    gate: Arc<Gate>,
    /// The relays of the connections accepted so far (finished ones pruned on accept).
    relays: Arc<Mutex<Vec<AbortHandle>>>,
    /// The listener while the node listens: taken out (and so closed at once, not when the
    /// accept task next runs) when it goes down.
    listening: Arc<Mutex<Option<TcpListener>>>,
}

impl Drop for FrontDoor {
    fn drop(&mut self) {
        // Open connections end with the proxy's workers, which close their side.
        if let Ok(mut accept) = self.accept.lock()
            && let Some(accept) = accept.take()
        {
            accept.abort();
        }
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
        let door = Door {
            address: listener.local_addr().unwrap_or(node),
            transport,
            node,
            gate,
            relays: Arc::default(),
            listening: Arc::default(),
        };
        let accept = door.clone().serve(listener);
        FrontDoor {
            accept: Mutex::new(Some(accept)),
            door,
        }
    }
}

impl Door {
    fn serve(self, listener: TcpListener) -> JoinHandle<()> {
        if let Ok(mut slot) = self.listening.lock() {
            *slot = Some(listener);
        }
        tokio::spawn(async move {
            loop {
                let (driver, peer) = match self.accept().await {
                    None => return,
                    Some(Ok(accepted)) => accepted,
                    Some(Err(e)) => {
                        // Out of descriptors or an aborted handshake: try again shortly.
                        tracing::warn!(error = %e, "cql-test-server: accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                match self
                    .transport
                    .connect(self.node, Some(peer.ip()), Some(peer.port()))
                {
                    Ok(proxy) => {
                        let gate = Arc::clone(&self.gate);
                        let relay = tokio::spawn(admit(gate, driver, proxy)).abort_handle();
                        if let Ok(mut relays) = self.relays.lock() {
                            relays.retain(|r| !r.is_finished());
                            relays.push(relay.clone());
                        }
                        // A shut that came between the accept and the push above found no
                        // relay to close: close it here (pushed first, so a shut after
                        // this check finds it).
                        if self.listening.lock().is_ok_and(|l| l.is_none()) {
                            relay.abort();
                            return;
                        }
                    }
                    Err(e) => {
                        // The proxy has shut down: nothing to serve any more.
                        tracing::debug!(error = %e, "cql-test-server: proxy node gone");
                        return;
                    }
                }
            }
        })
    }

    /// The next connection, or `None` once the listener was taken away. The lock is held
    /// only while polling, never across an await.
    async fn accept(&self) -> Option<std::io::Result<(TcpStream, SocketAddr)>> {
        std::future::poll_fn(|cx| match self.listening.lock() {
            Ok(slot) => match slot.as_ref() {
                Some(listener) => listener.poll_accept(cx).map(Some),
                None => std::task::Poll::Ready(None),
            },
            Err(_) => std::task::Poll::Ready(None),
        })
        .await
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

/// A node that is down: nothing listens on its address (a connection is refused) and the
/// connections it had are closed. [`FrontDoor::reopen`] listens on the same address again.
impl FrontDoor {
    /// Stops listening and closes every connection accepted so far. Idempotent.
    pub(crate) fn shut(&self) {
        // Dropped here, so the port is closed before this returns.
        let listener = self.door.listening.lock().ok().and_then(|mut l| l.take());
        drop(listener);
        if let Ok(mut accept) = self.accept.lock()
            && let Some(accept) = accept.take()
        {
            accept.abort();
        }
        if let Ok(mut relays) = self.door.relays.lock() {
            for relay in relays.drain(..) {
                relay.abort();
            }
        }
    }

    /// Listens on the same address again, if it was shut. Needs a Tokio runtime.
    ///
    /// # Errors
    /// The address could not be bound again.
    pub(crate) fn reopen(&self) -> std::io::Result<()> {
        let Ok(mut accept) = self.accept.lock() else {
            return Ok(());
        };
        if accept.is_some() {
            return Ok(());
        }
        // std's bind is synchronous (callers are not async); Tokio's listeners and std's
        // both set SO_REUSEADDR, so the port closed a moment ago binds again at once.
        let listener = std::net::TcpListener::bind(self.door.address)?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        *accept = Some(self.door.clone().serve(listener));
        Ok(())
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
