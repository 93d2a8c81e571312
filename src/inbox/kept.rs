//! Connections a hot loop keeps between its statements.
//!
//! sqlx checks every pooled connection with a round trip to the server when it goes back to the
//! pool. The receiver's batch writer, the workers' completion writer and their claims would pay
//! that once per statement, beside the statement itself: they keep their connections instead. A
//! connection goes back to the pool only after a statement on it failed (sqlx's check then
//! discards it if the server closed it), or when the pool closes, so that shutdown does not wait
//! for connections nobody uses.

use super::Result;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use std::sync::{Arc, Mutex};

type Free = Arc<Mutex<Vec<PoolConnection<Postgres>>>>;

#[derive(Clone)]
pub(crate) struct Kept {
    pool: PgPool,
    free: Free,
}

impl Kept {
    /// Must be called within a Tokio runtime: a task gives the kept connections back when the
    /// pool closes.
    pub(crate) fn new(pool: PgPool) -> Self {
        let free: Free = Arc::default();
        let on_close = (pool.clone(), Arc::downgrade(&free));
        tokio::spawn(async move {
            let (pool, free) = on_close;
            pool.close_event().await;
            if let Some(free) = free.upgrade() {
                free.lock().expect("never poisoned").clear();
            }
        });
        Self { pool, free }
    }

    /// Runs `f` on a kept connection (or a new one from the pool), and keeps the connection if
    /// `f` succeeded.
    pub(crate) async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
    ) -> Result<T> {
        let kept = self.free.lock().expect("never poisoned").pop();
        let mut conn = match kept {
            Some(conn) => conn,
            None => self.pool.acquire().await?,
        };
        let out = f(&mut conn).await;
        if out.is_ok() && !self.pool.is_closed() {
            self.free.lock().expect("never poisoned").push(conn);
        }
        out
    }
}
