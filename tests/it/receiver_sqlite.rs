//! Receiver against real SQLite files, as `hookgate standalone` runs by default.

use hookgate::inbox::Inbox;
use sqlx::Row;

macro_rules! on_sqlite {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let (_dir, inbox) = crate::common::sqlite_inbox().await;
            crate::common::scenarios::$name(inbox).await;
        }
    )*};
}

every_scenario!(on_sqlite);

/// The standalone inbox is a durable store: WAL journal and fsync on every commit.
#[tokio::test]
async fn sqlite_inbox_is_durable_wal_with_full_sync() {
    let (_dir, inbox) = crate::common::sqlite_inbox().await;
    let Inbox::Sqlite(pool) = &inbox else {
        unreachable!()
    };
    let mut conn = pool.acquire().await.unwrap();
    let mode: String = sqlx::query("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .get(0);
    let sync: i64 = sqlx::query("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .get(0);
    assert_eq!(mode, "wal");
    assert_eq!(sync, 2, "synchronous=FULL");
}

/// A missing database file is created, and a second process-like handle can read while one writes.
#[tokio::test]
async fn missing_sqlite_file_is_created_and_shared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested-new.db");
    let url = format!("sqlite://{}", path.display());
    let writer = Inbox::connect(&url).await.unwrap();
    writer.migrate().await.unwrap();
    assert!(path.exists());
    let reader = Inbox::connect(&url).await.unwrap();
    reader.migrate().await.unwrap();
    assert_eq!(reader.counts().await.unwrap(), (0, 0));
}
