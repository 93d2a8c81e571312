//! The inbox gauges' figures, shared by the worker processes of one database.
//!
//! Every worker process exports the backlog of the whole database (so that the alerts, a `max`
//! over pods, outlive any one pod), but reading it costs PostgreSQL a scan of the waiting and
//! dead-lettered statuses' partial indexes, with the entries of events delivered since the last
//! read: 150-235 ms at 4,500 events/s (docs/performance.md, round 37). Each interval one process
//! takes the turn (a chore, `super::chores`: whichever first finds it not taken for three quarters
//! of the interval; nobody holds it), reads the figures and writes them to `inbox_gauges`; the
//! others export what it wrote.

use super::stats::{Counted, aged};
use super::{BacklogCount, Inbox, Result};
use chrono::{DateTime, Utc};
use std::time::Duration;

/// The gauges' chore in `inbox_chores` (`super::chores`): whose turn it is to read them.
const CHORE: &str = "gauges";
/// The figures of the last turn. Writing `read_at` too keeps workers of round 37, which took the
/// turn on this row, from taking it again within the interval during a rollout.
const WRITE: &str = "INSERT INTO inbox_gauges (id, read_at, figures) VALUES (1, $1, $2) \
     ON CONFLICT (id) DO UPDATE SET read_at = excluded.read_at, figures = excluded.figures";
const SHARED: &str = "SELECT figures FROM inbox_gauges WHERE id = 1";

/// The backlog for a process's gauges and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeFigures {
    /// Oldest ages as of the `now` asked for, whoever read the counts.
    pub backlog: Vec<BacklogCount>,
    /// This call read the inbox (its turn), rather than the figures another process wrote.
    pub read: bool,
    /// This call's turn to read failed, with this error (the statement timeout, once the backlog
    /// outgrows it): `backlog` is then the last figures written, aged to now, so that the
    /// oldest event's age keeps growing instead of freezing where the last read left it.
    pub read_failed: Option<String>,
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
        if !self.take_chore(CHORE, now, every).await? {
            match self.shared_figures().await? {
                Shared::Figures(counted) => return Ok(Some(figures(counted, now, false))),
                Shared::None => return Ok(None),
                // Written by another version of hookgate: read them here this time.
                Shared::Unreadable => {}
            }
        }
        let counted = match self.counted(None).await {
            Ok(counted) => counted,
            Err(e) => {
                return match self.shared_figures().await? {
                    Shared::Figures(counted) => Ok(Some(GaugeFigures {
                        read_failed: Some(e.to_string()),
                        ..figures(counted, now, false)
                    })),
                    Shared::None | Shared::Unreadable => Err(e),
                };
            }
        };
        let json = serde_json::to_string(&counted).expect("plain data serializes");
        backend!(self, pool => {
            sqlx::query(WRITE).bind(now).bind(json).execute(pool).await?;
        });
        Ok(Some(figures(counted, now, true)))
    }
}

/// The figures the last turn wrote, as this version reads them.
enum Shared {
    Figures(Vec<Counted>),
    None,
    Unreadable,
}

impl Inbox {
    async fn shared_figures(&self) -> Result<Shared> {
        let shared: Option<Option<String>> = backend!(self, pool => {
            sqlx::query_scalar(SHARED).fetch_optional(pool).await?
        });
        Ok(match shared.flatten().map(|f| serde_json::from_str(&f)) {
            Some(Ok(counted)) => Shared::Figures(counted),
            None => Shared::None,
            Some(Err(_)) => Shared::Unreadable,
        })
    }
}

fn figures(counted: Vec<Counted>, now: DateTime<Utc>, read: bool) -> GaugeFigures {
    GaugeFigures {
        backlog: aged(counted, now),
        read,
        read_failed: None,
    }
}
