//! Traffic figures by integration: counts by status for the metrics gauges and the controller's
//! status, and when each key last verified an event.

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};
use sqlx::Row;

const KEYS_LAST_USED: &str =
    "SELECT key_id, MAX(received_at) FROM inbox_events WHERE integration = $1 GROUP BY key_id";

impl Inbox {
    /// When each key last verified an event of `integration` (for the controller's `lastUsedAt`).
    pub async fn keys_last_used(
        &self,
        integration: &str,
    ) -> Result<std::collections::HashMap<String, DateTime<Utc>>> {
        backend!(self, pool => {
            let rows = sqlx::query(KEYS_LAST_USED).bind(integration).fetch_all(pool).await?;
            rows.iter().map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).collect()
        })
    }
}

/// One (integration, status) count of the inbox, for the metrics gauges and the controller status.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxStat {
    pub integration: String,
    pub status: String,
    pub count: i64,
    /// For pending, retry and processing: seconds since the oldest of them was received.
    pub oldest_age_seconds: Option<i64>,
    pub last_received_at: Option<DateTime<Utc>>,
    pub dedupe_conflicts: i64,
}

const STATS: &str = "SELECT integration, status, COUNT(*), MIN(received_at), MAX(received_at), \
     CAST(SUM(dedupe_conflicts) AS BIGINT) FROM inbox_events \
     WHERE CAST($1 AS TEXT) IS NULL OR integration = $1 \
     GROUP BY integration, status ORDER BY integration, status";

impl Inbox {
    /// Counts by integration and status (one pass over the table's index).
    pub async fn stats(&self, now: DateTime<Utc>) -> Result<Vec<InboxStat>> {
        self.stats_of(None, now).await
    }

    /// The same for one integration (`namespace/name`), or all when `None`.
    pub async fn stats_of(
        &self,
        integration: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<InboxStat>> {
        backend!(self, pool => {
            let rows = sqlx::query(STATS).bind(integration).fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    let status: String = r.try_get(1)?;
                    let oldest: Option<DateTime<Utc>> = r.try_get(3)?;
                    let waiting = matches!(status.as_str(), "pending" | "retry" | "processing");
                    Ok(InboxStat {
                        integration: r.try_get(0)?,
                        count: r.try_get(2)?,
                        oldest_age_seconds: oldest.filter(|_| waiting).map(|t| (now - t).num_seconds().max(0)),
                        last_received_at: r.try_get(4)?,
                        dedupe_conflicts: r.try_get::<Option<i64>, _>(5)?.unwrap_or(0),
                        status,
                    })
                })
                .collect()
        })
    }
}
