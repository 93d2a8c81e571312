//! The inbox gauges of `/metrics` (the backlog by status, the oldest waiting event's age), kept
//! current on a timer. Every worker process exports them; one of the processes on the database
//! reads them for all each interval (`inbox::gauges`).

use crate::inbox::Inbox;
use crate::metrics::Metrics;
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;

/// Refreshes the gauges every `every` until `stop` turns true (or its sender is gone); a read
/// under way is finished first, so the process waits for at most that statement.
pub(super) async fn refresh(
    inbox: Inbox,
    metrics: Arc<Metrics>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    while super::ticked(&mut tick, &mut stop).await {
        match inbox.backlog_for_gauges(Utc::now(), every).await {
            Ok(Some(figures)) => {
                if let Some(e) = &figures.read_failed {
                    tracing::warn!(error = %e, "could not read the inbox backlog for the gauges; exporting the last figures read, aged to now");
                }
                metrics.set_inbox(&figures.backlog)
            }
            // Another process's first turn, not written yet: the next tick has it.
            Ok(None) => {}
            // Nothing to export: the gauges keep what they showed.
            Err(e) => tracing::warn!(error = %e, "could not read the inbox figures for the gauges"),
        }
    }
}
