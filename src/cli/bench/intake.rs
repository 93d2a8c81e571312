//! The receiver on its own (`hookgate standalone --no-workers`, a child process): its maximum
//! rate, duplicates, latency at half that rate, and its memory; with the ratios of its rate to
//! the baselines and to the HTTP ceiling measured earlier in the same run, and to pgbench 1-row
//! in pairs run beside it (`paired.rs`).

use super::background::watched;
use super::cpu;
use super::load;
use super::open_loop::{self, Pace};
use super::paired;
use super::report::{Report, Row};
use super::scrape;
use super::setup::Env;
use super::wal;
use super::{Anchors, BenchArgs};
use anyhow::Context;
use std::time::Duration;

const INTAKE_ROW: &str = "hookgate intake (HTTP, verify, commit)";
const DUPLICATES_ROW: &str = "duplicates (re-sent accepted events)";

/// How the receiver's own work compares with the HTTP ceiling's server, as figures: the rate at
/// which it answers duplicates from memory (HTTP, verification, no database); the most any
/// receiver could reach beside this load generator and database, were its own CPU free; and its
/// CPU per request beside the server's, for new events and for those duplicates.
fn against_the_ceiling(anchors: &Anchors, from_memory: f64, report: &mut Report) {
    let Some((ceiling, server)) = anchors.ceiling else {
        return;
    };
    report.figure(
        &format!("duplicates from memory / HTTP ceiling ({server})"),
        from_memory / ceiling,
    );
    if let Some(rest) = report.cpu_of(INTAKE_ROW).map(|c| c.bench_us + c.rest_us) {
        // Every core busy, and the receiver costing nothing: what the load generator and the
        // database beside it leave room for.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        if rest > 0.0 {
            let name = format!("intake with a receiver free of CPU / HTTP ceiling ({server})");
            report.figure(&name, cores * 1e6 / rest / ceiling);
        }
    }
    let Some(theirs) = report
        .cpu_of(super::ceiling::row_of(server))
        .filter(|c| c.hookgate_us > 0.0)
    else {
        return;
    };
    for (row, what) in [
        (INTAKE_ROW, "receiver CPU per new event"),
        (DUPLICATES_ROW, "receiver CPU per duplicate"),
    ] {
        if let Some(ours) = report.cpu_of(row) {
            let name = format!("{what} / {server}'s per request");
            report.figure(&name, ours.hookgate_us / theirs.hookgate_us);
        }
    }
}

/// The receiver as a child process: max rate, duplicates, half-rate latency and its memory.
pub async fn run(
    args: &BenchArgs,
    env: &Env,
    anchors: &Anchors,
    report: &mut Report,
) -> anyhow::Result<()> {
    // Its admin port serves the batch histogram the WAL table's events per commit come from.
    let receiver = env.spawn_receiver(Some(super::ports::free_port()?))?;
    receiver.wait_ready().await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = receiver.rss_kib()?;

    eprintln!("bench: hookgate intake, closed loop");
    let requests = env.signed_requests(0, args.events)?;
    let warmup = env.signed_requests(10 * args.events, 1000)?;
    load::closed_loop(receiver.addr, &warmup, args.concurrency).await?;
    let (meter, batches) = (
        wal::Meter::start(&env.pool).await,
        wal::batches(receiver.admin).await,
    );
    let (max, split) = watched(&env.pool, report, "intake", || {
        let load = load::closed_loop(receiver.addr, &requests, args.concurrency);
        cpu::measured(vec![receiver.pid()], load, |o| o.run.count)
    })
    .await?;
    max.expect_all(200, false, "intake")?;
    report.cpu(INTAKE_ROW, split);
    let per_commit = wal::per_commit(batches, wal::batches(receiver.admin).await);
    let w = wal::measured(meter, &env.pool, per_commit).await;
    report.wal("hookgate intake (closed loop)", w);
    report.push(Row::throughput(INTAKE_ROW, &max.run));
    let rate = max.run.rate();
    if let Some((a, b)) = anchors.baselines {
        report.ratio("intake / baseline A", rate / a, 1.5);
        report.ratio("intake / baseline B", rate / b, 0.5);
    }
    if let Some((ceiling, server)) = anchors.ceiling {
        report.ratio(
            &format!("intake / HTTP ceiling ({server})"),
            rate / ceiling,
            0.5,
        );
    }
    if let Some(one_row) = anchors.pgbench_one_row {
        // Against the anchor measured a minute earlier; the target uses the pairs below.
        report.figure("intake / pgbench 1-row, unpaired", rate / one_row);
    }

    eprintln!("bench: duplicates");
    let admin = receiver
        .admin
        .context("the receiver serves its admin port")?;
    let [before] = scrape::counters(admin, [scrape::REMEMBERED]).await?;
    let (dups, split) = watched(&env.pool, report, "duplicates", || {
        let load = load::closed_loop(receiver.addr, &requests, args.concurrency);
        cpu::measured(vec![receiver.pid()], load, |o| o.run.count)
    })
    .await?;
    dups.expect_all(200, true, "duplicates")?;
    let [after] = scrape::counters(admin, [scrape::REMEMBERED]).await?;
    report.push(Row::throughput(DUPLICATES_ROW, &dups.run));
    report.cpu(DUPLICATES_ROW, split);
    against_the_ceiling(anchors, dups.run.rate(), report);
    report.limit("duplicate p99 (ms)", dups.run.p99_ms(), 5.0);
    let remembered = (after - before) as usize;
    if remembered < requests.len() {
        report.note(format!(
            "duplicates: {remembered} of {} answered from the receiver's memory, the others by the inbox",
            requests.len()
        ));
    }
    // A build that remembers nothing (`--dedupe-cache-mib 0`, or one older than the flag) has
    // just measured the inbox's path.
    if remembered > 0 {
        database_duplicates(args, env, &requests, report).await?;
    }

    let half = max.run.rate() / 2.0;
    let n = ((half * args.latency_run.as_secs_f64()) as usize).max(100);
    eprintln!("bench: intake at half the maximum rate ({half:.0}/s) for {n} events");
    let paced = env.signed_requests(20 * args.events, n)?;
    let timed = scrape::timed(admin).await?;
    // Its CPU split says, when its p99 misses, whether a party cost more per event than at the
    // closed loop: the host's moment or the receiver's (round 46).
    let (steady, split) = watched(&env.pool, report, "half rate", || {
        let load = open_loop::open_loop(
            receiver.addr,
            &paced,
            args.open_loop_connections,
            Pace::from_now(half),
        );
        cpu::measured(vec![receiver.pid()], load, |o| o.run.count)
    })
    .await?;
    steady.expect_all(200, false, "half-rate intake")?;
    const HALF_ROW: &str = "intake at half the max rate (open loop)";
    report.push(Row::throughput(HALF_ROW, &steady.run));
    report.cpu(HALF_ROW, split);
    report.limit("intake p99 at half rate (ms)", steady.run.p99_ms(), 25.0);
    if let Some(late) = steady.sent_late_p99_ms() {
        report.figure(SENT_LATE, late);
    }
    let after = scrape::timed(admin).await?;
    own_timing(&timed, &after, report);
    let peak_rss = receiver.peak_rss_kib()?;
    report.limit("receiver RSS idle (MiB)", idle_rss as f64 / 1024.0, 40.0);
    report.limit(
        "receiver peak RSS under load (MiB)",
        peak_rss as f64 / 1024.0,
        150.0,
    );
    if let Some(bin) = &anchors.pgbench {
        paired::run(args, env, bin, &receiver, rate, report).await?;
    }
    receiver.stop();
    Ok(())
}

/// The same duplicates again, to a receiver without its memory of committed keys: every one
/// asks the inbox, as a retry that reaches another replica does. A figure, beside the target.
async fn database_duplicates(
    args: &BenchArgs,
    env: &Env,
    requests: &std::sync::Arc<Vec<load::Prepared>>,
    report: &mut Report,
) -> anyhow::Result<()> {
    eprintln!("bench: duplicates without the receiver's memory");
    let receiver = env.spawn_receiver_with(None, &["--dedupe-cache-mib", "0"])?;
    receiver.wait_ready().await?;
    let (dups, split) = watched(&env.pool, report, "duplicates without memory", || {
        let load = load::closed_loop(receiver.addr, requests, args.concurrency);
        cpu::measured(vec![receiver.pid()], load, |o| o.run.count)
    })
    .await?;
    dups.expect_all(200, true, "duplicates without memory")?;
    const ROW: &str = "duplicates, no memory (each asks the inbox)";
    report.push(Row::throughput(ROW, &dups.run));
    report.cpu(ROW, split);
    report.figure("duplicate p99 without the memory (ms)", dups.run.p99_ms());
    receiver.stop();
    Ok(())
}

/// How late the half-rate phase's requests left the load generator, p99: the part of its p99
/// from the schedule spent before a request reached its connection.
const SENT_LATE: &str = "half rate: requests sent late by the load generator, p99 (ms)";

/// The p99 of the half-rate phase's answers and transactions as the receiver timed them itself
/// (upper bounds: its buckets double), beside the load generator's p99 from the schedule: when
/// the target misses and these held, the wait was before the handler (the load generator, the
/// sockets, the cores); when the transactions' bound is the answers', the database's commits.
fn own_timing(before: &[Vec<(f64, f64)>; 2], after: &[Vec<(f64, f64)>; 2], report: &mut Report) {
    let names = [
        "half rate: the receiver's own answers, p99 at most (ms)",
        "half rate: its transactions, p99 at most (ms)",
    ];
    for (name, bound) in names.iter().zip(scrape::own_bounds_ms(before, after, 0.99)) {
        match bound {
            Some(ms) if ms.is_finite() => report.figure(name, ms),
            Some(_) => report.note(format!("{name}: over its last bucket")),
            // A build older than these histograms (`--hookgate`).
            None => report.note(format!("{name}: not served by the receiver measured")),
        }
    }
}
