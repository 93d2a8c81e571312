/// The library's one error type; the CLI wraps it with anyhow for context.
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
