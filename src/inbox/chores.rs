//! Chores: periodic work that one worker process does for all the processes on a database (the
//! retention janitor's passes, the inbox gauges' reads). Each period the chore goes to whichever process first finds it not
//! taken for three quarters of the period, so nobody holds it: a process that stops or dies just
//! stops taking it, and a lone process takes it every period.

use super::{Inbox, Result};
use chrono::{DateTime, SubsecRound, Utc};
use std::time::Duration;

/// `t` as both backends store it (PostgreSQL keeps microseconds), so that a give-back finds the
/// instant its take wrote.
fn stored(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// One row per chore, so concurrent takers serialize on it and the second finds `taken_at` just
/// moved (PostgreSQL re-checks the `WHERE` on the row it waited for; SQLite has one writer). A
/// chore's first take creates its row.
const TAKE: &str = "INSERT INTO inbox_chores (chore, taken_at) VALUES ($1, $2) \
     ON CONFLICT (chore) DO UPDATE SET taken_at = excluded.taken_at \
     WHERE inbox_chores.taken_at <= $3";

/// Only the take that set `taken_at` gives it back: a process that took the chore since keeps it.
const GIVE_BACK: &str = "UPDATE inbox_chores SET taken_at = $3 WHERE chore = $1 AND taken_at = $2";

impl Inbox {
    /// Takes `chore` at `now` if no process on this database took it within the last three
    /// quarters of `every`, the period at which each process asks. True when this call took it.
    pub async fn take_chore(
        &self,
        chore: &str,
        now: DateTime<Utc>,
        every: Duration,
    ) -> Result<bool> {
        let due_before = crate::time::before(now, every - every / 4);
        let now = stored(now);
        let taken = backend!(self, pool => {
            sqlx::query(TAKE)
                .bind(chore)
                .bind(now)
                .bind(due_before)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(taken == 1)
    }

    /// Gives back `chore` taken at `taken_at` (by [`Inbox::take_chore`] with the same `every`),
    /// so that the next process to ask takes it at once rather than a period later: for work cut
    /// off before its end. True when it was still this take's to give back.
    pub async fn give_back_chore(
        &self,
        chore: &str,
        taken_at: DateTime<Utc>,
        every: Duration,
    ) -> Result<bool> {
        let long_before = crate::time::before(taken_at, every);
        let given = backend!(self, pool => {
            sqlx::query(GIVE_BACK)
                .bind(chore)
                .bind(stored(taken_at))
                .bind(long_before)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(given == 1)
    }
}
