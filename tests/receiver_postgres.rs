//! Receiver against real PostgreSQL: each test gets its own migrated database (`#[sqlx::test]`).

mod common;

use hookgate::inbox::Inbox;
use sqlx::PgPool;

macro_rules! on_postgres {
    ($($name:ident),* $(,)?) => {$(
        #[sqlx::test(migrations = "migrations/postgres")]
        async fn $name(pool: PgPool) {
            common::scenarios::$name(Inbox::Postgres(pool)).await;
        }
    )*};
}

on_postgres!(
    accept_then_duplicate,
    provider_retry_is_duplicate,
    dedupe_conflict_is_counted,
    signature_replay_with_new_id_is_duplicate,
    filtered_type_is_recorded_as_ignored,
    fifty_concurrent_identical_posts_make_one_row,
    nonces_expire_after_retention_and_are_pruned,
    expired_unpruned_nonce_is_renewed,
);
