//! What the events a phase stored take on disk, for sizing a database: `inbox_events` (heap,
//! TOAST and every index) and `delivery_attempts` (the same), per stored event. Read twice: as
//! the phase left the tables, where each delivered event was inserted, claimed and completed
//! (three versions of its row until VACUUM reclaims two), and after `VACUUM FULL` has rewritten
//! them to the live rows alone. Like the WAL figures, PostgreSQL's own sizes: exact, whatever the
//! host's speed.

use sqlx::PgPool;

/// Bytes per stored event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Storage {
    pub events: i64,
    /// As the phase left the tables, dead row versions included.
    pub as_left: f64,
    /// The live rows only: what a retained event costs once VACUUM has reused the space of its
    /// old versions.
    pub compacted: f64,
}

const SIZE: &str = "SELECT CAST(pg_total_relation_size('inbox_events') \
     + pg_total_relation_size('delivery_attempts') AS BIGINT)";

/// `None` when the inbox is empty. Takes the tables' exclusive lock while `VACUUM FULL` runs:
/// only between phases, with no receiver or worker running.
pub async fn measure(pool: &PgPool) -> anyhow::Result<Option<Storage>> {
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events")
        .fetch_one(pool)
        .await?;
    if events == 0 {
        return Ok(None);
    }
    let left: i64 = sqlx::query_scalar(SIZE).fetch_one(pool).await?;
    sqlx::raw_sql("VACUUM FULL inbox_events, delivery_attempts")
        .execute(pool)
        .await?;
    let compacted: i64 = sqlx::query_scalar(SIZE).fetch_one(pool).await?;
    let per_event = |bytes: i64| bytes as f64 / events as f64;
    Ok(Some(Storage {
        events,
        as_left: per_event(left),
        compacted: per_event(compacted),
    }))
}
