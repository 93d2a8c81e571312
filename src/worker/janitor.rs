//! Retention: drop bodies of finished events after `retention.payload`, delete finished events
//! (and with them their dedupe keys) after `retention.dedupe`, forget expired signature nonces.
//! Dead letters are kept until replayed or purged.

use super::Worker;
use crate::crd::defaults;
use crate::inbox::Inbox;
use crate::time;
use chrono::Utc;
use std::time::Duration;

/// One pass over every integration in the inbox. Returns (bodies dropped, events deleted,
/// nonces). Integrations no longer configured keep the default retention, so their rows do not
/// stay forever.
pub async fn sweep(inbox: &Inbox, worker: &Worker) -> crate::inbox::Result<(u64, u64, u64)> {
    let now = Utc::now();
    let (mut purged, mut deleted) = (0, 0);
    let targets = worker.targets_snapshot();
    let mut retention: Vec<(String, Duration, Duration)> = targets
        .values()
        .map(|t| {
            (
                t.integration.clone(),
                t.retention_payload,
                t.retention_dedupe,
            )
        })
        .collect();
    if worker.targets_loaded() {
        // Rows of integrations that are gone get the default retention. Finding them must not
        // hold up the cleanup of the configured ones.
        match inbox.integrations_with_finished().await {
            Ok(names) => retention.extend(
                names
                    .into_iter()
                    .filter(|i| !targets.contains_key(i))
                    .map(|i| (i, defaults::RETENTION_PAYLOAD, defaults::RETENTION_DEDUPE)),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not list the inbox's integrations; rows of deleted ones wait for the next pass")
            }
        }
    }
    for (integration, payload, dedupe) in retention {
        purged += inbox
            .purge_payloads(&integration, time::before(now, payload), now)
            .await?;
        deleted += inbox
            .delete_finished(&integration, time::before(now, dedupe))
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
