//! Inbox workers: claim due events as leases, pass the ordering gate, deliver, and record the
//! outcome. The HTTP call happens outside any database transaction; a crashed worker's events
//! come back when their lease expires (at-least-once delivery).
//!
//! The rules are pure and tested on their own: [`retry`] (what an attempt's result means, how
//! long to wait) and [`ordering`] (the gate). `pool` runs the claim loop, `event` takes one
//! claimed event through both rules, and [`deliver`] is the HTTP attempt itself.

mod cursor;
pub mod defaults;
pub mod deliver;
mod event;
mod fair;
mod gauges;
mod in_flight;
pub mod janitor;
pub mod ordering;
mod parked;
mod pool;
pub mod resolver;
pub mod retry;
mod slots;
mod stopped;

pub use stopped::Stopped;

use crate::destination;
use crate::inbox::{Claimed, Inbox};
use crate::metrics::{Metrics, TransactionLabels};
use crate::route::RouteTable;
use crate::route::target::DeliveryTarget;
use arc_swap::ArcSwap;
use chrono::Utc;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Delivery targets by integration (`namespace/name`).
pub type Targets = HashMap<String, Arc<DeliveryTarget>>;

/// The targets of every route in a table.
pub fn targets(table: &RouteTable) -> Targets {
    table
        .iter()
        .map(|r| (r.integration.clone(), r.delivery.clone()))
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    /// Deliveries in flight at once in this process.
    pub concurrency: usize,
    /// How long a claim is held. Each attempt ends by ¾ of it, whatever the integration's timeout.
    pub lease: Duration,
    /// Pause between claims when nothing is due.
    pub poll: Duration,
    /// On shutdown, how long in-flight deliveries may take before their claims are released.
    pub grace: Duration,
    /// How often the retention janitor runs.
    pub janitor_every: Duration,
    /// How often the inbox gauges are refreshed.
    pub gauges_every: Duration,
    /// Which destinations deliveries may reach.
    pub destinations: destination::Policy,
    /// How long an event whose integration is not configured waits for it to come back before it
    /// is dead-lettered as `integration_missing`, counted from its arrival.
    pub orphan_grace: Duration,
    /// Claims and completions give up after `db.deadline()`; a claim lost that way returns
    /// after its lease, like one of a killed worker.
    pub db: crate::inbox::DbLimits,
    /// With a receiver in the process (`hookgate standalone`): the most new events it holds for
    /// this pool, stored leased and not yet started (0: none, every event is claimed).
    pub handoff_events: usize,
    /// The most body bytes of those events.
    pub handoff_bytes: usize,
    /// Most catch-up passes in progress at once in this process (the pool may allow fewer).
    pub catch_up_passes: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            concurrency: defaults::CONCURRENCY,
            lease: defaults::LEASE,
            poll: defaults::POLL,
            grace: defaults::GRACE,
            janitor_every: defaults::JANITOR_EVERY,
            gauges_every: defaults::GAUGES_EVERY,
            destinations: destination::Policy::default(),
            orphan_grace: defaults::ORPHAN_GRACE,
            db: Default::default(),
            handoff_events: defaults::HANDOFF_EVENTS,
            handoff_bytes: defaults::HANDOFF_BYTES,
            catch_up_passes: crate::crd::defaults::CATCH_UP_PASSES,
        }
    }
}

impl WorkerConfig {
    /// What the receiver of the process may hold for this pool: always an event per slot, and up
    /// to `handoff_events` while the pool keeps pace.
    pub fn handoff_room(&self) -> crate::inbox::HandoffRoom {
        crate::inbox::HandoffRoom {
            slots: self.concurrency.min(self.handoff_events),
            events: self.handoff_events,
            body_bytes: self.handoff_bytes,
            max_wait: defaults::HANDOFF_MAX_WAIT.min(self.lease / 8),
        }
    }
}

/// A worker pool for one process. Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    inbox: Inbox,
    /// Outcomes go through here: concurrent deliveries' completions share one statement.
    completer: crate::inbox::Completer,
    targets: ArcSwap<Targets>,
    /// False until targets arrive (cluster mode waits for the first complete list).
    loaded: std::sync::atomic::AtomicBool,
    client: reqwest::Client,
    /// The same policy the client's resolver applies, for the checks before a lookup.
    destinations: Arc<destination::Policy>,
    cfg: WorkerConfig,
    metrics: Arc<Metrics>,
    /// Wakes an idle pool before its next poll (the receiver in the same process signals it).
    arrivals: crate::inbox::Arrivals,
    /// Events the receiver of this process stored leased to this pool; taken by `run`.
    handed: std::sync::Mutex<Option<crate::inbox::Handed>>,
}

impl Worker {
    /// Must be called within a Tokio runtime: it starts the completion batching task.
    pub fn new(inbox: Inbox, targets: Targets, cfg: WorkerConfig, metrics: Arc<Metrics>) -> Self {
        Self::with_dns(inbox, targets, cfg, metrics, Arc::new(resolver::System))
    }

    /// Like [`Worker::new`], resolving destination names with `dns` (tests stand in for a
    /// cluster's DNS with it). The destination policy applies to whatever it answers.
    pub fn with_dns(
        inbox: Inbox,
        targets: Targets,
        cfg: WorkerConfig,
        metrics: Arc<Metrics>,
        dns: Arc<dyn reqwest::dns::Resolve>,
    ) -> Self {
        declare_series(&metrics, &targets);
        janitor::declare_series(&metrics);
        let policy = Arc::new(cfg.destinations.clone());
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(cfg.concurrency)
            .redirect(reqwest::redirect::Policy::none())
            // reqwest's default retries only HTTP/2 and HTTP/3 refusals, which this HTTP/1.1
            // client never sees, yet it copied every request's headers and body to be ready for
            // one: 1.65k instructions per delivery (docs/performance.md, round 30). Retries are
            // the worker's own, each recorded as an attempt.
            .retry(reqwest::retry::never().max_retries_per_request(0))
            .dns_resolver(Arc::new(resolver::Guarded::new(policy.clone(), dns)))
            // Through a proxy, the proxy would resolve the destination and no address check
            // could happen here.
            .no_proxy()
            .build()
            .expect("HTTP client builds");
        Self {
            inner: Arc::new(Inner {
                completer: {
                    let (batches, single) = completion_figures(&metrics);
                    crate::inbox::Completer::start(
                        inbox.clone(),
                        cfg.db.deadline(),
                        batches,
                        single,
                    )
                },
                inbox,
                targets: ArcSwap::from_pointee(targets),
                loaded: true.into(),
                client,
                destinations: policy,
                cfg,
                metrics,
                arrivals: Default::default(),
                handed: Default::default(),
            }),
        }
    }

    /// The end through which the receiver of this process stores new events leased to this pool
    /// while it has room ([`WorkerConfig::handoff_room`]), so that they need no claim. The events
    /// it has no place for are stored pending and signal this pool, which wakes for them if idle
    /// and keeps a quarter of its slots for claims while they wait. Call before the worker is
    /// cloned or run.
    pub fn with_handoff(mut self) -> (Self, crate::inbox::Handoff) {
        let cfg = &self.inner.cfg;
        let arrivals = self.inner.arrivals.clone();
        let (handoff, handed) = crate::inbox::handoff(cfg.handoff_room(), cfg.lease, arrivals);
        *Arc::get_mut(&mut self.inner)
            .expect("with_handoff is called before the worker is shared")
            .handed
            .get_mut()
            .expect("lock poisoned") = Some(handed);
        (self, handoff)
    }

    /// Replaces the targets; deliveries already running keep the target they started with.
    pub fn swap_targets(&self, targets: Targets) {
        declare_series(&self.inner.metrics, &targets);
        self.inner.targets.store(Arc::new(targets));
        self.inner
            .loaded
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Marks the targets as not loaded yet: readiness waits for the first `swap_targets`.
    pub fn awaiting_targets(self) -> Self {
        self.inner
            .loaded
            .store(false, std::sync::atomic::Ordering::Release);
        self
    }

    /// Whether delivery targets have been loaded (there may legitimately be none).
    pub fn targets_loaded(&self) -> bool {
        self.inner.loaded.load(std::sync::atomic::Ordering::Acquire)
    }

    async fn claim(
        &self,
        now: chrono::DateTime<Utc>,
        lease_until: chrono::DateTime<Utc>,
        limit: i64,
    ) -> crate::inbox::Result<Vec<Claimed>> {
        self.claim_as(&cursor::Claim::Full, &[], now, lease_until, limit)
            .await
    }

    async fn claim_as(
        &self,
        claim: &cursor::Claim,
        served: &[String],
        now: chrono::DateTime<Utc>,
        lease_until: chrono::DateTime<Utc>,
        limit: i64,
    ) -> crate::inbox::Result<Vec<Claimed>> {
        let deadline = self.inner.cfg.db.deadline();
        let inbox = &self.inner.inbox;
        let began = std::time::Instant::now();
        let claimed = match claim {
            cursor::Claim::Full => {
                let claimed = inbox.claim_after(now, lease_until, limit, served);
                crate::inbox::within(deadline, claimed).await
            }
            cursor::Claim::From(from) => {
                let claimed = inbox.claim_due_from(now, lease_until, limit, served, from);
                crate::inbox::within(deadline, claimed).await
            }
        };
        // Failed and timed-out claims too: a slow database shows as slow claims, not as none.
        self.inner
            .metrics
            .claim_duration
            .observe(began.elapsed().as_secs_f64());
        claimed
    }

    /// Ready once the delivery targets are loaded (possibly none) and the inbox answers.
    pub fn ready_check(&self) -> crate::http::admin::ReadyCheck {
        let worker = self.clone();
        Arc::new(move || {
            let worker = worker.clone();
            Box::pin(async move {
                if !worker.targets_loaded() {
                    return Err("delivery targets not loaded yet");
                }
                worker.inbox().ping().await.map_err(|_| "inbox unreachable")
            })
        })
    }

    /// Claims one batch and delivers it to the end. For tests and one-shot runs.
    pub async fn run_once(&self) -> crate::inbox::Result<usize> {
        let now = Utc::now();
        let until = crate::time::after(now, self.inner.cfg.lease);
        let batch = self
            .claim(now, until, self.inner.cfg.concurrency as i64)
            .await?;
        for event in &batch {
            self.deliver(event).await;
        }
        Ok(batch.len())
    }

    pub fn inbox(&self) -> &Inbox {
        &self.inner.inbox
    }

    pub(crate) fn targets_snapshot(&self) -> Arc<Targets> {
        self.inner.targets.load_full()
    }
}

/// The workers' completion transactions: `hookgate_completion_batch_size` and
/// `hookgate_completion_commit_duration_seconds` of the batches, and the latter of the
/// completions that take a transaction of their own. Both series are declared at start, so that
/// a dashboard shows `single` from zero once the first ordered event arrives.
fn completion_figures(metrics: &Metrics) -> (crate::inbox::BatchFigures, Histogram) {
    let timed = |transaction: &str| {
        let labels = TransactionLabels {
            transaction: transaction.into(),
        };
        metrics
            .completion_commit_duration
            .get_or_create(&labels)
            .clone()
    };
    let batches = crate::inbox::BatchFigures {
        sizes: metrics.completion_batch_size.clone(),
        durations: timed("batch"),
    };
    (batches, timed("single"))
}

/// Every outcome of every target counted from zero ([`Metrics::declare_outcomes`]): the first
/// dead letter after a start is then an increase an alert sees.
fn declare_series(metrics: &Metrics, targets: &Targets) {
    for integration in targets.keys() {
        Metrics::declare_outcomes(&metrics.deliveries, integration, &event::OUTCOMES);
        let _ = metrics
            .deferred
            .get_or_create(&crate::metrics::IntegrationLabels {
                integration: integration.clone(),
            });
    }
}

/// Waits for `tick`'s next instant: `false` instead when `stop` turns true first (or its sender is
/// gone), so that a chore on a timer (the janitor, the gauges) ends between two rounds.
async fn ticked(
    tick: &mut tokio::time::Interval,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        biased;
        _ = stop.wait_for(|s| *s) => false,
        _ = tick.tick() => true,
    }
}
