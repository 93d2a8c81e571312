//! `hookgate bench`: hookgate's intake, duplicates, delivery, whole pipeline and verification
//! measured side by side with plain PostgreSQL inserts of the same rows (through sqlx and through
//! pgbench) and with minimal HTTP servers, in one run on one machine.
//!
//! Everything stays on loopback. The receiver, the workers and the minimal servers run as child
//! processes (so their CPU and memory are their own); the load generator, the baselines, the
//! destination and the verification loops run in this process.

mod args;
mod autovacuum;
mod background;
mod ceiling;
mod checkpoints;
mod cpu;
mod cpu_table;
mod deployment;
mod fields;
mod host;
mod intake;
mod load;
mod open_loop;
mod paired;
mod pgbench;
mod pipeline;
mod ports;
mod report;
mod requests;
mod retention;
mod rounds;
mod scrape;
mod search;
mod setup;
mod sink;
mod sql;
mod stats;
mod storage;
mod tenants;
mod verify;
mod wal;

pub use args::{BenchArgs, Phase};
pub use ports::free_port;

use anyhow::Context;
use report::{Report, Row};
use std::time::Duration;

/// The figures the targets are ratios of, when their phases ran in this invocation.
#[derive(Debug, Default)]
struct Anchors {
    /// sqlx baselines A (1 row/transaction) and B (50 rows/transaction), rows/s.
    baselines: Option<(f64, f64)>,
    /// pgbench, 1 row per transaction, rows/s.
    pgbench_one_row: Option<f64>,
    /// The pgbench that set it, which the intake runs again beside itself in pairs.
    pgbench: Option<std::path::PathBuf>,
    /// Requests/s of the HTTP ceiling, and which server set it.
    ceiling: Option<(f64, &'static str)>,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.serve_fixed {
        return ceiling::serve_fixed(addr).await;
    }
    args.check()?;
    if let Some(path) = &args.hookgate {
        anyhow::ensure!(
            path.is_file(),
            "--hookgate {}: no such file (the hookgate binary to measure)",
            path.display()
        );
    }
    let phase = |p: Phase| args.only.contains(&p);
    let mut report = Report::new(&args);
    if !args.only.iter().any(|p| p.needs_database()) {
        // Verification alone: no database to create, so none has to be running.
        verification(&args, &mut report)?;
        return finish(&args, &report);
    }
    let env = setup::Env::create(&args).await?;
    eprintln!(
        "bench: database {}, {} events of {} bytes, concurrency {} (open loops: up to {} connections)",
        crate::redact::redact_url(&env.url),
        args.events,
        args.body_bytes,
        args.concurrency,
        args.open_loop_connections
    );
    let rows = env.rows(0, args.events);
    let mut anchors = Anchors::default();

    if phase(Phase::Baselines) {
        eprintln!("bench: baseline A (one row per transaction)");
        env.reset().await?;
        let a = sql::per_row(&env.pool, &rows, args.concurrency).await?;
        report.push(Row::throughput("baseline A: 1 row/transaction", &a));
        eprintln!("bench: baseline B (50 rows per transaction)");
        env.reset().await?;
        let b = sql::batched(&env.pool, &rows, args.concurrency, 50).await?;
        report.push(Row::throughput("baseline B: 50 rows/transaction", &b));
        anchors.baselines = Some((a.rate(), b.rate()));
    }
    if phase(Phase::Pgbench)
        && let Some((rate, bin)) = pgbench_rows(&args, &env, &mut report).await?
    {
        anchors.pgbench_one_row = Some(rate);
        anchors.pgbench = Some(bin);
    }

    env.reset().await?;
    let sink = sink::Sink::start().await?;
    env.write_manifests(sink.url())?;
    if phase(Phase::Ceiling) {
        anchors.ceiling = Some(http_ceiling(&args, &env, &mut report).await?);
    }
    if phase(Phase::Intake) {
        intake::run(&args, &env, &anchors, &mut report).await?;
    } else if phase(Phase::Delivery) {
        // Delivery on its own: pending rows written straight to the inbox.
        sql::batched(&env.pool, &rows, args.concurrency, 50).await?;
    }

    if phase(Phase::Delivery) {
        env.analyze().await?;
        let pending = env.pending().await?;
        eprintln!("bench: worker delivery of {pending} events to a local sink");
        let workers = env.spawn_workers(args.worker_concurrency, None)?;
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
        if let Some(s) = storage::measure(&env.pool).await? {
            eprintln!(
                "bench: disk per stored event ({} events): {:.0} bytes as delivery left it, {:.0} compacted",
                s.events, s.as_left, s.compacted
            );
            report.figure(
                "disk per stored event, as delivery left it (bytes)",
                s.as_left,
            );
            report.figure("disk per stored event, compacted (bytes)", s.compacted);
        }
    }

    if phase(Phase::Pipeline) {
        pipeline::run(&args, &env, anchors.pgbench_one_row, &mut report).await?;
    }

    if phase(Phase::Tenants) {
        tenants::run(&args, &env, &mut report).await?;
    }

    if phase(Phase::Retention) {
        retention::run(args.retention_events, &env.pool, &mut report).await?;
    }

    if phase(Phase::Verify) {
        verification(&args, &mut report)?;
    }

    env.drop_database().await?;
    finish(&args, &report)
}

/// The verify phase: the verifiers and the body's fields against the bare primitives.
fn verification(args: &BenchArgs, report: &mut Report) -> anyhow::Result<()> {
    eprintln!("bench: verification");
    for v in verify::run(args.verify_divisor.max(1))? {
        report.push(Row::per_op(&v.name, &v.hookgate));
        report.push(Row::per_op(&v.baseline_name, &v.baseline));
        report.ratio_max(&v.ratio_name, v.ratio(), v.target);
        if let Some(floor) = &v.floor {
            report.push(Row::per_op(&floor.name, &floor.run));
            report.figure(&floor.ratio_name, floor.ratio(&v));
        }
    }
    Ok(())
}

/// Prints the report, and writes it as JSON when asked.
fn finish(args: &BenchArgs, report: &Report) -> anyhow::Result<()> {
    print!("{}", report.text());
    if let Some(path) = &args.json {
        std::fs::write(path, report.json())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// pgbench inserting the inbox row, 1 and 50 rows per transaction: rows/s of the first and the
/// pgbench that ran, or `None` (said in the report) when there is no pgbench to run.
async fn pgbench_rows(
    args: &BenchArgs,
    env: &setup::Env,
    report: &mut Report,
) -> anyhow::Result<Option<(f64, std::path::PathBuf)>> {
    let Some(bin) = pgbench::find(args.pgbench.as_deref()) else {
        report.note(format!(
            "pgbench not found ({}): its rows and the ratios to it are skipped",
            match &args.pgbench {
                Some(p) => format!("--pgbench {}", p.display()),
                None => "pg_config --bindir, /usr/lib/postgresql/*/bin, PATH".into(),
            }
        ));
        return Ok(None);
    };
    let body = requests::body(0, args.body_bytes);
    let mut one_row = 0.0;
    for (rows, name) in [
        (1, "pgbench: 1 row/transaction"),
        (50, "pgbench: 50 rows/transaction"),
    ] {
        eprintln!(
            "bench: {name} ({}), {} runs",
            bin.display(),
            args.pgbench_runs
        );
        let mut runs = Vec::new();
        for k in 0..args.pgbench_runs {
            env.reset().await?;
            let meter = wal::Meter::start_counting_flushes(&env.pool).await;
            let rate = pgbench::rows_per_second(
                &bin,
                &env.url,
                rows,
                args.concurrency,
                args.pgbench_run,
                &body,
            )
            .await?;
            let w = wal::measured(meter, &env.pool, Some(rows as f64)).await;
            report.wal(&format!("{name}, run {}", k + 1), w);
            runs.push(rate);
        }
        let rate = pgbench::median(&runs);
        if runs.len() > 1 {
            let each: Vec<String> = runs.iter().map(|r| format!("{r:.0}")).collect();
            report.note(format!(
                "{name}: runs {}/s, the median used",
                each.join(", ")
            ));
        }
        report.push(Row::rate(name, rate));
        if rows == 1 {
            one_row = rate;
        }
    }
    Ok(Some((one_row, bin)))
}

/// The intake's closed loop against a minimal hyper server and, when installed, nginx; the
/// ceiling is nginx's rate when it ran, else hyper's.
async fn http_ceiling(
    args: &BenchArgs,
    env: &setup::Env,
    report: &mut Report,
) -> anyhow::Result<(f64, &'static str)> {
    let requests = env.signed_requests(0, args.events)?;
    let warmup = env.signed_requests(10 * args.events, 1000)?;
    eprintln!("bench: HTTP ceiling, minimal hyper server");
    let hyper = ceiling::spawn_hyper(env)?;
    hyper.wait_ready().await?;
    let (h, split) = ceiling::closed_loop(
        hyper.addr,
        || vec![hyper.pid()],
        &warmup,
        &requests,
        args.concurrency,
        args.ceiling_run,
        "hyper",
    )
    .await?;
    hyper.stop();
    report.push(Row::throughput(ceiling::HYPER_ROW, &h));
    report.cpu(ceiling::HYPER_ROW, split);
    let Some(bin) = ceiling::find_nginx() else {
        report.note(
            "nginx not found (PATH, /usr/sbin): the HTTP ceiling is the hyper server's".into(),
        );
        return Ok((h.rate(), "hyper"));
    };
    eprintln!("bench: HTTP ceiling, nginx ({})", bin.display());
    let nginx = ceiling::Nginx::start(&bin).await?;
    let (n, split) = ceiling::closed_loop(
        nginx.addr,
        || nginx.pids(),
        &warmup,
        &requests,
        args.concurrency,
        args.ceiling_run,
        "nginx",
    )
    .await?;
    drop(nginx);
    report.push(Row::throughput(ceiling::NGINX_ROW, &n));
    report.cpu(ceiling::NGINX_ROW, split);
    Ok((n.rate(), "nginx"))
}
