//! Reading the inbox back for people (`hookgate inbox`, tests): events without their bodies,
//! and the size of the tables.

use super::Result;
use super::{EventSummary, Inbox, ListFilter};
use sqlx::Row;

const LIST: &str = "SELECT id, integration, event_id, event_type, status, scheme, key_id, attempts, \
     signed_at, received_at, next_attempt_at, processed_at, last_error, dedupe_conflicts \
     FROM inbox_events \
     WHERE (CAST($1 AS TEXT) IS NULL OR integration = $1) AND (CAST($2 AS TEXT) IS NULL OR status = $2) \
     ORDER BY id DESC LIMIT $3";

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

    /// Number of rows in the inbox and nonce tables; used by tests and `inbox` diagnostics.
    pub async fn counts(&self) -> Result<(i64, i64)> {
        backend!(self, pool => {
            let events: i64 = sqlx::query("SELECT COUNT(*) FROM inbox_events").fetch_one(pool).await?.try_get(0)?;
            let nonces: i64 = sqlx::query("SELECT COUNT(*) FROM signature_nonces").fetch_one(pool).await?.try_get(0)?;
            Ok((events, nonces))
        })
    }
}
