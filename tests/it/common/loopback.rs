//! The receiver served on 127.0.0.1:0 through the real listener (`hookgate::http::listener`, hyper's
//! HTTP/1.1 parser), and a raw TCP client that writes exact bytes, for tests whose point is what
//! crosses the wire rather than what `Router::oneshot` is handed.

use hookgate::http::listener::Limits;
use hookgate::receiver::Receiver;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A receiver listening on loopback; it stops when this is dropped.
pub struct Served {
    pub addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Served {
    /// Serves `receiver`'s router with the production listener limits.
    pub async fn start(receiver: &Receiver) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(hookgate::http::listener::serve(
            listener,
            receiver.router(),
            Limits::default(),
            async {
                let _ = stopped.await;
            },
        ));
        Self { addr, _stop: stop }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs `body` with `headers` through reqwest (hyper's client): status and JSON body.
    pub async fn post(
        &self,
        path: &str,
        headers: &[(String, String)],
        body: impl Into<Vec<u8>>,
    ) -> (u16, Value) {
        let mut req = reqwest::Client::new()
            .post(self.url(path))
            .body(body.into());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let res = req.send().await.expect("the receiver answers");
        let status = res.status().as_u16();
        let bytes = res.bytes().await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// An answer read off the socket as bytes.
#[derive(Debug)]
pub struct RawReply {
    pub status: u16,
    /// The status line and headers, lower-cased.
    pub head: String,
    pub body: Vec<u8>,
}

impl RawReply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// Writes `request` on a fresh connection exactly as given, half-closes when `eof` is set, then
/// reads one response. Bounded: a server that neither answers nor closes fails the test.
pub async fn raw(addr: SocketAddr, request: &[u8], eof: bool) -> RawReply {
    try_raw(addr, request, eof)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// [`raw`], with a missing or unreadable answer as an error to report.
pub async fn try_raw(addr: SocketAddr, request: &[u8], eof: bool) -> Result<RawReply, String> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The server may answer and close before it has read everything (a body over the cap); the
    // answer is what is being tested, so a failed write is not an error here.
    let _ = stream.write_all(request).await;
    if eof {
        let _ = stream.shutdown().await;
    }
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if complete(&buf) {
                break;
            }
        }
    })
    .await;
    if read.is_err() {
        return Err("no answer within 30 s".into());
    }
    parse(&buf).ok_or_else(|| format!("not an HTTP response: {:?}", String::from_utf8_lossy(&buf)))
}

/// Whether `buf` holds a whole response with a Content-Length body.
fn complete(buf: &[u8]) -> bool {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    head.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .is_some_and(|len| buf.len() >= end + 4 + len)
}

fn parse(buf: &[u8]) -> Option<RawReply> {
    let end = find(buf, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(RawReply {
        status,
        head,
        body: buf[end + 4..].to_vec(),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
