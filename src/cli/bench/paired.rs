//! The intake against pgbench 1-row in pairs run back to back. The anchor's runs and the intake's
//! closed loop are a minute apart in a full run, and this machine's speed moved by half within
//! minutes (pgbench runs of 9,150 and 12,995 rows/s in one run, docs/performance.md round 18), so
//! a ratio of two figures taken at different moments measured the host as much as hookgate. Each
//! pair runs pgbench and the intake for the same few seconds one after the other, the order
//! alternating from pair to pair, and the target uses the median of the pairs' ratios.

use super::BenchArgs;
use super::background::around;
use super::cpu;
use super::load;
use super::pgbench;
use super::report::Report;
use super::requests;
use super::setup::{Child, Env};
use super::wal;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// How long each side of a pair runs at most: long enough for a few dozen thousand events, short
/// enough that both sides of a pair see the same host and that the requests signed beforehand
/// (about 1.3 kB each) stay within a hundred megabytes.
const PAIR_RUN: Duration = Duration::from_secs(3);

/// Requests signed for one pair's intake: half as many again as the closed loop's rate asks, so
/// that a faster moment does not run out before the time is up.
fn requests_for(rate: f64, run: Duration, at_least: usize) -> usize {
    ((rate * run.as_secs_f64() * 1.5).ceil() as usize).max(at_least)
}

/// Pair `k` runs pgbench first when even, the intake first when odd: a host that speeds up or
/// slows down steadily then favours neither side.
fn pgbench_first(k: usize) -> bool {
    k.is_multiple_of(2)
}

/// One pair's figures, events or rows per second.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pair {
    pgbench: f64,
    intake: f64,
}

impl Pair {
    fn ratio(&self) -> f64 {
        self.intake / self.pgbench
    }
}

/// The median of the pairs' ratios (not the ratio of the medians: that would pair figures
/// taken at different moments again).
fn median_ratio(pairs: &[Pair]) -> f64 {
    let ratios: Vec<f64> = pairs.iter().map(Pair::ratio).collect();
    pgbench::median(&ratios)
}

/// Runs `args.pgbench_runs` pairs against the receiver at `addr` (already warmed up; its inbox is
/// emptied before each side) and reports their median ratio against the 1.5x target, each pair
/// as a note and, in the JSON, under `intake_pgbench_pairs`.
pub async fn run(
    args: &BenchArgs,
    env: &Env,
    pgbench_bin: &Path,
    receiver: &Child,
    rate: f64,
    report: &mut Report,
) -> anyhow::Result<()> {
    let run = PAIR_RUN.min(args.pgbench_run).max(Duration::from_secs(1));
    let n = requests_for(rate, run, args.events);
    let body = requests::body(0, args.body_bytes);
    let mut pairs = Vec::new();
    // PostgreSQL's CPU per row, the intake's over pgbench's, pair by pair.
    let mut database_per_row = Vec::new();
    for k in 0..args.pgbench_runs as usize {
        eprintln!(
            "bench: intake and pgbench 1-row, pair {} of {} ({} s each)",
            k + 1,
            args.pgbench_runs,
            run.as_secs()
        );
        // Ids no earlier phase used: the intake, duplicates and half-rate phases sign below 30x.
        let signed = env.signed_requests((30 + k) * args.events.max(n), n)?;
        let pgbench_side = async {
            env.reset().await?;
            let meter = wal::Meter::start(&env.pool).await;
            let before = cpu::sample(&[]);
            let (rate, note) = around(&env.pool, &format!("pair {}, pgbench", k + 1), || {
                pgbench::rows_per_second(pgbench_bin, &env.url, 1, args.concurrency, run, &body)
            })
            .await;
            let after = cpu::sample(&[]);
            let w = wal::measured(meter, &env.pool, Some(1.0)).await;
            // Per row it inserted; pgbench's own CPU counts as the load generator's (it is
            // reaped by then), PostgreSQL's as the rest.
            let rows = w.as_ref().map_or(0, |w| w.rows.max(0) as usize);
            let split = before
                .zip(after)
                .and_then(|(b, a)| cpu::per_event(b, a, rows));
            anyhow::Ok(((rate?, w, split), note))
        };
        let intake_side = async {
            env.reset().await?;
            let (meter, batches) = (
                wal::Meter::start(&env.pool).await,
                wal::batches(receiver.admin).await,
            );
            let (out, note) = around(&env.pool, &format!("pair {}, intake", k + 1), || {
                let load =
                    load::closed_loop_for(receiver.addr, &signed, args.concurrency, Some(run));
                cpu::measured(vec![receiver.pid()], load, |o| o.run.count)
            })
            .await;
            let (out, split) = out?;
            out.expect_all(200, false, "paired intake")?;
            let per_commit = wal::per_commit(batches, wal::batches(receiver.admin).await);
            let w = wal::measured(meter, &env.pool, per_commit).await;
            anyhow::Ok(((out.run.rate(), w, split), note))
        };
        // Each side: (its rate, WAL and CPU, notes when autovacuum or a checkpoint worked while it ran).
        let (
            ((pgbench, pgbench_wal, pgbench_cpu), pgbench_note),
            ((intake, intake_wal, intake_cpu), intake_note),
        ) = if pgbench_first(k) {
            let p = pgbench_side.await?;
            (p, intake_side.await?)
        } else {
            let i = intake_side.await?;
            (pgbench_side.await?, i)
        };
        let pair = Pair { pgbench, intake };
        report.wal(&format!("pair {}: pgbench 1-row", k + 1), pgbench_wal);
        report.wal(&format!("pair {}: intake", k + 1), intake_wal);
        report.cpu_without_server(&format!("pair {}: pgbench 1-row", k + 1), pgbench_cpu);
        report.cpu(&format!("pair {}: intake", k + 1), intake_cpu);
        if let Some((p, i)) = pgbench_cpu.zip(intake_cpu).filter(|(p, _)| p.rest_us > 0.0) {
            database_per_row.push(i.rest_us / p.rest_us);
        }
        report.note(format!(
            "pair {}: pgbench 1-row {:.0} rows/s, intake {:.0} events/s ({} first): {:.2}x",
            k + 1,
            pair.pgbench,
            pair.intake,
            if pgbench_first(k) {
                "pgbench"
            } else {
                "intake"
            },
            pair.ratio()
        ));
        pairs.push(pair);
        for note in pgbench_note.into_iter().chain(intake_note) {
            report.note(note);
        }
    }
    report.ratio("intake / pgbench 1-row, paired", median_ratio(&pairs), 1.5);
    if !database_per_row.is_empty() {
        report.figure(
            "PostgreSQL CPU per row, intake / pgbench (pairs)",
            pgbench::median(&database_per_row),
        );
    }
    let text = pairs
        .iter()
        .enumerate()
        .map(|(k, p)| {
            format!(
                "  pair {}: {:.0} / {:.0} = {:.2}x\n",
                k + 1,
                p.intake,
                p.pgbench,
                p.ratio()
            )
        })
        .collect();
    let json = json!(pairs
        .iter()
        .map(|p| json!({"pgbench_rows_per_s": p.pgbench, "intake_events_per_s": p.intake, "ratio": p.ratio()}))
        .collect::<Vec<_>>());
    report.section("intake_pgbench_pairs", text, json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_uses_the_median_of_the_pairs_ratios_not_the_ratio_of_medians() {
        let pairs = [
            Pair {
                pgbench: 10_000.0,
                intake: 12_000.0,
            }, // 1.2
            Pair {
                pgbench: 6_000.0,
                intake: 12_000.0,
            }, // 2.0
            Pair {
                pgbench: 12_000.0,
                intake: 18_000.0,
            }, // 1.5
        ];
        assert_eq!(median_ratio(&pairs), 1.5);
        // The medians (12,000 / 10,000) would have said 1.2.
        let even = [pairs[0], pairs[2]];
        assert!((median_ratio(&even) - 1.35).abs() < 1e-12);
    }

    #[test]
    fn the_side_that_runs_first_alternates() {
        let order: Vec<bool> = (0..4).map(pgbench_first).collect();
        assert_eq!(order, [true, false, true, false]);
    }

    #[test]
    fn enough_requests_are_signed_for_a_faster_moment() {
        assert_eq!(requests_for(10_000.0, Duration::from_secs(3), 200), 45_000);
        // Never fewer than the intake's own count, whatever the rate measured.
        assert_eq!(requests_for(10.0, Duration::from_secs(3), 20_000), 20_000);
    }
}
