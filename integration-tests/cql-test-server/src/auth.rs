//! Password authentication, as a node with Cassandra's `PasswordAuthenticator` does it: the
//! driver's `STARTUP` is answered with `AUTHENTICATE`, its `AUTH_RESPONSE` carries a SASL
//! PLAIN token (`\0user\0password`), and the connection serves requests only after
//! `AUTH_SUCCESS`. It runs at the front door, before the relay to the proxy node starts, so the
//! engine never sees an unauthenticated request.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The one user a server accepts (see `ServerOptions::with_password_auth`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the password, even in a test log.
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// The authenticator class a node names in `AUTHENTICATE` (drivers pick the SASL mechanism
/// by it).
pub const AUTHENTICATOR: &str = "org.apache.cassandra.auth.PasswordAuthenticator";

const ERROR: u8 = 0x00;
const STARTUP: u8 = 0x01;
const READY: u8 = 0x02;
const AUTHENTICATE: u8 = 0x03;
const OPTIONS: u8 = 0x05;
const AUTH_RESPONSE: u8 = 0x0F;
const AUTH_SUCCESS: u8 = 0x10;
const BAD_CREDENTIALS: i32 = 0x0100;
const PROTOCOL_ERROR: i32 = 0x000A;
/// The header's flag of a compressed body.
const COMPRESSED: u8 = 0x01;
/// Larger frames are refused (Cassandra's default `native_transport_max_frame_size`).
const MAX_BODY: usize = 16 << 20;

/// One frame, protocol v3 to v4 layout: a 9-byte header and the body.
struct Frame {
    header: [u8; 9],
    body: Vec<u8>,
}

impl Frame {
    fn opcode(&self) -> u8 {
        self.header[4]
    }

    /// A response to this request, on its stream.
    fn answer(&self, opcode: u8, body: Vec<u8>) -> Frame {
        let len = u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes();
        let header = [
            0x80 | (self.header[0] & 0x7F),
            0,
            self.header[2],
            self.header[3],
            opcode,
            len[0],
            len[1],
            len[2],
            len[3],
        ];
        Frame { header, body }
    }

    fn error(&self, code: i32, message: &str) -> Frame {
        let mut body = code.to_be_bytes().to_vec();
        push_string(&mut body, message);
        self.answer(ERROR, body)
    }
}

fn push_string(out: &mut Vec<u8>, s: &str) {
    let len = u16::try_from(s.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..usize::from(len)]);
}

async fn read_frame(from: &mut (impl AsyncRead + Unpin)) -> io::Result<Frame> {
    let mut header = [0; 9];
    from.read_exact(&mut header).await?;
    let len = u32::from_be_bytes([header[5], header[6], header[7], header[8]]);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > MAX_BODY {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {len}-byte frame before authentication"),
        ));
    }
    let mut body = vec![0; len];
    from.read_exact(&mut body).await?;
    Ok(Frame { header, body })
}

async fn write_frame(to: &mut (impl AsyncWrite + Unpin), frame: &Frame) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(9 + frame.body.len());
    bytes.extend_from_slice(&frame.header);
    bytes.extend_from_slice(&frame.body);
    to.write_all(&bytes).await?;
    to.flush().await
}

/// Sends `request` to the proxy node and returns its answer.
async fn ask(
    proxy: &mut (impl AsyncRead + AsyncWrite + Unpin),
    request: &Frame,
) -> io::Result<Frame> {
    write_frame(proxy, request).await?;
    read_frame(proxy).await
}

/// Whether a SASL PLAIN token (`authzid \0 user \0 password`) names `expected`.
fn plain_token_matches(token: &[u8], expected: &Credentials) -> bool {
    let mut parts = token.split(|b| *b == 0);
    let (Some(_authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    user == expected.user.as_bytes() && password == expected.password.as_bytes()
}

/// The `[bytes]` token of an `AUTH_RESPONSE` body.
fn token(body: &[u8]) -> Option<&[u8]> {
    let len = i32::from_be_bytes(body.get(..4)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    body.get(4..4 + len)
}

/// Runs the connection's handshake: `OPTIONS` and `STARTUP` go to the proxy node (which
/// answers them as any node does), `STARTUP`'s `READY` becomes `AUTHENTICATE`, and the
/// driver's `AUTH_RESPONSE` is checked against `expected`. Returns `Ok(true)` once the
/// driver is told `AUTH_SUCCESS` (the relay may start), `Ok(false)` after refusing it (the
/// connection is then closed, as the driver would close it anyway). Any other request before
/// that is answered with a protocol error and not served.
///
/// # Errors
/// Either side closed or sent a frame that could not be read.
pub(crate) async fn handshake(
    driver: &mut (impl AsyncRead + AsyncWrite + Unpin),
    proxy: &mut (impl AsyncRead + AsyncWrite + Unpin),
    expected: &Credentials,
) -> io::Result<bool> {
    let mut started = false;
    loop {
        let request = read_frame(driver).await?;
        let answer = match request.opcode() {
            OPTIONS if !started => ask(proxy, &request).await?,
            STARTUP if !started => {
                let answer = ask(proxy, &request).await?;
                if answer.opcode() == READY {
                    started = true;
                    let mut body = Vec::new();
                    push_string(&mut body, AUTHENTICATOR);
                    request.answer(AUTHENTICATE, body)
                } else {
                    answer
                }
            }
            AUTH_RESPONSE if started && request.header[1] & COMPRESSED != 0 => request.error(
                PROTOCOL_ERROR,
                "cql-test-server: a compressed AUTH_RESPONSE is not supported",
            ),
            AUTH_RESPONSE if started => {
                let accepted =
                    token(&request.body).is_some_and(|token| plain_token_matches(token, expected));
                if accepted {
                    tracing::debug!(user = %expected.user, "cql-test-server: authenticated");
                    // A null token: PLAIN needs no final message.
                    let success = request.answer(AUTH_SUCCESS, (-1i32).to_be_bytes().to_vec());
                    write_frame(driver, &success).await?;
                    return Ok(true);
                }
                tracing::debug!("cql-test-server: bad credentials");
                let refused = request.error(
                    BAD_CREDENTIALS,
                    "Provided user name and/or password are incorrect",
                );
                write_frame(driver, &refused).await?;
                return Ok(false);
            }
            other => request.error(
                PROTOCOL_ERROR,
                &format!(
                    "cql-test-server: opcode {other:#04x} before authentication (expected {})",
                    if started { "AUTH_RESPONSE" } else { "STARTUP" }
                ),
            ),
        };
        write_frame(driver, &answer).await?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

    use super::*;

    fn request(opcode: u8, stream: u8, body: &[u8]) -> Frame {
        let len = (body.len() as u32).to_be_bytes();
        Frame {
            header: [4, 0, 0, stream, opcode, len[0], len[1], len[2], len[3]],
            body: body.to_vec(),
        }
    }

    fn auth_response(token: &[u8]) -> Frame {
        let mut body = (token.len() as i32).to_be_bytes().to_vec();
        body.extend_from_slice(token);
        request(AUTH_RESPONSE, 9, &body)
    }

    /// Runs the handshake against a node that answers READY to STARTUP, feeding it
    /// `requests`; returns its verdict and the answers the driver got.
    async fn drive(requests: Vec<Frame>) -> (io::Result<bool>, Vec<Frame>) {
        let (mut driver, mut front) = tokio::io::duplex(4096);
        let (mut node, mut proxy) = tokio::io::duplex(4096);
        tokio::spawn(async move {
            while let Ok(request) = read_frame(&mut node).await {
                assert_eq!(request.opcode(), STARTUP, "only STARTUP reaches the node");
                write_frame(&mut node, &request.answer(READY, Vec::new()))
                    .await
                    .unwrap();
            }
        });
        let count = requests.len();
        let client = tokio::spawn(async move {
            let mut answers = Vec::new();
            for r in &requests {
                if write_frame(&mut driver, r).await.is_err() {
                    break; // closed by the front door
                }
                match read_frame(&mut driver).await {
                    Ok(answer) => answers.push(answer),
                    Err(_) => break,
                }
            }
            answers
        });
        let verdict = handshake(&mut front, &mut proxy, &expected()).await;
        drop(front);
        let answers = client.await.unwrap();
        assert!(answers.len() <= count);
        (verdict, answers)
    }

    fn code(answer: &Frame) -> i32 {
        assert_eq!(answer.opcode(), ERROR);
        i32::from_be_bytes(answer.body[..4].try_into().unwrap())
    }

    #[tokio::test]
    async fn nothing_is_served_before_the_right_credentials() {
        const QUERY: u8 = 0x07;
        let (verdict, answers) = drive(vec![
            request(QUERY, 1, b"early"),
            request(STARTUP, 2, b""),
            request(QUERY, 3, b"still early"),
            auth_response(b"\0ops\0s3cret"),
        ])
        .await;
        assert!(verdict.unwrap(), "accepted");
        let opcodes: Vec<u8> = answers.iter().map(Frame::opcode).collect();
        assert_eq!(opcodes, [ERROR, AUTHENTICATE, ERROR, AUTH_SUCCESS]);
        assert_eq!(code(&answers[0]), PROTOCOL_ERROR);
        assert_eq!(code(&answers[2]), PROTOCOL_ERROR);
        // Each answer on its request's stream, as a response of the request's version.
        let streams: Vec<u8> = answers.iter().map(|a| a.header[3]).collect();
        assert_eq!(streams, [1, 2, 3, 9]);
        assert!(answers.iter().all(|a| a.header[0] == 0x84));
        assert!(answers[1].body.ends_with(AUTHENTICATOR.as_bytes()));

        let (verdict, answers) = drive(vec![
            request(STARTUP, 2, b""),
            auth_response(b"\0ops\0guess"),
            request(QUERY, 3, b"after a refusal"),
        ])
        .await;
        assert!(!verdict.unwrap(), "refused");
        assert_eq!(answers.len(), 2, "the connection ends at the refusal");
        assert_eq!(code(&answers[1]), BAD_CREDENTIALS);
    }

    fn expected() -> Credentials {
        Credentials {
            user: "ops".into(),
            password: "s3cret".into(),
        }
    }

    #[test]
    fn plain_tokens_are_checked_field_by_field() {
        assert!(plain_token_matches(b"\0ops\0s3cret", &expected()));
        assert!(plain_token_matches(b"admin\0ops\0s3cret", &expected()));
        assert!(!plain_token_matches(b"\0ops\0wrong", &expected()));
        assert!(!plain_token_matches(b"\0other\0s3cret", &expected()));
        assert!(!plain_token_matches(b"\0ops\0s3cret\0", &expected()));
        assert!(!plain_token_matches(b"ops:s3cret", &expected()));
        let mut body = 11i32.to_be_bytes().to_vec();
        body.extend_from_slice(b"\0ops\0s3cret");
        assert_eq!(token(&body), Some(&b"\0ops\0s3cret"[..]));
        assert_eq!(token(&(-1i32).to_be_bytes()), None);
        assert!(!format!("{:?}", expected()).contains("s3cret"));
    }
}
