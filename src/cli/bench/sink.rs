//! The destinations the workers deliver to, in the bench's own process: they answer 200 to
//! everything, at once so that delivery is measured, not the destination (or, for the tenants
//! phase's burst, after a set delay, as a destination with work to do would).

use super::stats::Run;
use anyhow::bail;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

async fn serve(app: axum::Router) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}/bench")
}

/// A destination that answers 200 to everything and notes when deliveries arrive.
pub struct Sink {
    addr: SocketAddr,
    seen: Arc<std::sync::Mutex<Vec<Instant>>>,
}

impl Sink {
    pub async fn start() -> anyhow::Result<Self> {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let app = axum::Router::new().fallback({
            let seen = seen.clone();
            move || async move {
                seen.lock().expect("not poisoned").push(Instant::now());
                "ok"
            }
        });
        Ok(Self {
            addr: serve(app).await?,
            seen,
        })
    }

    pub fn url(&self) -> String {
        url(self.addr)
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

/// A destination that only counts deliveries: the pipeline's minute-long runs deliver too many
/// events to keep an instant for each.
pub struct Counter {
    addr: SocketAddr,
    count: Arc<AtomicUsize>,
}

impl Counter {
    pub async fn start() -> anyhow::Result<Self> {
        Self::answering_after(Duration::ZERO).await
    }

    /// A counter that answers each delivery `delay` after it arrived (counted when answered).
    pub async fn answering_after(delay: Duration) -> anyhow::Result<Self> {
        let count = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new().fallback({
            let count = count.clone();
            move || async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                count.fetch_add(1, Ordering::Relaxed);
                "ok"
            }
        });
        Ok(Self {
            addr: serve(app).await?,
            count,
        })
    }

    pub fn url(&self) -> String {
        url(self.addr)
    }

    /// Deliveries so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Waits until `n` deliveries arrived in all.
    pub async fn wait_for(&self, n: usize, limit: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + limit;
        while self.count() < n {
            if Instant::now() > deadline {
                bail!(
                    "only {} of {n} deliveries arrived within {limit:?}",
                    self.count()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}
