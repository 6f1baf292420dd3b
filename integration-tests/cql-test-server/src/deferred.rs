//! Answers given later than their request's turn, without holding up the connection.
//!
//! The proxy node answers a frame by calling a synchronous function, so a request that has to
//! wait (a Paxos round that backs off) cannot be answered from there. It is answered with a
//! marker instead: an `EVENT` frame on the request's stream (real events always travel on
//! stream -1) carrying a ticket. The task that finishes the request parks the real answer's
//! bytes under that ticket, and the front door, which relays the node's frames to the driver,
//! swaps the marker for the answer once it is ready, writing the connection's other frames
//! meanwhile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use scylla_proxy::{RequestFrame, ResponseFrame, ResponseOpcode};
use tokio::sync::oneshot;

/// What a marker's body starts with, before its ticket.
const MAGIC: &[u8; 8] = b"cqlts-dx";
/// The `EVENT` opcode.
const EVENT: u8 = 0x0C;
/// The header of a protocol v4 frame.
pub(crate) const HEADER: usize = 9;

/// Answers on their way, by ticket, shared by a server's request handler and front doors.
#[derive(Debug, Default)]
pub(crate) struct Parked {
    next: AtomicU64,
    answers: Mutex<HashMap<u64, oneshot::Receiver<Vec<u8>>>>,
}

impl Parked {
    /// Parks the answer `answer` will bring; returns its ticket.
    pub(crate) fn park(&self, answer: oneshot::Receiver<Vec<u8>>) -> u64 {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(ticket, answer);
        }
        ticket
    }

    /// The answer parked under `ticket` (each is taken once).
    pub(crate) fn take(&self, ticket: u64) -> Option<oneshot::Receiver<Vec<u8>>> {
        self.answers.lock().ok()?.remove(&ticket)
    }
}

/// The marker standing for the answer parked under `ticket`, on the request's stream.
pub(crate) fn marker(request: &RequestFrame, ticket: u64) -> ResponseFrame {
    ResponseFrame::new(
        request.params.for_response(),
        ResponseOpcode::Event,
        marker_body(ticket).into(),
    )
}

fn marker_body(ticket: u64) -> Vec<u8> {
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&ticket.to_be_bytes());
    body
}

/// The ticket of a whole frame (header and body), if it is a marker.
pub(crate) fn ticket_of(frame: &[u8]) -> Option<u64> {
    let (header, body) = frame.split_at_checked(HEADER)?;
    let stream = i16::from_be_bytes([header[2], header[3]]);
    if header[4] != EVENT || stream < 0 {
        return None;
    }
    let ticket = body.strip_prefix(MAGIC.as_slice())?;
    Some(u64::from_be_bytes(ticket.try_into().ok()?))
}

/// A frame as the driver reads it: the header, then the body (never compressed: the server
/// offers no compression).
pub(crate) fn to_bytes(frame: &ResponseFrame) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + frame.body.len());
    out.push(frame.params.version);
    out.push(frame.params.flags);
    out.extend_from_slice(&frame.params.stream.to_be_bytes());
    out.push(frame.opcode as u8);
    out.extend_from_slice(
        &u32::try_from(frame.body.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(&frame.body);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    fn frame(opcode: u8, stream: i16, body: &[u8]) -> Vec<u8> {
        let mut out = vec![0x84, 0];
        out.extend_from_slice(&stream.to_be_bytes());
        out.push(opcode);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    /// A marker is recognised with its ticket; a real event (stream -1) and other frames are
    /// not markers.
    #[test]
    fn only_markers_carry_tickets() {
        assert_eq!(ticket_of(&frame(EVENT, 7, &marker_body(42))), Some(42));
        assert_eq!(ticket_of(&frame(EVENT, -1, &marker_body(42))), None);
        assert_eq!(ticket_of(&frame(0x08, 7, &marker_body(42))), None);
        assert_eq!(ticket_of(&frame(EVENT, 7, b"short")), None);
    }
}
