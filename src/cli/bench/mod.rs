//! `hookgate bench`: hookgate's intake, duplicates, delivery and verification measured side by
//! side with plain PostgreSQL inserts of the same rows, in one run on one machine.
//!
//! Everything stays on loopback. The receiver and the workers run as child processes of this
//! binary (so their memory is their own); the load generator, the baselines, the destination and
//! the verification loops run in this process.

mod load;
mod setup;
mod sql;
mod stats;
mod verify;

use anyhow::Context;
use clap::Args;
use stats::{Report, Row};
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
    /// Events per phase (baselines, intake, duplicates).
    #[arg(long, default_value_t = 20_000)]
    pub events: usize,
    /// Concurrent clients (connections) for the baselines and the intake.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Size of each event body.
    #[arg(long, default_value_t = 1024)]
    pub body_bytes: usize,
    /// Length of the half-rate (latency) run.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub latency_run: Duration,
    /// Worker processes' delivery concurrency.
    #[arg(long, default_value_t = 32)]
    pub worker_concurrency: usize,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Divides the verification loops' iterations (for profiling under callgrind).
    #[arg(long, default_value_t = 1, hide = true)]
    pub verify_divisor: usize,
    /// Run only these phases (comma-separated); the ratios need baselines and intake together.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Phase::ALL)]
    pub only: Vec<Phase>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Plain PostgreSQL inserts: 1 and 50 rows per transaction.
    Baselines,
    /// The receiver: max rate, duplicates, half-rate latency, memory.
    Intake,
    /// Workers delivering everything pending to a local sink.
    Delivery,
    /// The verifier against the bare primitives.
    Verify,
}

impl Phase {
    const ALL: [Phase; 4] = [
        Phase::Baselines,
        Phase::Intake,
        Phase::Delivery,
        Phase::Verify,
    ];
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use clap::ValueEnum;
        f.write_str(
            self.to_possible_value()
                .expect("no skipped variants")
                .get_name(),
        )
    }
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.events >= 100, "--events must be at least 100");
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(args.body_bytes >= 128, "--body-bytes must be at least 128");
    let phase = |p: Phase| args.only.contains(&p);
    let mut report = Report::new(&args);
    let env = setup::Env::create(&args).await?;
    eprintln!(
        "bench: database {}, {} events of {} bytes, concurrency {}",
        crate::redact::redact_url(&env.url),
        args.events,
        args.body_bytes,
        args.concurrency
    );
    let rows = env.rows(0, args.events);

    let mut baselines = None;
    if phase(Phase::Baselines) {
        eprintln!("bench: baseline A (one row per transaction)");
        env.reset().await?;
        let a = sql::per_row(&env.pool, &rows, args.concurrency).await?;
        report.push(Row::throughput("baseline A: 1 row/transaction", &a));
        eprintln!("bench: baseline B (50 rows per transaction)");
        env.reset().await?;
        let b = sql::batched(&env.pool, &rows, args.concurrency, 50).await?;
        report.push(Row::throughput("baseline B: 50 rows/transaction", &b));
        baselines = Some((a.rate(), b.rate()));
    }

    env.reset().await?;
    let sink = load::Sink::start().await?;
    env.write_manifests(sink.url())?;
    if phase(Phase::Intake) {
        intake(&args, &env, baselines, &mut report).await?;
    } else if phase(Phase::Delivery) {
        // Delivery on its own: pending rows written straight to the inbox.
        sql::batched(&env.pool, &rows, args.concurrency, 50).await?;
    }

    if phase(Phase::Delivery) {
        env.analyze().await?;
        let pending = env.pending().await?;
        eprintln!("bench: worker delivery of {pending} events to a local sink");
        let workers = env.spawn_workers(args.worker_concurrency)?;
        let delivered = sink
            .wait_for(pending as usize, Duration::from_secs(120))
            .await
            .context("worker delivery")?;
        workers.stop();
        report.push(Row::throughput(
            "worker delivery to a local sink",
            &delivered,
        ));
        report.limit_min("worker delivery (events/s)", delivered.rate(), 5000.0);
    }

    if phase(Phase::Verify) {
        eprintln!("bench: verification");
        for v in verify::run(args.verify_divisor.max(1))? {
            report.push(Row::per_op(&v.name, &v.hookgate));
            report.push(Row::per_op(&v.baseline_name, &v.baseline));
            report.ratio_max(&v.ratio_name, v.ratio(), v.target);
        }
    }

    env.drop_database().await?;
    print!("{}", report.text());
    if let Some(path) = &args.json {
        std::fs::write(path, report.json())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// The receiver as a child process: max rate, duplicates, half-rate latency and its memory.
async fn intake(
    args: &BenchArgs,
    env: &setup::Env,
    baselines: Option<(f64, f64)>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let receiver = env.spawn_receiver()?;
    receiver.wait_ready().await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = receiver.rss_kib()?;

    eprintln!("bench: hookgate intake, closed loop");
    let requests = env.signed_requests(0, args.events)?;
    let warmup = env.signed_requests(10 * args.events, 1000)?;
    load::closed_loop(receiver.addr, &warmup, args.concurrency).await?;
    let max = load::closed_loop(receiver.addr, &requests, args.concurrency).await?;
    max.expect_all(200, false, "intake")?;
    report.push(Row::throughput(
        "hookgate intake (HTTP, verify, commit)",
        &max.run,
    ));
    if let Some((a, b)) = baselines {
        report.ratio("intake / baseline A", max.run.rate() / a, 1.5);
        report.ratio("intake / baseline B", max.run.rate() / b, 0.5);
    }

    eprintln!("bench: duplicates");
    let dups = load::closed_loop(receiver.addr, &requests, args.concurrency).await?;
    dups.expect_all(200, true, "duplicates")?;
    report.push(Row::throughput(
        "duplicates (re-sent accepted events)",
        &dups.run,
    ));
    report.limit("duplicate p99 (ms)", dups.run.p99_ms(), 5.0);

    let half = max.run.rate() / 2.0;
    let n = ((half * args.latency_run.as_secs_f64()) as usize).max(100);
    eprintln!("bench: intake at half the maximum rate ({half:.0}/s) for {n} events");
    let paced = env.signed_requests(20 * args.events, n)?;
    let steady = load::open_loop(receiver.addr, &paced, args.concurrency, half).await?;
    steady.expect_all(200, false, "half-rate intake")?;
    report.push(Row::throughput(
        "intake at half the max rate (open loop)",
        &steady.run,
    ));
    report.limit("intake p99 at half rate (ms)", steady.run.p99_ms(), 25.0);
    let peak_rss = receiver.peak_rss_kib()?;
    report.limit("receiver RSS idle (MiB)", idle_rss as f64 / 1024.0, 40.0);
    report.limit(
        "receiver peak RSS under load (MiB)",
        peak_rss as f64 / 1024.0,
        150.0,
    );
    receiver.stop();
    Ok(())
}
