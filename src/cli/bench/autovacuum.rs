//! Whether PostgreSQL's autovacuum worked in the bench's database while a phase ran. The intake
//! fills an empty inbox with tens of thousands of rows, so autovacuum vacuums and analyzes it
//! within its next minute, at a moment nobody chose: on this 2-core machine one such pass took
//! both cores for about a third of a second, and the half-rate phase's answers then took up to
//! 42 ms, its p99 30 ms (docs/performance.md, round 25). [`super::background`] reads it around
//! each latency phase and says when this happened.

use super::background::at_either_end;
use sqlx::PgPool;

/// PostgreSQL's autovacuum counters for the bench's database at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// VACUUMs autovacuum finished on the database's tables so far.
    vacuums: i64,
    /// ANALYZEs autovacuum finished so far.
    analyzes: i64,
    /// Autovacuum workers at work in the database at that moment.
    running: i64,
}

/// Reads the counters: PostgreSQL's shared statistics, which a worker updates as it finishes a
/// table, and which each statement here reads afresh.
pub async fn seen(pool: &PgPool) -> Result<Seen, sqlx::Error> {
    let row: (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(SUM(autovacuum_count), 0)::int8 FROM pg_stat_all_tables), \
                (SELECT COALESCE(SUM(autoanalyze_count), 0)::int8 FROM pg_stat_all_tables), \
                (SELECT COUNT(*) FROM pg_stat_activity \
                  WHERE backend_type = 'autovacuum worker' AND datname = current_database())",
    )
    .fetch_one(pool)
    .await?;
    Ok(Seen {
        vacuums: row.0,
        analyzes: row.1,
        running: row.2,
    })
}

/// What autovacuum did between `before` and `after`, as the end of a note about a phase; `None`
/// when it finished nothing and no worker was at work at either end.
pub fn during(before: Seen, after: Seen) -> Option<String> {
    let mut finished = Vec::new();
    for (n, what) in [
        (after.vacuums - before.vacuums, "VACUUM"),
        (after.analyzes - before.analyzes, "ANALYZE"),
    ] {
        if n > 0 {
            finished.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
        }
    }
    let mut said = Vec::new();
    if !finished.is_empty() {
        said.push(format!("finished {}", finished.join(" and ")));
    }
    if let Some(when) = at_either_end(before.running > 0, after.running > 0) {
        said.push(format!("was at work {when}"));
    }
    (!said.is_empty()).then(|| format!("autovacuum {}", said.join(", and ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(vacuums: i64, analyzes: i64, running: i64) -> Seen {
        Seen {
            vacuums,
            analyzes,
            running,
        }
    }

    #[test]
    fn nothing_done_and_nobody_at_work_says_nothing() {
        assert_eq!(during(seen(3, 4, 0), seen(3, 4, 0)), None);
    }

    #[test]
    fn what_finished_is_counted() {
        assert_eq!(
            during(seen(3, 4, 0), seen(4, 5, 0)).as_deref(),
            Some("autovacuum finished 1 VACUUM and 1 ANALYZE")
        );
        assert_eq!(
            during(seen(0, 0, 0), seen(0, 2, 0)).as_deref(),
            Some("autovacuum finished 2 ANALYZEs")
        );
    }

    #[test]
    fn a_worker_at_work_at_either_end_is_said_even_before_it_finishes() {
        assert_eq!(
            during(seen(1, 1, 0), seen(1, 1, 1)).as_deref(),
            Some("autovacuum was at work when it ended")
        );
        assert_eq!(
            during(seen(1, 1, 1), seen(2, 1, 0)).as_deref(),
            Some("autovacuum finished 1 VACUUM, and was at work when it began")
        );
        assert_eq!(
            during(seen(1, 1, 1), seen(1, 1, 2)).as_deref(),
            Some("autovacuum was at work when it began and when it ended")
        );
    }
}
