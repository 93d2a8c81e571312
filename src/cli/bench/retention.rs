//! The retention phase: the statements of one janitor pass (`inbox::retention`) on an inbox that
//! keeps `--retention-events` finished events and on one that keeps four times as many, with the
//! same work due in both, beside a sequential read of each inbox (what each statement of a pass
//! cost until round 38 of docs/performance.md). A pass should cost what it removes: the ratio of
//! the two passes is the target. It runs in the bench's own process (`--hookgate` changes nothing
//! here).

use super::report::Report;
use crate::crd::defaults::{RETENTION_DEDUPE, RETENTION_PAYLOAD};
use crate::inbox::Inbox;
use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::ConnectOptions;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::{Duration, Instant};

/// Events due in each inbox: as many to delete, as many bodies to purge, as many nonces expired.
/// Two batches' worth, so that a pass repeats its batches.
const DUE: u64 = 2 * crate::inbox::RETENTION_BATCH;
/// The integration the phase's events belong to.
const INTEGRATION: &str = "bench/retention";

/// At most a pass at 4x the events kept may cost, against the pass at 1x.
const TARGET: f64 = 1.5;
/// Passes timed at each size.
const ROUNDS: u32 = 2;

pub async fn run(kept: u64, pool: &PgPool, report: &mut Report) -> anyhow::Result<()> {
    let inbox = Inbox::Postgres(pool.clone());
    // Filling takes seconds a statement, which sqlx would log as slow, each with its text.
    let options = (*pool.connect_options())
        .clone()
        .disable_statement_logging();
    let quiet = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let pool = &quiet;
    // Each size is timed in each of the rounds, the sizes alternating, and the quickest of its
    // passes (and reads) counts: one pass per size read 1.20-1.52x from run to run (round 39).
    let sizes = [kept, 4 * kept];
    let mut timed: [Vec<(Duration, Duration)>; 2] = Default::default();
    for round in 1..=ROUNDS {
        for (size, events) in sizes.into_iter().enumerate() {
            eprintln!(
                "bench: retention, round {round} of {ROUNDS}: an inbox keeping {events} finished \
                 events, {DUE} due"
            );
            timed[size].push(timed_pass(&inbox, pool, events).await?);
        }
    }
    let quickest = |runs: &[(Duration, Duration)]| {
        let pass = runs.iter().map(|r| r.0).min().unwrap_or_default();
        let read = runs.iter().map(|r| r.1).min().unwrap_or_default();
        (pass, read)
    };
    let (one, four) = (quickest(&timed[0]), quickest(&timed[1]));
    for (events, runs) in sizes.into_iter().zip(&timed) {
        let (took, read) = quickest(runs);
        report.figure(&format!("retention pass (ms), {events} kept"), ms(took));
        report.figure(&format!("inbox read (ms), {events} kept"), ms(read));
        let each: Vec<String> = runs.iter().map(|r| format!("{:.0}", ms(r.0))).collect();
        report.note(format!(
            "retention, {events} kept: passes {} ms, the quickest used",
            each.join(", ")
        ));
    }
    report.ratio_max("retention pass, 4x kept / 1x", ratio(four.0, one.0), TARGET);
    report.figure(
        "retention pass / inbox read, 4x kept",
        ratio(four.0, four.1),
    );
    Ok(())
}

/// Fills the inbox keeping `events`, then times a sequential read of it and a pass.
async fn timed_pass(
    inbox: &Inbox,
    pool: &PgPool,
    events: u64,
) -> anyhow::Result<(Duration, Duration)> {
    let now = Utc::now();
    fill(pool, events, now).await?;
    let read = sequential_read(pool).await?;
    let started = Instant::now();
    let removed = pass(inbox, now).await?;
    let took = started.elapsed();
    anyhow::ensure!(
        removed == (DUE, DUE, DUE),
        "the retention pass removed {removed:?} (bodies, events, nonces), not {DUE} of each"
    );
    Ok((took, read))
}

/// The statements of a janitor pass over the phase's integration: bodies purged, events deleted
/// (with their attempts), nonces pruned; the integrations with finished events are listed too.
async fn pass(inbox: &Inbox, now: DateTime<Utc>) -> anyhow::Result<(u64, u64, u64)> {
    let purged = inbox
        .purge_payloads(
            INTEGRATION,
            crate::time::before(now, RETENTION_PAYLOAD),
            now,
        )
        .await?;
    let deleted = inbox
        .delete_finished(INTEGRATION, crate::time::before(now, RETENTION_DEDUPE))
        .await?;
    let names = inbox.integrations_with_finished().await?;
    anyhow::ensure!(names == [INTEGRATION], "finished events of {names:?}");
    let nonces = inbox.prune_nonces(now).await?;
    Ok((purged, deleted, nonces))
}

/// Empties the inbox, then: [`DUE`] events finished five minutes past `retention.dedupe` (each
/// with a delivery attempt), [`DUE`] finished five minutes past `retention.payload` with their 1 KiB
/// body, and `kept` spread over the 30 days between, their bodies purged past the payload's
/// retention as earlier passes would have left them; `kept` nonces and [`DUE`] expired ones.
async fn fill(pool: &PgPool, kept: u64, now: DateTime<Utc>) -> anyhow::Result<()> {
    sqlx::raw_sql(
        "TRUNCATE inbox_events, signature_nonces, delivery_attempts RESTART IDENTITY CASCADE",
    )
    .execute(pool)
    .await?;
    let kept = i64::try_from(kept).context("--retention-events")?;
    let due = i64::try_from(DUE).expect("a few batches");
    sqlx::query(FILL)
        .bind(now)
        .bind(due)
        .bind(kept)
        .execute(pool)
        .await
        .context("filling the retention phase's inbox")?;
    sqlx::query(FILL_ATTEMPTS).bind(now).execute(pool).await?;
    sqlx::query(FILL_NONCES)
        .bind(now)
        .bind(due)
        .bind(kept)
        .execute(pool)
        .await?;
    sqlx::raw_sql("VACUUM ANALYZE inbox_events, signature_nonces, delivery_attempts")
        .execute(pool)
        .await?;
    // The fill wrote gigabytes of WAL: without this the pass would share the disk with the
    // checkpoint they set off. (It needs superuser or pg_checkpoint, as `Env::reset`'s.)
    let _ = sqlx::raw_sql("CHECKPOINT").execute(pool).await;
    Ok(())
}

/// `$1` now, `$2` due, `$3` kept. Finish instants: the due ones 5 minutes past 30 d and past 7 d,
/// the kept ones evenly over the 30 days from a minute after the first bound to a minute ago.
const FILL: &str = "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, \
     content_type, body, body_sha256, status, attempts, received_at, processed_at, body_purged_at) \
     SELECT 'bench/retention', 'r_' || g, 'stripe', 'v1', \
     '[[\"content-type\", \"application/json\"]]', 'application/json', \
     CASE WHEN purged THEN ''::bytea ELSE convert_to(repeat('x', 1024), 'UTF8') END, '\\x00', \
     'processed', 1, t - interval '1 second', t, CASE WHEN purged THEN t + interval '7 days' END \
     FROM (SELECT g, t, t < $1 - interval '7 days' AND NOT (g >= $2 AND g < 2 * $2) AS purged \
     FROM (SELECT g, CASE \
       WHEN g < $2 THEN $1 - interval '30 days 5 minutes' + g * interval '1 millisecond' \
       WHEN g < 2 * $2 THEN $1 - interval '7 days 5 minutes' + g * interval '1 millisecond' \
       ELSE $1 - interval '30 days' + interval '1 minute' \
         + (g - 2 * $2) * (interval '30 days' - interval '2 minutes') / GREATEST($3, 1) END \
     FROM generate_series(0, 2 * $2 + $3 - 1) g) s(g, t)) e";

const FILL_ATTEMPTS: &str = "INSERT INTO delivery_attempts (event_row, attempt, started_at, \
     duration_ms, status_code, outcome) SELECT id, 1, received_at, 3, 200, 'processed' \
     FROM inbox_events WHERE processed_at < $1 - interval '30 days'";

/// `$1` now, `$2` due (expired a second ago and before), `$3` kept (expiring over the next day).
const FILL_NONCES: &str = "INSERT INTO signature_nonces (integration, digest, expires_at) \
     SELECT 'bench/retention', sha256(convert_to(g::text, 'UTF8')), CASE WHEN g < $2 \
     THEN $1 - interval '1 second' - g * interval '1 millisecond' \
     ELSE $1 + (g - $2 + 1) * interval '1 day' / GREATEST($3, 1) END \
     FROM generate_series(0, $2 + $3 - 1) g";

/// One read of every row of the inbox, through the table rather than an index.
async fn sequential_read(pool: &PgPool) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let _: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events WHERE length(body) >= 0")
        .fetch_one(pool)
        .await?;
    Ok(started.elapsed())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}
