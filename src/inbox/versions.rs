//! The ordering gate's rows (`resource_versions`): a resource's delivery lease, which serializes
//! its deliveries across workers and processes without holding a connection, and its last
//! delivered version, moved only by a completion that still holds the lease. Forgetting versions
//! that stopped moving is retention's (`forget.rs`).

use super::{Inbox, Result};
use chrono::{DateTime, Utc};
use sqlx::Row;

/// Inside a completion's transaction (`Inbox::complete`): fenced on the lease token and on the
/// version the worker compared against.
pub(super) const ADVANCE_VERSION: &str = "UPDATE resource_versions SET version = $1, updated_at = $2 \
     WHERE integration = $3 AND resource_id = $4 AND lock_token = $5 \
     AND version IS NOT DISTINCT FROM $6";

const LOCK_RESOURCE: &str = "INSERT INTO resource_versions \
     (integration, resource_id, version, updated_at, locked_until, lock_token) \
     VALUES ($1, $2, NULL, $3, $4, $5) ON CONFLICT (integration, resource_id) \
     DO UPDATE SET locked_until = excluded.locked_until, lock_token = excluded.lock_token \
     WHERE resource_versions.locked_until IS NULL OR resource_versions.locked_until <= $3 \
     RETURNING version";

const UNLOCK_RESOURCE: &str = "UPDATE resource_versions SET locked_until = NULL, lock_token = NULL \
     WHERE integration = $1 AND resource_id = $2 AND lock_token = $3";

impl Inbox {
    /// Takes the delivery lease of one resource until `until`. `None` while another worker
    /// holds it; otherwise the stored form of the last delivered version (if any).
    pub async fn lock_resource(
        &self,
        integration: &str,
        resource: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        token: &str,
    ) -> Result<Option<Option<String>>> {
        backend!(self, pool => {
            let row = sqlx::query(LOCK_RESOURCE)
                .bind(integration)
                .bind(resource)
                .bind(now)
                .bind(until)
                .bind(token)
                .fetch_optional(pool)
                .await?;
            Ok(row.map(|r| r.try_get(0)).transpose()?)
        })
    }

    /// Gives the resource lease back (only if `token` still holds it).
    pub async fn unlock_resource(
        &self,
        integration: &str,
        resource: &str,
        token: &str,
    ) -> Result<()> {
        backend!(self, pool => {
            sqlx::query(UNLOCK_RESOURCE).bind(integration).bind(resource).bind(token).execute(pool).await?;
            Ok(())
        })
    }
}
