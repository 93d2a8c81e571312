//! The worker's side of the inbox: claiming due events as leases, recording attempts, and
//! finishing or releasing a claim. Every write after the claim is fenced on (id, attempts,
//! locked_until), so a worker whose lease expired and was re-claimed elsewhere cannot overwrite
//! the newer attempt. The attempt number alone is not enough: a replay starts it again at 1.

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};
use sqlx::Row;

/// An event leased to this worker until `locked_until`.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub id: i64,
    pub integration: String,
    pub event_id: String,
    pub event_type: Option<String>,
    /// `[[name, value], ...]` as stored by the receiver.
    pub headers: super::StoredHeaders,
    pub content_type: Option<String>,
    /// Shared, not copied, from the receiver's request to the destination's (a hand-over and
    /// each attempt's request take a reference).
    pub body: bytes::Bytes,
    /// 1-based number of the attempt this claim is for; with `lease_until`, the fencing token.
    pub attempt: i64,
    /// The lease deadline this claim set, as stored. A later claim of the same row sets a later
    /// one, even when a replay has brought the attempt number back to the same value.
    pub lease_until: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub signed_at: Option<DateTime<Utc>>,
    /// When the event was due (`next_attempt_at` before this claim): where a worker's next
    /// [`Inbox::claim_due_from`] may start.
    pub due_at: Option<DateTime<Utc>>,
}

impl Claimed {
    /// The claim without its payload (body, headers): enough to complete or release it.
    pub fn lease_only(&self) -> Claimed {
        Claimed {
            id: self.id,
            integration: self.integration.clone(),
            event_id: self.event_id.clone(),
            event_type: self.event_type.clone(),
            headers: super::StoredHeaders::none(),
            content_type: None,
            body: bytes::Bytes::new(),
            attempt: self.attempt,
            lease_until: self.lease_until,
            received_at: self.received_at,
            signed_at: self.signed_at,
            due_at: self.due_at,
        }
    }

    /// Frees the payload once it has been sent; the claim stays usable for completion.
    pub fn shed_payload(&mut self) {
        self.body = bytes::Bytes::new();
        self.headers = super::StoredHeaders::none();
        self.content_type = None;
    }
}

/// How a claimed event ends this round.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// Delivered; `version` advances the ordering gate.
    Processed {
        version: Option<Advance>,
    },
    Retry {
        next_attempt_at: DateTime<Utc>,
        error: String,
    },
    DeadLetter {
        error: String,
    },
    /// Never delivered (ordering gate): `stale_version` or `duplicate_version`.
    Ignored {
        reason: &'static str,
    },
}

/// Moving a resource's ordering version forward after a delivery. Fenced: it applies only while
/// `token` still holds the resource's lock and the stored version is still `previous`, the one
/// the gate compared against; a worker that lost its lock can never move the version back.
#[derive(Debug, Clone, PartialEq)]
pub struct Advance {
    pub resource: String,
    /// The delivered version, in its stored form.
    pub version: String,
    pub token: String,
    pub previous: Option<String>,
}

/// One delivery attempt, as recorded with the event.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub started_at: DateTime<Utc>,
    pub duration_ms: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
}

/// Leases rows whose lease expired, then due rows. Each half walks its own partial index in
/// order and stops at the limit, so a claim costs the same with 40 or 40 million rows waiting (one
/// `OR` across both conditions made PostgreSQL scan and sort the whole table on every claim).
/// Postgres adds `FOR UPDATE SKIP LOCKED` so concurrent workers skip each other's rows; SQLite has
/// one writer at a time, so the single UPDATE statement is already atomic there.
macro_rules! claim_sql {
    ($lock:literal) => {
        concat!(
            "WITH expired AS (SELECT id FROM inbox_events ",
            "WHERE status = 'processing' AND locked_until <= $2 ",
            "ORDER BY locked_until LIMIT $3",
            $lock,
            "), due AS (SELECT id FROM inbox_events ",
            "WHERE status IN ('pending', 'retry') AND next_attempt_at <= $2 ",
            "ORDER BY next_attempt_at LIMIT $3",
            $lock,
            ") UPDATE inbox_events SET status = 'processing', locked_until = $1, attempts = attempts + 1 ",
            "WHERE id IN (SELECT id FROM (SELECT id FROM expired UNION ALL SELECT id FROM due) AS c LIMIT $3) ",
            "RETURNING id, integration, event_id, event_type, headers, content_type, body, ",
            "attempts, locked_until, received_at, signed_at, next_attempt_at"
        )
    };
}

/// Due rows from `$4` on, and no lease expiry. A claimed row keeps its entry in the due index
/// (pointing at a dead version) until VACUUM reaches the table, and those entries pile up at the
/// index's oldest end: a claim that always starts there walks every event processed since the
/// last vacuum (100,000 of them cost a claim 1.5 ms instead of 0.1 ms, measured), which slowed
/// delivery the longer a backlog lasted. Starting at the oldest row a worker last claimed skips
/// them. Rows due before that point (an insert that committed late, a lease that expired) are
/// found by the full claim the pool still makes every second.
macro_rules! claim_from_sql {
    ($lock:literal) => {
        concat!(
            "WITH due AS (SELECT id FROM inbox_events ",
            "WHERE status IN ('pending', 'retry') AND next_attempt_at <= $2 AND next_attempt_at >= $4 ",
            "ORDER BY next_attempt_at LIMIT $3",
            $lock,
            ") UPDATE inbox_events SET status = 'processing', locked_until = $1, attempts = attempts + 1 ",
            "WHERE id IN (SELECT id FROM due) ",
            "RETURNING id, integration, event_id, event_type, headers, content_type, body, ",
            "attempts, locked_until, received_at, signed_at, next_attempt_at"
        )
    };
}

/// Public so a test can check its plan: it must walk indexes, never scan the inbox.
pub const CLAIM_PG: &str = claim_sql!(" FOR UPDATE SKIP LOCKED");
const CLAIM_SQLITE: &str = claim_sql!("");
/// Public so a test can check its plan, like [`CLAIM_PG`].
pub const CLAIM_FROM_PG: &str = claim_from_sql!(" FOR UPDATE SKIP LOCKED");
const CLAIM_FROM_SQLITE: &str = claim_from_sql!("");

// The fence is the lease, without a test of `status = 'processing'`: see `COMPLETE_MANY_PG`.
// Releases are in `release.rs`.
const FINISH: &str = "UPDATE inbox_events SET status = $1, next_attempt_at = $2, locked_until = NULL, \
     last_error = COALESCE($3, last_error), processed_at = $4, dead_lettered_at = $5, ignored_reason = $6 \
     WHERE id = $7 AND attempts = $8 AND locked_until = $9";

const RECORD_ATTEMPT: &str = "INSERT INTO delivery_attempts \
     (event_row, attempt, started_at, duration_ms, status_code, error, outcome) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// The inbox columns a completion sets.
pub(super) struct FinishColumns<'c> {
    pub status: &'static str,
    pub next: Option<DateTime<Utc>>,
    pub error: Option<&'c str>,
    pub processed: Option<DateTime<Utc>>,
    pub dead: Option<DateTime<Utc>>,
    pub reason: Option<&'static str>,
}

pub(super) fn finish_columns(completion: &Completion, now: DateTime<Utc>) -> FinishColumns<'_> {
    let base = |status| FinishColumns {
        status,
        next: None,
        error: None,
        processed: None,
        dead: None,
        reason: None,
    };
    match completion {
        Completion::Processed { .. } => FinishColumns {
            processed: Some(now),
            ..base("processed")
        },
        Completion::Retry {
            next_attempt_at,
            error,
        } => FinishColumns {
            next: Some(*next_attempt_at),
            error: Some(error),
            ..base("retry")
        },
        Completion::DeadLetter { error } => FinishColumns {
            error: Some(error),
            dead: Some(now),
            ..base("dead_letter")
        },
        Completion::Ignored { reason } => FinishColumns {
            processed: Some(now),
            reason: Some(reason),
            ..base("ignored")
        },
    }
}

/// The claimed rows, as either backend returns them (a macro: each backend's row type).
macro_rules! claimed_rows {
    ($rows:expr) => {
        $rows
            .iter()
            .map(|r| {
                let headers: sqlx::types::Json<Box<serde_json::value::RawValue>> =
                    r.try_get("headers")?;
                Ok(Claimed {
                    id: r.try_get("id")?,
                    integration: r.try_get("integration")?,
                    event_id: r.try_get("event_id")?,
                    event_type: r.try_get("event_type")?,
                    headers: headers.0.into(),
                    content_type: r.try_get("content_type")?,
                    body: r.try_get::<Vec<u8>, _>("body")?.into(),
                    attempt: r.try_get("attempts")?,
                    lease_until: r.try_get("locked_until")?,
                    received_at: r.try_get("received_at")?,
                    signed_at: r.try_get("signed_at")?,
                    due_at: r.try_get("next_attempt_at")?,
                })
            })
            .collect::<Result<Vec<Claimed>>>()
    };
}

impl Inbox {
    /// Leases up to `limit` due events (and events whose previous lease expired) until `lease_until`.
    pub async fn claim(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<Claimed>> {
        let sql = match self {
            Inbox::Postgres(_) => CLAIM_PG,
            Inbox::Sqlite(_) => CLAIM_SQLITE,
        };
        backend!(self, pool => {
            let rows = sqlx::query(sql).bind(lease_until).bind(now).bind(limit).fetch_all(pool).await?;
            claimed_rows!(rows)
        })
    }

    /// Like [`Inbox::claim`], but only rows due at `from` or later, and no expired leases: the
    /// claim a busy worker makes between full ones (see `claim_from_sql!`).
    pub async fn claim_due_from(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        limit: i64,
        from: DateTime<Utc>,
    ) -> Result<Vec<Claimed>> {
        let sql = match self {
            Inbox::Postgres(_) => CLAIM_FROM_PG,
            Inbox::Sqlite(_) => CLAIM_FROM_SQLITE,
        };
        backend!(self, pool => {
            let rows = sqlx::query(sql)
                .bind(lease_until)
                .bind(now)
                .bind(limit)
                .bind(from)
                .fetch_all(pool)
                .await?;
            claimed_rows!(rows)
        })
    }

    /// Ends a claim: the new status, the attempt record and (for an ordered delivery) the new
    /// resource version, in one transaction. `false` when the lease was lost to another worker.
    pub async fn complete(
        &self,
        claimed: &Claimed,
        completion: &Completion,
        attempt: Option<&Attempt>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        let FinishColumns {
            status,
            next,
            error,
            processed,
            dead,
            reason,
        } = finish_columns(completion, now);
        backend!(self, pool => {
            let mut tx = pool.begin().await?;
            let updated = sqlx::query(FINISH)
                .bind(status)
                .bind(next)
                .bind(error)
                .bind(processed)
                .bind(dead)
                .bind(reason)
                .bind(claimed.id)
                .bind(claimed.attempt)
                .bind(claimed.lease_until)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if updated == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            if let Some(a) = attempt {
                sqlx::query(RECORD_ATTEMPT)
                    .bind(claimed.id)
                    .bind(claimed.attempt)
                    .bind(a.started_at)
                    .bind(a.duration_ms)
                    .bind(a.status_code)
                    .bind(&a.error)
                    .bind(status)
                    .execute(&mut *tx)
                    .await?;
            }
            if let Completion::Processed { version: Some(a) } = completion {
                let moved = sqlx::query(super::versions::ADVANCE_VERSION)
                    .bind(&a.version)
                    .bind(now)
                    .bind(&claimed.integration)
                    .bind(&a.resource)
                    .bind(&a.token)
                    .bind(&a.previous)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if moved == 0 {
                    tracing::warn!(integration = %claimed.integration, event_id = %claimed.event_id, "ordering lock lost during delivery; the resource version was not moved");
                }
            }
            tx.commit().await?;
            Ok(true)
        })
    }
}
