//! Group commit: concurrent requests' events are gathered into one transaction, and each request
//! is answered only after that transaction committed.
//!
//! The receiver's throughput is bounded by commits, not by crypto: one fsync'd commit per event
//! caps a 2-core machine at a few thousand events per second, while one commit per 50 events gets
//! tens of thousands. Durability is unchanged: every answer still follows a synchronous commit.

use super::kept::Kept;
use super::key_use::KeyUse;
use super::{Error, Result};
use super::{Inbox, InsertOutcome, NewEvent};
use prometheus_client::metrics::histogram::Histogram;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

/// How events are gathered into transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitConfig {
    /// Longest a batch waits for company once the receiver is busy. An idle receiver (one
    /// request, nothing committing) commits at once, so a lone request never waits.
    pub window: Duration,
    /// Most events in one transaction.
    pub max_batch: usize,
    /// Transactions in flight at once (each holds one database connection). `None`: 1, which
    /// measured best on PostgreSQL with 32 clients (docs/performance.md): requests that arrive
    /// while it commits form the next batch. SQLite has one writer anyway.
    pub concurrency: Option<usize>,
    /// Each insert answers within `db.deadline()`, whatever the database does.
    pub db: super::DbLimits,
    /// The receiver's memory of the keys it committed (`super::recent`).
    pub recent: super::RecentConfig,
}

/// The most events one transaction may hold (13 bound values each stay far below both
/// backends' parameter limits).
pub const MAX_BATCH: usize = 1000;

/// The most transactions in flight at once: each holds a connection, and no pool opens more than
/// [`super::MAX_CONNECTIONS`]. Past it the hand-off channel's room (batch x transactions x 4)
/// overflowed, and tokio's semaphore panicked.
pub const MAX_COMMIT_CONCURRENCY: usize = super::MAX_CONNECTIONS as usize;

impl Default for GroupCommitConfig {
    /// No window and 64 events: see docs/performance.md for how they were chosen.
    fn default() -> Self {
        Self {
            window: Duration::ZERO,
            max_batch: 64,
            concurrency: None,
            db: Default::default(),
            recent: Default::default(),
        }
    }
}

/// The configuration with its defaults resolved.
#[derive(Clone, Copy)]
pub(crate) struct Settings {
    pub window: Duration,
    pub max_batch: usize,
    pub concurrency: usize,
}

impl From<GroupCommitConfig> for Settings {
    fn from(cfg: GroupCommitConfig) -> Self {
        Self {
            window: cfg.window,
            max_batch: cfg.max_batch.clamp(1, MAX_BATCH),
            concurrency: cfg
                .concurrency
                .unwrap_or(1)
                .clamp(1, MAX_COMMIT_CONCURRENCY),
        }
    }
}

/// What the batching task records of each batch: the items it held, and how long its commit
/// took, from the call to its result (a failed or timed-out commit too).
#[derive(Clone)]
pub struct BatchFigures {
    pub sizes: Histogram,
    pub durations: Histogram,
}

/// Commits one batch; returns one result per item, in order.
pub(crate) type CommitFn<T, R> =
    Arc<dyn Fn(Vec<T>) -> Pin<Box<dyn Future<Output = Vec<Result<R>>> + Send>> + Send + Sync>;

struct Job<T, R> {
    item: T,
    reply: oneshot::Sender<Result<R>>,
}

/// Gathers items submitted concurrently into batches and hands each batch to one commit call;
/// every submitter gets its own result once its batch is done. Used for the receiver's inserts
/// and the workers' completions.
pub(crate) struct Batcher<T, R> {
    jobs: mpsc::Sender<Job<T, R>>,
}

impl<T, R> Clone for Batcher<T, R> {
    fn clone(&self) -> Self {
        Self {
            jobs: self.jobs.clone(),
        }
    }
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts the batching task on the current Tokio runtime; it ends when the last handle is
    /// dropped, after committing what it holds.
    pub(crate) fn start(
        cfg: Settings,
        figures: Option<BatchFigures>,
        commit: CommitFn<T, R>,
    ) -> Self {
        let (jobs, rx) = mpsc::channel(cfg.max_batch * cfg.concurrency * 4);
        tokio::spawn(gather(cfg, rx, figures, commit));
        Self { jobs }
    }

    /// Adds `item` to the next batch; resolves once that batch committed (or failed).
    pub(crate) async fn submit(&self, item: T) -> Result<R> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { item, reply })
            .await
            .map_err(|_| Error::Unavailable("the batching task has stopped".into()))?;
        answer
            .await
            .map_err(|_| Error::Unavailable("the batching task dropped the batch".into()))?
    }
}

/// The handle requests submit their event through. Cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    batcher: Batcher<NewEvent, InsertOutcome>,
    deadline: Duration,
    key_use: KeyUse,
}

impl GroupCommit {
    /// Starts the batching task on the current Tokio runtime.
    pub fn start(inbox: Inbox, cfg: GroupCommitConfig, figures: Option<BatchFigures>) -> Self {
        let deadline = cfg.db.deadline();
        let kept = match &inbox {
            Inbox::Postgres(pool) => Some(Kept::new(pool.clone())),
            Inbox::Sqlite(_) => None,
        };
        let key_use = KeyUse::start(inbox.clone());
        let noted = key_use.clone();
        let commit: CommitFn<NewEvent, InsertOutcome> = Arc::new(move |events| {
            let (inbox, kept, noted) = (inbox.clone(), kept.clone(), noted.clone());
            Box::pin(async move {
                let n = events.len();
                // A stuck batch would hold its transaction slot, and every later batch with it.
                let work = async {
                    let outcomes = commit_events(&inbox, kept.as_ref(), &events).await;
                    noted.committed(&events, &outcomes);
                    outcomes
                };
                super::within_batch(deadline, n, work).await
            })
        });
        Self {
            batcher: Batcher::start(cfg.into(), figures, commit),
            // A request may also wait out the window before its batch starts.
            deadline: cfg.window + deadline,
            key_use,
        }
    }

    /// Writes the key use noted since the last write (`key_usage`); for the receiver to call once
    /// it stopped taking requests, so that a clean stop loses none of it.
    pub async fn flush_key_use(&self) {
        self.key_use.flush().await;
    }

    /// Stores `event` in the next batch; resolves once that batch committed (or failed), or
    /// with an error once the deadline has passed.
    ///
    /// Not an `async fn`, for the reason given at [`super::within`]: this future is part of every
    /// request's.
    pub fn insert(
        &self,
        event: NewEvent,
    ) -> impl std::future::Future<Output = Result<InsertOutcome>> + '_ {
        super::within(self.deadline, self.batcher.submit(event))
    }
}

async fn gather<T: Send + 'static, R: Send + 'static>(
    cfg: Settings,
    mut rx: mpsc::Receiver<Job<T, R>>,
    figures: Option<BatchFigures>,
    commit: CommitFn<T, R>,
) {
    let permits = Arc::new(Semaphore::new(cfg.concurrency));
    while let Some(first) = rx.recv().await {
        // Waiting for a free transaction slot is what lets a batch fill up under load.
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .expect("semaphore never closed");
        let mut batch = Vec::new();
        keep_waited(&mut batch, first);
        while batch.len() < cfg.max_batch {
            match rx.try_recv() {
                Ok(job) => keep_waited(&mut batch, job),
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            continue;
        }
        let others_busy = permits.available_permits() + 1 < cfg.concurrency;
        if (batch.len() > 1 || others_busy) && !cfg.window.is_zero() {
            let deadline = tokio::time::Instant::now() + cfg.window;
            while batch.len() < cfg.max_batch {
                match tokio::time::timeout_at(deadline, rx.recv()).await {
                    Ok(Some(job)) => keep_waited(&mut batch, job),
                    _ => break,
                }
            }
        }
        let durations = figures.as_ref().map(|f| {
            f.sizes.observe(batch.len() as f64);
            f.durations.clone()
        });
        let commit = commit.clone();
        tokio::spawn(async move {
            let _permit: OwnedSemaphorePermit = permit;
            let (items, replies): (Vec<T>, Vec<_>) =
                batch.into_iter().map(|j| (j.item, j.reply)).unzip();
            let began = std::time::Instant::now();
            let results = commit(items).await;
            if let Some(h) = durations {
                h.observe(began.elapsed().as_secs_f64());
            }
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        });
    }
}

/// Adds `job` unless its submitter has stopped waiting: a request past its deadline has already
/// been answered 503 (the provider sends it again), and a completion past its deadline leaves the
/// event to its lease. Committing such work anyway would keep an overloaded receiver busy with
/// requests nobody waits for while the waiting ones miss their deadlines too.
fn keep_waited<T, R>(batch: &mut Vec<Job<T, R>>, job: Job<T, R>) {
    if !job.reply.is_closed() {
        batch.push(job);
    }
}

async fn commit_events(
    inbox: &Inbox,
    kept: Option<&Kept>,
    events: &[NewEvent],
) -> Vec<Result<InsertOutcome>> {
    let stored = match kept {
        Some(kept) => {
            kept.run(async |conn| super::batch::insert_many_on(conn, events).await)
                .await
        }
        None => inbox.insert_many(events).await,
    };
    match stored {
        Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
        // The server refused a statement (not an outage): one bad row must not fail the others,
        // so each event is tried alone and only the bad one fails.
        Err(Error::Database(sqlx::Error::Database(_))) if events.len() > 1 => {
            tracing::warn!(
                events = events.len(),
                "a batch insert was refused; committing its events one by one"
            );
            let mut out = Vec::with_capacity(events.len());
            for event in events {
                out.push(inbox.insert(event).await);
            }
            out
        }
        Err(e) => {
            // Each request logs the failure with its integration; once here would be noise.
            tracing::debug!(events = events.len(), error = %e, "inbox batch insert failed");
            let cause = e.to_string();
            events
                .iter()
                .map(|_| Err(Error::Unavailable(cause.clone())))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A batch commit that records what it was given and waits for `release` before answering.
    fn recording(
        seen: Arc<Mutex<Vec<u32>>>,
        release: Arc<tokio::sync::Notify>,
    ) -> CommitFn<u32, u32> {
        Arc::new(move |items| {
            let (seen, release) = (seen.clone(), release.clone());
            Box::pin(async move {
                seen.lock().unwrap().extend(items.iter().copied());
                release.notified().await;
                items.into_iter().map(Ok).collect()
            })
        })
    }

    #[tokio::test]
    async fn work_whose_submitter_gave_up_is_not_committed() {
        let settings = Settings {
            window: Duration::ZERO,
            max_batch: 8,
            concurrency: 1,
        };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let release = Arc::new(tokio::sync::Notify::new());
        let batcher = Batcher::start(settings, None, recording(seen.clone(), release.clone()));

        // The first batch holds the only transaction slot until released.
        let first = tokio::spawn({
            let b = batcher.clone();
            async move { b.submit(1).await }
        });
        while seen.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        // Queued behind it: one submitter gives up, one keeps waiting.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), batcher.submit(2)).await;
        assert!(gave_up.is_err());
        let waiting = tokio::spawn({
            let b = batcher.clone();
            async move { b.submit(3).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;

        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap(), 1);
        while seen.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        assert_eq!(waiting.await.unwrap().unwrap(), 3);
        assert_eq!(
            *seen.lock().unwrap(),
            [1, 3],
            "the abandoned item was committed"
        );
    }
}
