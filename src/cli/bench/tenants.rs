//! Tenants: one integration's backlog beside another integration's trickle, in `hookgate
//! standalone` as a user first runs it (or `--tenants-topology split`, the chart's receiver and
//! worker processes, where every event is claimed). A burst of `--events` to a destination that
//! answers each after a delay takes `--tenants-backlog` to deliver; a second integration, whose
//! destination answers at once, sends a few events a second, first alone and then while the
//! backlog drains.
//! Its completion latency (sent → `processed_at`) beside the backlog, as a share of the backlog's
//! own drain, says whether one tenant's burst holds another's events back: taken oldest first
//! whatever their integration, the quiet events wait for the whole backlog (a share near 1); taken
//! in turns, for a few deliveries (near 0).

use super::BenchArgs;
use super::deployment::Deployment;
use super::load::{self, Conn};
use super::pipeline::WARMUP_FROM;
use super::report::{Report, Row};
use super::requests::{self, INTEGRATION, Signer};
use super::setup::Env;
use super::sink::Counter;
use super::stats::Run;
use anyhow::{Context, ensure};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The quiet integration, beside the bench's own (which sends the burst).
const QUIET: &str = "bench/quiet";
/// Its events' ids, far from the burst's.
const QUIET_FROM: usize = 800_000_000;
/// Its events per second: a steady trickle, each sent on its own.
const TRICKLE_RATE: f64 = 20.0;
/// The share of its p99 in the backlog's drain that passes: one second of a 20-second backlog.
const TARGET: f64 = 0.05;

pub async fn run(args: &BenchArgs, env: &Env, report: &mut Report) -> anyhow::Result<()> {
    let delay = answer_delay(args);
    let burst_to = Counter::answering_after(delay).await?;
    let quiet_to = Counter::start().await?;
    let topology = args.tenants_topology;
    env.reset().await?;
    env.write_integrations(&[("stripe", &burst_to.url()), ("quiet", &quiet_to.url())])?;
    let backlog = args.tenants_backlog;
    let (alone_n, beside_n) = (trickle_len(backlog / 4), trickle_len(backlog / 2));
    let quiet = env.signer_of(QUIET, QUIET_FROM, alone_n + beside_n)?;
    let burst = env.signer_of(INTEGRATION, 0, args.events)?.all()?;
    eprintln!(
        "bench: tenants ({}): a burst of {} events answered after {delay:?} each ({backlog:?} at {} slots) beside a trickle of {TRICKLE_RATE}/s",
        topology.label(),
        args.events,
        args.worker_concurrency
    );

    let deployment = Deployment::start(env, topology, args.worker_concurrency).await?;
    let addr = deployment.addr();
    // The burst's first delivery opens its destination's connection before the burst; the quiet
    // integration's opens its own within the baseline, as it would for a tenant starting up.
    let warmup = env.signer_of(INTEGRATION, WARMUP_FROM, 1)?.sign(0)?;
    Conn::open(addr).await?.send(&warmup).await?;
    let alone = trickle(addr, &quiet, 0..alone_n).await?;
    burst_to.wait_for(1, Duration::from_secs(30)).await?;
    quiet_to
        .wait_for(alone_n, Duration::from_secs(30))
        .await
        .context("the quiet integration alone")?;

    let started = Instant::now();
    let sent = load::closed_loop(addr, &burst, args.concurrency).await?;
    sent.expect_all(200, false, "tenants: the burst")?;
    let drained = async {
        // The warm-up's delivery came first.
        let limit = backlog * 4 + Duration::from_secs(60);
        burst_to.wait_for(args.events + 1, limit).await?;
        anyhow::Ok(started.elapsed())
    };
    let (beside, drain) = tokio::join!(trickle(addr, &quiet, alone_n..alone_n + beside_n), drained);
    let (beside, drain) = (beside?, drain.context("the burst's backlog")?);
    quiet_to
        .wait_for(alone_n + beside_n, Duration::from_secs(60))
        .await
        .context("the quiet integration beside the backlog")?;
    let processed = processed_at(env, alone_n + beside_n).await?;
    deployment.stop();

    let alone = completion(&alone, &processed)?;
    let (beside, after_drain) = (
        completion(&beside, &processed)?,
        late(&beside, started, drain),
    );
    let named = |name: &str| topology.named(name);
    report.push(Row::throughput(
        &named("tenants: quiet integration alone"),
        &alone,
    ));
    report.push(Row::throughput(
        &named("tenants: quiet beside another's backlog"),
        &beside,
    ));
    report.push(Row::rate(
        &named("tenants: backlog delivered"),
        args.events as f64 / drain.as_secs_f64(),
    ));
    let drain_s = drain.as_secs_f64();
    report.ratio_max(
        &named("tenants: quiet p99 / backlog's drain"),
        beside.p99_ms() / 1e3 / drain_s,
        TARGET,
    );
    report.figure(&named("tenants: backlog's drain (s)"), drain_s);
    report.figure(
        &named("tenants: quiet p99 beside / alone"),
        beside.p99_ms() / alone.p99_ms().max(1e-3),
    );
    if after_drain > 0 {
        report.note(format!(
            "tenants: {after_drain} of the quiet integration's {beside_n} events were sent after the backlog had drained (the burst took long to send): a longer --tenants-backlog measures them all beside it"
        ));
    }
    Ok(())
}

/// How long the burst's destination takes to answer, so that the worker's slots deliver the
/// burst in `--tenants-backlog`.
fn answer_delay(args: &BenchArgs) -> Duration {
    let each = args
        .tenants_backlog
        .mul_f64(args.worker_concurrency as f64 / args.events as f64);
    each.clamp(Duration::from_millis(1), args.tenants_backlog)
}

/// The trickle's events in `span`, at least a few.
fn trickle_len(span: Duration) -> usize {
    ((span.as_secs_f64() * TRICKLE_RATE) as usize).max(5)
}

/// Sends the quiet integration's events `ks` on one connection, each at its turn of the
/// trickle's schedule: each one's id and when it was sent.
async fn trickle(
    addr: SocketAddr,
    quiet: &Signer,
    ks: std::ops::Range<usize>,
) -> anyhow::Result<Vec<(String, DateTime<Utc>, Instant)>> {
    let mut conn = Conn::open(addr).await?;
    let start = tokio::time::Instant::now();
    let mut sent = Vec::new();
    for (j, k) in ks.enumerate() {
        tokio::time::sleep_until(start + Duration::from_secs_f64(j as f64 / TRICKLE_RATE)).await;
        let request = quiet.sign(k)?;
        let (at, instant) = (Utc::now(), Instant::now());
        let (status, _) = conn.send(&request).await?;
        ensure!(
            status == 200,
            "tenants: a quiet event was answered {status}"
        );
        sent.push((requests::event_id(QUIET_FROM + k), at, instant));
    }
    Ok(sent)
}

/// `processed_at` of the quiet integration's events, by id.
async fn processed_at(env: &Env, n: usize) -> anyhow::Result<HashMap<String, DateTime<Utc>>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut out = HashMap::new();
        let mut rows = sqlx::query_as::<_, (String, DateTime<Utc>)>(
            "SELECT event_id, processed_at FROM inbox_events \
             WHERE integration = $1 AND status = 'processed'",
        )
        .bind(QUIET)
        .fetch(&env.pool);
        while let Some((id, at)) = rows.try_next().await? {
            out.insert(id, at);
        }
        // Delivered is not yet recorded: the outcome commits a moment after the answer.
        if out.len() >= n || Instant::now() > deadline {
            return Ok(out);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each sent event's completion latency: sent → processed.
fn completion(
    sent: &[(String, DateTime<Utc>, Instant)],
    processed: &HashMap<String, DateTime<Utc>>,
) -> anyhow::Result<Run> {
    let latencies = sent
        .iter()
        .map(|(id, at, _)| {
            let done = processed
                .get(id)
                .with_context(|| format!("tenants: {id} was delivered but not recorded"))?;
            Ok((*done - *at).to_std().unwrap_or_default())
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let elapsed = match (sent.first(), sent.last()) {
        (Some(first), Some(last)) => last.2 - first.2,
        _ => Duration::ZERO,
    };
    Ok(Run {
        count: sent.len().saturating_sub(1),
        elapsed,
        latencies,
    })
}

/// How many of `sent` left after the backlog, which began at `started`, drained in `drain`.
fn late(sent: &[(String, DateTime<Utc>, Instant)], started: Instant, drain: Duration) -> usize {
    sent.iter()
        .filter(|(_, _, at)| *at > started + drain)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(flags: &[&str]) -> BenchArgs {
        Cli::parse_from(std::iter::once("bench").chain(flags.iter().copied())).bench
    }

    #[test]
    fn the_burst_destination_answers_so_that_the_slots_take_the_backlog_to_deliver_it() {
        // 32 slots, 20,000 events in 20 s: 1,000 a second, 32 ms each.
        assert_eq!(answer_delay(&args(&[])), Duration::from_millis(32));
        let few = args(&["--events", "100", "--tenants-backlog", "1s"]);
        assert_eq!(answer_delay(&few), Duration::from_millis(320));
        // More slots than events: every event answered at the end of the backlog.
        let wide = args(&["--events", "100", "--worker-concurrency", "1000"]);
        assert_eq!(answer_delay(&wide), Duration::from_secs(20));
        let many = args(&["--events", "1000000", "--worker-concurrency", "1"]);
        assert_eq!(answer_delay(&many), Duration::from_millis(1));
    }

    #[test]
    fn latencies_run_from_the_send_to_the_recorded_outcome() {
        let t0 = Utc::now();
        let i0 = Instant::now();
        let sent = vec![
            ("a".to_string(), t0, i0),
            ("b".to_string(), t0, i0 + Duration::from_millis(50)),
        ];
        let processed = HashMap::from([
            ("a".to_string(), t0 + chrono::TimeDelta::milliseconds(7)),
            ("b".to_string(), t0 + chrono::TimeDelta::milliseconds(900)),
        ]);
        let run = completion(&sent, &processed).unwrap();
        assert_eq!(
            run.latencies,
            [Duration::from_millis(7), Duration::from_millis(900)]
        );
        assert_eq!((run.count, run.elapsed), (1, Duration::from_millis(50)));
        let missing = completion(&sent, &HashMap::new()).unwrap_err().to_string();
        assert!(
            missing.contains("a was delivered but not recorded"),
            "{missing}"
        );
        assert_eq!(late(&sent, i0, Duration::from_millis(10)), 1);
        assert_eq!(late(&sent, i0, Duration::from_secs(1)), 0);
    }
}
