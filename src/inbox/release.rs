//! Giving claims back without counting an attempt: one when a delivery cannot start (its resource
//! is busy, its integration unknown, a handed-over event waited too long), many when a pool stops
//! with events it never started. Fenced like every write after a claim, on the lease alone (see
//! `COMPLETE_MANY_PG`): a claim lost to another worker releases nothing.

use super::{Claimed, Inbox, Result};
use chrono::{DateTime, Utc};

const RELEASE: &str = "UPDATE inbox_events SET attempts = attempts - 1, locked_until = NULL, \
     next_attempt_at = $1, status = CASE WHEN attempts - 1 = 0 THEN 'pending' ELSE 'retry' END \
     WHERE id = $2 AND attempts = $3 AND locked_until = $4";

const RELEASE_MANY_PG: &str = "UPDATE inbox_events e SET attempts = e.attempts - 1, \
     locked_until = NULL, next_attempt_at = $1, \
     status = CASE WHEN e.attempts - 1 = 0 THEN 'pending' ELSE 'retry' END \
     FROM UNNEST($2::bigint[], $3::bigint[], $4::timestamptz[]) AS i(id, attempt, lease_until) \
     WHERE e.id = i.id AND e.attempts = i.attempt AND e.locked_until = i.lease_until";

/// Events per statement (or SQLite transaction) when many are released: a stopping pool may hold
/// thousands handed over and never started.
const RELEASE_CHUNK: usize = 1000;

impl Inbox {
    /// Gives a claim back without counting it as an attempt (shutdown, resource busy, unknown
    /// integration); it becomes due again at `retry_at`.
    pub async fn release(&self, claimed: &Claimed, retry_at: DateTime<Utc>) -> Result<bool> {
        backend!(self, pool => {
            let n = sqlx::query(RELEASE)
                .bind(retry_at)
                .bind(claimed.id)
                .bind(claimed.attempt)
                .bind(claimed.lease_until)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n > 0)
        })
    }

    /// [`Inbox::release`] for many claims, a thousand per statement (PostgreSQL) or transaction
    /// (SQLite) instead of one each; the number released. Claims lost to another worker are
    /// skipped, as one by one.
    pub async fn release_many(&self, claims: &[Claimed], retry_at: DateTime<Utc>) -> Result<u64> {
        let mut released = 0;
        for chunk in claims.chunks(RELEASE_CHUNK) {
            released += match self {
                Inbox::Postgres(pool) => sqlx::query(RELEASE_MANY_PG)
                    .bind(retry_at)
                    .bind(chunk.iter().map(|c| c.id).collect::<Vec<_>>())
                    .bind(chunk.iter().map(|c| c.attempt).collect::<Vec<_>>())
                    .bind(chunk.iter().map(|c| c.lease_until).collect::<Vec<_>>())
                    .execute(pool)
                    .await?
                    .rows_affected(),
                Inbox::Sqlite(pool) => {
                    let mut tx = pool.begin().await?;
                    let mut n = 0;
                    for c in chunk {
                        n += sqlx::query(RELEASE)
                            .bind(retry_at)
                            .bind(c.id)
                            .bind(c.attempt)
                            .bind(c.lease_until)
                            .execute(&mut *tx)
                            .await?
                            .rows_affected();
                    }
                    tx.commit().await?;
                    n
                }
            };
        }
        Ok(released)
    }
}
