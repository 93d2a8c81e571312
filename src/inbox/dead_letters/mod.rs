//! Dead letters: listing them, inspecting one event with its delivery history, and replaying or
//! purging a selection of them.
//!
//! Only rows whose status is `dead_letter` are ever replayed or purged; every statement carries
//! that condition itself, so a row that changed status in between is simply not affected.

use super::audit::record_audit;
use super::{Apply, AuditAction, AuditedEvent, Inbox};
use super::{Error, Result};
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use sqlx::types::Json;
use sqlx::{AssertSqlSafe, Row};

#[macro_use]
mod selection;
use selection::{Param, id_chunks, selection};

/// Which dead letters [`Inbox::dead_letters`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLetterFilter {
    /// `namespace/name`; `None` for every integration.
    pub integration: Option<String>,
    /// Only events dead-lettered at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// At most this many rows; `0` or less means no limit.
    pub limit: i64,
}

/// One dead-lettered event, without body or headers (read by column name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct DeadLetter {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub received_at: DateTime<Utc>,
    pub dead_lettered_at: Option<DateTime<Utc>>,
}

/// One recorded delivery attempt of an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    pub attempt: i64,
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub outcome: String,
}

/// Everything stored about one event (any status), with its delivery attempts in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventDetail {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
    pub event_type: Option<String>,
    pub status: String,
    pub scheme: String,
    pub key_id: String,
    pub signed_at: Option<DateTime<Utc>>,
    /// `[[name, value], ...]` as stored by the receiver (signature headers are never stored).
    pub headers: serde_json::Value,
    pub content_type: Option<String>,
    /// The raw body; empty once purged (see `body_purged_at`). Serialized as base64.
    #[serde(rename = "body_base64", serialize_with = "base64_bytes")]
    pub body: Vec<u8>,
    /// Hex SHA-256 of the body as received (kept when the body is purged).
    pub body_sha256: String,
    /// The `attempts` column: attempts made in the current retry schedule.
    pub attempt_count: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub locked_until: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub dedupe_conflicts: i64,
    pub received_at: DateTime<Utc>,
    pub processed_at: Option<DateTime<Utc>>,
    pub ignored_reason: Option<String>,
    pub body_purged_at: Option<DateTime<Utc>>,
    pub dead_lettered_at: Option<DateTime<Utc>>,
    /// Every recorded delivery attempt, oldest first (kept across replays).
    pub attempts: Vec<AttemptRecord>,
}

fn base64_bytes<S: Serializer>(bytes: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    use base64::Engine;
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Which dead letters [`Inbox::replay_dead_letters`] and [`Inbox::purge_dead_letters`] act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaySelector {
    /// These row ids (ids that are not dead letters are skipped).
    Ids(Vec<i64>),
    /// Every dead letter of one integration, optionally only those dead-lettered since an instant.
    Integration {
        integration: String,
        since: Option<DateTime<Utc>>,
    },
    /// Every dead letter.
    All,
}

// When a dead letter was dead-lettered. Rows without the timestamp (written before it existed)
// fall back to their arrival, so that `since` and the ordering never silently drop them.
const DEAD_AT: &str = "COALESCE(dead_lettered_at, received_at)";

const LIST_DEAD: &str = "SELECT id, integration, event_id, event_type, attempts, last_error, \
     received_at, dead_lettered_at FROM inbox_events \
     WHERE status = 'dead_letter' AND (CAST($1 AS TEXT) IS NULL OR integration = $1) \
     AND (CAST($2 AS TEXT) IS NULL OR COALESCE(dead_lettered_at, received_at) >= $2) \
     ORDER BY COALESCE(dead_lettered_at, received_at) DESC, id DESC LIMIT $3";

const DETAIL: &str = "SELECT id, integration, event_id, event_type, status, scheme, key_id, \
     signed_at, headers, content_type, body, body_sha256, attempts, next_attempt_at, locked_until, \
     last_error, dedupe_conflicts, received_at, processed_at, ignored_reason, body_purged_at, \
     dead_lettered_at FROM inbox_events WHERE id = $1";

const DETAIL_ATTEMPTS: &str = "SELECT attempt, started_at, duration_ms, status_code, error, outcome \
     FROM delivery_attempts WHERE event_row = $1 ORDER BY id";

const STATUS_OF: &str = "SELECT status FROM inbox_events WHERE id = $1";

/// A fresh retry schedule: due now, no lease, no attempts yet. `last_error` and the rows in
/// `delivery_attempts` stay as they are.
const REPLAY_SET: &str = "UPDATE inbox_events SET status = 'pending', attempts = 0, \
     next_attempt_at = $1, locked_until = NULL, dead_lettered_at = NULL \
     WHERE status = 'dead_letter'";

const PURGE_EVENTS: &str = "DELETE FROM inbox_events WHERE status = 'dead_letter'";

/// What a replay or purge returns of each row it changed, for the result and the audit row.
const AFFECTED: &str = "id, integration, event_id";

fn affected<R: Row>(row: &R) -> Result<AuditedEvent>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    Ok(AuditedEvent {
        id: row.try_get(0)?,
        integration: row.try_get(1)?,
        event_id: row.try_get(2)?,
    })
}

const SELECT_DEAD: &str = "SELECT id FROM inbox_events WHERE status = 'dead_letter'";

impl Inbox {
    /// Dead letters, most recently dead-lettered first.
    pub async fn dead_letters(&self, f: &DeadLetterFilter) -> Result<Vec<DeadLetter>> {
        let limit = if f.limit > 0 { f.limit } else { i64::MAX };
        backend!(self, pool => {
            Ok(sqlx::query_as(LIST_DEAD)
                .bind(f.integration.as_deref())
                .bind(f.since)
                .bind(limit)
                .fetch_all(pool)
                .await?)
        })
    }

    /// One event of any status with its delivery attempts, or `None` when there is no such row.
    pub async fn event_detail(&self, id: i64) -> Result<Option<EventDetail>> {
        backend!(self, pool => {
            let Some(r) = sqlx::query(DETAIL).bind(id).fetch_optional(pool).await? else {
                return Ok(None);
            };
            let attempts = sqlx::query(DETAIL_ATTEMPTS)
                .bind(id)
                .fetch_all(pool)
                .await?
                .iter()
                .map(|a| {
                    Ok(AttemptRecord {
                        attempt: a.try_get("attempt")?,
                        started_at: a.try_get("started_at")?,
                        duration_ms: a.try_get("duration_ms")?,
                        status_code: a.try_get("status_code")?,
                        error: a.try_get("error")?,
                        outcome: a.try_get("outcome")?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let headers: Json<serde_json::Value> = r.try_get("headers")?;
            let sha: Vec<u8> = r.try_get("body_sha256")?;
            Ok(Some(EventDetail {
                id: r.try_get("id")?,
                integration: r.try_get("integration")?,
                event_id: r.try_get("event_id")?,
                event_type: r.try_get("event_type")?,
                status: r.try_get("status")?,
                scheme: r.try_get("scheme")?,
                key_id: r.try_get("key_id")?,
                signed_at: r.try_get("signed_at")?,
                headers: headers.0,
                content_type: r.try_get("content_type")?,
                body: r.try_get("body")?,
                body_sha256: const_hex::encode(sha),
                attempt_count: r.try_get("attempts")?,
                next_attempt_at: r.try_get("next_attempt_at")?,
                locked_until: r.try_get("locked_until")?,
                last_error: r.try_get("last_error")?,
                dedupe_conflicts: r.try_get("dedupe_conflicts")?,
                received_at: r.try_get("received_at")?,
                processed_at: r.try_get("processed_at")?,
                ignored_reason: r.try_get("ignored_reason")?,
                body_purged_at: r.try_get("body_purged_at")?,
                dead_lettered_at: r.try_get("dead_lettered_at")?,
                attempts,
            }))
        })
    }

    /// The status of each of `ids` that exists (in the order given; missing ids are left out).
    pub async fn event_statuses(&self, ids: &[i64]) -> Result<Vec<(i64, super::Status)>> {
        let mut out = Vec::with_capacity(ids.len());
        backend!(self, pool => {
            for &id in ids {
                let row = sqlx::query(STATUS_OF).bind(id).fetch_optional(pool).await?;
                if let Some(row) = row {
                    let status: String = row.try_get(0)?;
                    let status = status.parse().map_err(Error::Config)?;
                    out.push((id, status));
                }
            }
        });
        Ok(out)
    }

    /// Puts the selected dead letters back in the queue with a fresh retry schedule: status
    /// `pending`, no attempts, due at `now`, no lease. `last_error` and the delivery history are
    /// kept. Returns the ids replayed, ascending; with [`Apply::DryRun`], the ids that would be,
    /// and nothing changes. Rows that are not dead letters are never touched nor returned. A real
    /// replay is recorded in `dlq_audit`, in the same transaction, as made by the actor.
    pub async fn replay_dead_letters(
        &self,
        sel: &ReplaySelector,
        now: DateTime<Utc>,
        apply: Apply<'_>,
    ) -> Result<Vec<i64>> {
        let Apply::By(actor) = apply else {
            return self.select_dead_letters(sel).await;
        };
        let mut done: Vec<AuditedEvent> = Vec::new();
        backend!(self, pool => {
            let mut tx = pool.begin().await?;
            for (cond, params) in selection(sel, 2) {
                let sql = format!("{REPLAY_SET}{cond} RETURNING {AFFECTED}");
                let q = bind_params!(sqlx::query(AssertSqlSafe(sql)).bind(now), &params);
                for row in q.fetch_all(&mut *tx).await? {
                    done.push(affected(&row)?);
                }
            }
            done.sort_unstable_by_key(|e| e.id);
            // Recorded at the wall clock: `now` is when the events become due, which a caller
            // may choose.
            record_audit!(&mut *tx, actor, AuditAction::Replay, sel, &done, Utc::now());
            tx.commit().await?;
        });
        Ok(done.iter().map(|e| e.id).collect())
    }

    /// Deletes the selected dead letters with their delivery attempts. Returns the ids deleted,
    /// ascending; with [`Apply::DryRun`], the ids that would be, and nothing changes. A real
    /// purge is recorded in `dlq_audit`, in the same transaction.
    pub async fn purge_dead_letters(
        &self,
        sel: &ReplaySelector,
        apply: Apply<'_>,
    ) -> Result<Vec<i64>> {
        let Apply::By(actor) = apply else {
            return self.select_dead_letters(sel).await;
        };
        let now = Utc::now();
        let mut done: Vec<AuditedEvent> = Vec::new();
        backend!(self, pool => {
            let mut tx = pool.begin().await?;
            for (cond, params) in selection(sel, 1) {
                let sql = format!("{PURGE_EVENTS}{cond} RETURNING {AFFECTED}");
                let q = bind_params!(sqlx::query(AssertSqlSafe(sql)), &params);
                for row in q.fetch_all(&mut *tx).await? {
                    done.push(affected(&row)?);
                }
            }
            done.sort_unstable_by_key(|e| e.id);
            let ids: Vec<i64> = done.iter().map(|e| e.id).collect();
            // PostgreSQL's attempts have no foreign key (migration 0005) and SQLite's cascade
            // needs `foreign_keys` on the connection, so the attempts go explicitly. The events
            // are deleted first so that only the history of rows that really went is removed.
            for (list, params) in id_chunks(&ids, 1) {
                let sql = format!("DELETE FROM delivery_attempts WHERE event_row IN ({list})");
                bind_params!(sqlx::query(AssertSqlSafe(sql)), &params).execute(&mut *tx).await?;
            }
            record_audit!(&mut *tx, actor, AuditAction::Purge, sel, &done, now);
            tx.commit().await?;
        });
        Ok(done.iter().map(|e| e.id).collect())
    }

    /// The ids of the selected dead letters, ascending.
    async fn select_dead_letters(&self, sel: &ReplaySelector) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = Vec::new();
        backend!(self, pool => {
            for (cond, params) in selection(sel, 1) {
                let sql = format!("{SELECT_DEAD}{cond}");
                let q = bind_params!(sqlx::query(AssertSqlSafe(sql)), &params);
                for row in q.fetch_all(pool).await? {
                    ids.push(row.try_get(0)?);
                }
            }
        });
        ids.sort_unstable();
        Ok(ids)
    }
}
