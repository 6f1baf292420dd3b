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
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};

use crate::deferred::{self, Parked};
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
    /// Answers that replace the node's markers (see `deferred`).
    parked: Arc<Parked>,
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
        parked: Arc<Parked>,
    ) -> FrontDoor {
        let door = Door {
            address: listener.local_addr().unwrap_or(node),
            transport,
            node,
            gate,
            relays: Arc::default(),
            listening: Arc::default(),
            parked,
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
                        let parked = Arc::clone(&self.parked);
                        let relay = tokio::spawn(admit(gate, driver, proxy, parked)).abort_handle();
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

/// Relays a connection until both sides closed: the driver's bytes to the proxy node as they
/// come, and the node's frames to the driver, each marker swapped for its parked answer once
/// that is ready. Frames behind a marker go out meanwhile (the driver matches answers to
/// requests by stream), so a request that waits holds up no other request of its connection.
pub(crate) async fn relay(
    driver: impl AsyncRead + AsyncWrite + Unpin,
    proxy: tokio::io::DuplexStream,
    parked: &Parked,
) {
    let (mut driver_in, mut driver_out) = tokio::io::split(driver);
    let (proxy_in, mut proxy_out) = tokio::io::split(proxy);
    let up = async {
        if let Err(e) = tokio::io::copy(&mut driver_in, &mut proxy_out).await {
            tracing::debug!(error = %e, "cql-test-server: connection closed");
        }
        let _ = proxy_out.shutdown().await;
    };
    // Frames for the driver, in the order they are ready; `None` once the node hung up.
    let (ready, mut to_write) = mpsc::unbounded_channel::<Option<Vec<u8>>>();
    let read = async {
        let mut frames = BufReader::new(proxy_in);
        loop {
            let frame = match read_frame(&mut frames).await {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "cql-test-server: connection closed");
                    break;
                }
            };
            let Some(ticket) = deferred::ticket_of(&frame) else {
                let _ = ready.send(Some(frame));
                continue;
            };
            match parked.take(ticket) {
                Some(answer) => {
                    let ready = ready.clone();
                    tokio::spawn(async move {
                        if let Ok(answer) = answer.await {
                            let _ = ready.send(Some(answer));
                        }
                    });
                }
                None => tracing::warn!(ticket, "cql-test-server: no answer parked"),
            }
        }
        let _ = ready.send(None);
    };
    let write = async {
        while let Some(Some(frame)) = to_write.recv().await {
            let written = match driver_out.write_all(&frame).await {
                Ok(()) if to_write.is_empty() => driver_out.flush().await,
                other => other,
            };
            if let Err(e) = written {
                tracing::debug!(error = %e, "cql-test-server: connection closed");
                break;
            }
        }
        let _ = driver_out.shutdown().await;
    };
    tokio::join!(up, read, write);
}

/// The next whole frame (header and body) from the node; `None` at the end of the stream.
async fn read_frame(from: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Option<Vec<u8>>> {
    let mut frame = vec![0; deferred::HEADER];
    match from.read_exact(&mut frame).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) as usize;
    frame.resize(deferred::HEADER + len, 0);
    from.read_exact(&mut frame[deferred::HEADER..]).await?;
    Ok(Some(frame))
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
    use crate::deferred::{HEADER, Parked};

    /// A response frame on `stream` with `body`.
    fn frame(opcode: u8, stream: i16, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0x84, 0];
        out.extend_from_slice(&stream.to_be_bytes());
        out.push(opcode);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    async fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let driver = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        (driver, accepted)
    }

    /// Bytes pass both ways, and a proxy that hangs up closes the driver's connection (the
    /// connection faults rely on it).
    #[tokio::test]
    async fn relays_both_ways_and_passes_the_hang_up_on() {
        let (mut driver, accepted) = connected().await;
        let (front, mut proxy) = tokio::io::duplex(64);
        let parked = std::sync::Arc::new(Parked::default());
        let relayed = {
            let parked = std::sync::Arc::clone(&parked);
            tokio::spawn(async move { relay(accepted, front, &parked).await })
        };

        driver.write_all(b"query").await.unwrap();
        let mut buf = [0; 5];
        proxy.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"query");
        let rows = frame(0x08, 1, b"rows");
        proxy.write_all(&rows).await.unwrap();
        let mut buf = vec![0; rows.len()];
        driver.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, rows);

        drop(proxy);
        let mut rest = Vec::new();
        driver.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "{rest:?}");
        // The relay ends once the driver closes its side too.
        drop(driver);
        relayed.await.unwrap();
    }

    /// A marker is replaced by its parked answer once that is ready, and the frames the node
    /// sent after the marker reach the driver first.
    #[tokio::test]
    async fn a_parked_answer_replaces_its_marker_without_holding_up_later_frames() {
        let (mut driver, accepted) = connected().await;
        let (front, mut proxy) = tokio::io::duplex(1024);
        let parked = std::sync::Arc::new(Parked::default());
        let (answer, parked_answer) = tokio::sync::oneshot::channel();
        let ticket = parked.park(parked_answer);
        let relayed = {
            let parked = std::sync::Arc::clone(&parked);
            tokio::spawn(async move { relay(accepted, front, &parked).await })
        };

        let marker_body = {
            let mut body = b"cqlts-dx".to_vec();
            body.extend_from_slice(&ticket.to_be_bytes());
            body
        };
        proxy
            .write_all(&frame(0x0C, 1, &marker_body))
            .await
            .unwrap();
        let later = frame(0x08, 2, b"second");
        proxy.write_all(&later).await.unwrap();
        let mut buf = vec![0; later.len()];
        driver.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, later, "the later frame passes the waiting one");

        let first = frame(0x08, 1, b"first");
        answer.send(first.clone()).unwrap();
        let mut buf = vec![0; first.len()];
        driver.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, first, "the parked answer, not the marker");
        assert!(first.len() > HEADER);

        drop(proxy);
        drop(driver);
        relayed.await.unwrap();
    }
}
