//! Claiming due events as leases: the statements (each walks a partial index, never the inbox)
//! and the rows they return. What a worker does with a claim is in `delivery`.

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
}
