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
            Ok(sqlx::query_as(LIST)
                .bind(filter.integration.as_deref())
                .bind(status)
                .bind(limit)
                .fetch_all(pool)
                .await?)
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
