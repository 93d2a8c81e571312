//! What a measured run wrote to PostgreSQL's write-ahead log per row, and how many rows each
//! of its transactions committed. pgbench 1-row commits one row per transaction and relies on
//! PostgreSQL flushing the WAL of every backend that committed since the last flush; the
//! receiver commits a batch of events per transaction. Unlike the rates, these figures do not
//! move with the host's speed.
//!
//! The bytes are the distance `pg_current_wal_lsn()` moved: exact at any moment, and
//! cluster-wide (the bench's own statements between runs are not inside a run).
//!
//! WAL flushes come from `pg_stat_wal`, which is cluster-wide too, and which a backend updates
//! when it goes idle, or up to ten seconds later when it reported less than a second before
//! (PostgreSQL 15's `PGSTAT_IDLE_INTERVAL`); a backend that exits reports at once. So they are
//! counted only for pgbench's anchor runs: pgbench's backends exit when it does, the bench's own
//! connections are made to report before and after, and no receiver is running yet. In the
//! pairs, the receiver's connections stay open and their late reports would land in pgbench's
//! figures.
//!
//! Because both are the server's, another database's writes during a run land in its figures.
//! Each run therefore also counts the sessions of other databases that were at work during it
//! (`pg_stat_activity`, current at every reading): a client backend or an autovacuum worker
//! that was not idle at either end, or changed state or connected in between. A session that
//! connected and left within the run is no longer there to be seen, so each run also counts the
//! rows other databases inserted, updated or deleted (`pg_stat_database`), which a backend reports
//! when it exits (at once), goes idle (at most once a second) or stays idle (up to ten seconds
//! later): a run may be charged with rows written up to ten seconds before it, never spared rows
//! written during it by a session that has ended or gone idle for ten seconds. Autovacuum's visits
//! to other databases write no rows there. The report notes each run it found either in.

use serde::Serialize;
use sqlx::PgPool;
use std::time::Duration;

/// What one run wrote.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerRow {
    pub rows: i64,
    pub wal_bytes_per_row: f64,
    /// Rows per transaction: pgbench's script says it, the receiver's batch histogram counts it.
    pub rows_per_commit: Option<f64>,
    /// Rows per WAL flush, where flushes were counted (pgbench's anchor runs): how many commits
    /// PostgreSQL's own group commit put behind one flush.
    pub rows_per_flush: Option<f64>,
    /// Sessions of other databases at work during the run, whose WAL is in these figures too;
    /// `None` when they could not be read.
    pub other_sessions: Option<i64>,
    /// Rows other databases inserted, updated or deleted during the run, as their sessions
    /// reported them (see the module's comment); `None` when they could not be read.
    pub other_rows: Option<i64>,
}

/// The WAL written between LSNs `before` and `after` for `rows` rows, with the WAL `flushes`
/// when counted; `None` when no row was added.
pub fn per_row(
    before: i64,
    after: i64,
    rows: i64,
    rows_per_commit: Option<f64>,
    flushes: Option<i64>,
) -> Option<PerRow> {
    (rows > 0 && after >= before).then(|| PerRow {
        rows,
        wal_bytes_per_row: (after - before) as f64 / rows as f64,
        rows_per_commit,
        rows_per_flush: flushes.filter(|f| *f > 0).map(|f| rows as f64 / f as f64),
        other_sessions: None,
        other_rows: None,
    })
}

/// Long enough for the WAL writer and an exited backend to have reported: a process reports at
/// most once a second.
const REPORTED: Duration = Duration::from_millis(1100);

/// WAL flushes so far (`pg_stat_wal.wal_sync`), once every connection of `pool` has reported
/// what it did (`pg_stat_force_next_flush()`, PostgreSQL 15 and later); `None` before 15.
async fn flushes(pool: &PgPool) -> Option<i64> {
    let conns = futures::future::try_join_all((0..pool.size()).map(|_| pool.acquire()))
        .await
        .ok()?;
    for mut conn in conns {
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&mut *conn)
            .await
            .ok()?;
    }
    tokio::time::sleep(REPORTED).await;
    sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(pool)
        .await
        .ok()
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
    let lsn = lsn(pool).await?;
    let rows = sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events")
        .fetch_one(pool)
        .await
        .ok()?;
    Some((lsn, rows))
}

/// What the run `meter` measured wrote, or `None` when it went unmeasured.
pub async fn measured(
    meter: Option<Meter>,
    pool: &PgPool,
    rows_per_commit: Option<f64>,
) -> Option<PerRow> {
    meter?.finish(pool, rows_per_commit).await
}

/// The sessions of databases other than the bench's that are at work: a client backend or an
/// autovacuum worker not idle, or one that changed state or connected at or after `$1` (the
/// server's clock; `NULL` counts only those not idle).
const ELSEWHERE: &str = "SELECT COALESCE(array_agg(pid), '{}') FROM pg_stat_activity \
     WHERE datname <> current_database() \
       AND backend_type IN ('client backend', 'autovacuum worker') \
       AND (state IS DISTINCT FROM 'idle' OR state_change >= $1 OR backend_start >= $1)";

/// The rows databases other than the bench's have inserted, updated or deleted, as reported.
const WRITTEN_ELSEWHERE: &str = "SELECT COALESCE(sum(tup_inserted + tup_updated + tup_deleted), 0)::int8 \
     FROM pg_stat_database WHERE datname IS NOT NULL AND datname <> current_database()";

/// Who was at work elsewhere when a run began: the server's clock then, the sessions, and the
/// rows written elsewhere so far.
struct Elsewhere {
    since: chrono::DateTime<chrono::Utc>,
    at_work: Vec<i32>,
    written: Option<i64>,
}

impl Elsewhere {
    async fn start(pool: &PgPool) -> Option<Self> {
        let since = sqlx::query_scalar("SELECT clock_timestamp()")
            .fetch_one(pool)
            .await
            .ok()?;
        let at_work = at_work(pool, None).await?;
        let written = written(pool).await;
        Some(Self {
            since,
            at_work,
            written,
        })
    }

    /// The sessions at work at either end or in between, each counted once, and the rows
    /// written elsewhere in between.
    async fn finish(self, pool: &PgPool) -> (Option<i64>, Option<i64>) {
        let rows = match (self.written, written(pool).await) {
            (Some(before), Some(after)) => Some((after - before).max(0)),
            _ => None,
        };
        let Some(mut seen) = at_work(pool, Some(self.since)).await else {
            return (None, rows);
        };
        seen.extend(self.at_work);
        seen.sort_unstable();
        seen.dedup();
        (Some(seen.len() as i64), rows)
    }
}

async fn written(pool: &PgPool) -> Option<i64> {
    sqlx::query_scalar(WRITTEN_ELSEWHERE)
        .fetch_one(pool)
        .await
        .ok()
}

async fn at_work(pool: &PgPool, since: Option<chrono::DateTime<chrono::Utc>>) -> Option<Vec<i32>> {
    sqlx::query_scalar(ELSEWHERE)
        .bind(since)
        .fetch_one(pool)
        .await
        .ok()
}

/// A run being measured: where the WAL and the inbox stood when it started, the WAL flushes so
/// far when they are counted, and who was at work in other databases.
pub struct Meter {
    lsn: i64,
    rows: i64,
    flushes: Option<i64>,
    elsewhere: Option<Elsewhere>,
}

impl Meter {
    /// `None` when the position cannot be read (a standby, a role without the function): the
    /// run then goes unmeasured, not failed.
    pub async fn start(pool: &PgPool) -> Option<Self> {
        let elsewhere = Elsewhere::start(pool).await;
        let (lsn, rows) = position(pool).await?;
        Some(Self {
            lsn,
            rows,
            flushes: None,
            elsewhere,
        })
    }

    /// Also counts WAL flushes; only for runs whose every connection reports when it ends or
    /// is `pool`'s (see the module's comment). Takes a second more at each end.
    pub async fn start_counting_flushes(pool: &PgPool) -> Option<Self> {
        let flushes = flushes(pool).await;
        Some(Self {
            flushes,
            ..Self::start(pool).await?
        })
    }

    pub async fn finish(self, pool: &PgPool, rows_per_commit: Option<f64>) -> Option<PerRow> {
        let (lsn, rows) = position(pool).await?;
        let flushes = match self.flushes {
            Some(before) => flushes(pool).await.map(|after| after - before),
            None => None,
        };
        let (other_sessions, other_rows) = match self.elsewhere {
            Some(e) => e.finish(pool).await,
            None => (None, None),
        };
        per_row(self.lsn, lsn, rows - self.rows, rows_per_commit, flushes).map(|w| PerRow {
            other_sessions,
            other_rows,
            ..w
        })
    }
}

/// The runs measured, in the order they ran: a table in the report, and `wal` in its JSON.
#[derive(Debug, Default)]
pub struct Table(Vec<(String, PerRow)>);

impl Table {
    pub fn push(&mut self, run: &str, w: PerRow) {
        self.0.push((run.into(), w));
    }

    /// The note a run's figures need: other databases' sessions were at work during it, or
    /// rows were written there.
    pub fn disturbed(run: &str, w: &PerRow) -> Option<String> {
        let (sessions, rows) = (w.other_sessions.unwrap_or(0), w.other_rows.unwrap_or(0));
        if sessions == 0 && rows == 0 {
            return None;
        }
        let plural =
            |n: i64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        Some(format!(
            "{run}: other databases were at work during it ({} seen, {} written); the WAL it \
             wrote and its flushes are counted server-wide, so its figures include theirs, and \
             its rates shared the server with them",
            plural(sessions, "session", "sessions"),
            plural(rows, "row", "rows"),
        ))
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
    let or_dash = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |r| format!("{r:.1}"));
    let count = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |n| n.to_string());
    let elsewhere = format!("{}/{}", count(w.other_sessions), count(w.other_rows));
    format!(
        "{name:<44} {:>8} {:>10.0} {:>12} {:>11} {:>16}\n",
        w.rows,
        w.wal_bytes_per_row,
        or_dash(w.rows_per_commit),
        or_dash(w.rows_per_flush),
        elsewhere
    )
}

fn heading() -> String {
    format!(
        "{:<44} {:>8} {:>10} {:>12} {:>11} {:>16}\n",
        "WAL written", "rows", "bytes/row", "rows/commit", "rows/flush", "elsewhere s/rows"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_the_distance_the_wal_moved_per_row_it_added() {
        let w = per_row(5_000_000, 25_000_000, 10_000, Some(12.5), Some(1_250)).unwrap();
        assert_eq!(w.rows, 10_000);
        assert_eq!(w.wal_bytes_per_row, 2_000.0);
        assert_eq!(w.rows_per_commit, Some(12.5));
        assert_eq!(w.rows_per_flush, Some(8.0));
        assert_eq!(per_row(5, 10, 0, None, None), None, "no rows added");
        assert_eq!(
            per_row(10, 5, 3, None, None),
            None,
            "the WAL does not go back"
        );
        // Flushes not counted, or none counted (asynchronous commit): no figure, not infinity.
        for flushes in [None, Some(0)] {
            assert_eq!(
                per_row(0, 10, 5, None, flushes).unwrap().rows_per_flush,
                None
            );
        }
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
        let pgbench = per_row(0, 3_000, 3, Some(1.0), Some(2)).unwrap();
        t.push("pgbench: 1 row/transaction", pgbench);
        t.push("intake", per_row(0, 3_000, 2, None, None).unwrap());
        let json = t.json();
        assert_eq!(json[0]["run"], "pgbench: 1 row/transaction");
        assert_eq!(json[0]["wal_bytes_per_row"], 1000.0);
        assert_eq!(json[0]["rows_per_flush"], 1.5);
        assert_eq!(json[1]["run"], "intake");
        assert!(json[1]["rows_per_commit"].is_null());
        let text = t.text().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
        assert!(
            lines[1].ends_with(" 1.0         1.5              -/-"),
            "{text}"
        );
        assert!(
            lines[2].ends_with(" -           -              -/-"),
            "{text}"
        );
    }

    #[test]
    fn a_run_shared_with_other_databases_says_so() {
        let alone = PerRow {
            other_sessions: Some(0),
            other_rows: Some(0),
            ..per_row(0, 3_000, 3, Some(1.0), None).unwrap()
        };
        let with = |sessions: Option<i64>, rows: Option<i64>| PerRow {
            other_sessions: sessions,
            other_rows: rows,
            ..alone
        };
        assert_eq!(Table::disturbed("intake", &alone), None);
        assert_eq!(
            Table::disturbed("intake", &with(None, None)),
            None,
            "not read: no claim"
        );
        let note = Table::disturbed("intake", &with(Some(2), Some(0))).unwrap();
        assert!(
            note.starts_with(
                "intake: other databases were at work during it (2 sessions seen, 0 rows written)"
            ),
            "{note}"
        );
        assert!(note.contains("its rates shared the server"), "{note}");
        // A session that wrote and left within the run: only its rows tell.
        let gone = Table::disturbed("x", &with(Some(0), Some(1))).unwrap();
        assert!(gone.contains("(0 sessions seen, 1 row written)"), "{gone}");
        let one = Table::disturbed("x", &with(Some(1), None)).unwrap();
        assert!(one.contains("(1 session seen, 0 rows written)"), "{one}");
        let mut t = Table::default();
        t.push("alone", alone);
        t.push("shared", with(Some(2), Some(1_500)));
        t.push("unread", with(None, None));
        let text = t.text().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(" elsewhere s/rows"), "{text}");
        assert!(lines[1].ends_with(" 0/0"), "{text}");
        assert!(lines[2].ends_with(" 2/1500"), "{text}");
        assert!(lines[3].ends_with(" -/-"), "{text}");
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
        let json = t.json();
        assert_eq!(json[1]["other_sessions"], 2);
        assert_eq!(json[1]["other_rows"], 1_500);
        assert_eq!(json[0]["other_rows"], 0);
        assert!(json[2]["other_rows"].is_null());
    }
}
