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
//!
//! A process that stops ends its pass between two batches (two stretches of the versions' walk)
//! and gives its turn back. Until round 44 the pass was aborted mid-statement, and the rest of it
//! waited for the next period; until round 46 the versions' walk and the nonces' prune went on
//! past a stop, and a long one was cut off so.

use super::Worker;
use crate::crd::defaults;
use crate::inbox::{Error, Inbox, NEVER_STOPS, Stop};
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
    /// The process began stopping during the pass, which ended between two batches: the rest
    /// waits for the next pass, which the turn given back lets any process make at once.
    pub stopped: bool,
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

    /// The last failure says the database cannot be reached, or the process is stopping: the
    /// rest waits for the next pass.
    fn over(&mut self, stop: Stop<'_>) -> bool {
        self.stopped |= stop();
        self.stopped || self.failed.last().is_some_and(|f| f.error.is_unreachable())
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
    sweep_until(inbox, worker, NEVER_STOPS).await
}

/// [`sweep`], ending between two steps or two batches once `stop` says so.
pub async fn sweep_until(inbox: &Inbox, worker: &Worker, stop: Stop<'_>) -> Pass {
    let now = Utc::now();
    let mut pass = Pass::default();
    if pass.over(stop) {
        return pass;
    }
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
        if pass.over(stop) {
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
            .purge_payloads_until(&integration, time::before(now, payload), now, stop)
            .await;
        pass.swept.purged += pass.count(worker, Step::Purge, i, purged);
        if pass.over(stop) {
            return pass;
        }
        let deleted = inbox
            .delete_finished_until(&integration, time::before(now, dedupe), stop)
            .await;
        pass.swept.deleted += pass.count(worker, Step::Delete, i, deleted);
        if pass.over(stop) {
            return pass;
        }
        unchanged_before.push((integration, time::before(now, dedupe)));
    }
    let walk = inbox
        .forget_versions_until(&unchanged_before, now, stop)
        .await;
    pass.swept.versions = walk.versions;
    if let Some(e) = walk.failed {
        pass.fail(worker, Step::Versions, None, e);
    }
    if pass.over(stop) {
        return pass;
    }
    let nonces = inbox.prune_nonces_until(now, stop).await;
    pass.swept.nonces = pass.count(worker, Step::Nonces, None, nonces);
    if worker.targets_loaded() && !pass.over(stop) {
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
    pass_if_due_until(inbox, worker, now, every, NEVER_STOPS).await
}

/// [`pass_if_due`], ending between two steps or two batches once `stop` says so. A pass that
/// ends so gives its turn back: the next process to ask (this one restarted, or another) makes
/// the rest at once, not a period later.
pub async fn pass_if_due_until(
    inbox: &Inbox,
    worker: &Worker,
    now: chrono::DateTime<Utc>,
    every: Duration,
    stop: Stop<'_>,
) -> crate::inbox::Result<Option<Pass>> {
    if !inbox.take_chore(CHORE, now, every).await? {
        return Ok(None);
    }
    let pass = sweep_until(inbox, worker, stop).await;
    if pass.stopped {
        match inbox.give_back_chore(CHORE, now, every).await {
            Ok(_) => tracing::info!(
                "retention janitor pass stopped with the process; its turn is given back"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "retention janitor pass stopped with the process and could not give its turn back; the rest waits a period"
            ),
        }
    }
    Ok(Some(pass))
}

/// A pass every `every` when it is this process's turn, until `stop` turns true (or its sender
/// is gone). A pass under way then ends between two batches, so the process waits for at most the
/// statement it is on.
pub async fn run(
    inbox: Inbox,
    worker: Worker,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    while super::ticked(&mut tick, &mut stop).await {
        let stopping = || *stop.borrow();
        match pass_if_due_until(&inbox, &worker, Utc::now(), every, &stopping).await {
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
