//! The inbox gauges' figures, shared by the worker processes of one database.
//!
//! Every worker process exports the backlog of the whole database (so that the alerts, a `max`
//! over pods, outlive any one pod), but reading it costs PostgreSQL a scan of the waiting and
//! dead-lettered statuses' partial indexes, with the entries of events delivered since the last
//! read: 150-235 ms at 4,500 events/s (docs/performance.md, round 37). Each interval one process takes the turn, reads it
//! and writes it to `inbox_gauges`; the others export what it wrote. The turn goes to whichever
//! process first finds the figures older than three quarters of the interval, so nobody holds
//! it: a process that stops or dies just stops taking it. A lone process takes it every time.

use super::stats::{Counted, aged};
use super::{BacklogCount, Inbox, Result};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// Takes the turn when the figures are due: one row, so concurrent takers serialize on it and
/// the second finds `read_at` just moved (PostgreSQL re-checks the `WHERE` on the row it waited
/// for; SQLite has one writer). Its first take creates the row.
const TAKE_TURN: &str = "INSERT INTO inbox_gauges (id, read_at) VALUES (1, $1) \
     ON CONFLICT (id) DO UPDATE SET read_at = excluded.read_at \
     WHERE inbox_gauges.read_at <= $2";
const WRITE: &str = "UPDATE inbox_gauges SET figures = $1 WHERE id = 1";
const SHARED: &str = "SELECT figures FROM inbox_gauges WHERE id = 1";

/// The backlog for a process's gauges and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeFigures {
    /// Oldest ages as of the `now` asked for, whoever read the counts.
    pub backlog: Vec<BacklogCount>,
    /// This call read the inbox (its turn), rather than the figures another process wrote.
    pub read: bool,
}

impl Inbox {
    /// The backlog for the gauges of a process that asks every `every`: read from the inbox
    /// when its turn is due, the figures another process wrote otherwise. `None` in the moment
    /// between another's turn and its write, when there are no figures yet.
    pub async fn backlog_for_gauges(
        &self,
        now: DateTime<Utc>,
        every: Duration,
    ) -> Result<Option<GaugeFigures>> {
        let due_before = crate::time::before(now, every - every / 4);
        let taken = backend!(self, pool => {
            sqlx::query(TAKE_TURN).bind(now).bind(due_before).execute(pool).await?.rows_affected()
        });
        if taken == 0 {
            let shared: Option<Option<String>> = backend!(self, pool => {
                sqlx::query_scalar(SHARED).fetch_optional(pool).await?
            });
            match shared
                .flatten()
                .map(|f| serde_json::from_str::<Vec<Counted>>(&f))
            {
                Some(Ok(counted)) => return Ok(Some(figures(counted, now, false))),
                None => return Ok(None),
                // Written by another version of hookgate: read them here this time.
                Some(Err(_)) => {}
            }
        }
        let counted = self.counted(None).await?;
        let json = serde_json::to_string(&counted).expect("plain data serializes");
        backend!(self, pool => {
            sqlx::query(WRITE).bind(json).execute(pool).await?;
        });
        Ok(Some(figures(counted, now, true)))
    }
}

fn figures(counted: Vec<Counted>, now: DateTime<Utc>, read: bool) -> GaugeFigures {
    GaugeFigures {
        backlog: aged(counted, now),
        read,
    }
}
