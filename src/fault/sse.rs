//! The streamed responses of the fault server: server-sent events over a
//! chunked HTTP/1.1 body (`content-type: text/event-stream`), played from a
//! script of [`Step`]s, as an LLM endpoint streams a completion.
//!
//! Each event goes out as one chunk, flushed at once. The headers are sent
//! before the first step, so every fault of a script happens after the
//! client's `send()` has returned: in the body, where a plain HTTP client's
//! retry no longer reaches.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One step of a streamed response ([`Fault::Stream`](super::Fault::Stream)).
///
/// A script that runs out of steps ends the body cleanly (the chunked
/// encoding's last chunk), and the connection is kept alive for the next
/// request. [`Cut`](Step::Cut), [`Reset`](Step::Reset) and
/// [`Stall`](Step::Stall) end a script early: later steps are never played.
///
/// ```
/// use std::time::Duration;
/// use nika_retry_tests::fault::{Fault, Step};
///
/// // A usage chunk, two tokens, then the connection is cut.
/// let script = Fault::stream([
///     Step::Meta("usage".into()),
///     Step::Event("Hello".into()),
///     Step::Event(" world".into()),
///     Step::Cut,
/// ]);
/// // Ten tokens, one every 50 ms.
/// let steady = Fault::steady(Duration::from_millis(50), 10);
/// # let _ = (script, steady);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A content event: `data: <text>` (one `data:` line per line of text).
    Event(String),
    /// A numbered content event: `id: <n>` and `data: <text>`, as a
    /// resumable stream sends it ([`resumable`](super::resumable)).
    Numbered(usize, String),
    /// A metadata event, not content: `event: meta` with `data: <text>` (a
    /// ping, a usage chunk, the model's name).
    Meta(String),
    /// Waits this long before the next step; a client that hangs up
    /// meanwhile is seen at once ([`Hit::hung_up`](super::Hit::hung_up)).
    Wait(Duration),
    /// Closes the connection mid-body (a FIN without the last chunk): the
    /// client sees an unexpected end of the body.
    Cut,
    /// Resets the connection mid-body (RST). What was sent but not yet read
    /// may be lost with it, so a test that counts the events the client saw
    /// before a failure uses [`Cut`](Step::Cut).
    Reset,
    /// Sends nothing more and keeps the connection open until the client
    /// hangs up (or the server's lifetime ends): a stalled stream.
    Stall,
}

impl Step {
    /// `n` content events, `t1` to `tn`.
    pub fn tokens(n: usize) -> impl Iterator<Item = Step> {
        (1..=n).map(|i| Step::Event(format!("t{i}")))
    }
}

/// How a script ended, for the server's bookkeeping.
pub(crate) enum Ended {
    /// Every step was played and the body ended cleanly: the connection
    /// stays open for the next request.
    Complete,
    /// The script cut, reset or stalled the connection, or the client hung
    /// up (`hung_up` says which): the connection is done.
    Closed {
        /// The client closed the connection before the script was over.
        hung_up: bool,
    },
}

const HEAD: &str = "HTTP/1.1 200 OK\r\n\
    Content-Type: text/event-stream\r\n\
    Cache-Control: no-cache\r\n\
    Transfer-Encoding: chunked\r\n\r\n";

/// Plays `steps` on `stream`: the head, then each step. `on_event` is
/// called after each content event is written.
pub(crate) async fn play(
    stream: &mut TcpStream,
    steps: &[Step],
    mut on_event: impl FnMut(),
) -> Ended {
    let hung_up = Ended::Closed { hung_up: true };
    if send(stream, HEAD.as_bytes()).await.is_err() {
        return hung_up;
    }
    for step in steps {
        match step {
            Step::Event(text) => {
                if send(stream, &chunk(&event(None, text))).await.is_err() {
                    return hung_up;
                }
                on_event();
            }
            Step::Numbered(n, text) => {
                let event = format!("id: {n}\n{}", event(None, text));
                if send(stream, &chunk(&event)).await.is_err() {
                    return hung_up;
                }
                on_event();
            }
            Step::Meta(text) => {
                if send(stream, &chunk(&event(Some("meta"), text)))
                    .await
                    .is_err()
                {
                    return hung_up;
                }
            }
            Step::Wait(wait) => {
                if !client_stays(stream, Some(*wait)).await {
                    return hung_up;
                }
            }
            Step::Cut => {
                let _ = stream.shutdown().await;
                return Ended::Closed { hung_up: false };
            }
            Step::Reset => {
                // Linger 0: closing sends RST rather than FIN.
                let _ = stream.set_zero_linger();
                return Ended::Closed { hung_up: false };
            }
            Step::Stall => {
                client_stays(stream, None).await;
                return hung_up;
            }
        }
    }
    match send(stream, b"0\r\n\r\n").await {
        Ok(()) => Ended::Complete,
        Err(_) => hung_up,
    }
}

async fn send(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Waits `wait` (forever if `None`) while watching the connection: false as
/// soon as the client closes it. An HTTP/1.1 client sends nothing while it
/// reads a response, so the only thing a read can see is the hang-up.
async fn client_stays(stream: &mut TcpStream, wait: Option<Duration>) -> bool {
    let sleep = async {
        match wait {
            Some(wait) => tokio::time::sleep(wait).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    let mut scratch = [0u8; 256];
    loop {
        tokio::select! {
            () = &mut sleep => return true,
            read = stream.read(&mut scratch) => match read {
                Ok(0) | Err(_) => return false,
                Ok(_) => continue,
            },
        }
    }
}

/// One server-sent event: an optional `event:` line, a `data:` line per
/// line of `text`, and the blank line that ends it.
fn event(name: Option<&str>, text: &str) -> String {
    let mut out = String::new();
    if let Some(name) = name {
        out.push_str(&format!("event: {name}\n"));
    }
    for line in text.split('\n') {
        out.push_str(&format!("data: {line}\n"));
    }
    out.push('\n');
    out
}

/// `payload` as one chunk of a chunked body.
fn chunk(payload: &str) -> Vec<u8> {
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_data_lines_and_a_blank_line() {
        assert_eq!(event(None, "a\nb"), "data: a\ndata: b\n\n");
        assert_eq!(event(Some("meta"), "{}"), "event: meta\ndata: {}\n\n");
        assert_eq!(chunk("data: x\n\n"), b"9\r\ndata: x\n\n\r\n");
    }
}
