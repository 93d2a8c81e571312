//! What the pipeline phase runs against: `hookgate standalone` with its workers in one process, as
//! a user first runs it, or the chart's split, a receiver without workers and a `hookgate worker`
//! process on the same database. A split receiver cannot hand an event to another process's
//! worker (the body is in its own memory), so every event is stored `pending` and claimed: the
//! figures show what the chart's topology costs on the same machine. `split-delivering` gives the
//! receiver workers of its own beside the worker process, as `receiver.workers.enabled` does.

use super::args::Topology;
use super::ports::free_port;
use super::scrape;
use super::setup::{Child, Env};
use std::net::SocketAddr;

/// The hookgate processes of one pipeline step; killed when dropped.
pub struct Deployment {
    receiver: Child,
    workers: Option<Child>,
}

impl Deployment {
    /// Started and listening; both processes serve their admin port for their counters.
    pub async fn start(env: &Env, topology: Topology, concurrency: usize) -> anyhow::Result<Self> {
        let out = match topology {
            Topology::Standalone => Self {
                receiver: env.spawn_standalone(concurrency)?,
                workers: None,
            },
            Topology::Split => Self {
                receiver: env.spawn_receiver(Some(free_port()?))?,
                workers: Some(env.spawn_workers(concurrency, Some(free_port()?))?),
            },
            Topology::SplitDelivering => Self {
                receiver: env.spawn_standalone(concurrency)?,
                workers: Some(env.spawn_workers(concurrency, Some(free_port()?))?),
            },
        };
        for child in out.children() {
            child.wait_ready().await?;
        }
        Ok(out)
    }

    /// Where the load is sent.
    pub fn addr(&self) -> SocketAddr {
        self.receiver.addr
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children().map(Child::pid).collect()
    }

    /// Events handed over at intake, the workers' claims, and the seconds and the number of the
    /// receiver's timed answers, summed over the processes; `None` when a counter cannot be read.
    pub async fn counted(&self) -> Option<[f64; 4]> {
        let mut sum = [0.0; 4];
        for child in self.children() {
            let names = [
                scrape::HANDED_OVER,
                scrape::CLAIMS,
                scrape::ANSWER_SECONDS,
                scrape::ANSWERS,
            ];
            let got = scrape::counters(child.admin?, names).await.ok()?;
            for (s, g) in sum.iter_mut().zip(got) {
                *s += g;
            }
        }
        Some(sum)
    }

    /// The receiver's timing of its 2xx answers and its transactions ([`scrape::timed`]);
    /// `None` when it cannot be read.
    pub async fn timed(&self) -> Option<[Vec<(f64, f64)>; 2]> {
        scrape::timed(self.receiver.admin?).await.ok()
    }

    /// The workers' timing of their claims and completion transactions, summed over the
    /// processes ([`scrape::workers_timed`]); `None` when one cannot be read.
    pub async fn workers_timed(&self) -> Option<[Vec<(f64, f64)>; 2]> {
        let mut sum: [Vec<(f64, f64)>; 2] = Default::default();
        for child in self.children() {
            let got = scrape::workers_timed(child.admin?).await.ok()?;
            for (s, g) in sum.iter_mut().zip(&got) {
                scrape::add_buckets(s, g);
            }
        }
        Some(sum)
    }

    pub fn stop(self) {
        self.receiver.stop();
        if let Some(w) = self.workers {
            w.stop();
        }
    }

    fn children(&self) -> impl Iterator<Item = &Child> {
        std::iter::once(&self.receiver).chain(self.workers.as_ref())
    }
}

impl Topology {
    /// How the bench's lines and tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Topology::Standalone => "standalone",
            Topology::Split => "split: receiver and worker processes",
            Topology::SplitDelivering => {
                "split-delivering: a receiver with workers, and a worker process"
            }
        }
    }

    /// `name` as the report gives it: the standalone rows keep the names earlier reports used,
    /// the others start with the topology's flag value.
    pub fn named(self, name: &str) -> String {
        match self {
            Topology::Standalone => name.to_string(),
            Topology::Split => format!("split {name}"),
            Topology::SplitDelivering => format!("split-delivering {name}"),
        }
    }
}
