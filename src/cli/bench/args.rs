//! `hookgate bench`'s flags and phases.

use crate::cli::args::bounds::{Span, count};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// A PostgreSQL server the bench may create and drop the `hookgate_bench` database on.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub database_url: String,
    /// Events per phase (baselines, intake, duplicates; the HTTP ceiling cycles through them).
    #[arg(long, default_value_t = 20_000)]
    pub events: usize,
    /// Concurrent clients (connections) for the baselines, pgbench, the intake and the pipeline's
    /// closed loops.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// The most connections an open loop (the half-rate intake, the pipeline steps) opens as its
    /// schedule needs them; by default the receiver's in-flight limit, above which it sheds load.
    #[arg(long, default_value_t = crate::http::listener::MAX_IN_FLIGHT)]
    pub open_loop_connections: usize,
    /// Size of each event body.
    #[arg(long, default_value_t = 1024)]
    pub body_bytes: usize,
    /// Length of the half-rate (latency) run.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub latency_run: Duration,
    /// Worker processes' delivery concurrency (delivery and pipeline phases); by default the
    /// workers' own default, as a user first runs them.
    #[arg(long, default_value_t = crate::worker::defaults::CONCURRENCY)]
    pub worker_concurrency: usize,
    /// Length of each pgbench run (`pgbench -T`).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub pgbench_run: Duration,
    /// pgbench runs per setting; the median is the anchor the ratios use.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=15))]
    pub pgbench_runs: u32,
    /// The pgbench binary; by default `pg_config --bindir`, then /usr/lib/postgresql/*/bin, then PATH.
    #[arg(long)]
    pub pgbench: Option<PathBuf>,
    /// Length of each HTTP-ceiling run (the intake's requests, sent round and round).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub ceiling_run: Duration,
    /// Length of the pipeline's closed loop and of each of its steps (an open loop at one rate).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub pipeline_secs: Duration,
    /// Pipeline steps (rates tried) in the search for the highest sustainable rate.
    #[arg(long, default_value_t = 5)]
    pub pipeline_steps: usize,
    /// The pipeline's first rate (events/s); by default the rate the workers delivered during
    /// the closed-loop run with the receiver beside them.
    #[arg(long)]
    pub pipeline_start: Option<f64>,
    /// What the pipeline phase runs: `standalone` (receiver and workers in one process, as a user
    /// first runs it), `split` (a receiver and a worker process on one database, as the chart
    /// deploys them) or `split-delivering` (the same with a receiver that delivers too).
    #[arg(long, value_enum, default_value_t = Topology::Standalone)]
    pub pipeline_topology: Topology,
    /// How long the tenants phase's burst takes to deliver: its destination answers each event
    /// after `--worker-concurrency` times this divided by `--events`.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    pub tenants_backlog: Duration,
    /// What the tenants phase runs, as `--pipeline-topology` for the pipeline: in `split` every
    /// event is stored for a claim, as in the chart's default.
    #[arg(long, value_enum, default_value_t = Topology::Standalone)]
    pub tenants_topology: Topology,
    /// Finished events the retention phase's smaller inbox keeps (the larger keeps four times as
    /// many).
    #[arg(long, default_value_t = 500_000)]
    pub retention_events: u64,
    /// The hookgate binary the bench starts as receiver and workers; by default itself. With
    /// another build here, two builds are compared under the same load generator and sink.
    #[arg(long, value_name = "PATH")]
    pub hookgate: Option<PathBuf>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Divides the verification loops' iterations (for profiling under callgrind).
    #[arg(long, default_value_t = 1, hide = true)]
    pub verify_divisor: usize,
    /// Serve the fixed 200 of the HTTP-ceiling phase on this address and do nothing else: the
    /// bench starts itself this way, so that the minimal server has a process of its own.
    #[arg(long, hide = true)]
    pub serve_fixed: Option<SocketAddr>,
    /// Run only these phases (comma-separated); a ratio is checked only when both of its sides
    /// ran in the same invocation.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Phase::ALL)]
    pub only: Vec<Phase>,
}

const RUN: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(60 * 60));
/// The bench signs a phase's requests before it sends them: they must fit in memory.
const MAX_SIGNED_BYTES: usize = 2 << 30;

impl BenchArgs {
    /// Every flag in its range, before anything connects or runs. Past these the bench panicked
    /// on allocation (`--events`, `--body-bytes`), opened connections without end
    /// (`--concurrency`) or had no schedule (`--pipeline-start inf`).
    pub fn check(&self) -> anyhow::Result<()> {
        let body_max = crate::crd::defaults::MAX_BODY_BYTES as usize;
        count("--events", self.events, 100, 1_000_000)?;
        count("--body-bytes", self.body_bytes, 128, body_max)?;
        anyhow::ensure!(
            self.events * self.body_bytes <= MAX_SIGNED_BYTES,
            "--events times --body-bytes must be at most 2 GiB: the bench signs a phase's \
             requests beforehand"
        );
        let receiver = crate::http::listener::MAX_CONNECTIONS;
        count("--concurrency", self.concurrency, 1, receiver)?;
        count(
            "--open-loop-connections",
            self.open_loop_connections,
            1,
            receiver,
        )?;
        let workers = crate::worker::defaults::MAX_CONCURRENCY;
        count("--worker-concurrency", self.worker_concurrency, 1, workers)?;
        count("--pipeline-steps", self.pipeline_steps, 1, 100)?;
        count(
            "--retention-events",
            usize::try_from(self.retention_events).unwrap_or(usize::MAX),
            1000,
            100_000_000,
        )?;
        for (flag, value) in [
            ("--latency-run", self.latency_run),
            ("--pgbench-run", self.pgbench_run),
            ("--ceiling-run", self.ceiling_run),
            ("--pipeline-secs", self.pipeline_secs),
            ("--tenants-backlog", self.tenants_backlog),
        ] {
            Span::new(flag, RUN.0, RUN.1).check(value)?;
        }
        if let Some(rate) = self.pipeline_start {
            anyhow::ensure!(
                (1.0..=1_000_000.0).contains(&rate),
                "--pipeline-start must be from 1 to 1000000 events/s, got {rate}"
            );
        }
        Ok(())
    }
}

/// How the pipeline and tenants phases deploy receiver and workers.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// `hookgate standalone`: one process, which hands new events to its own workers.
    Standalone,
    /// `hookgate standalone --no-workers` and `hookgate worker`: every event is claimed.
    Split,
    /// `hookgate standalone` (a receiver that delivers, like `receiver --with-workers`) and
    /// `hookgate worker`: the chart with `receiver.workers.enabled`.
    SplitDelivering,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Plain PostgreSQL inserts through sqlx: 1 and 50 rows per transaction.
    Baselines,
    /// The same rows inserted by PostgreSQL's own pgbench: 1 and 50 rows per transaction.
    Pgbench,
    /// The intake's load generator against minimal servers answering a fixed 200.
    Ceiling,
    /// The receiver: max rate, duplicates, half-rate latency, memory.
    Intake,
    /// Workers delivering everything pending to a local sink.
    Delivery,
    /// Receiver and workers together: closed loop, then the highest sustainable open-loop rate.
    Pipeline,
    /// One integration's backlog beside another integration's trickle: how long the trickle's
    /// events wait.
    Tenants,
    /// A retention pass on an inbox keeping `--retention-events` finished events and on one
    /// keeping four times as many, the same work due in both.
    Retention,
    /// The verifier against the bare primitives.
    Verify,
}

impl Phase {
    /// Whether the phase reads or writes the bench's database: every phase but verification,
    /// which runs in the bench's own process on bytes in memory.
    pub fn needs_database(self) -> bool {
        self != Phase::Verify
    }

    pub const ALL: [Phase; 9] = [
        Phase::Baselines,
        Phase::Pgbench,
        Phase::Ceiling,
        Phase::Intake,
        Phase::Delivery,
        Phase::Pipeline,
        Phase::Tenants,
        Phase::Retention,
        Phase::Verify,
    ];
}

/// The flag's value, as clap reads it.
fn flag_value(value: &impl clap::ValueEnum, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(
        value
            .to_possible_value()
            .expect("no skipped variants")
            .get_name(),
    )
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        flag_value(self, f)
    }
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        flag_value(self, f)
    }
}
