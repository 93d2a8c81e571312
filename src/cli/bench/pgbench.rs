//! The pgbench baselines: PostgreSQL's own load tool inserting the inbox's row into the inbox's
//! table, one row and 50 rows per transaction. Every PostgreSQL user knows what its figures mean,
//! and it costs less per row than any client library, so it is the anchor the targets use.
//!
//! The row is the one the receiver writes: same columns, a body of the same size sent with every
//! transaction (a bound parameter in `-M prepared`, as sqlx sends it), the same JSON headers and
//! digest, `ON CONFLICT DO NOTHING` like the receiver's insert. Event ids are random 63-bit
//! numbers, since pgbench has no per-transaction counter; a collision (odds about 1e-7 at a million
//! rows) would insert nothing rather than abort the client.

use anyhow::{Context, bail};
use sha2::Digest;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const COLUMNS: &str = "INSERT INTO inbox_events (integration, event_id, event_type, scheme, \
     key_id, signed_at, headers, content_type, body, body_sha256, status, next_attempt_at, \
     received_at) VALUES ";

/// pgbench binds at most 255 parameters per statement; each row uses four.
const MAX_ROWS: usize = 60;

/// The custom script: one `INSERT` of `rows` rows, a transaction of its own in autocommit.
pub fn script(rows: usize) -> String {
    assert!((1..=MAX_ROWS).contains(&rows), "pgbench rows per statement");
    let values: Vec<String> = (1..=rows)
        .map(|k| {
            format!(
                "('bench/stripe', 'evt_pgbench_' || :n || '_{k}', 'invoice.paid', 'stripe', 'v1', \
                 now(), :headers::jsonb, 'application/json', :body::bytea, :sha::bytea, 'pending', \
                 now(), now())"
            )
        })
        .collect();
    format!(
        "\\set n random(1, 9000000000000000000)\n{COLUMNS}{} ON CONFLICT (integration, event_id) DO NOTHING;\n",
        values.join(", ")
    )
}

/// What one pgbench run reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Transactions per second, without connection set-up.
    pub tps: f64,
    pub transactions: u64,
    pub failed: u64,
}

/// Reads pgbench's summary. PostgreSQL 14 and later print one `tps = ... (without initial
/// connection time)` line; older versions print `including` and `excluding connections
/// establishing`, and the `excluding` one is the comparable figure.
pub fn parse(output: &str) -> anyhow::Result<Summary> {
    let first_number = |s: &str| -> Option<f64> { s.split_whitespace().next()?.parse().ok() };
    let (mut tps, mut transactions, mut failed) = (None, None, 0);
    for line in output.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("tps = ") {
            if !rest.contains("including") {
                tps = first_number(rest);
            }
        } else if let Some(rest) = line.strip_prefix("number of transactions actually processed:") {
            // With -t: "processed/planned".
            transactions = rest.trim().split('/').next().and_then(|n| n.parse().ok());
        } else if let Some(rest) = line.strip_prefix("number of failed transactions:") {
            failed = first_number(rest).map_or(0, |n| n as u64);
        }
    }
    let tps = tps.context("no `tps = ` line in pgbench's output")?;
    let transactions = transactions.context("no transaction count in pgbench's output")?;
    if transactions == 0 || !tps.is_finite() || tps <= 0.0 {
        bail!("pgbench processed no transactions");
    }
    Ok(Summary {
        tps,
        transactions,
        failed,
    })
}

/// The pgbench to run: `explicit`, else the one beside `pg_config`, else the newest under
/// /usr/lib/postgresql (Debian's layout; /usr/bin/pgbench there is a wrapper that wants a
/// cluster of its own), else the first on PATH.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    let bindir = std::process::Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join("pgbench"));
    let debian = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .and_then(|dirs| {
            dirs.filter_map(|d| {
                let d = d.ok()?;
                let version: u32 = d.file_name().to_str()?.parse().ok()?;
                Some((version, d.path().join("bin/pgbench")))
            })
            .filter(|(_, p)| p.is_file())
            .max()
            .map(|(_, p)| p)
        });
    let path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("pgbench"))
            .find(|p| p.is_file())
    });
    [bindir, debian, path]
        .into_iter()
        .flatten()
        .find(|p| p.is_file())
}

/// Runs `pgbench` for `duration` with `clients` connections, `rows` rows per transaction of
/// `body`; returns rows per second.
pub async fn rows_per_second(
    bin: &Path,
    url: &str,
    rows: usize,
    clients: usize,
    duration: Duration,
    body: &[u8],
) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join(format!("insert_{rows}.sql"));
    std::fs::write(&file, script(rows))?;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(clients);
    // The body in bytea's escape format: itself, with backslashes doubled.
    let text = std::str::from_utf8(body).context("bench bodies are text")?;
    let vars = [
        format!("body={}", text.replace('\\', "\\\\")),
        format!("headers={}", super::setup::headers_json(body.len())),
        format!("sha=\\x{}", const_hex::encode(sha2::Sha256::digest(body))),
    ];
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["-n", "-M", "prepared", "-c", &clients.to_string()])
        .args(["-j", &threads.to_string()])
        .args(["-T", &duration.as_secs().max(1).to_string()])
        .arg("-f")
        .arg(&file);
    for v in &vars {
        cmd.arg("-D").arg(v);
    }
    let out = cmd
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("running {}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} failed ({}):\n{stdout}\n{}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let summary = parse(&stdout).with_context(|| format!("pgbench said:\n{stdout}"))?;
    if summary.failed > 0 {
        bail!("pgbench: {} failed transactions:\n{stdout}", summary.failed);
    }
    Ok(summary.tps * rows as f64)
}

/// The middle of `runs` (the mean of the two middle ones for an even count). One pgbench run of
/// 10 s moved by up to a fifth between runs minutes apart on the same cluster (docs/performance.md,
/// round 6), more than the changes its ratios were meant to show.
pub fn median(runs: &[f64]) -> f64 {
    let mut sorted = runs.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_anchor_is_the_median_run() {
        assert_eq!(median(&[22_174.0, 18_423.0, 20_545.0]), 20_545.0);
        assert_eq!(median(&[2.0, 1.0]), 1.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert_eq!(median(&[]), 0.0);
    }

    const PG15: &str = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: /tmp/insert_1.sql
scaling factor: 1
query mode: prepared
number of clients: 32
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 136440
number of failed transactions: 0 (0.000%)
latency average = 2.345 ms
initial connection time = 25.928 ms
tps = 13644.123456 (without initial connection time)
";

    const PG13: &str = "transaction type: x.sql
number of clients: 32
number of transactions per client: 100
number of transactions actually processed: 3200/3200
latency average = 2.1 ms
tps = 14000.5 (including connections establishing)
tps = 15000.25 (excluding connections establishing)
";

    #[test]
    fn reads_the_tps_without_connection_setup() {
        let s = parse(PG15).unwrap();
        assert_eq!(
            s,
            Summary {
                tps: 13644.123456,
                transactions: 136440,
                failed: 0
            }
        );
        let old = parse(PG13).unwrap();
        assert_eq!((old.tps, old.transactions), (15000.25, 3200));
    }

    #[test]
    fn failed_transactions_are_read_and_empty_runs_refused() {
        let failed = PG15.replace(
            "failed transactions: 0 (0.000%)",
            "failed transactions: 12 (0.009%)",
        );
        assert_eq!(parse(&failed).unwrap().failed, 12);
        assert!(parse("pgbench: error: connection refused").is_err());
        let none = PG15.replace("processed: 136440", "processed: 0");
        assert!(parse(&none).is_err());
        assert!(parse(&PG15.replace("tps = 13644.123456", "tps = x")).is_err());
    }

    #[test]
    fn scripts_bind_every_row_and_stay_under_the_parameter_cap() {
        let one = script(1);
        assert_eq!(one.matches(":body::bytea").count(), 1);
        assert!(one.contains("ON CONFLICT (integration, event_id) DO NOTHING"));
        let fifty = script(50);
        assert_eq!(fifty.matches(":body::bytea").count(), 50);
        assert!(fifty.contains("'_1'") && fifty.contains("'_50'"));
        let params: usize = [":n ", ":headers::", ":body::", ":sha::"]
            .iter()
            .map(|p| fifty.matches(p).count())
            .sum();
        assert_eq!(params, 200);
    }
}
