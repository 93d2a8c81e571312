//! Workers' completions, group-committed like the receiver's inserts: on PostgreSQL the outcomes
//! of concurrent deliveries are written by one statement (status changes and attempt records
//! together), instead of one transaction each.

use super::group::{BatchFigures, Batcher, CommitFn, Settings};
use super::kept::Kept;
use super::{Attempt, Claimed, Completion, Inbox};
use super::{Error, Result};
use chrono::{DateTime, Utc};
use prometheus_client::metrics::histogram::Histogram;
use sqlx::PgConnection;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// One completion waiting for its batch.
pub(crate) struct Finish {
    id: i64,
    attempt_no: i64,
    lease_until: DateTime<Utc>,
    completion: Completion,
    attempt: Option<Attempt>,
    now: DateTime<Utc>,
}

/// Fenced on (id, attempts, locked_until) like [`Inbox::complete`]; the attempt row is written
/// only for events whose status change went through. Public so a test can check its plan.
///
/// No `status = 'processing'` test: a lease is set only with that status and cleared by every
/// change away from it, so the lease deadline already says it. Written out, the test lets the
/// planner walk the partial index of leased rows, which statistics taken while few events were
/// leased make look like one row: with thousands leased, each batch read them all
/// (`tests/it/query_plans.rs`; docs/performance.md, round 15).
pub const COMPLETE_MANY_PG: &str = "WITH input AS (SELECT * FROM UNNEST($1::bigint[], $2::bigint[], \
     $3::text[], $4::timestamptz[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::text[], \
     $9::timestamptz[], $10::bigint[], $11::bigint[], $12::text[], $13::timestamptz[]) AS i(id, attempt, \
     status, next_at, error, processed_at, dead_at, reason, started_at, duration_ms, status_code, \
     attempt_error, lease_until)), \
     done AS (UPDATE inbox_events e SET status = i.status, next_attempt_at = i.next_at, \
     locked_until = NULL, last_error = COALESCE(i.error, e.last_error), \
     processed_at = i.processed_at, dead_lettered_at = i.dead_at, ignored_reason = i.reason \
     FROM input i WHERE e.id = i.id AND e.attempts = i.attempt \
     AND e.locked_until = i.lease_until \
     RETURNING e.id), \
     recorded AS (INSERT INTO delivery_attempts (event_row, attempt, started_at, duration_ms, \
     status_code, error, outcome) SELECT i.id, i.attempt, i.started_at, i.duration_ms, \
     i.status_code, i.attempt_error, i.status FROM input i JOIN done d ON d.id = i.id \
     WHERE i.started_at IS NOT NULL) \
     SELECT id FROM done";

/// Where a worker records outcomes. Cheap to clone.
#[derive(Clone)]
pub struct Completer {
    inbox: Inbox,
    batcher: Option<Batcher<Finish, bool>>,
    deadline: Duration,
    /// Times the completions that take a transaction of their own; the batching task times its
    /// batches with its own figures.
    single: Histogram,
}

impl Completer {
    /// On PostgreSQL starts the batching task (current Tokio runtime). SQLite writes each
    /// completion in its own transaction: it is local, and has one writer anyway. `batches`
    /// records each batch's duration and size, `single` the duration of each completion that
    /// takes a transaction of its own.
    pub fn start(
        inbox: Inbox,
        deadline: Duration,
        batches: BatchFigures,
        single: Histogram,
    ) -> Self {
        let batcher = match &inbox {
            Inbox::Postgres(pool) => {
                let kept = Kept::new(pool.clone());
                let commit: CommitFn<Finish, bool> = Arc::new(move |items| {
                    let kept = kept.clone();
                    Box::pin(async move {
                        let n = items.len();
                        super::within_batch(deadline, n, commit(&kept, items)).await
                    })
                });
                let settings = Settings {
                    window: Duration::ZERO,
                    max_batch: 128,
                    // One completion in flight: two split the batches in half and made them
                    // wait on each other's rows (docs/performance.md, round 5).
                    concurrency: 1,
                };
                Some(Batcher::start(settings, Some(batches), commit))
            }
            Inbox::Sqlite(_) => None,
        };
        Self {
            inbox,
            batcher,
            deadline,
            single,
        }
    }

    /// Ends a claim like [`Inbox::complete`]: `false` when the lease was lost to another worker.
    /// Ordered deliveries (which also advance a resource version) keep their own transaction.
    ///
    /// Not an `async fn`, and the statement of its own transaction boxed: each delivery's task
    /// holds this future, and an `async fn` around another keeps room for both.
    pub fn complete<'a>(
        &'a self,
        claimed: &'a Claimed,
        completion: Completion,
        attempt: Option<Attempt>,
        now: DateTime<Utc>,
    ) -> impl std::future::Future<Output = Result<bool>> + 'a {
        super::within(
            self.deadline,
            self.record(claimed, completion, attempt, now),
        )
    }

    async fn record(
        &self,
        claimed: &Claimed,
        completion: Completion,
        attempt: Option<Attempt>,
        now: DateTime<Utc>,
    ) -> Result<bool> {
        match &self.batcher {
            Some(batcher) if !matches!(completion, Completion::Processed { version: Some(_) }) => {
                let finish = Finish {
                    id: claimed.id,
                    attempt_no: claimed.attempt,
                    lease_until: claimed.lease_until,
                    completion,
                    attempt,
                    now,
                };
                batcher.submit(finish).await
            }
            _ => {
                let _timed = Timed::start(&self.single);
                Box::pin(
                    self.inbox
                        .complete(claimed, &completion, attempt.as_ref(), now),
                )
                .await
            }
        }
    }
}

/// Observes the time from its start to its drop: a transaction the deadline cut short is timed
/// too, as the batching task times its batches whatever their end.
struct Timed<'a> {
    histogram: &'a Histogram,
    began: std::time::Instant,
}

impl<'a> Timed<'a> {
    fn start(histogram: &'a Histogram) -> Self {
        Self {
            histogram,
            began: std::time::Instant::now(),
        }
    }
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.began.elapsed().as_secs_f64());
    }
}

async fn commit(kept: &Kept, items: Vec<Finish>) -> Vec<Result<bool>> {
    match kept.run(async |conn| finish_many(conn, &items).await).await {
        Ok(done) => items.iter().map(|f| Ok(done.contains(&f.id))).collect(),
        Err(e) => {
            let cause = e.to_string();
            items
                .iter()
                .map(|_| Err(Error::Unavailable(cause.clone())))
                .collect()
        }
    }
}

fn attempt(f: &Finish) -> Option<&Attempt> {
    f.attempt.as_ref()
}

async fn finish_many(conn: &mut PgConnection, items: &[Finish]) -> Result<HashSet<i64>> {
    let cols: Vec<_> = items
        .iter()
        .map(|f| super::delivery::finish_columns(&f.completion, f.now))
        .collect();
    let ids: Vec<i64> = sqlx::query_scalar(COMPLETE_MANY_PG)
        .bind(items.iter().map(|f| f.id).collect::<Vec<_>>())
        .bind(items.iter().map(|f| f.attempt_no).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.status).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.next).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.error).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.processed).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.dead).collect::<Vec<_>>())
        .bind(cols.iter().map(|c| c.reason).collect::<Vec<_>>())
        .bind(
            items
                .iter()
                .map(|f| attempt(f).map(|a| a.started_at))
                .collect::<Vec<_>>(),
        )
        .bind(
            items
                .iter()
                .map(|f| attempt(f).map(|a| a.duration_ms))
                .collect::<Vec<_>>(),
        )
        .bind(
            items
                .iter()
                .map(|f| attempt(f).and_then(|a| a.status_code))
                .collect::<Vec<_>>(),
        )
        .bind(
            items
                .iter()
                .map(|f| attempt(f).and_then(|a| a.error.as_deref()))
                .collect::<Vec<_>>(),
        )
        .bind(items.iter().map(|f| f.lease_until).collect::<Vec<_>>())
        .fetch_all(conn)
        .await?;
    Ok(ids.into_iter().collect())
}
