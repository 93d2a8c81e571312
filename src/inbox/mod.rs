//! The durable inbox: one row per accepted event, on PostgreSQL (production) or SQLite (standalone).
//!
//! Both backends run the same SQL; the `backend!` macro expands one body per pool type so the
//! statements cannot drift apart.

/// Expands `$body` with `$pool` bound to the concrete pool of whichever backend `$inbox` is.
macro_rules! backend {
    ($inbox:expr, $pool:ident => $body:expr) => {
        match $inbox {
            Inbox::Postgres($pool) => $body,
            Inbox::Sqlite($pool) => $body,
        }
    };
}

mod arrivals;
mod audit;
mod batch;
mod catch_up;
mod chores;
mod claim;
mod complete;
mod dead_letters;
mod dedupe;
mod delivery;
mod event;
mod forget;
mod gauges;
mod group;
mod handoff;
mod headers;
mod kept;
mod key_use;
mod list;
mod notify;
mod pool_load;
mod recent;
mod release;
mod retention;
mod stale_versions;
mod stats;
mod turns;
mod versions;

pub use arrivals::Arrivals;
pub use audit::{
    Actor, ActorSource, Apply, AuditAction, AuditRecord, AuditedEvent, MAX_AUDITED_EVENTS,
    PURGES_AFTER, PURGES_RECORDED, RecordedPurge,
};
pub use batch::STORED_HASHES_PG;
pub use catch_up::{CatchUpLock, CatchUpRun, RunResult};
pub use claim::{CLAIM_FROM_PG, CLAIM_PG, Claimed, seen_per_integration};
pub use complete::{COMPLETE_MANY_PG, Completer};
pub use dead_letters::*;
pub use delivery::{Advance, Attempt, Completion};
pub use event::{Arrival, EventSummary, InsertOutcome, ListFilter, NewEvent, Status};
pub use gauges::GaugeFigures;
pub use group::{BatchFigures, GroupCommit, GroupCommitConfig, MAX_BATCH, MAX_COMMIT_CONCURRENCY};
pub use handoff::{Handed, Handoff, Reservation, Room as HandoffRoom, handoff};
pub use headers::StoredHeaders;
pub use key_use::FLUSH_EVERY as KEY_USE_FLUSH_EVERY;
pub use notify::{CHANNEL as NOTIFY_CHANNEL, Notifier, listen};
pub use pool_load::PoolLoad;
pub use recent::{
    CONFIRM_EVERY as DEDUPE_CACHE_CONFIRM_EVERY, CONFIRMED_FOR as DEDUPE_CACHE_CONFIRMED_FOR,
    MAX_MIB as MAX_DEDUPE_CACHE_MIB, PurgedKeys, Recalled, Recent, RecentConfig,
};
pub use retention::{
    BATCH as RETENTION_BATCH, DELETE_FINISHED_PG, NEVER as NEVER_STOPS, PRUNE_NONCES_PG, PURGE_PG,
    Stop, WITH_FINISHED,
};
pub use stale_versions::{
    Forgotten, SKIPPED_STRETCHES_MAX, STRETCH_PG as FORGET_VERSIONS_PG, VERSIONS_PAGES,
    VERSIONS_ROWIDS,
};
pub use stats::{BACKLOG, BacklogCount, CONFLICTS, Traffic};

use crate::redact::redact_url;
mod error;

pub use error::{Error, Result};
use sqlx::Postgres;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

static PG_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// Deadlines of database calls, so that a stalled database answers 503 (or a worker retries)
/// within seconds instead of hanging, and how many connections a process may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbLimits {
    /// How long a call may wait for a pooled connection.
    pub acquire_timeout: Duration,
    /// How long one statement may run (and wait for locks): PostgreSQL's `statement_timeout`,
    /// SQLite's busy timeout.
    pub statement_timeout: Duration,
    /// Most PostgreSQL connections the process's pool opens (SQLite keeps its own 4), from
    /// [`MIN_CONNECTIONS`] to [`MAX_CONNECTIONS`].
    pub max_connections: u32,
}

/// Fewest connections a pool may be capped at. A worker holds one for `LISTEN` for as long as it
/// runs and its completion batcher keeps one while busy; claims need a third and the timers
/// (gauges, retention) a fourth. Below that a busy worker would wait on itself.
pub const MIN_CONNECTIONS: u32 = 4;
/// Most: a mistyped value must not ask PostgreSQL for thousands of backends.
pub const MAX_CONNECTIONS: u32 = 1000;

impl Default for DbLimits {
    fn default() -> Self {
        Self {
            acquire_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_secs(5),
            // Under load a receiver used 2-3 and a worker 6-7 (docs/performance.md, round 22).
            max_connections: 16,
        }
    }
}

impl DbLimits {
    /// The longest one call on the request path, a claim or a completion may take in all,
    /// whatever the database does (the client gives up even if the server never answers).
    pub fn deadline(&self) -> Duration {
        self.acquire_timeout + self.statement_timeout
    }
}

/// A handle on the inbox database. Cheap to clone (pools are shared).
#[derive(Clone, Debug)]
pub enum Inbox {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

impl Inbox {
    /// Connects to `postgres://…` or `sqlite://…`. A SQLite file is created when missing and
    /// opened in WAL mode with full fsync: the inbox is a durable store, not a cache.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, DbLimits::default()).await
    }

    /// [`Inbox::connect`] with these deadlines.
    pub async fn connect_with(url: &str, limits: DbLimits) -> Result<Self> {
        Self::connect_as(url, "hookgate", limits).await
    }

    /// [`Inbox::connect_with`] as `name`: the `application_name` PostgreSQL shows for these
    /// connections (`pg_stat_activity`, its log's `%a`), so that a database's operator can tell
    /// which of hookgate's roles holds which connections. The URL's own `application_name` wins.
    pub async fn connect_as(url: &str, name: &str, limits: DbLimits) -> Result<Self> {
        Self::open(url, name, limits).await.map_err(|e| match e {
            Error::Database(e) => {
                Error::Config(format!("cannot open the inbox at {}: {e}", redact_url(url)))
            }
            other => other,
        })
    }

    async fn open(url: &str, name: &str, limits: DbLimits) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // Server side, so that the server too gives up a statement stuck behind a lock, and
            // frees its backend, when the client has stopped waiting.
            let timeout = limits.statement_timeout.as_millis().max(1).to_string();
            let mut opts =
                PgConnectOptions::from_str(url)?.options([("statement_timeout", timeout.as_str())]);
            if opts.get_application_name().is_none() {
                opts = opts.application_name(name);
            }
            let pool = PgPoolOptions::new()
                .max_connections(limits.max_connections)
                // No ping before each use: it was a whole round trip, with the server process's
                // wake-up, ahead of every batch insert, claim and completion (intake 30% faster
                // without it: docs/performance.md). A connection the server has closed fails the
                // one statement that finds out (a 503 the provider retries, a claim tried again
                // next round), and sqlx discards it when its release check fails.
                .test_before_acquire(false)
                // A short acquire timeout turns an outage into a prompt 503, not a hung request.
                .acquire_timeout(limits.acquire_timeout)
                .connect_with(opts)
                .await?;
            Ok(Inbox::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .foreign_keys(true)
                .busy_timeout(limits.statement_timeout);
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(limits.acquire_timeout)
                .connect_with(opts)
                .await?;
            Ok(Inbox::Sqlite(pool))
        } else {
            Err(Error::Config(format!(
                "unsupported database URL {:?}: use postgres://… or sqlite://…",
                redact_url(url)
            )))
        }
    }

    /// Applies pending migrations (idempotent).
    pub async fn migrate(&self) -> Result<()> {
        match self {
            Inbox::Postgres(p) => {
                // Building an index on a large inbox may outlast the statement timeout: migrate on
                // a connection of its own without one, and close it rather than pool it.
                let mut conn = p.acquire().await?;
                sqlx::query("SET statement_timeout = 0")
                    .execute(&mut *conn)
                    .await?;
                let ran = PG_MIGRATIONS.run(&mut *conn).await;
                conn.close_on_drop();
                ran?
            }
            Inbox::Sqlite(p) => SQLITE_MIGRATIONS.run(p).await?,
        }
        Ok(())
    }

    /// A trivial round trip, for readiness.
    pub async fn ping(&self) -> Result<()> {
        backend!(self, pool => {
            sqlx::query("SELECT 1").execute(pool).await?;
            Ok(())
        })
    }

    pub async fn close(&self) {
        match self {
            Inbox::Postgres(p) => p.close().await,
            Inbox::Sqlite(p) => p.close().await,
        }
    }
}

/// Runs one database call with a client-side deadline: even a server that never answers (a
/// network partition, a stopped process) costs the caller `deadline` at most.
///
/// Not an `async fn`: one keeps room for `call` both as its argument and inside the timeout,
/// twice the size of a database call's future (sqlx's are kilobytes), copied whenever it moves.
pub(crate) fn within<T>(
    deadline: Duration,
    call: impl std::future::Future<Output = Result<T>>,
) -> impl std::future::Future<Output = Result<T>> {
    use futures::FutureExt;
    tokio::time::timeout(deadline, call).map(move |done| {
        done.unwrap_or_else(|_| {
            Err(Error::Unavailable(format!(
                "the database did not answer within {deadline:?}"
            )))
        })
    })
}

/// [`within`] for a batch: every item of a batch that missed the deadline gets the error.
pub(crate) fn within_batch<T>(
    deadline: Duration,
    items: usize,
    call: impl std::future::Future<Output = Vec<Result<T>>>,
) -> impl std::future::Future<Output = Vec<Result<T>>> {
    use futures::FutureExt;
    tokio::time::timeout(deadline, call).map(move |done| match done {
        Ok(results) => results,
        Err(_) => (0..items)
            .map(|_| {
                Err(Error::Unavailable(format!(
                    "the database did not answer within {deadline:?}"
                )))
            })
            .collect(),
    })
}

/// A statement that lifts the statement timeout for the rest of a transaction (maintenance work
/// may legitimately take longer than a request may wait), but keeps each lock wait within it:
/// `lock_timeout` becomes the statement timeout the connection had. A row another transaction
/// holds then fails the batch after that long instead of holding it, and the retention pass
/// behind it, for as long as that transaction lasts. (The filter runs before the select list, so
/// the timeout is read before it is lifted.)
const LIFT_STATEMENT_TIMEOUT_PG: &str = "SELECT set_config('statement_timeout', '0', true) \
     WHERE set_config('lock_timeout', current_setting('statement_timeout'), true) IS NOT NULL";

/// A PostgreSQL transaction for maintenance work, its statement timeout lifted and its lock
/// waits kept within it ([`LIFT_STATEMENT_TIMEOUT_PG`]). Every retention statement runs in one:
/// under load a statement with nothing to wait for may still take longer than a request may.
/// (SQLite's timeout is a busy timeout, which only ever waits for the one writer, so it stays.)
pub(crate) async fn maintenance(
    pool: &PgPool,
) -> sqlx::Result<sqlx::Transaction<'static, Postgres>> {
    let mut tx = pool.begin().await?;
    sqlx::query(LIFT_STATEMENT_TIMEOUT_PG)
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}
