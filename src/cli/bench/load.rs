//! The load generator (plain HTTP/1.1 keep-alive connections, requests signed beforehand so
//! that its own crypto is not measured) and the destination the workers deliver to.

use super::stats::Run;
use anyhow::{Context, bail};
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::http::{HeaderName, HeaderValue, Request};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// A signed request, ready to send as many times as needed.
pub struct Prepared {
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
}

/// What the receiver answered over one phase.
#[derive(Debug, Default)]
pub struct Outcome {
    pub run: Run,
    statuses: BTreeMap<u16, usize>,
    duplicates: usize,
    errors: Vec<String>,
}

impl Outcome {
    fn merge(&mut self, other: Outcome) {
        self.run.latencies.extend(other.run.latencies);
        self.run.count += other.run.count;
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.duplicates += other.duplicates;
        self.errors.extend(other.errors);
    }

    /// Fails the bench unless every request got `status` and was (or was not) a duplicate:
    /// figures from a run that lost or refused events would mean nothing.
    pub fn expect_all(&self, status: u16, duplicate: bool, phase: &str) -> anyhow::Result<()> {
        let ok = self.statuses.get(&status).copied().unwrap_or(0);
        let want_dups = if duplicate { self.run.count } else { 0 };
        if ok != self.run.count || self.duplicates != want_dups || !self.errors.is_empty() {
            bail!(
                "{phase}: {} requests, statuses {:?}, {} duplicates (expected {want_dups}), errors: {:?}",
                self.run.count,
                self.statuses,
                self.duplicates,
                self.errors.iter().take(3).collect::<Vec<_>>()
            );
        }
        Ok(())
    }
}

struct Conn {
    addr: SocketAddr,
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        Ok(Self { addr, sender })
    }

    /// Sends one request and reads the whole answer: (status, was it a duplicate).
    async fn send(&mut self, p: &Prepared) -> anyhow::Result<(u16, bool)> {
        if self.sender.ready().await.is_err() {
            *self = Conn::open(self.addr).await?;
        }
        let mut req = Request::post(p.path.as_str())
            .header("host", "127.0.0.1")
            .body(Full::new(p.body.clone()))?;
        for (k, v) in &p.headers {
            req.headers_mut().insert(k.clone(), v.clone());
        }
        let res = self.sender.send_request(req).await?;
        let status = res.status().as_u16();
        let body = res.into_body().collect().await?.to_bytes();
        let duplicate = body.windows(16).any(|w| w == b"\"duplicate\":true");
        Ok((status, duplicate))
    }
}

fn record(out: &mut Outcome, answer: anyhow::Result<(u16, bool)>, latency: Duration) {
    out.run.count += 1;
    match answer {
        Ok((status, dup)) => {
            out.run.latencies.push(latency);
            *out.statuses.entry(status).or_default() += 1;
            out.duplicates += dup as usize;
        }
        Err(e) => out.errors.push(e.to_string()),
    }
}

/// `concurrency` connections each send the next unsent request as soon as their previous one
/// was answered: the maximum rate.
pub async fn closed_loop(
    addr: SocketAddr,
    requests: &Arc<Vec<Prepared>>,
    concurrency: usize,
) -> anyhow::Result<Outcome> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (requests, next) = (requests.clone(), next.clone());
        let mut conn = Conn::open(addr)
            .await
            .context("connecting to the receiver")?;
        tasks.spawn(async move {
            let mut out = Outcome::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = requests.get(i) else { break };
                let t = Instant::now();
                let answer = conn.send(p).await;
                record(&mut out, answer, t.elapsed());
            }
            out
        });
    }
    collect(tasks, started).await
}

/// Requests leave on a fixed schedule (`rate` per second, spread over `concurrency`
/// connections) whether or not earlier ones were answered; latency counts from the scheduled
/// instant, so a stall shows up in the percentiles instead of hiding (no coordinated omission).
pub async fn open_loop(
    addr: SocketAddr,
    requests: &Arc<Vec<Prepared>>,
    concurrency: usize,
    rate: f64,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let t0 = tokio::time::Instant::now() + Duration::from_millis(50);
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..concurrency {
        let requests = requests.clone();
        let mut conn = Conn::open(addr)
            .await
            .context("connecting to the receiver")?;
        tasks.spawn(async move {
            let mut out = Outcome::default();
            for i in (k..requests.len()).step_by(concurrency) {
                let due = t0 + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due).await;
                let answer = conn.send(&requests[i]).await;
                record(&mut out, answer, due.elapsed());
            }
            out
        });
    }
    collect(tasks, started).await
}

async fn collect(
    mut tasks: tokio::task::JoinSet<Outcome>,
    started: Instant,
) -> anyhow::Result<Outcome> {
    let mut all = Outcome::default();
    while let Some(part) = tasks.join_next().await {
        all.merge(part?);
    }
    all.run.elapsed = started.elapsed();
    Ok(all)
}

/// A destination that answers 200 to everything and notes when deliveries arrive.
pub struct Sink {
    addr: SocketAddr,
    seen: Arc<std::sync::Mutex<Vec<Instant>>>,
}

impl Sink {
    pub async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let app = axum::Router::new().fallback({
            let seen = seen.clone();
            move || async move {
                seen.lock().expect("not poisoned").push(Instant::now());
                "ok"
            }
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { addr, seen })
    }

    pub fn url(&self) -> String {
        format!("http://{}/bench", self.addr)
    }

    /// Waits until `n` deliveries arrived; the rate runs from the first to the last of them.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> anyhow::Result<Run> {
        let deadline = Instant::now() + limit;
        loop {
            let seen = self.seen.lock().expect("not poisoned").clone();
            if seen.len() >= n {
                let (first, last) = (seen[0], seen[n - 1]);
                return Ok(Run {
                    count: n - 1,
                    elapsed: last - first,
                    latencies: Vec::new(),
                });
            }
            if Instant::now() > deadline {
                bail!(
                    "only {} of {n} deliveries arrived within {limit:?}",
                    seen.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
