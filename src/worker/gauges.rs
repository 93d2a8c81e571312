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
            Ok(Some(figures)) => metrics.set_inbox(&figures.backlog),
            // Another process's first turn, not written yet: the next tick has it.
            Ok(None) => {}
            Err(e) => tracing::debug!(error = %e, "could not read inbox figures for metrics"),
        }
    }
}
