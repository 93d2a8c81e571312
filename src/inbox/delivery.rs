//! The worker's side of the inbox once it holds a claim (`claim`): recording the attempt and
//! finishing the claim (releasing one is in `release`). Every write after the claim is fenced on
//! (id, attempts, locked_until), so a worker whose lease expired and was re-claimed elsewhere
//! cannot overwrite the newer attempt. The attempt number alone is not enough: a replay starts it
//! again at 1.

use super::Inbox;
use super::Result;
use super::claim::Claimed;
use chrono::{DateTime, Utc};

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

impl Inbox {
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
