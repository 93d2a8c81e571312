//! What catch-up (`spec.catchUp`) keeps in the database: who runs an integration's pass now, and
//! how the last passes went (for the controller's status).
//!
//! Exclusivity: on PostgreSQL a session advisory lock, held on one pooled connection for the whole
//! pass; if the process dies the server ends the session and the lock with it. On SQLite (one
//! file, usually one process, but `hookgate worker -f` may share it) a lease in `catch_up_runs`,
//! taken by one conditional UPDATE (SQLite has a single writer) and expiring by itself.

use super::{Inbox, Result};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use sqlx::pool::PoolConnection;
use sqlx::{Postgres, QueryBuilder, Row, Sqlite, SqlitePool};
use std::collections::HashSet;

/// The advisory lock key of an integration's catch-up: stable across processes and versions.
pub fn lock_key(integration: &str) -> i64 {
    let d = Sha256::digest(format!("hookgate/catch-up/{integration}").as_bytes());
    i64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// The right to run one integration's pass. Give it back with [`CatchUpLock::release`]; dropped
/// otherwise (a cancelled pass), the PostgreSQL session is closed, which frees the lock, and the
/// SQLite lease runs out.
pub struct CatchUpLock {
    inner: Held,
}

enum Held {
    Postgres {
        conn: Option<PoolConnection<Postgres>>,
        key: i64,
    },
    Sqlite {
        pool: SqlitePool,
        integration: String,
        token: String,
    },
}

impl Drop for CatchUpLock {
    fn drop(&mut self) {
        if let Held::Postgres {
            conn: Some(conn), ..
        } = &mut self.inner
        {
            // Back in the pool it would keep the lock for whoever borrows it next.
            conn.close_on_drop();
        }
    }
}

impl CatchUpLock {
    pub async fn release(mut self) -> Result<()> {
        match &mut self.inner {
            Held::Postgres { conn, key } => {
                if let Some(mut c) = conn.take() {
                    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
                        .bind(*key)
                        .execute(&mut *c)
                        .await;
                    if unlocked.is_err() {
                        c.close_on_drop();
                    }
                    unlocked?;
                }
            }
            Held::Sqlite {
                pool,
                integration,
                token,
            } => {
                sqlx::query(
                    "UPDATE catch_up_runs SET locked_until = NULL, lock_token = NULL \
                     WHERE integration = $1 AND lock_token = $2",
                )
                .bind(&*integration)
                .bind(&*token)
                .execute(&*pool)
                .await?;
            }
        }
        Ok(())
    }
}

/// How the passes of one integration went, as the last of them recorded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatchUpRun {
    pub integration: String,
    /// The last pass that ended, whatever its outcome.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The last pass that completed: `lastCatchUpAt`.
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_missing: i64,
    pub missing_total: i64,
    pub consecutive_failures: i64,
    /// A fixed label (`unauthorized`, `rate_limited`, ...).
    pub last_error_reason: Option<String>,
    /// Never holds the credential.
    pub last_error: Option<String>,
}

/// What one pass did: events found missing (stored or redelivered), and its error if it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResult {
    pub missing: i64,
    pub error: Option<(&'static str, String)>,
}

const SUCCEEDED: &str = "INSERT INTO catch_up_runs (integration, last_run_at, last_success_at, \
     last_missing, missing_total, consecutive_failures) VALUES ($1, $2, $2, $3, $3, 0) \
     ON CONFLICT (integration) DO UPDATE SET last_run_at = $2, last_success_at = $2, \
     last_missing = $3, missing_total = catch_up_runs.missing_total + $3, \
     consecutive_failures = 0, last_error_reason = NULL, last_error = NULL";

const FAILED: &str = "INSERT INTO catch_up_runs (integration, last_run_at, missing_total, \
     consecutive_failures, last_error_reason, last_error) VALUES ($1, $2, $3, 1, $4, $5) \
     ON CONFLICT (integration) DO UPDATE SET last_run_at = $2, \
     missing_total = catch_up_runs.missing_total + $3, \
     consecutive_failures = catch_up_runs.consecutive_failures + 1, \
     last_error_reason = $4, last_error = $5";

const RUN: &str = "SELECT integration, last_run_at, last_success_at, last_missing, missing_total, \
     consecutive_failures, last_error_reason, last_error FROM catch_up_runs WHERE integration = $1";

impl Inbox {
    /// Takes the right to run `integration`'s pass, or `None` when another holds it. `lease`
    /// bounds how long a SQLite lease outlives a process that died holding it.
    pub async fn try_lock_catch_up(
        &self,
        integration: &str,
        now: DateTime<Utc>,
        lease: std::time::Duration,
    ) -> Result<Option<CatchUpLock>> {
        match self {
            Inbox::Postgres(pool) => {
                let key = lock_key(integration);
                let mut conn = pool.acquire().await?;
                let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(key)
                    .fetch_one(&mut *conn)
                    .await?;
                Ok(got.then(|| CatchUpLock {
                    inner: Held::Postgres {
                        conn: Some(conn),
                        key,
                    },
                }))
            }
            Inbox::Sqlite(pool) => {
                let token = format!("{:032x}", rand::random::<u128>());
                sqlx::query(
                    "INSERT INTO catch_up_runs (integration) VALUES ($1) \
                     ON CONFLICT (integration) DO NOTHING",
                )
                .bind(integration)
                .execute(pool)
                .await?;
                let taken = sqlx::query(
                    "UPDATE catch_up_runs SET locked_until = $2, lock_token = $3 \
                     WHERE integration = $1 AND (locked_until IS NULL OR locked_until <= $4)",
                )
                .bind(integration)
                .bind(crate::time::after(now, lease))
                .bind(&token)
                .bind(now)
                .execute(pool)
                .await?
                .rows_affected();
                Ok((taken == 1).then(|| CatchUpLock {
                    inner: Held::Sqlite {
                        pool: pool.clone(),
                        integration: integration.to_string(),
                        token,
                    },
                }))
            }
        }
    }

    /// Records the end of a pass.
    pub async fn record_catch_up(
        &self,
        integration: &str,
        at: DateTime<Utc>,
        result: &RunResult,
    ) -> Result<()> {
        backend!(self, pool => {
            match &result.error {
                None => sqlx::query(SUCCEEDED)
                    .bind(integration)
                    .bind(at)
                    .bind(result.missing)
                    .execute(pool)
                    .await?,
                Some((reason, message)) => sqlx::query(FAILED)
                    .bind(integration)
                    .bind(at)
                    .bind(result.missing)
                    .bind(*reason)
                    .bind(message)
                    .execute(pool)
                    .await?,
            };
            Ok(())
        })
    }

    /// The record of `integration`'s passes, if it ever ran one.
    pub async fn catch_up_run(&self, integration: &str) -> Result<Option<CatchUpRun>> {
        backend!(self, pool => {
            let row = sqlx::query(RUN).bind(integration).fetch_optional(pool).await?;
            row.map(|r| {
                Ok(CatchUpRun {
                    integration: r.try_get(0)?,
                    last_run_at: r.try_get(1)?,
                    last_success_at: r.try_get(2)?,
                    last_missing: r.try_get(3)?,
                    missing_total: r.try_get(4)?,
                    consecutive_failures: r.try_get(5)?,
                    last_error_reason: r.try_get(6)?,
                    last_error: r.try_get(7)?,
                })
            })
            .transpose()
        })
    }

    /// Which of `ids` the inbox holds for `integration`.
    pub async fn known_event_ids(
        &self,
        integration: &str,
        ids: &[String],
    ) -> Result<HashSet<String>> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let rows: Vec<String> = match self {
            Inbox::Postgres(pool) => sqlx::query_scalar(
                "SELECT event_id FROM inbox_events WHERE integration = $1 AND event_id = ANY($2)",
            )
            .bind(integration)
            .bind(ids)
            .fetch_all(pool)
            .await?,
            Inbox::Sqlite(pool) => {
                let mut q = QueryBuilder::<Sqlite>::new(
                    "SELECT event_id FROM inbox_events WHERE integration = ",
                );
                q.push_bind(integration).push(" AND event_id IN (");
                let mut list = q.separated(", ");
                for id in ids {
                    list.push_bind(id.as_str());
                }
                q.push(")");
                q.build_query_scalar().fetch_all(pool).await?
            }
        };
        Ok(rows.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lock_keys_are_stable_and_differ_per_integration() {
        let a = super::lock_key("pay/stripe");
        assert_eq!(a, super::lock_key("pay/stripe"));
        assert_ne!(a, super::lock_key("pay/paddle"));
    }
}
