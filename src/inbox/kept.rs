//! Connections a hot loop keeps between its statements.
//!
//! sqlx checks every pooled connection with a round trip to the server when it goes back to the
//! pool. The receiver's batch writer and the workers' completion writer would pay that once per
//! batch, beside the batch itself: while they are busy they keep their connections instead. A
//! kept connection goes back to the pool after a statement on it failed (sqlx's check then
//! discards it if the server closed it), when it has not been used for [`KEEP_IDLE`], when the
//! pool has no other connection to give, or when the pool closes, so that neither other callers
//! nor shutdown wait for connections nobody uses.

use super::Result;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a kept connection may sit unused before it goes back to the pool.
const KEEP_IDLE: Duration = Duration::from_millis(500);

/// Kept connections, each with when it was last used.
type Idle = Mutex<Vec<(PoolConnection<Postgres>, Instant)>>;
type Free = Arc<Idle>;

#[derive(Clone)]
pub(crate) struct Kept {
    pool: PgPool,
    free: Free,
}

impl Kept {
    /// Must be called within a Tokio runtime: a task gives back connections left unused, and all
    /// of them when the pool closes.
    pub(crate) fn new(pool: PgPool) -> Self {
        let free: Free = Arc::default();
        tokio::spawn(give_back_unused(pool.clone(), Arc::downgrade(&free)));
        Self { pool, free }
    }

    /// Runs `f` on a kept connection (or one from the pool), and keeps the connection if `f`
    /// succeeded and the pool has connections left for others.
    pub(crate) async fn run<T>(
        &self,
        f: impl AsyncFnOnce(&mut PgConnection) -> Result<T>,
    ) -> Result<T> {
        let kept = self.free.lock().expect("never poisoned").pop();
        let mut conn = match kept {
            Some((conn, _)) => conn,
            None => self.pool.acquire().await?,
        };
        let out = f(&mut conn).await;
        let exhausted = self.pool.num_idle() == 0
            && self.pool.size() >= self.pool.options().get_max_connections();
        if out.is_ok() && !exhausted && !self.pool.is_closed() {
            let mut free = self.free.lock().expect("never poisoned");
            free.push((conn, Instant::now()));
        }
        out
    }
}

async fn give_back_unused(pool: PgPool, free: Weak<Idle>) {
    let closed = pool.close_event();
    tokio::pin!(closed);
    loop {
        let pool_closed = tokio::select! {
            _ = &mut closed => true,
            _ = tokio::time::sleep(KEEP_IDLE) => false,
        };
        let Some(free) = free.upgrade() else { return };
        // Dropped outside the lock: each goes back to the pool through sqlx's check.
        let given_back: Vec<_> = {
            let mut free = free.lock().expect("never poisoned");
            if pool_closed {
                std::mem::take(&mut *free)
            } else {
                let (unused, used) = free
                    .drain(..)
                    .partition(|(_, at)| at.elapsed() >= KEEP_IDLE);
                *free = used;
                unused
            }
        };
        drop(given_back);
        if pool_closed {
            return;
        }
    }
}
