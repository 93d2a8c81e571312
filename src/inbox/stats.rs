//! Traffic figures by integration: the backlog (events still to deliver, and dead letters) for the
//! workers' gauges and the controller's status, and what the controller reads of one integration's
//! arrivals (when each key last verified an event, the dedupe conflicts).
//!
//! Both run on a timer for as long as hookgate runs (the gauges every 15 s, read by one of the
//! worker processes on the database for all of them, `inbox::gauges`; the status every 30 s per
//! integration), so none may cost more as the inbox's retained history grows: the backlog is read
//! through the partial indexes of its statuses, the keys' last use from `key_usage` (see
//! `key_use`), and the conflicts through the partial index of the events that had one
//! (docs/performance.md, round 12).

use super::Inbox;
use super::Result;
use chrono::{DateTime, Utc};
use sqlx::Row;
use std::collections::HashMap;

/// Events of one integration in one status that still wait for delivery (`pending`, `retry`,
/// `processing`) or were dead-lettered.
#[derive(Debug, Clone, PartialEq)]
pub struct BacklogCount {
    pub integration: String,
    pub status: String,
    pub count: i64,
    /// For pending, retry and processing: seconds since the oldest of them was received.
    pub oldest_age_seconds: Option<i64>,
}

/// What the controller puts in one integration's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Traffic {
    pub backlog: Vec<BacklogCount>,
    /// When each key id last verified a stored event (caught-up events, verified by no key, under
    /// the empty id, which no key can have), from `key_usage`: up to `key_use::FLUSH_EVERY` behind.
    pub keys_last_used: HashMap<String, DateTime<Utc>>,
    /// Sum over the integration's events of the times a different body came with their id.
    pub dedupe_conflicts: i64,
}

impl Traffic {
    /// When the integration last stored an event: the latest of its keys' last use.
    pub fn last_received_at(&self) -> Option<DateTime<Utc>> {
        self.keys_last_used.values().max().copied()
    }
}

/// The backlog by integration and status: one arm per partial index (`inbox_events_waiting`,
/// `_leases`, `_dead`), whose status test is that index's predicate, so that PostgreSQL reads
/// those indexes instead of the table: the cost follows the backlog and the dead letters, not the
/// processed events kept for retention. Each arm on its own is a plain index scan, which marks
/// the entries of rows that moved on as dead for the scans after it. Until round 37 the three
/// were ORed into one bitmap scan, which marks nothing: every event delivered within the lease
/// (60 s) left an entry in `_leases` that each read visited again, with its heap page (273 ms a
/// read at 4,500 events/s, docs/performance.md). `status IN (...)` with all four would be one
/// array test that no partial index matches, i.e. a scan of the whole inbox. Public so a test can
/// check its plan.
pub const BACKLOG: &str = "SELECT integration, status, COUNT(*), MIN(received_at) FROM inbox_events \
     WHERE status IN ('pending', 'retry') AND (CAST($1 AS TEXT) IS NULL OR integration = $1) \
     GROUP BY integration, status \
     UNION ALL SELECT integration, 'processing', COUNT(*), MIN(received_at) FROM inbox_events \
     WHERE status = 'processing' AND (CAST($1 AS TEXT) IS NULL OR integration = $1) \
     GROUP BY integration \
     UNION ALL SELECT integration, 'dead_letter', COUNT(*), MIN(received_at) FROM inbox_events \
     WHERE status = 'dead_letter' AND (CAST($1 AS TEXT) IS NULL OR integration = $1) \
     GROUP BY integration \
     ORDER BY 1, 2";

/// Through `inbox_events_conflicts`, which holds only the events that had a conflict. Public so a
/// test can check its plan.
pub const CONFLICTS: &str = "SELECT CAST(COALESCE(SUM(dedupe_conflicts), 0) AS BIGINT) \
     FROM inbox_events WHERE integration = $1 AND dedupe_conflicts > 0";

/// One row of [`BACKLOG`]: what [`BacklogCount`] holds with the oldest event's arrival instead of
/// its age, so that the figures can be shared between processes (`inbox::gauges`) and aged by
/// each when it exports them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Counted {
    integration: String,
    status: String,
    count: i64,
    oldest_received_at: Option<DateTime<Utc>>,
}

impl Counted {
    /// The figure as of `now`; dead letters have no oldest age.
    fn at(self, now: DateTime<Utc>) -> BacklogCount {
        let waiting = self.status != "dead_letter";
        BacklogCount {
            oldest_age_seconds: self
                .oldest_received_at
                .filter(|_| waiting)
                .map(|t| (now - t).num_seconds().max(0)),
            integration: self.integration,
            status: self.status,
            count: self.count,
        }
    }
}

/// The figures as of `now`.
pub(super) fn aged(counted: Vec<Counted>, now: DateTime<Utc>) -> Vec<BacklogCount> {
    counted.into_iter().map(|c| c.at(now)).collect()
}

impl Inbox {
    /// The backlog of every integration, read now (the workers' gauges share it through
    /// `inbox::gauges`).
    pub async fn backlog(&self, now: DateTime<Utc>) -> Result<Vec<BacklogCount>> {
        self.backlog_of(None, now).await
    }

    /// The backlog of one integration (`namespace/name`), or of all when `None`.
    async fn backlog_of(
        &self,
        integration: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<BacklogCount>> {
        Ok(aged(self.counted(integration).await?, now))
    }

    /// [`BACKLOG`]'s rows.
    pub(super) async fn counted(&self, integration: Option<&str>) -> Result<Vec<Counted>> {
        backend!(self, pool => {
            let rows = sqlx::query(BACKLOG).bind(integration).fetch_all(pool).await?;
            rows.iter()
                .map(|r| {
                    Ok(Counted {
                        integration: r.try_get(0)?,
                        status: r.try_get(1)?,
                        count: r.try_get(2)?,
                        oldest_received_at: r.try_get(3)?,
                    })
                })
                .collect()
        })
    }

    /// Everything the controller's status and key phases read of one integration's inbox rows.
    pub async fn traffic(&self, integration: &str, now: DateTime<Utc>) -> Result<Traffic> {
        let backlog = self.backlog_of(Some(integration), now).await?;
        let keys_last_used = self.keys_last_used(integration).await?;
        let dedupe_conflicts = backend!(self, pool => {
            sqlx::query_scalar(CONFLICTS).bind(integration).fetch_one(pool).await?
        });
        Ok(Traffic {
            backlog,
            keys_last_used,
            dedupe_conflicts,
        })
    }
}
