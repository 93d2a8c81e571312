//! What retention forgets besides events: the records kept about integrations that are gone
//! (ordering versions that stopped moving are `stale_versions`).
//!
//! `resource_versions` gets a row per resource an ordered integration ever delivered, and
//! `key_usage` and `catch_up_runs` a row per integration (and key). Without this they only grew:
//! a version per Stripe customer or subscription ever seen, and the records of every integration
//! ever deleted, which a new integration of the same name would then inherit: its status would
//! show the old keys' use and catch-up runs, and its ordering gate the old versions.

use super::{Inbox, Result};

/// `$1`: the integrations configured, in the backend's form `$configured` reads. A gone
/// integration's records go with its last event, so they are kept for as long as retention keeps
/// any of its events (its dead letters included).
macro_rules! forget_records {
    ($configured:literal) => {
        [
            forget_records!(@ "key_usage", $configured),
            forget_records!(@ "catch_up_runs", $configured),
            forget_records!(@ "resource_versions", $configured),
        ]
    };
    (@ $table:literal, $configured:literal) => {
        concat!(
            "DELETE FROM ", $table, " WHERE integration ", $configured,
            " AND NOT EXISTS (SELECT 1 FROM inbox_events e WHERE e.integration = ", $table,
            ".integration)"
        )
    };
}

const FORGET_RECORDS_PG: [&str; 3] = forget_records!("<> ALL($1::text[])");
/// SQLite has no arrays: the names come as a JSON array.
const FORGET_RECORDS_SQLITE: [&str; 3] =
    forget_records!("NOT IN (SELECT value FROM json_each($1))");

impl Inbox {
    /// Forgets the key use, catch-up and ordering records of every integration not in
    /// `configured` that has no event left in the inbox. Returns how many rows were removed.
    pub async fn forget_gone_integrations(&self, configured: &[String]) -> Result<u64> {
        let mut n = 0;
        match self {
            // A gone integration may leave a version per resource it ever delivered: millions,
            // in one statement, which may take longer than a request may wait.
            Inbox::Postgres(pool) => {
                let mut tx = super::maintenance(pool).await?;
                for sql in FORGET_RECORDS_PG {
                    n += sqlx::query(sql)
                        .bind(configured)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                }
                tx.commit().await?;
            }
            Inbox::Sqlite(pool) => {
                let configured = serde_json::to_string(configured).expect("strings serialize");
                for sql in FORGET_RECORDS_SQLITE {
                    n += sqlx::query(sql)
                        .bind(&configured)
                        .execute(pool)
                        .await?
                        .rows_affected();
                }
            }
        }
        Ok(n)
    }
}
