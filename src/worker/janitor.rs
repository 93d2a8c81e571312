//! Retention: drop bodies of finished events after `retention.payload`, delete finished events
//! (and with them their dedupe keys) after `retention.dedupe`, forget ordering versions that have
//! not moved for `retention.dedupe`, forget expired signature nonces, and forget the key use and
//! catch-up records of integrations that are gone once their last event is. Dead letters are kept
//! until replayed or purged. One worker process on a database makes each period's pass, whichever
//! finds it due first (`inbox::chores`).
//!
//! Each step of a pass stands alone: one that fails (a row another transaction holds past the
//! lock timeout, a connection lost) leaves its rows for the next pass, and the pass goes on with
//! the other integrations and the other steps. Until round 40 the first failure ended the pass, so
//! one tenant's held row kept every tenant after it, and the nonces, waiting. A database that
//! cannot be reached at all ends the pass at once: every further step would wait for a connection
//! in vain.

use super::Worker;
use crate::crd::defaults;
use crate::inbox::{Error, Inbox};
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

/// A step of a pass: the `step` label of `hookgate_retention_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Listing the integrations that have finished events, configured or not.
    Integrations,
    Purge,
    Delete,
    Versions,
    Nonces,
    Records,
}

impl Step {
    pub const ALL: [Step; 6] = [
        Step::Integrations,
        Step::Purge,
        Step::Delete,
        Step::Versions,
        Step::Nonces,
        Step::Records,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::Integrations => "integrations",
            Step::Purge => "purge",
            Step::Delete => "delete",
            Step::Versions => "versions",
            Step::Nonces => "nonces",
            Step::Records => "records",
        }
    }
}

/// A step that failed: what it would have removed waits for the next pass.
#[derive(Debug)]
pub struct Failed {
    pub step: Step,
    /// The integration whose rows the step was on, for the steps made per integration.
    pub integration: Option<String>,
    pub error: Error,
}

/// One pass: what it removed, and the steps that failed.
#[derive(Debug, Default)]
pub struct Pass {
    pub swept: Swept,
    pub failed: Vec<Failed>,
}

impl Pass {
    /// `result`'s count, or 0 with the failure noted (and counted in `worker`'s metrics).
    fn count(
        &mut self,
        worker: &Worker,
        step: Step,
        integration: Option<&str>,
        result: crate::inbox::Result<u64>,
    ) -> u64 {
        match result {
            Ok(n) => n,
            Err(error) => {
                self.fail(worker, step, integration, error);
                0
            }
        }
    }

    /// The last failure says the database cannot be reached: the rest waits for the next pass.
    fn gave_up(&self) -> bool {
        self.failed.last().is_some_and(|f| f.error.is_unreachable())
    }

    fn fail(&mut self, worker: &Worker, step: Step, integration: Option<&str>, error: Error) {
        worker.inner.metrics.retention_failures(step.as_str(), 1);
        self.failed.push(Failed {
            step,
            integration: integration.map(str::to_string),
            error,
        });
    }
}

/// One pass over every integration in the inbox. Integrations no longer configured keep the
/// default retention, so their rows do not stay forever.
pub async fn sweep(inbox: &Inbox, worker: &Worker) -> Pass {
    let now = Utc::now();
    let mut pass = Pass::default();
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
        // Rows of integrations that are gone get the default retention.
        match inbox.integrations_with_finished().await {
            Ok(names) => retention.extend(
                names
                    .into_iter()
                    .filter(|i| !targets.contains_key(i))
                    .map(|i| (i, defaults::RETENTION_PAYLOAD, defaults::RETENTION_DEDUPE)),
            ),
            Err(e) => pass.fail(worker, Step::Integrations, None, e),
        }
        if pass.gave_up() {
            return pass;
        }
    }
    // A version older than the dedupe window guards only against events older than any
    // duplicate the inbox would still recognise. One walk of the versions serves every
    // integration.
    let mut unchanged_before = Vec::with_capacity(retention.len());
    for (integration, payload, dedupe) in retention {
        let i = Some(integration.as_str());
        let purged = inbox
            .purge_payloads(&integration, time::before(now, payload), now)
            .await;
        pass.swept.purged += pass.count(worker, Step::Purge, i, purged);
        if pass.gave_up() {
            return pass;
        }
        let deleted = inbox
            .delete_finished(&integration, time::before(now, dedupe))
            .await;
        pass.swept.deleted += pass.count(worker, Step::Delete, i, deleted);
        if pass.gave_up() {
            return pass;
        }
        unchanged_before.push((integration, time::before(now, dedupe)));
    }
    let walk = inbox.forget_versions(&unchanged_before, now).await;
    pass.swept.versions = walk.versions;
    if let Some(e) = walk.failed {
        pass.fail(worker, Step::Versions, None, e);
    }
    if pass.gave_up() {
        return pass;
    }
    let nonces = inbox.prune_nonces(now).await;
    pass.swept.nonces = pass.count(worker, Step::Nonces, None, nonces);
    if worker.targets_loaded() && !pass.gave_up() {
        let configured: Vec<String> = targets.keys().cloned().collect();
        let records = inbox.forget_gone_integrations(&configured).await;
        pass.swept.records = pass.count(worker, Step::Records, None, records);
    }
    pass
}

/// Every step's failures counted from zero, so that the first is an increase an alert sees.
pub(crate) fn declare_series(metrics: &crate::metrics::Metrics) {
    for step in Step::ALL {
        metrics.retention_failures(step.as_str(), 0);
    }
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
) -> crate::inbox::Result<Option<Pass>> {
    if !inbox.take_chore(CHORE, now, every).await? {
        return Ok(None);
    }
    Ok(Some(sweep(inbox, worker).await))
}

pub async fn run(inbox: Inbox, worker: Worker, every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        match pass_if_due(&inbox, &worker, Utc::now(), every).await {
            Ok(None) => tracing::debug!("retention janitor: another worker process made this pass"),
            Ok(Some(pass)) => log(&pass),
            Err(e) => tracing::warn!(error = %e, "retention janitor could not take its turn"),
        }
    }
}

fn log(pass: &Pass) {
    for f in &pass.failed {
        tracing::warn!(
            step = f.step.as_str(),
            integration = f.integration.as_deref().unwrap_or(""),
            error = %f.error,
            "retention janitor step failed; its rows wait for the next pass"
        );
    }
    let s = pass.swept;
    if s != Swept::default() {
        tracing::info!(
            purged = s.purged,
            deleted = s.deleted,
            nonces = s.nonces,
            versions = s.versions,
            records = s.records,
            failed = pass.failed.len(),
            "retention janitor pass"
        );
    }
}
