//! The inbox statements, written once and expanded for each backend.

use super::Inbox;
use super::{EventSummary, ListFilter};
use crate::Result;
use chrono::{DateTime, Utc};
use sqlx::Row;

const LIST: &str = "SELECT id, integration, event_id, event_type, status, scheme, key_id, attempts, \
     signed_at, received_at, next_attempt_at, processed_at, last_error, dedupe_conflicts \
     FROM inbox_events \
     WHERE (CAST($1 AS TEXT) IS NULL OR integration = $1) AND (CAST($2 AS TEXT) IS NULL OR status = $2) \
     ORDER BY id DESC LIMIT $3";

const PRUNE_NONCES: &str = "DELETE FROM signature_nonces WHERE expires_at <= $1";

impl Inbox {
    /// Newest first, without bodies.
    pub async fn list(&self, filter: &ListFilter) -> Result<Vec<EventSummary>> {
        let status = filter.status.map(|s| s.as_str());
        let limit = if filter.limit > 0 {
            filter.limit
        } else {
            i64::MAX
        };
        backend!(self, pool => {
            let rows = sqlx::query(LIST)
                .bind(filter.integration.as_deref())
                .bind(status)
                .bind(limit)
                .fetch_all(pool)
                .await?;
            rows.iter()
                .map(|r| {
                    Ok(EventSummary {
                        id: r.try_get("id")?,
                        integration: r.try_get("integration")?,
                        event_id: r.try_get("event_id")?,
                        event_type: r.try_get("event_type")?,
                        status: r.try_get("status")?,
                        scheme: r.try_get("scheme")?,
                        key_id: r.try_get("key_id")?,
                        attempts: r.try_get("attempts")?,
                        signed_at: r.try_get("signed_at")?,
                        received_at: r.try_get("received_at")?,
                        next_attempt_at: r.try_get("next_attempt_at")?,
                        processed_at: r.try_get("processed_at")?,
                        last_error: r.try_get("last_error")?,
                        dedupe_conflicts: r.try_get("dedupe_conflicts")?,
                    })
                })
                .collect()
        })
    }

    /// Forgets signature digests whose window has passed. Returns how many were removed.
    pub async fn prune_nonces(&self, now: DateTime<Utc>) -> Result<u64> {
        backend!(self, pool => {
            Ok(sqlx::query(PRUNE_NONCES).bind(now).execute(pool).await?.rows_affected())
        })
    }

    /// A trivial round trip, for readiness.
    pub async fn ping(&self) -> Result<()> {
        backend!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        })
    }

    /// Number of rows in the inbox and nonce tables; used by tests and `inbox` diagnostics.
    pub async fn counts(&self) -> Result<(i64, i64)> {
        backend!(self, pool => {
            let events: i64 = sqlx::query("SELECT COUNT(*) FROM inbox_events").fetch_one(pool).await?.try_get(0)?;
            let nonces: i64 = sqlx::query("SELECT COUNT(*) FROM signature_nonces").fetch_one(pool).await?.try_get(0)?;
            Ok((events, nonces))
        })
    }
}

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
