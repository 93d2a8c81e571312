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
        assert!(
            labels
                .iter()
                .all(|l| l.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        );
    }
}
