//! A batch's statements on SQLite: a `VALUES` list per statement (statements are prepared
//! in-process there, so their number costs little).

use super::{
    BatchTx, COUNT_CONFLICT, On, attempts, dead_lettered_at, fresh_of, next_attempt, signed_at,
    stored_of,
};
use crate::inbox::dedupe::{Key, Stored};
use crate::inbox::{NewEvent, Result};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use std::collections::HashMap;

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
                .push_bind(Json(e.headers.json()))
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
