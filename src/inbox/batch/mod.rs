//! Storing many verified events in one transaction: the storage half of group commit.
//!
//! Which outcome each event gets is decided in [`super::dedupe`]; this module asks the database
//! what that rule needs and writes what it decided. Only the SQL differs per backend
//! ([`postgres`], [`sqlite`]).

use super::Result;
use super::dedupe::{Incoming, Key, Nonces, Stored};
use super::{Arrival, Inbox, InsertOutcome, NewEvent, Status};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use std::collections::{HashMap, HashSet};

mod postgres;
mod sqlite;

pub use postgres::STORED_HASHES_PG;

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
