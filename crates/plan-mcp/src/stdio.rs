//! The transport of a stdio server: its process and the JSON-RPC lines over its pipes,
//! with a cap on the size of one line that fails the request it answers at once.
//!
//! rmcp's own reader drops a line over its cap and keeps reading: the request it answered
//! would wait out the server's whole time limit, then read as a timeout. [`Capped`] sits
//! under that reader: a line over the cap is cut short (rmcp ignores the unparsable rest)
//! and, when it was a response, followed by an error response to the same request that
//! says how large the answer was ([`too_large`] tells the error apart).

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use process_wrap::tokio::ChildWrapper;
use rmcp::RoleClient;
use rmcp::model::ErrorData;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{ChildStdin, ChildStdout};

/// The largest message a server may send: rmcp's own cap (the same over HTTP).
pub(crate) const MAX_MESSAGE_BYTES: usize = DEFAULT_MAX_LINE_LENGTH;
/// The key of the error data that marks an answer over the cap, with its size.
const TOO_LARGE: &str = "planvmAnswerBytes";
/// How long a server that was asked to stop may take before it is made to.
const EXIT_WAIT: Duration = Duration::from_secs(3);
/// SIGTERM, the same on every Unix.
#[cfg(unix)]
const SIGTERM: i32 = 15;

/// A stdio server: its process (killed with its group when dropped) and its transport.
pub(crate) struct Child {
    child: Option<Box<dyn ChildWrapper>>,
    transport: AsyncRwTransport<RoleClient, Capped<ChildStdout>, ChildStdin>,
}

impl Child {
    /// The transport over `child`'s pipes (stdin and stdout piped, not yet taken).
    pub(crate) fn new(mut child: Box<dyn ChildWrapper>) -> std::io::Result<Child> {
        let missing = |p| std::io::Error::other(format!("its {p} is not piped"));
        let stdin = child.stdin().take().ok_or_else(|| missing("stdin"))?;
        let stdout = child.stdout().take().ok_or_else(|| missing("stdout"))?;
        Ok(Child {
            child: Some(child),
            transport: AsyncRwTransport::new_client(Capped::new(stdout, MAX_MESSAGE_BYTES), stdin),
        })
    }

    /// As the MCP specification says: its input closed, then (when it does not exit)
    /// SIGTERM, then killed, each after a wait.
    async fn stop(&mut self) -> std::io::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        self.transport.close().await?;
        if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(SIGTERM).is_ok()
            && tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok()
        {
            self.child = None;
            return Ok(());
        }
        let killed = Box::into_pin(child.kill()).await;
        self.child = None;
        killed
    }
}

impl Transport<RoleClient> for Child {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.stop()
    }
}

/// The size of the answer `e` stands for, when it is the error [`Capped`] put in place of
/// an answer over the cap.
pub(crate) fn too_large(e: &ErrorData) -> Option<u64> {
    e.data.as_ref()?.get(TOO_LARGE)?.as_u64()
}

/// A server's stdout, its lines passed on whole up to `cap` bytes each.
pub(crate) struct Capped<R> {
    inner: R,
    cap: usize,
    /// Bytes of the current line passed on.
    line: usize,
    /// The current line's whole size, once it went over the cap.
    over: Option<usize>,
    scan: Scan,
    chunk: Box<[u8]>,
    /// What is to be read before more of `inner`, from `at`.
    out: Vec<u8>,
    at: usize,
}

impl<R> Capped<R> {
    pub(crate) fn new(inner: R, cap: usize) -> Capped<R> {
        Capped {
            inner,
            cap,
            line: 0,
            over: None,
            scan: Scan::default(),
            chunk: vec![0; 64 << 10].into_boxed_slice(),
            out: Vec::new(),
            at: 0,
        }
    }

    /// Passes `bytes` on (to `out`), cutting a line over the cap.
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let end = bytes.iter().position(|&b| b == b'\n');
            let part = &bytes[..end.unwrap_or(bytes.len())];
            self.scan.feed(part);
            match &mut self.over {
                Some(total) => *total = total.saturating_add(part.len()),
                None if part.len() <= self.cap - self.line => {
                    self.out.extend_from_slice(part);
                    self.line += part.len();
                }
                None => {
                    // NB: the reader above sees a line cut short, which does not parse and
                    // is ignored; the rest is never kept.
                    self.out.extend_from_slice(&part[..self.cap - self.line]);
                    self.out.push(b'\n');
                    self.over = Some(self.line + part.len());
                    self.line = self.cap;
                }
            }
            let Some(end) = end else { break };
            match self.over.take() {
                None => self.out.push(b'\n'),
                Some(total) => {
                    // NB: only a response: an error under the id of a request the server
                    // made would answer one of ours that has the same id.
                    if let Some(id) = self.scan.response_id() {
                        let error = json!({"jsonrpc": "2.0", "id": id, "error": {
                            "code": -32603,
                            "message": format!("answer of {total} bytes, larger than {} bytes", self.cap),
                            "data": {TOO_LARGE: total},
                        }});
                        self.out.extend_from_slice(error.to_string().as_bytes());
                        self.out.push(b'\n');
                    }
                }
            }
            self.line = 0;
            self.scan = Scan::default();
            bytes = &bytes[end + 1..];
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.at);
                buf.put_slice(&this.out[this.at..this.at + n]);
                this.at += n;
                if this.at == this.out.len() {
                    this.out.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = std::mem::take(&mut this.chunk);
            let mut read = ReadBuf::new(&mut chunk);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let n = read.filled().len();
            if let Poll::Ready(Ok(())) = polled {
                this.take(&chunk[..n]);
            }
            this.chunk = chunk;
            ready!(polled)?;
            if n == 0 {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

/// What a JSON-RPC message says at its top level, read a byte at a time as it passes:
/// its `id`, and whether it is a response (`result` or `error`, no `method`).
#[derive(Default)]
struct Scan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, the next string is a key.
    key_next: bool,
    in_key: bool,
    key: Vec<u8>,
    /// At depth 1, the value being read is the `id`'s.
    in_id: bool,
    id: Vec<u8>,
    response: bool,
    request: bool,
}

/// Bytes of an id kept: rmcp's ids are numbers.
const ID_BYTES: usize = 64;

impl Scan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.in_string {
                let closing = !self.escaped && b == b'"';
                self.escaped = !self.escaped && b == b'\\';
                if self.in_key {
                    if closing {
                        self.in_string = false;
                        self.in_key = false;
                        match &self.key[..] {
                            b"id" => {
                                self.in_id = true;
                                self.id.clear();
                            }
                            b"result" | b"error" => self.response = true,
                            b"method" => self.request = true,
                            _ => {}
                        }
                    } else if self.key.len() < 8 {
                        self.key.push(b);
                    }
                    continue;
                }
                if closing {
                    self.in_string = false;
                }
                if self.in_id && self.depth == 1 && self.id.len() < ID_BYTES {
                    self.id.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    if self.depth == 1 && self.key_next {
                        self.key_next = false;
                        self.in_key = true;
                        self.key.clear();
                    } else if self.in_id && self.depth == 1 && self.id.len() < ID_BYTES {
                        self.id.push(b);
                    }
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    self.key_next = self.depth == 1 && b == b'{';
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' if self.depth == 1 => {
                    self.key_next = true;
                    self.in_id = false;
                }
                b':' | b' ' | b'\t' | b'\r' => {}
                _ if self.in_id && self.depth == 1 && self.id.len() < ID_BYTES => self.id.push(b),
                _ => {}
            }
        }
    }

    /// The id of the response read, if it was one with an id (a number or a string).
    fn response_id(&self) -> Option<Value> {
        if !self.response || self.request {
            return None;
        }
        serde_json::from_slice::<Value>(&self.id)
            .ok()
            .filter(|id| id.is_number() || id.is_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: &[u8], cap: usize) -> String {
        let mut out = String::new();
        Capped::new(input, cap)
            .read_to_string(&mut out)
            .await
            .unwrap();
        out
    }

    #[tokio::test]
    async fn lines_within_the_cap_pass_whole() {
        let input = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n{\"a\":\"b\"}\npartial";
        assert_eq!(through(input.as_bytes(), 40).await, input);
    }

    #[tokio::test]
    async fn a_response_over_the_cap_becomes_an_error_for_its_request() {
        let big = "x".repeat(100);
        for line in [
            format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{{\"text\":\"{big}\"}}}}"),
            // The TypeScript SDK writes the id last.
            format!("{{\"result\":{{\"id\":3,\"t\":\"{big}\"}},\"jsonrpc\":\"2.0\",\"id\": 7}}"),
        ] {
            let input = format!("{line}\n{{\"id\":8,\"result\":1}}\n");
            let out = through(input.as_bytes(), 50).await;
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 3, "{out}");
            assert_eq!(lines[0], &line[..50]);
            let error: Value = serde_json::from_str(lines[1]).unwrap();
            assert_eq!(error["id"], 7);
            assert_eq!(
                error["error"]["message"],
                format!("answer of {} bytes, larger than 50 bytes", line.len())
            );
            let e: ErrorData = serde_json::from_value(error["error"].clone()).unwrap();
            assert_eq!(too_large(&e), Some(line.len() as u64));
            assert_eq!(lines[2], "{\"id\":8,\"result\":1}");
        }
    }

    #[tokio::test]
    async fn a_request_or_notification_over_the_cap_is_dropped() {
        let big = "x".repeat(100);
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"sampling/createMessage\",\"params\":\"{big}\"}}\n{{\"method\":\"n\",\"params\":\"{big}\"}}\n"
        );
        let out = through(input.as_bytes(), 50).await;
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(out.lines().all(|l| l.len() == 50 && !l.contains("error")));
    }
}
