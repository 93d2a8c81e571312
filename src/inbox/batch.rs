//! Storing many verified events in one transaction: the storage half of group commit.
//!
//! Which outcome each event gets is decided in [`super::dedupe`]; this module asks the database
//! what that rule needs and writes what it decided. Only the SQL differs per backend: PostgreSQL
//! binds whole columns as arrays (`UNNEST`, one prepared statement whatever the batch size), SQLite
//! gets a `VALUES` list (statements are prepared in-process there, so their number costs little).

use super::Result;
use super::dedupe::{Incoming, Key, Nonces, Stored};
use super::{Arrival, Inbox, InsertOutcome, NewEvent, Status};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgConnection, QueryBuilder, Row, Sqlite, SqliteConnection};
use std::collections::{HashMap, HashSet};

/// A connection the batch statements run on: inside a transaction, or in autocommit.
struct On<'c, C>(&'c mut C);

/// The per-backend statements a batch needs.
trait BatchTx {
    /// Records each event's signature digest; returns, per event, whether its digest was fresh.
    async fn claim_nonces(&mut self, evs: &[&NewEvent], now: DateTime<Utc>) -> Result<Vec<bool>>;
    /// Inserts the events (distinct keys); returns the row id per inserted (integration, event id).
    async fn insert_events(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, i64>>;
    /// The stored body hash of each of these keys that exists.
    async fn stored_hashes(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, Stored>>;
    /// Gives back the digests of events that were not stored, as a rolled-back attempt would.
    async fn forget_nonces(&mut self, evs: &[&NewEvent]) -> Result<()>;
    async fn count_conflict(&mut self, ev: &NewEvent) -> Result<()>;
}

/// One batch on the connection `$conn`, with [`Inbox::insert_many`]'s guarantees.
macro_rules! insert_on {
    ($conn:expr, $events:expr) => {{
        if $events.iter().any(|e| e.needs_nonce) {
            // A digest and its event must stand or fall together.
            let mut tx = sqlx::Connection::begin(&mut *$conn).await?;
            let outcomes = run(&mut On(&mut *tx), $events).await?;
            tx.commit().await?;
            Ok(outcomes)
        } else {
            // Without digests the one INSERT is the whole write: in autocommit it is atomic and
            // durable by itself, and BEGIN and COMMIT would be two more round trips. The reads
            // that follow only classify duplicates.
            run(&mut On(&mut *$conn), $events).await
        }
    }};
}

/// [`Inbox::insert_many`] on a PostgreSQL connection the caller keeps.
pub(crate) async fn insert_many_on(
    conn: &mut PgConnection,
    events: &[NewEvent],
) -> Result<Vec<InsertOutcome>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    insert_on!(conn, events)
}

impl Inbox {
    /// Stores each event unless it is a duplicate, a conflict or a replay, all in one transaction:
    /// either every outcome returned is committed, or the call fails and nothing of it remains.
    pub async fn insert_many(&self, events: &[NewEvent]) -> Result<Vec<InsertOutcome>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        backend!(self, pool => {
            let mut conn = pool.acquire().await?;
            insert_on!(conn, events)
        })
    }

    /// One event; the same transaction shape as a batch of one.
    pub async fn insert(&self, event: &NewEvent) -> Result<InsertOutcome> {
        let mut v = self.insert_many(std::slice::from_ref(event)).await?;
        Ok(v.remove(0))
    }
}

async fn run<T: BatchTx>(tx: &mut T, events: &[NewEvent]) -> Result<Vec<InsertOutcome>> {
    let now = events
        .iter()
        .map(|e| e.received_at)
        .max()
        .expect("not empty");
    let pick = |ask: &[usize]| -> Vec<&NewEvent> { ask.iter().map(|&i| &events[i]).collect() };

    let nonces = Nonces::new(events.iter().map(Incoming::from).collect());
    let claim = pick(nonces.ask());
    let fresh = if claim.is_empty() {
        Vec::new()
    } else {
        tx.claim_nonces(&claim, now).await?
    };
    let inserts = nonces.answer(&fresh);
    let insert = pick(inserts.ask());
    let ids = if insert.is_empty() {
        HashMap::new()
    } else {
        tx.insert_events(&insert).await?
    };
    let known = inserts.answer(&ids);
    let compare = pick(known.ask());
    let stored = if compare.is_empty() {
        HashMap::new()
    } else {
        tx.stored_hashes(&compare).await?
    };
    let decided = known.answer(&stored);
    for &i in decided.conflicts() {
        tx.count_conflict(&events[i]).await?;
    }
    let forget = pick(decided.forget());
    if !forget.is_empty() {
        tx.forget_nonces(&forget).await?;
    }
    Ok(decided.outcomes())
}

fn signed_at(ev: &NewEvent) -> Option<DateTime<Utc>> {
    ev.signed_at
}

/// `(integration, event_id, body_sha256, source)` rows as the dedupe rule reads them.
fn stored_of<R: Row>(rows: &[R]) -> Result<HashMap<Key, Stored>>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    rows.iter()
        .map(|r| {
            let source: String = r.try_get(3)?;
            let stored = Stored {
                body_sha256: r.try_get(2)?,
                caught_up: source == Arrival::CatchUp.as_str(),
            };
            Ok(((r.try_get(0)?, r.try_get(1)?), stored))
        })
        .collect()
}

/// Due on arrival; a leased event keeps that too, as a claimed one keeps its due time.
fn next_attempt(ev: &NewEvent) -> Option<DateTime<Utc>> {
    matches!(ev.status, Status::Pending | Status::Processing).then_some(ev.received_at)
}

/// A leased event is stored as its first attempt's claim would have left it.
fn attempts(ev: &NewEvent) -> i64 {
    i64::from(ev.lease_until.is_some())
}

fn dead_lettered_at(ev: &NewEvent) -> Option<DateTime<Utc>> {
    (ev.status == Status::DeadLetter).then_some(ev.received_at)
}

const COUNT_CONFLICT: &str = "UPDATE inbox_events SET dedupe_conflicts = dedupe_conflicts + 1 \
     WHERE integration = $1 AND event_id = $2";

const PG_NONCES: &str = "INSERT INTO signature_nonces (integration, digest, expires_at) \
     SELECT * FROM UNNEST($1::text[], $2::bytea[], $3::timestamptz[]) \
     ON CONFLICT (integration, digest) DO UPDATE SET expires_at = excluded.expires_at \
     WHERE signature_nonces.expires_at <= $4 RETURNING integration, digest";

const PG_EVENTS: &str = "INSERT INTO inbox_events (integration, event_id, event_type, scheme, \
     key_id, signed_at, headers, content_type, body, body_sha256, status, next_attempt_at, received_at, \
     last_error, dead_lettered_at, source, source_credential, locked_until, attempts) \
     SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], \
     $6::timestamptz[], $7::jsonb[], $8::text[], $9::bytea[], $10::bytea[], $11::text[], \
     $12::timestamptz[], $13::timestamptz[], $14::text[], $15::timestamptz[], $16::text[], \
     $17::text[], $18::timestamptz[], $19::bigint[]) \
     ON CONFLICT (integration, event_id) DO NOTHING RETURNING id, integration, event_id";

/// Public so a test can check its plan.
pub const STORED_HASHES_PG: &str = "SELECT integration, event_id, body_sha256, source FROM inbox_events \
     WHERE (integration, event_id) IN (SELECT * FROM UNNEST($1::text[], $2::text[]))";

const PG_FORGET: &str = "DELETE FROM signature_nonces \
     WHERE (integration, digest) IN (SELECT * FROM UNNEST($1::text[], $2::bytea[]))";

fn digests<'e>(evs: &[&'e NewEvent]) -> Vec<&'e [u8]> {
    evs.iter().map(|e| &e.digest[..]).collect()
}

fn integrations<'e>(evs: &[&'e NewEvent]) -> Vec<&'e str> {
    evs.iter().map(|e| e.integration.as_str()).collect()
}

/// Which of `evs` came back in `(integration, digest)` rows.
fn fresh_of<R: Row>(evs: &[&NewEvent], rows: &[R]) -> Result<Vec<bool>>
where
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    let back: HashSet<(String, Vec<u8>)> = rows
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_>>()?;
    Ok(evs
        .iter()
        .map(|e| back.contains(&(e.integration.clone(), e.digest.to_vec())))
        .collect())
}

impl BatchTx for On<'_, PgConnection> {
    async fn claim_nonces(&mut self, evs: &[&NewEvent], now: DateTime<Utc>) -> Result<Vec<bool>> {
        let expires: Vec<DateTime<Utc>> = evs.iter().map(|e| e.nonce_expires_at).collect();
        let rows = sqlx::query(PG_NONCES)
            .bind(integrations(evs))
            .bind(digests(evs))
            .bind(expires)
            .bind(now)
            .fetch_all(&mut *self.0)
            .await?;
        fresh_of(evs, &rows)
    }

    async fn insert_events(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, i64>> {
        let col = |f: fn(&NewEvent) -> Option<&str>| evs.iter().map(|e| f(e)).collect::<Vec<_>>();
        let rows = sqlx::query(PG_EVENTS)
            .bind(integrations(evs))
            .bind(col(|e| Some(&e.event_id)))
            .bind(col(|e| e.event_type.as_deref()))
            .bind(col(|e| Some(e.scheme)))
            .bind(col(|e| Some(&e.key_id)))
            .bind(evs.iter().map(|e| signed_at(e)).collect::<Vec<_>>())
            .bind(evs.iter().map(|e| Json(&e.headers)).collect::<Vec<_>>())
            .bind(col(|e| e.content_type.as_deref()))
            .bind(evs.iter().map(|e| &e.body[..]).collect::<Vec<_>>())
            .bind(evs.iter().map(|e| &e.body_sha256[..]).collect::<Vec<_>>())
            .bind(col(|e| Some(e.status.as_str())))
            .bind(evs.iter().map(|e| next_attempt(e)).collect::<Vec<_>>())
            .bind(evs.iter().map(|e| e.received_at).collect::<Vec<_>>())
            .bind(col(|e| e.last_error.as_deref()))
            .bind(evs.iter().map(|e| dead_lettered_at(e)).collect::<Vec<_>>())
            .bind(col(|e| Some(e.arrival.as_str())))
            .bind(col(|e| e.credential.as_deref()))
            .bind(evs.iter().map(|e| e.lease_until).collect::<Vec<_>>())
            .bind(evs.iter().map(|e| attempts(e)).collect::<Vec<_>>())
            .fetch_all(&mut *self.0)
            .await?;
        rows.iter()
            .map(|r| Ok(((r.try_get(1)?, r.try_get(2)?), r.try_get(0)?)))
            .collect()
    }

    async fn stored_hashes(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, Stored>> {
        let ids: Vec<&str> = evs.iter().map(|e| e.event_id.as_str()).collect();
        let rows = sqlx::query(STORED_HASHES_PG)
            .bind(integrations(evs))
            .bind(ids)
            .fetch_all(&mut *self.0)
            .await?;
        stored_of(&rows)
    }

    async fn forget_nonces(&mut self, evs: &[&NewEvent]) -> Result<()> {
        sqlx::query(PG_FORGET)
            .bind(integrations(evs))
            .bind(digests(evs))
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }

    async fn count_conflict(&mut self, ev: &NewEvent) -> Result<()> {
        sqlx::query(COUNT_CONFLICT)
            .bind(&ev.integration)
            .bind(&ev.event_id)
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }
}

impl BatchTx for On<'_, SqliteConnection> {
    async fn claim_nonces(&mut self, evs: &[&NewEvent], now: DateTime<Utc>) -> Result<Vec<bool>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "INSERT INTO signature_nonces (integration, digest, expires_at) ",
        );
        q.push_values(evs, |mut b, e| {
            b.push_bind(e.integration.as_str())
                .push_bind(&e.digest[..])
                .push_bind(e.nonce_expires_at);
        });
        q.push(
            " ON CONFLICT (integration, digest) DO UPDATE SET expires_at = excluded.expires_at \
             WHERE signature_nonces.expires_at <= ",
        )
        .push_bind(now)
        .push(" RETURNING integration, digest");
        let rows = q.build().fetch_all(&mut *self.0).await?;
        fresh_of(evs, &rows)
    }

    async fn insert_events(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, i64>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "INSERT INTO inbox_events (integration, event_id, event_type, scheme, key_id, \
             signed_at, headers, content_type, body, body_sha256, status, next_attempt_at, received_at, \
             last_error, dead_lettered_at, source, source_credential, locked_until, attempts) ",
        );
        q.push_values(evs, |mut b, e| {
            b.push_bind(e.integration.as_str())
                .push_bind(e.event_id.as_str())
                .push_bind(e.event_type.as_deref())
                .push_bind(e.scheme)
                .push_bind(e.key_id.as_str())
                .push_bind(signed_at(e))
                .push_bind(Json(&e.headers))
                .push_bind(e.content_type.as_deref())
                .push_bind(&e.body[..])
                .push_bind(&e.body_sha256[..])
                .push_bind(e.status.as_str())
                .push_bind(next_attempt(e))
                .push_bind(e.received_at)
                .push_bind(e.last_error.as_deref())
                .push_bind(dead_lettered_at(e))
                .push_bind(e.arrival.as_str())
                .push_bind(e.credential.as_deref())
                .push_bind(e.lease_until)
                .push_bind(attempts(e));
        });
        q.push(
            " ON CONFLICT (integration, event_id) DO NOTHING RETURNING id, integration, event_id",
        );
        let rows = q.build().fetch_all(&mut *self.0).await?;
        rows.iter()
            .map(|r| Ok(((r.try_get(1)?, r.try_get(2)?), r.try_get(0)?)))
            .collect()
    }

    async fn stored_hashes(&mut self, evs: &[&NewEvent]) -> Result<HashMap<Key, Stored>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT integration, event_id, body_sha256, source FROM inbox_events \
             WHERE (integration, event_id) IN (",
        );
        push_pairs(&mut q, evs, |e| e.event_id.clone());
        let rows = q.build().fetch_all(&mut *self.0).await?;
        stored_of(&rows)
    }

    async fn forget_nonces(&mut self, evs: &[&NewEvent]) -> Result<()> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "DELETE FROM signature_nonces WHERE (integration, digest) IN (",
        );
        push_pairs(&mut q, evs, |e| e.digest.to_vec());
        q.build().execute(&mut *self.0).await?;
        Ok(())
    }

    async fn count_conflict(&mut self, ev: &NewEvent) -> Result<()> {
        sqlx::query(COUNT_CONFLICT)
            .bind(&ev.integration)
            .bind(&ev.event_id)
            .execute(&mut *self.0)
            .await?;
        Ok(())
    }
}

/// `VALUES (?, ?), (?, ?))`: (integration, second value) pairs for a row-value IN list.
fn push_pairs<V>(q: &mut QueryBuilder<Sqlite>, evs: &[&NewEvent], second: impl Fn(&NewEvent) -> V)
where
    V: for<'q> sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite>,
{
    q.push("VALUES ");
    let mut list = q.separated(", ");
    for e in evs {
        list.push("(")
            .push_bind_unseparated(e.integration.clone())
            .push_unseparated(", ")
            .push_bind_unseparated(second(e))
            .push_unseparated(")");
    }
    q.push(")");
}
