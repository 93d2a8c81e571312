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

mod batch;
mod complete;
mod delivery;
mod dlq;
mod event;
mod group;
mod retention;
mod store;

pub use complete::Completer;
pub use delivery::{Advance, Attempt, CLAIM_PG, Claimed, Completion};
pub use dlq::*;
pub use event::{EventSummary, InsertOutcome, ListFilter, NewEvent, Status};
pub use group::{GroupCommit, GroupCommitConfig, MAX_BATCH};
pub use store::InboxStat;

use crate::{Error, Result};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

static PG_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");
static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

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
        Self::open(url).await.map_err(|e| match e {
            Error::Database(e) => {
                Error::Config(format!("cannot open the inbox at {}: {e}", redact_url(url)))
            }
            other => other,
        })
    }

    async fn open(url: &str) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                // A short acquire timeout turns an outage into a prompt 503, not a hung request.
                .acquire_timeout(Duration::from_secs(3))
                .connect(url)
                .await?;
            Ok(Inbox::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .foreign_keys(true)
                .busy_timeout(Duration::from_secs(10));
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(10))
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
            Inbox::Postgres(p) => PG_MIGRATIONS.run(p).await?,
            Inbox::Sqlite(p) => SQLITE_MIGRATIONS.run(p).await?,
        }
        Ok(())
    }

    pub async fn close(&self) {
        match self {
            Inbox::Postgres(p) => p.close().await,
            Inbox::Sqlite(p) => p.close().await,
        }
    }
}

/// `postgres://user:pass@host/db` -> `postgres://user:***@host/db`, for error messages.
pub fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Only `scheme://host:port` of a URL, for logs: paths and queries often carry tokens.
pub fn url_origin(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|_| "<invalid url>".into())
}
