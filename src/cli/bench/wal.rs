//! What a measured run wrote to PostgreSQL's write-ahead log per row, and how many rows each
//! of its transactions committed. pgbench 1-row commits one row per transaction and relies on
//! PostgreSQL flushing the WAL of every backend that committed since the last flush; the
//! receiver commits a batch of events per transaction. Unlike the rates, these figures do not
//! move with the host's speed.
//!
//! The bytes are the distance `pg_current_wal_lsn()` moved: exact at any moment, and
//! cluster-wide (the bench's own statements between runs are not inside a run). `pg_stat_wal`
//! would add records and flushes, but a connection that stays open, as the receiver's pool
//! does, reports its counters only when idle and up to ten seconds late, so a run's figures
//! would land in the next one's.

use serde::Serialize;
use sqlx::PgPool;

/// What one run wrote.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerRow {
    pub rows: i64,
    pub wal_bytes_per_row: f64,
    /// Rows per transaction: pgbench's script says it, the receiver's batch histogram counts it.
    pub rows_per_commit: Option<f64>,
}

/// The WAL written between LSNs `before` and `after` for `rows` rows; `None` when no row was
/// added.
pub fn per_row(before: i64, after: i64, rows: i64, rows_per_commit: Option<f64>) -> Option<PerRow> {
    (rows > 0 && after >= before).then(|| PerRow {
        rows,
        wal_bytes_per_row: (after - before) as f64 / rows as f64,
        rows_per_commit,
    })
}

/// Events per transaction between two readings of the receiver's batch histogram, each
/// `[events, transactions]`.
pub fn per_commit(before: Option<[f64; 2]>, after: Option<[f64; 2]>) -> Option<f64> {
    let ([e0, t0], [e1, t1]) = (before?, after?);
    (t1 > t0).then(|| (e1 - e0) / (t1 - t0))
}

/// The receiver's `[events, transactions]` committed so far, when it serves `/metrics`.
pub async fn batches(admin: Option<std::net::SocketAddr>) -> Option<[f64; 2]> {
    use super::scrape;
    scrape::counters(admin?, [scrape::BATCHED_EVENTS, scrape::BATCHES])
        .await
        .ok()
}

/// The WAL's insert position in bytes, `None` when it cannot be read.
pub async fn lsn(pool: &PgPool) -> Option<i64> {
    sqlx::query_scalar("SELECT (pg_current_wal_lsn() - '0/0')::int8")
        .fetch_one(pool)
        .await
        .ok()
}

/// The WAL's insert position in bytes, and the inbox's rows.
async fn position(pool: &PgPool) -> Option<(i64, i64)> {
    sqlx::query_as(
        "SELECT (pg_current_wal_lsn() - '0/0')::int8, (SELECT COUNT(*) FROM inbox_events)",
    )
    .fetch_one(pool)
    .await
    .ok()
}

/// A run being measured: where the WAL and the inbox stood when it started.
pub struct Meter {
    lsn: i64,
    rows: i64,
}

impl Meter {
    /// `None` when the position cannot be read (a standby, a role without the function): the
    /// run then goes unmeasured, not failed.
    pub async fn start(pool: &PgPool) -> Option<Self> {
        let (lsn, rows) = position(pool).await?;
        Some(Self { lsn, rows })
    }

    pub async fn finish(self, pool: &PgPool, rows_per_commit: Option<f64>) -> Option<PerRow> {
        let (lsn, rows) = position(pool).await?;
        per_row(self.lsn, lsn, rows - self.rows, rows_per_commit)
    }
}

/// The runs measured, in the order they ran: a table in the report, and `wal` in its JSON.
#[derive(Debug, Default)]
pub struct Table(Vec<(String, PerRow)>);

impl Table {
    pub fn push(&mut self, run: &str, w: PerRow) {
        self.0.push((run.into(), w));
    }

    /// The table, or nothing when no run was measured.
    pub fn text(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| {
            let lines: String = self.0.iter().map(|(n, w)| line(n, w)).collect();
            heading() + &lines
        })
    }

    pub fn json(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|(run, w)| {
                let mut v = serde_json::to_value(w).expect("plain numbers");
                v["run"] = run.as_str().into();
                v
            })
            .collect()
    }
}

fn line(name: &str, w: &PerRow) -> String {
    format!(
        "{name:<44} {:>8} {:>10.0} {:>12}\n",
        w.rows,
        w.wal_bytes_per_row,
        w.rows_per_commit
            .map_or_else(|| "-".to_string(), |r| format!("{r:.1}"))
    )
}

fn heading() -> String {
    format!(
        "{:<44} {:>8} {:>10} {:>12}\n",
        "WAL written", "rows", "bytes/row", "rows/commit"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_the_distance_the_wal_moved_per_row_it_added() {
        let w = per_row(5_000_000, 25_000_000, 10_000, Some(12.5)).unwrap();
        assert_eq!(w.rows, 10_000);
        assert_eq!(w.wal_bytes_per_row, 2_000.0);
        assert_eq!(w.rows_per_commit, Some(12.5));
        assert_eq!(per_row(5, 10, 0, None), None, "no rows added");
        assert_eq!(per_row(10, 5, 3, None), None, "the WAL does not go back");
    }

    #[test]
    fn events_per_commit_come_from_the_histograms_growth() {
        let before = Some([1_000.0, 100.0]);
        assert_eq!(per_commit(before, Some([4_000.0, 250.0])), Some(20.0));
        assert_eq!(
            per_commit(before, before),
            None,
            "no transaction in between"
        );
        assert_eq!(
            per_commit(None, Some([1.0, 1.0])),
            None,
            "no metrics to read"
        );
    }

    #[test]
    fn the_table_keeps_the_order_runs_were_measured_in() {
        let mut t = Table::default();
        assert_eq!(t.text(), None, "nothing measured, nothing printed");
        t.push(
            "pgbench: 1 row/transaction",
            per_row(0, 3_000, 3, Some(1.0)).unwrap(),
        );
        t.push("intake", per_row(0, 3_000, 2, None).unwrap());
        let json = t.json();
        assert_eq!(json[0]["run"], "pgbench: 1 row/transaction");
        assert_eq!(json[0]["wal_bytes_per_row"], 1000.0);
        assert_eq!(json[1]["run"], "intake");
        assert!(json[1]["rows_per_commit"].is_null());
        let text = t.text().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
        assert!(
            lines[1].ends_with(" 1.0") && lines[2].ends_with(" -"),
            "{text}"
        );
    }
}
