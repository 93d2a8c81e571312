//! Retention: drop bodies of finished events after `retention.payload`, delete finished events
//! (and with them their dedupe keys) after `retention.dedupe`, forget expired signature nonces.
//! Dead letters are kept until replayed or purged.

use super::Worker;
use crate::inbox::Inbox;
use chrono::Utc;
use std::time::Duration;

fn ago(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// One pass over every configured integration. Returns (bodies dropped, events deleted, nonces).
pub async fn sweep(inbox: &Inbox, worker: &Worker) -> crate::Result<(u64, u64, u64)> {
    let now = Utc::now();
    let (mut purged, mut deleted) = (0, 0);
    for target in worker.targets_snapshot().values() {
        purged += inbox
            .purge_payloads(
                &target.integration,
                now - ago(target.retention_payload),
                now,
            )
            .await?;
        deleted += inbox
            .delete_finished(&target.integration, now - ago(target.retention_dedupe))
            .await?;
    }
    let nonces = inbox.prune_nonces(now).await?;
    Ok((purged, deleted, nonces))
}

pub async fn run(inbox: Inbox, worker: Worker, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match sweep(&inbox, &worker).await {
            Ok((0, 0, 0)) => {}
            Ok((purged, deleted, nonces)) => {
                tracing::info!(purged, deleted, nonces, "retention janitor pass")
            }
            Err(e) => tracing::warn!(error = %e, "retention janitor pass failed"),
        }
    }
}
