//! The load generator: plain HTTP/1.1 keep-alive connections, requests signed before they are
//! due so that its own crypto is not measured. The same generator drives the receiver, the
//! pipeline and the minimal servers of the HTTP ceiling. Closed loops are here; the open loop,
//! which sends on a schedule, is in `open_loop`.

use super::requests::Source;
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
#[derive(Clone)]
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
    // Set by the open loop once it ends; the parts merged into it carry answers only.
    /// Requests an open loop never sent: it fell too far behind their schedule and stopped.
    pub(super) unsent: usize,
    /// Whether an open loop stopped so.
    pub(super) stopped: bool,
    /// The most connections an open loop had open at once.
    pub(super) connections: usize,
    /// An open loop's requests: how late each left, from its scheduled instant to the moment it
    /// was handed to its connection (a wait for a free connection, one opened, the load
    /// generator's own delay). The rest of its latency was spent after it left.
    pub(super) sent_late: Vec<Duration>,
    /// An open loop's requests that found every connection busy at the cap and waited for one
    /// to come back, and how long the loop spent so waiting. That wait makes the requests due
    /// meanwhile late too; lateness beyond it is the load generator's own (opening connections,
    /// its tasks waiting for a core).
    pub(super) at_cap: usize,
    pub(super) blocked_at_cap: Duration,
}

impl Outcome {
    pub(super) fn merge(&mut self, other: Outcome) {
        self.run.latencies.extend(other.run.latencies);
        self.sent_late.extend(other.sent_late);
        self.run.count += other.run.count;
        for (s, n) in other.statuses {
            *self.statuses.entry(s).or_default() += n;
        }
        self.duplicates += other.duplicates;
        self.errors.extend(other.errors);
    }

    /// Requests answered `status` and not as duplicates.
    pub fn fresh(&self, status: u16) -> usize {
        self.statuses
            .get(&status)
            .copied()
            .unwrap_or(0)
            .saturating_sub(self.duplicates)
    }

    /// Requests that did not get `200 {"duplicate":false}`: refused, failed, or never sent.
    pub fn not_accepted(&self) -> usize {
        self.run.count + self.unsent - self.fresh(200)
    }

    /// Whether an open loop stopped sending, too far behind its schedule: the accepted rate then
    /// counts a part of the run in which nothing was sent, whatever the receiver could take.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The most connections an open loop had open at once: the requests the offered rate kept in
    /// flight (rate times answer time, at most the cap).
    pub fn connections(&self) -> usize {
        self.connections
    }

    /// The p99 of how late an open loop's requests left ([`Outcome::sent_late`]), in ms; `None`
    /// for a closed loop.
    pub fn sent_late_p99_ms(&self) -> Option<f64> {
        (!self.sent_late.is_empty()).then(|| {
            Run {
                latencies: self.sent_late.clone(),
                ..Run::default()
            }
            .p99_ms()
        })
    }

    /// The share of an open loop's requests sent that waited for a connection at the cap, and
    /// the share of its run the loop spent waiting so, in percent; `None` for a closed loop or a
    /// loop that sent nothing.
    pub fn at_cap_pct(&self) -> Option<(f64, f64)> {
        let run = self.run.elapsed.as_secs_f64();
        (!self.sent_late.is_empty() && run > 0.0).then(|| {
            (
                100.0 * self.at_cap as f64 / self.sent_late.len() as f64,
                100.0 * self.blocked_at_cap.as_secs_f64() / run,
            )
        })
    }

    /// Fails the bench unless every request got `status` and was (or was not) a duplicate:
    /// figures from a run that lost or refused events would mean nothing.
    pub fn expect_all(&self, status: u16, duplicate: bool, phase: &str) -> anyhow::Result<()> {
        let ok = self.statuses.get(&status).copied().unwrap_or(0);
        let want_dups = if duplicate { self.run.count } else { 0 };
        if ok != self.run.count
            || self.duplicates != want_dups
            || !self.errors.is_empty()
            || self.unsent > 0
        {
            bail!(
                "{phase}: {} requests, statuses {:?}, {} duplicates (expected {want_dups}), {} not sent, errors: {:?}",
                self.run.count,
                self.statuses,
                self.duplicates,
                self.unsent,
                self.errors.iter().take(3).collect::<Vec<_>>()
            );
        }
        Ok(())
    }
}

pub(super) struct Conn {
    addr: SocketAddr,
    sender: http1::SendRequest<Full<Bytes>>,
}

impl Conn {
    pub(super) async fn open(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        Ok(Self { addr, sender })
    }

    /// Sends one request and reads the whole answer: (status, was it a duplicate).
    pub(super) async fn send(&mut self, p: &Prepared) -> anyhow::Result<(u16, bool)> {
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

pub(super) fn record(out: &mut Outcome, answer: anyhow::Result<(u16, bool)>, latency: Duration) {
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
pub async fn closed_loop<S: Source>(
    addr: SocketAddr,
    requests: &Arc<S>,
    concurrency: usize,
) -> anyhow::Result<Outcome> {
    closed_loop_for(addr, requests, concurrency, None).await
}

/// [`closed_loop`] that also stops sending once `limit` has passed.
pub async fn closed_loop_for<S: Source>(
    addr: SocketAddr,
    requests: &Arc<S>,
    concurrency: usize,
    limit: Option<Duration>,
) -> anyhow::Result<Outcome> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = limit.map(|l| started + l);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (requests, next) = (requests.clone(), next.clone());
        let mut conn = Conn::open(addr)
            .await
            .context("connecting to the receiver")?;
        tasks.spawn(async move {
            let mut out = Outcome::default();
            while deadline.is_none_or(|d| Instant::now() < d) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests.count() {
                    break;
                }
                let p = requests.request(i);
                let t = Instant::now();
                let answer = conn.send(&p).await;
                record(&mut out, answer, t.elapsed());
            }
            out
        });
    }
    collect(tasks, started).await
}

pub(super) async fn collect(
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
