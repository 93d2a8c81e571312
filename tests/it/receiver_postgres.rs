//! Receiver against real PostgreSQL: each test gets its own migrated database (`#[sqlx::test]`).

use hookgate::inbox::Inbox;
use sqlx::PgPool;

macro_rules! on_postgres {
    ($($name:ident),* $(,)?) => {$(
        #[sqlx::test(migrations = "migrations/postgres")]
        async fn $name(pool: PgPool) {
            crate::common::scenarios::$name(Inbox::Postgres(pool)).await;
        }
    )*};
}

every_scenario!(on_postgres);
