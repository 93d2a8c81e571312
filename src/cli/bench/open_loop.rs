//! The open loop: requests leave on a fixed schedule whether or not earlier ones were answered,
//! and latency counts from each request's scheduled instant, so that a stall shows up in the
//! percentiles instead of hiding (no coordinated omission).
//!
//! A due request takes an idle connection, or opens a new one while fewer than the cap are open.
//! HTTP/1.1 carries one request at a time per connection, so a fixed set of connections would
//! hold the schedule back as soon as the answers took longer than connections / rate (3.2 ms for
//! 32 connections at 10,000/s): the load would turn closed. Opening connections as they are needed
//! keeps rate × answer time in flight, as many independent senders would. At the cap a request
//! waits for the first connection to come back, late, and its lateness counts in its latency.

use super::load::{Conn, Outcome, collect, record};
use super::requests::Source;
use anyhow::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// When an open loop's requests are due.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Requests per second.
    pub rate: f64,
    /// Request 0 is due now; request `i` at `start + i / rate`.
    pub start: tokio::time::Instant,
    /// The loop stops once a request is this far behind its schedule, and counts the rest as not
    /// sent, so that an offered rate far above capacity ends in bounded time.
    pub give_up: Option<Duration>,
}

impl Pace {
    /// `rate` per second from 50 ms from now (time to spread the first requests), never given up.
    pub fn from_now(rate: f64) -> Self {
        Self {
            rate,
            start: tokio::time::Instant::now() + Duration::from_millis(50),
            give_up: None,
        }
    }

    pub fn due(&self, i: usize) -> tokio::time::Instant {
        self.start + Duration::from_secs_f64(i as f64 / self.rate)
    }
}

/// Sends every request of `requests` at its instant of `pace`, over at most `max_connections`
/// connections opened as the load needs them.
pub async fn open_loop<S: Source>(
    addr: SocketAddr,
    requests: &Arc<S>,
    max_connections: usize,
    pace: Pace,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let count = requests.count();
    // Connections come back here once answered; the loop holds a sender, so `recv` only ends
    // by its timeout.
    let (idle_tx, mut idle_rx) = mpsc::unbounded_channel::<Conn>();
    let mut tasks = tokio::task::JoinSet::new();
    let mut out = Outcome::default();
    let mut open = 0;
    let (mut unsent, mut stopped) = (0, false);
    for i in 0..count {
        // Prepared (and, for a lazy source, signed) before its instant, not on the clock.
        let request = requests.request(i).into_owned();
        let due = pace.due(i);
        tokio::time::sleep_until(due).await;
        let conn = if pace.give_up.is_some_and(|g| due.elapsed() > g) {
            None
        } else {
            match idle_rx.try_recv() {
                Ok(conn) => Some(Take::Idle(conn)),
                Err(_) if open < max_connections => {
                    open += 1;
                    Some(Take::Open)
                }
                // At the cap: the first connection to come back, unless it is too late by then.
                Err(_) => {
                    let waiting = Instant::now();
                    let conn = match pace.give_up {
                        Some(g) => tokio::time::timeout_at(due + g, idle_rx.recv())
                            .await
                            .ok()
                            .flatten(),
                        None => idle_rx.recv().await,
                    };
                    out.at_cap += usize::from(conn.is_some());
                    out.blocked_at_cap += waiting.elapsed();
                    conn.map(Take::Idle)
                }
            }
        };
        let Some(conn) = conn else {
            (unsent, stopped) = (count - i, true);
            break;
        };
        while let Some(done) = tasks.try_join_next() {
            out.merge(done?);
        }
        let idle = idle_tx.clone();
        tasks.spawn(async move {
            let mut part = Outcome::default();
            let conn = match conn {
                Take::Idle(conn) => Ok(conn),
                Take::Open => Conn::open(addr).await.context("connecting to the receiver"),
            };
            match conn {
                Ok(mut conn) => {
                    part.sent_late.push(due.elapsed());
                    let answer = conn.send(&request).await;
                    record(&mut part, answer, due.elapsed());
                    let _ = idle.send(conn);
                }
                Err(e) => record(&mut part, Err(e), due.elapsed()),
            }
            part
        });
    }
    out.merge(collect(tasks, started).await?);
    out.run.elapsed = started.elapsed();
    (out.unsent, out.stopped, out.connections) = (unsent, stopped, open);
    Ok(out)
}

/// The connection a due request is sent on.
enum Take {
    Idle(Conn),
    Open,
}

#[cfg(test)]
mod tests {
    use super::{Pace, open_loop};
    use crate::cli::bench::load::Prepared;
    use axum::body::Bytes;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    /// A server that answers every request `{}` after `delay`.
    async fn slow_server(delay: Duration) -> SocketAddr {
        let app = axum::Router::new().fallback(move || async move {
            tokio::time::sleep(delay).await;
            "{}"
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    fn requests(n: usize) -> Arc<Vec<Prepared>> {
        let request = Prepared {
            path: "/".into(),
            headers: Vec::new(),
            body: Bytes::from_static(b"{}"),
        };
        Arc::new(vec![request; n])
    }

    /// Answers after 2 s, 1,000 requests/s, two connections, giving up 1 s behind: the first two
    /// requests are sent, the third waits for a connection past the give-up, and the loop stops.
    #[tokio::test]
    async fn an_open_loop_stops_once_it_is_too_far_behind_its_schedule() {
        let addr = slow_server(Duration::from_secs(2)).await;
        let pace = Pace {
            give_up: Some(Duration::from_secs(1)),
            ..Pace::from_now(1000.0)
        };
        let out = open_loop(addr, &requests(100), 2, pace).await.unwrap();
        assert!(out.stopped(), "{out:?}");
        assert_eq!(out.run.count, 2, "one request per connection was sent");
        assert_eq!(out.not_accepted(), 98, "the other 98 were never sent");
        assert_eq!(out.connections(), 2);
    }

    /// Answers after 100 ms at 200 requests/s keep about 20 in flight: the loop opens that many
    /// connections rather than holding the schedule back, and stays under its cap.
    #[tokio::test]
    async fn slow_answers_open_more_connections_up_to_the_cap() {
        let addr = slow_server(Duration::from_millis(100)).await;
        let out = open_loop(addr, &requests(100), 64, Pace::from_now(200.0))
            .await
            .unwrap();
        assert_eq!(out.fresh(200), 100, "{out:?}");
        assert!(!out.stopped());
        assert!(
            (10..64).contains(&out.connections()),
            "{} connections for ~20 in flight",
            out.connections()
        );
        // Each request spent the server's 100 ms after it left: its lateness at leaving holds
        // none of that, whatever the machine's speed.
        let late = out.sent_late_p99_ms().unwrap();
        assert!(out.run.p99_ms() >= late + 100.0, "{late} ms late: {out:?}");
        // Below the cap no request waited for a connection: whatever lateness there was is the
        // load generator's own.
        assert_eq!(out.at_cap_pct(), Some((0.0, 0.0)), "{out:?}");
    }

    /// At the cap a due request waits for a connection, and the wait counts in its latency and in
    /// how late it left: four connections answering in 100 ms carry 40 requests in ten rounds,
    /// about a second, although the last was due 195 ms after the first.
    #[tokio::test]
    async fn at_the_cap_requests_wait_and_their_lateness_is_measured() {
        let addr = slow_server(Duration::from_millis(100)).await;
        let out = open_loop(addr, &requests(40), 4, Pace::from_now(200.0))
            .await
            .unwrap();
        assert_eq!(out.fresh(200), 40, "{out:?}");
        assert_eq!(out.connections(), 4);
        let slowest = out.run.latencies.iter().max().copied().unwrap();
        assert!(slowest >= Duration::from_millis(600), "{slowest:?}");
        // That wait was before the last requests left: they were late by it when sent.
        let late = out.sent_late_p99_ms().unwrap();
        assert!(late >= 600.0, "{late} ms");
        // And it is counted as a wait at the cap: each of the nine rounds after the first begins
        // with a request that finds every connection busy (the rest of a round may find one
        // just come back: the four return within moments of each other, and which of them the
        // loop sees first is the scheduler's), and the loop spent most of the run waiting.
        let (waited, blocked) = out.at_cap_pct().unwrap();
        assert!(out.at_cap >= 9 && waited >= 22.5, "{out:?}");
        assert!(blocked >= 50.0, "blocked {blocked}% of the run");
    }
}
