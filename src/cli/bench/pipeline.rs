//! The pipeline: `hookgate standalone` with its workers, as a user first runs it (or, with
//! `--pipeline-topology split`, a receiver and a worker process as the chart deploys them),
//! delivering to a sink that answers at once. First a closed loop (the receiver as fast as it answers, the workers
//! delivering beside it), then open loops at fixed rates searching for the highest rate the whole
//! product sustains: every event accepted, the backlog at the end under one second of traffic,
//! and completion latency p99 (scheduled send → `processed_at`) within a second.
//!
//! Latency counts from the instant each request was scheduled, not from its signed timestamp:
//! Stripe signs whole seconds, too coarse for a one-second target. Every step starts from an
//! empty inbox and a fresh process, so that no step inherits the last one's backlog.

use super::BenchArgs;
use super::args::Topology;
use super::autovacuum;
use super::cpu;
use super::deployment::Deployment;
use super::load;
use super::open_loop::{self, Pace};
use super::report::{Report, Row};
use super::requests;
use super::scrape;
use super::search::{self, LATENCY_LIMIT, Step};
use super::setup::Env;
use super::sink::Counter;
use super::stats::Run;
use super::wal;
use anyhow::Context;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

/// Warm-up events (pool connections opened, first claims made) get ids far from the measured ones.
pub(super) const WARMUP_FROM: usize = 900_000_000;
/// A connection this far behind its schedule stops sending: the step has failed by then.
const GIVE_UP: Duration = Duration::from_secs(5);

/// `anchor`: pgbench's one row per transaction, when it ran, for the target's ratio.
pub async fn run(
    args: &BenchArgs,
    env: &Env,
    anchor: Option<f64>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let sink = Counter::start().await?;
    env.write_manifests(sink.url())?;

    let topology = args.pipeline_topology;
    eprintln!(
        "bench: receiver + workers ({}), closed loop",
        topology.label()
    );
    let (intake, delivered) = closed_loop(args, env, &sink).await?;
    report.push(Row::throughput(
        &topology.named("receiver + workers: intake (closed loop)"),
        &intake,
    ));
    report.push(Row::rate(
        &topology.named("receiver + workers: delivered during it"),
        delivered,
    ));

    // The closed loop's delivery rate is what the workers managed while the receiver took all
    // it could: a fair first guess at what the two sustain together. A closed loop shorter than
    // the workers' idle poll may see no delivery at all; half its intake is the guess then.
    let guess = if delivered > 0.0 {
        delivered
    } else {
        intake.rate() / 2.0
    };
    let start = args.pipeline_start.unwrap_or(guess).max(1.0);
    let (mut tried, mut steps) = (Vec::new(), Vec::new());
    for k in 1..=args.pipeline_steps {
        let rate = search::next_rate(start, &tried);
        eprintln!(
            "bench: pipeline step {k}/{}: {rate:.0} events/s for {:?}",
            args.pipeline_steps, args.pipeline_secs
        );
        let s = step(args, env, &sink, rate).await?;
        eprintln!("bench:   {}", line(k, &s));
        tried.push((rate, s.sustainable));
        steps.push(s);
    }
    let best = search::best(&tried);
    report.push(Row::rate(
        &topology.named("pipeline: highest sustainable rate"),
        best.unwrap_or(0.0),
    ));
    if best.is_none() && !tried.is_empty() {
        report.note(format!(
            "{}: none of the {} rates tried was sustainable (lowest {:.0}/s)",
            topology.named("pipeline"),
            tried.len(),
            tried.iter().map(|t| t.0).fold(f64::INFINITY, f64::min)
        ));
    }
    report.section(
        &topology.named("pipeline_steps").replace([' ', '-'], "_"),
        table(args, &steps),
        serde_json::to_value(&steps)?,
    );
    let ratio = topology.named("pipeline sustainable / pgbench 1-row");
    match (anchor, topology) {
        // The target is the product as a user first runs it; the split is measured beside it.
        (Some(one_row), Topology::Standalone) => {
            report.ratio(&ratio, best.unwrap_or(0.0) / one_row, 0.5)
        }
        (Some(one_row), _) => report.figure(&ratio, best.unwrap_or(0.0) / one_row),
        (None, _) => report.note(format!("{ratio} not checked: pgbench did not run")),
    }
    Ok(())
}

/// A fresh inbox and fresh hookgate processes, their connections and claims warmed up.
async fn start(args: &BenchArgs, env: &Env, sink: &Counter) -> anyhow::Result<Deployment> {
    env.reset().await?;
    let child = Deployment::start(env, args.pipeline_topology, args.worker_concurrency).await?;
    let n = args.events.min(1000);
    let warmup = env.signed_requests(WARMUP_FROM, n)?;
    let before = sink.count();
    load::closed_loop(child.addr(), &warmup, args.concurrency)
        .await?
        .expect_all(200, false, "pipeline warm-up")?;
    sink.wait_for(before + n, Duration::from_secs(60))
        .await
        .context("pipeline warm-up delivery")?;
    // Statistics for the warmed-up inbox, as autovacuum takes them within a minute of the first
    // 50 events: without any, the plans the child's connections cache are made for an inbox the
    // planner believes empty, and some of them scan the whole backlog as it grows
    // (tests/it/query_plans.rs). A production inbox runs on autovacuum's statistics.
    env.analyze().await?;
    Ok(child)
}

/// The intake's closed loop against receiver + workers for `--pipeline-secs`, long enough for the
/// backlog to reach its steady growth; the delivery rate over the same time. Requests are signed
/// as they are sent (a minute of them signed beforehand would not fit in memory): a few µs of the
/// load generator's CPU per request that the receiver-alone phase does not pay.
async fn closed_loop(args: &BenchArgs, env: &Env, sink: &Counter) -> anyhow::Result<(Run, f64)> {
    let child = start(args, env, sink).await?;
    let signer = env.signer(0, WARMUP_FROM)?;
    signer.sign(0)?; // fails here, not in the middle of the load
    let before = sink.count();
    let out = load::closed_loop_for(
        child.addr(),
        &Arc::new(signer),
        args.concurrency,
        Some(args.pipeline_secs),
    )
    .await?;
    let delivered = (sink.count() - before) as f64 / out.run.elapsed.as_secs_f64();
    out.expect_all(200, false, "receiver + workers")?;
    child.stop();
    Ok((out.run, delivered))
}

/// One open-loop run at `rate` for `--pipeline-secs`.
async fn step(args: &BenchArgs, env: &Env, sink: &Counter, rate: f64) -> anyhow::Result<Step> {
    let child = start(args, env, sink).await?;
    let n = ((rate * args.pipeline_secs.as_secs_f64()) as usize).max(1);
    let signer = env.signer(0, n)?;
    signer.sign(0)?; // fails here, not in the middle of the load
    let signer = Arc::new(signer);
    let lead = Duration::from_millis(50);
    let (wall_start, pace) = (
        Utc::now() + lead,
        Pace {
            rate,
            start: tokio::time::Instant::now() + lead,
            give_up: Some(GIVE_UP),
        },
    );
    let before = sink.count();
    let counted_before = child.counted().await;
    let cpu_before = cpu::sample(&child.pids());
    let lsn_before = wal::lsn(&env.pool).await;
    let vacuum_before = autovacuum::seen(&env.pool).await.ok();
    let timed_before = child.timed().await;
    let workers_before = child.workers_timed().await;
    let out = open_loop::open_loop(child.addr(), &signer, args.open_loop_connections, pace).await?;
    let cpu_after = cpu::sample(&child.pids());
    let timed_after = child.timed().await;
    let own = finite_bounds(&timed_before, &timed_after, 0.99);
    let own_max = finite_bounds(&timed_before, &timed_after, 1.0);
    let workers = finite_bounds(&workers_before, &child.workers_timed().await, 0.99);
    // [handed over, claims, answers' seconds, answers] during the load.
    let counted = child
        .counted()
        .await
        .zip(counted_before)
        .map(|(after, before)| [0, 1, 2, 3].map(|k| after[k] - before[k]));
    let elapsed = pace.start.elapsed().as_secs_f64();
    let delivered = (sink.count() - before) as f64 / elapsed;
    let pending = env.backlog().await?;
    // Events still in flight get the latency limit to finish; any left after it is late anyway,
    // and counts with what it has waited so far.
    tokio::time::sleep(LATENCY_LIMIT).await;
    let lsn_after = wal::lsn(&env.pool).await;
    let vacuum_after = autovacuum::seen(&env.pool).await.ok();
    let read_at = Utc::now();
    let processed = processed_at(env, n).await?;
    child.stop();
    let done = Run {
        count: n,
        elapsed: pace.start.elapsed(),
        latencies: search::completion_latencies(wall_start, rate, &processed, read_at),
    };
    let not_accepted = out.not_accepted();
    let at_cap = out.at_cap_pct();
    let cpu = cpu_before
        .zip(cpu_after)
        .and_then(|(b, a)| cpu::per_event(b, a, out.fresh(200)));
    Ok(Step {
        offered: rate,
        not_accepted,
        stopped_behind: out.stopped(),
        connections: out.connections(),
        intake: out.fresh(200) as f64 / elapsed,
        intake_p99_ms: out.run.p99_ms(),
        delivered,
        pending,
        p50_ms: done.p50_ms(),
        p99_ms: done.p99_ms(),
        sustainable: search::sustainable(
            rate,
            not_accepted,
            pending,
            Duration::from_secs_f64(done.p99_ms() / 1e3),
        ),
        cpu,
        handed_pct: counted
            .filter(|_| out.fresh(200) > 0)
            .map(|[h, ..]| 100.0 * h / out.fresh(200) as f64),
        claims_per_1k: counted
            .filter(|_| out.fresh(200) > 0)
            .map(|[_, c, ..]| 1000.0 * c / out.fresh(200) as f64),
        own_answers_mean_ms: counted
            .filter(|[.., n]| *n > 0.0)
            .map(|[.., secs, n]| 1e3 * secs / n),
        wal_bytes_per_event: lsn_before
            .zip(lsn_after)
            .filter(|_| out.fresh(200) > 0)
            .map(|(b, a)| (a - b) as f64 / out.fresh(200) as f64),
        autovacuum: vacuum_before
            .zip(vacuum_after)
            .and_then(|(b, a)| autovacuum::during(b, a)),
        own_answers_p99_ms: own.and_then(|[a, _]| a),
        own_commits_p99_ms: own.and_then(|[_, c]| c),
        own_answers_max_ms: own_max.and_then(|[a, _]| a),
        own_commits_max_ms: own_max.and_then(|[_, c]| c),
        own_claims_p99_ms: workers.and_then(|[c, _]| c),
        own_completions_p99_ms: workers.and_then(|[_, c]| c),
        sent_late_p99_ms: out.sent_late_p99_ms(),
        waited_at_cap_pct: at_cap.map(|(w, _)| w),
        blocked_at_cap_pct: at_cap.map(|(_, b)| b),
    })
}

/// Two histograms' cumulative buckets from one read of a child's `/metrics` (`None`: not read).
type Histograms = Option<[Vec<(f64, f64)>; 2]>;

/// Their `q` quantiles' bounds between two reads ([`scrape::own_bounds_ms`]), in ms; `None`
/// where a read failed, nothing was observed, or the quantile was past the last bucket.
fn finite_bounds(before: &Histograms, after: &Histograms, q: f64) -> Option<[Option<f64>; 2]> {
    let (before, after) = before.as_ref().zip(after.as_ref())?;
    Some(scrape::own_bounds_ms(before, after, q).map(|b| b.filter(|ms| ms.is_finite())))
}

/// `processed_at` of events `0..n` (`None`: not processed yet, or never stored).
async fn processed_at(env: &Env, n: usize) -> anyhow::Result<Vec<Option<DateTime<Utc>>>> {
    let mut out = vec![None; n];
    let mut rows = sqlx::query_as::<_, (String, Option<DateTime<Utc>>)>(
        "SELECT event_id, processed_at FROM inbox_events WHERE status = 'processed'",
    )
    .fetch(&env.pool);
    while let Some((id, at)) = rows.try_next().await? {
        if let Some(k) = requests::index(&id).filter(|k| *k < n) {
            out[k] = at;
        }
    }
    Ok(out)
}

fn line(k: usize, s: &Step) -> String {
    let handed = match s.handed_pct {
        Some(h) => format!("{h:>6.0}%"),
        None => format!("{:>7}", "-"),
    };
    let claims = match s.claims_per_1k {
        Some(c) => format!("{c:>9.1}"),
        None => format!("{:>9}", "-"),
    };
    let wal = match s.wal_bytes_per_event {
        Some(w) => format!("{w:>9.0}"),
        None => format!("{:>9}", "-"),
    };
    let cpu = match s.cpu {
        Some(c) => format!(
            "{:>8.0} {:>8.0} {:>8.0} {:>5.0}%",
            c.hookgate_us, c.bench_us, c.rest_us, c.busy_pct
        ),
        None => format!("{:>8} {:>8} {:>8} {:>6}", "-", "-", "-", "-"),
    };
    // A miss beside autovacuum's work on the same cores says so on its line, and one on a host
    // whose hypervisor took a share of the cores.
    let mut said = match &s.autovacuum {
        Some(v) => format!(" [{v}]"),
        None => String::new(),
    };
    // Where a slow step's intake p99 went: before its requests left the load generator, in the
    // receiver's own answers and its commits; and its completions' in the workers' claims and
    // completion transactions.
    if let Some(l) = s.sent_late_p99_ms {
        said += &format!(" [sent late p99 {l:.0} ms");
        if let (Some(w), Some(b)) = (s.waited_at_cap_pct, s.blocked_at_cap_pct) {
            said += &format!(", {w:.0}% waited at the cap, the load {b:.0}% of the step");
        }
        said += "]";
    }
    if let (Some(a), Some(c)) = (s.own_answers_p99_ms, s.own_commits_p99_ms) {
        said += &format!(" [own p99 <= {a:.0}/{c:.0} ms");
        if let (Some(a), Some(c)) = (s.own_answers_max_ms, s.own_commits_max_ms) {
            said += &format!(", slowest <= {a:.0}/{c:.0} ms");
        }
        if let Some(m) = s.own_answers_mean_ms {
            said += &format!(", answers' mean {m:.1} ms");
        }
        // A step whose events were all handed over made no claim: `-`.
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        if s.own_claims_p99_ms.is_some() || s.own_completions_p99_ms.is_some() {
            said += &format!(
                ", claims/completions <= {}/{} ms",
                ms(s.own_claims_p99_ms),
                ms(s.own_completions_p99_ms)
            );
        }
        said += "]";
    }
    if let Some(c) = s.cpu.filter(|c| c.stolen_pct >= 1.0) {
        said += &format!(" [the hypervisor took {:.0}% of the cores]", c.stolen_pct);
    }
    format!(
        "{k:>4} {:>10.0} {:>10.0} {:>9.2}ms {:>6} {:>11.0} {:>9} {:>10.1}ms {:>10.1}ms {cpu} {handed} {claims} {wal}  {}{}{said}",
        s.offered,
        s.intake,
        s.intake_p99_ms,
        s.connections,
        s.delivered,
        s.pending,
        s.p50_ms,
        s.p99_ms,
        if s.sustainable { "yes" } else { "no" },
        match (s.not_accepted, s.stopped_behind) {
            (0, _) => String::new(),
            (n, false) => format!(" ({n} not accepted)"),
            (n, true) => format!(" ({n} not accepted; the load stopped 5 s behind its schedule)"),
        }
    )
}

fn table(args: &BenchArgs, steps: &[Step]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "pipeline steps ({}): open loop, {:?} each; sustainable = all accepted, pending < 1 s of traffic, done p99 <= 1 s; \
         conns = connections the load generator needed (up to {} as answers took longer); \
         CPU µs per accepted event during the load: hookgate, the bench (load generator and sink), the rest of the machine (PostgreSQL); busy = of all cores; \
         handed = accepted events the receiver handed over to the workers of its process (no claim); \
         claims/1k = the workers' claims (found events or not) per 1,000 accepted events; \
         WAL B/ev = WAL bytes PostgreSQL wrote per accepted event until the step's events were delivered; \
         [autovacuum ...] = what PostgreSQL's autovacuum did meanwhile, on the same cores; \
         [own p99 <= A/C ms] = the receiver's p99 of its 2xx answers (from its handler's start) and of its transactions, as it timed them (bounds of doubling buckets); \
         [the hypervisor took N% of the cores] = steal, when 1% or more",
        args.pipeline_topology.label(),
        args.pipeline_secs,
        args.open_loop_connections
    );
    let _ = writeln!(
        out,
        "{:>4} {:>10} {:>10} {:>11} {:>6} {:>11} {:>9} {:>12} {:>12} {:>8} {:>8} {:>8} {:>6} {:>7} {:>9} {:>9}  sustainable",
        "step",
        "offered/s",
        "intake/s",
        "intake p99",
        "conns",
        "delivered/s",
        "pending",
        "done p50",
        "done p99",
        "hookgate",
        "bench",
        "rest",
        "busy",
        "handed",
        "claims/1k",
        "WAL B/ev"
    );
    for (k, s) in steps.iter().enumerate() {
        let _ = writeln!(out, "{}", line(k + 1, s));
    }
    out
}
