//! The baselines: the same rows the receiver stores, inserted straight into the same table by
//! plain clients, one row per transaction (A) and 50 rows per transaction (B). They write only
//! the event row, not the signature nonce hookgate also keeps, so they are the kinder baseline.

use super::stats::Run;
use axum::body::Bytes;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgPool, Postgres, QueryBuilder};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

pub struct BenchRow {
    pub integration: String,
    pub event_id: String,
    pub headers: serde_json::Value,
    pub body: Bytes,
    pub body_sha256: Vec<u8>,
    pub received_at: DateTime<Utc>,
}

const COLUMNS: &str = "INSERT INTO inbox_events (integration, event_id, event_type, scheme, key_id, \
     signed_at, headers, content_type, body, body_sha256, status, next_attempt_at, received_at) ";

fn push_row(b: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>, r: &BenchRow) {
    b.push_bind(r.integration.clone())
        .push_bind(r.event_id.clone())
        .push_bind("invoice.paid")
        .push_bind("stripe")
        .push_bind("v1")
        .push_bind(r.received_at)
        .push_bind(Json(r.headers.clone()))
        .push_bind("application/json")
        .push_bind(r.body.to_vec())
        .push_bind(r.body_sha256.clone())
        .push_bind("pending")
        .push_bind(r.received_at)
        .push_bind(r.received_at);
}

/// Baseline A: each client inserts one row per statement, in autocommit (one transaction each).
pub async fn per_row(
    pool: &PgPool,
    rows: &Arc<Vec<BenchRow>>,
    clients: usize,
) -> anyhow::Result<Run> {
    chunked(pool, rows, clients, 1).await
}

/// Baseline B: each client inserts `per` rows with one multi-row INSERT per transaction.
pub async fn batched(
    pool: &PgPool,
    rows: &Arc<Vec<BenchRow>>,
    clients: usize,
    per: usize,
) -> anyhow::Result<Run> {
    chunked(pool, rows, clients, per).await
}

/// Each client is its own task, like the intake's load generator. Every row's latency is that
/// of the statement that carried it.
async fn chunked(
    pool: &PgPool,
    rows: &Arc<Vec<BenchRow>>,
    clients: usize,
    per: usize,
) -> anyhow::Result<Run> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (rows, next, pool) = (rows.clone(), next.clone(), pool.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let from = next.fetch_add(1, Ordering::Relaxed) * per;
                if from >= rows.len() {
                    break;
                }
                let chunk = &rows[from..(from + per).min(rows.len())];
                let mut q = QueryBuilder::<Postgres>::new(COLUMNS);
                q.push_values(chunk.iter(), |mut b, r| push_row(&mut b, r));
                let t = Instant::now();
                q.build().execute(&pool).await?;
                latencies.extend(std::iter::repeat_n(t.elapsed(), chunk.len()));
            }
            anyhow::Ok(latencies)
        });
    }
    let mut run = Run::default();
    while let Some(part) = tasks.join_next().await {
        run.latencies.extend(part??);
    }
    run.elapsed = started.elapsed();
    run.count = rows.len();
    Ok(run)
}
