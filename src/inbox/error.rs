//! Why the inbox could not answer. Callers decide what it means for them: the receiver answers
//! 503 `inbox_unavailable`, a worker retries its claim, the CLI exits 1.

/// The storage layer's error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Config(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The group-committed batch this request belonged to failed (the cause is logged once).
    #[error("inbox unavailable: {0}")]
    Unavailable(String),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl Error {
    /// A fixed, snake_case name for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Config(_) => "inbox_config",
            Error::Database(_) => "database",
            Error::Unavailable(_) => "inbox_unavailable",
            Error::Migrate(_) => "migration",
        }
    }

    /// The database could not be reached at all (no connection within the acquire timeout, a
    /// closed pool, a broken connection), as opposed to a statement it refused: the next statement
    /// would most likely fail the same way.
    pub fn is_unreachable(&self) -> bool {
        match self {
            Error::Database(e) => matches!(
                e,
                sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::WorkerCrashed
            ),
            Error::Unavailable(_) => true,
            Error::Config(_) | Error::Migrate(_) => false,
        }
    }

    /// PostgreSQL gave up waiting: for a lock (`lock_timeout`, 55P03) or for the whole statement
    /// (`statement_timeout`, 57014), usually behind a row another transaction holds. The same
    /// statement may go through later; other rows may go through now.
    pub fn is_lock_wait(&self) -> bool {
        match self {
            Error::Database(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("55P03" | "57014"))
            }
            _ => false,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_fixed_and_distinct() {
        let all = [
            Error::Config("bad url".into()),
            Error::Database(sqlx::Error::PoolTimedOut),
            Error::Unavailable("batch failed".into()),
            Error::Migrate(sqlx::migrate::MigrateError::VersionMissing(1)),
        ];
        let mut labels: Vec<_> = all.iter().map(Error::metric_label).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), all.len());
        let unreachable: Vec<bool> = all.iter().map(Error::is_unreachable).collect();
        assert_eq!(unreachable, [false, true, true, false]);
        assert!(
            labels
                .iter()
                .all(|l| l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
    }
}
