//! A batch's statements on PostgreSQL: whole columns bound as arrays (`UNNEST`), one prepared
//! statement whatever the batch size.

use super::{
    BatchTx, COUNT_CONFLICT, On, attempts, dead_lettered_at, digests, fresh_of, integrations,
    next_attempt, signed_at, stored_of,
};
use crate::inbox::dedupe::{Key, Stored};
use crate::inbox::{NewEvent, Result};
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgConnection, Row};
use std::collections::HashMap;

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
            .bind(
                evs.iter()
                    .map(|e| Json(e.headers.json()))
                    .collect::<Vec<_>>(),
            )
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
