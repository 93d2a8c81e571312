//! Retention: drop bodies of finished events after `retention.payload`, delete finished events
//! (and with them their dedupe keys) after `retention.dedupe`, forget ordering versions that have
//! not moved for `retention.dedupe`, forget expired signature nonces, and forget the key use and
//! catch-up records of integrations that are gone once their last event is. Dead letters are kept
//! until replayed or purged. One worker process on a database makes each period's pass, whichever
//! finds it due first (`inbox::chores`).

use super::Worker;
use crate::crd::defaults;
use crate::inbox::Inbox;
use crate::time;
use chrono::Utc;
use std::time::Duration;

/// What one pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Bodies emptied.
    pub purged: u64,
    /// Finished events deleted.
    pub deleted: u64,
    /// Signature nonces forgotten.
    pub nonces: u64,
    /// Ordering versions forgotten.
    pub versions: u64,
    /// Key use, catch-up and ordering rows of integrations gone with their last event.
    pub records: u64,
}

/// One pass over every integration in the inbox. Integrations no longer configured keep the
/// default retention, so their rows do not stay forever.
pub async fn sweep(inbox: &Inbox, worker: &Worker) -> crate::inbox::Result<Swept> {
    let now = Utc::now();
    let mut swept = Swept::default();
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
    // A version older than the dedupe window guards only against events older than any
    // duplicate the inbox would still recognise. One walk of the versions serves every
    // integration.
    let mut unchanged_before = Vec::with_capacity(retention.len());
    for (integration, payload, dedupe) in retention {
        swept.purged += inbox
            .purge_payloads(&integration, time::before(now, payload), now)
            .await?;
        swept.deleted += inbox
            .delete_finished(&integration, time::before(now, dedupe))
            .await?;
        unchanged_before.push((integration, time::before(now, dedupe)));
    }
    swept.versions = inbox.forget_versions(&unchanged_before, now).await?;
    swept.nonces = inbox.prune_nonces(now).await?;
    if worker.targets_loaded() {
        let configured: Vec<String> = targets.keys().cloned().collect();
        swept.records = inbox.forget_gone_integrations(&configured).await?;
    }
    Ok(swept)
}

/// The janitor's chore in `inbox_chores`.
pub const CHORE: &str = "retention";

/// A pass, if it is this process's turn at `now` among the worker processes on the database that
/// each ask every `every`: `None` when another took it within the last three quarters of `every`.
/// A pass walks the same rows whoever makes it, so one per period is enough.
pub async fn pass_if_due(
    inbox: &Inbox,
    worker: &Worker,
    now: chrono::DateTime<Utc>,
    every: Duration,
) -> crate::inbox::Result<Option<Swept>> {
    if !inbox.take_chore(CHORE, now, every).await? {
        return Ok(None);
    }
    sweep(inbox, worker).await.map(Some)
}

pub async fn run(inbox: Inbox, worker: Worker, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match pass_if_due(&inbox, &worker, Utc::now(), every).await {
            Ok(None) => tracing::debug!("retention janitor: another worker process made this pass"),
            Ok(Some(s)) if s == Swept::default() => {}
            Ok(Some(s)) => tracing::info!(
                purged = s.purged,
                deleted = s.deleted,
                nonces = s.nonces,
                versions = s.versions,
                records = s.records,
                "retention janitor pass"
            ),
            Err(e) => tracing::warn!(error = %e, "retention janitor pass failed"),
        }
    }
}
