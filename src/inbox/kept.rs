//! Connections a hot loop keeps between its statements.
//!
//! sqlx checks every pooled connection with a round trip to the server when it goes back to the
//! pool. The receiver's batch writer and the workers' completion writer would pay that once per
//! batch, beside the batch itself: while they are busy they keep their connections instead. A
//! kept connection goes back to the pool after a statement on it failed (sqlx's check then
//! discards it if the server closed it), when it has not been used for [`KEEP_IDLE`], when the
//! pool has no other connection to give, or when the pool closes, so that neither other callers
//! nor shutdown wait for connections nobody uses; and after [`KEEP_AT_MOST`] in a row, so that the
//! pool's `max_lifetime` still replaces connections under steady load.

use super::Result;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How long a kept connection may sit unused before it goes back to the pool.
const KEEP_IDLE: Duration = Duration::from_millis(500);
/// Longest one connection is kept in a row, however busy: then it goes back to the pool, whose
/// own rules (`max_lifetime`, `idle_timeout`) decide whether it is reused or replaced.
const KEEP_AT_MOST: Duration = Duration::from_secs(60);

/// A kept connection, when it was last used, and when it was taken from the pool.
type Entry = (PoolConnection<Postgres>, Instant, Instant);
type Idle = Mutex<Vec<Entry>>;
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
        let (mut conn, taken_at) = match kept {
            Some((conn, _, taken_at)) => (conn, taken_at),
            None => (self.pool.acquire().await?, Instant::now()),
        };
        let out = f(&mut conn).await;
        let exhausted = self.pool.num_idle() == 0
            && self.pool.size() >= self.pool.options().get_max_connections();
        let now = Instant::now();
        if keep(
            out.is_ok(),
            exhausted || self.pool.is_closed(),
            taken_at,
            now,
        ) {
            let mut free = self.free.lock().expect("never poisoned");
            free.push((conn, now, taken_at));
        }
        out
    }
}

/// Whether a connection goes back to the kept list after a statement: only after a success, while
/// others may still get a connection from the pool, and for at most [`KEEP_AT_MOST`] in a row.
fn keep(succeeded: bool, pool_unavailable: bool, taken_at: Instant, now: Instant) -> bool {
    succeeded && !pool_unavailable && now.saturating_duration_since(taken_at) < KEEP_AT_MOST
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
                    .partition(|(_, used, _)| used.elapsed() >= KEEP_IDLE);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_kept_only_after_a_success_while_the_pool_has_room_and_for_a_minute_at_most()
    {
        let t0 = Instant::now();
        let soon = t0 + Duration::from_secs(1);
        assert!(keep(true, false, t0, soon));
        assert!(
            !keep(false, false, t0, soon),
            "a failed statement gives it back"
        );
        assert!(
            !keep(true, true, t0, soon),
            "an exhausted or closed pool gets it back"
        );
        assert!(
            !keep(true, false, t0, t0 + KEEP_AT_MOST),
            "kept a minute in a row at most"
        );
        assert!(keep(
            true,
            false,
            t0,
            t0 + KEEP_AT_MOST - Duration::from_millis(1)
        ));
    }
}
