//! Inbox workers: claim due events as leases, pass the ordering gate, deliver, and record the
//! outcome. The HTTP call happens outside any database transaction; a crashed worker's events
//! come back when their lease expires (at-least-once delivery).

pub mod deliver;
pub mod janitor;
pub mod policy;
pub mod resolver;

use crate::destination;
use crate::inbox::{Advance, Attempt, Claimed, Completion, Inbox};
use crate::metrics::Metrics;
use crate::route::RouteTable;
use crate::route::target::DeliveryTarget;
use arc_swap::ArcSwap;
use chrono::Utc;
use policy::{Gate, Outcome, Version};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Delivery targets by integration (`namespace/name`).
pub type Targets = HashMap<String, Arc<DeliveryTarget>>;

/// The targets of every route in a table.
pub fn targets(table: &RouteTable) -> Targets {
    table
        .iter()
        .map(|r| (r.integration.clone(), r.delivery.clone()))
        .collect()
}

#[derive(Debug, Clone)]
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
    /// Which destinations deliveries may reach.
    pub destinations: destination::Policy,
    /// How long an event whose integration is not configured waits for it to come back before it
    /// is dead-lettered as `integration_missing`, counted from its arrival.
    pub orphan_grace: Duration,
    /// Claims and completions give up after `db.deadline()`; a claim lost that way returns
    /// after its lease, like one of a killed worker.
    pub db: crate::inbox::DbLimits,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            concurrency: 16,
            lease: Duration::from_secs(60),
            poll: Duration::from_millis(250),
            grace: Duration::from_secs(30),
            janitor_every: Duration::from_secs(600),
            destinations: destination::Policy::default(),
            orphan_grace: Duration::from_secs(3600),
            db: Default::default(),
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
        let policy = Arc::new(cfg.destinations.clone());
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(cfg.concurrency)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(resolver::Guarded::new(policy.clone(), dns)))
            // Through a proxy, the proxy would resolve the destination and no address check
            // could happen here.
            .no_proxy()
            .build()
            .expect("HTTP client builds");
        Self {
            inner: Arc::new(Inner {
                completer: crate::inbox::Completer::start(inbox.clone(), cfg.db.deadline()),
                inbox,
                targets: ArcSwap::from_pointee(targets),
                loaded: true.into(),
                client,
                destinations: policy,
                cfg,
                metrics,
            }),
        }
    }

    /// Replaces the targets; deliveries already running keep the target they started with.
    pub fn swap_targets(&self, targets: Targets) {
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

    /// Claims and delivers until `shutdown` resolves; then stops claiming, lets in-flight
    /// deliveries finish within the grace period and releases the claims of the rest.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        let cfg = &self.inner.cfg;
        let permits = Arc::new(Semaphore::new(cfg.concurrency));
        let in_flight: Arc<Mutex<HashMap<i64, Claimed>>> = Arc::default();
        let mut tasks = JoinSet::new();
        let janitor = tokio::spawn(janitor::run(
            self.inner.inbox.clone(),
            self.clone(),
            cfg.janitor_every,
        ));
        let gauges = tokio::spawn(refresh_inbox_gauges(
            self.inner.inbox.clone(),
            self.inner.metrics.clone(),
        ));

        tokio::pin!(shutdown);
        loop {
            while tasks.try_join_next().is_some() {}
            let free = permits.available_permits();
            // Claim in batches: while deliveries are running, wait until a quarter of the slots
            // are free, so that a busy worker spends one claim commit on several events rather
            // than one per event. An idle worker (all slots free) claims at once.
            if free == 0 || (free < cfg.concurrency && free < cfg.concurrency.div_ceil(4)) {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tasks.join_next() => continue,
                }
            }
            // A cluster worker learns its targets from a watch: an event claimed before the
            // first complete list would be deferred for a minute as unconfigured.
            if !self.targets_loaded() {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(cfg.poll) => continue,
                }
            }
            let now = Utc::now();
            let until = crate::time::after(now, cfg.lease);
            let batch = match self.claim(now, until, free as i64).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "claiming events failed; retrying");
                    Vec::new()
                }
            };
            if batch.is_empty() {
                tokio::select! {
                    _ = &mut shutdown => break,
                    _ = tokio::time::sleep(cfg.poll) => continue,
                }
            }
            for event in batch {
                let permit = permits
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("semaphore is never closed");
                in_flight
                    .lock()
                    .expect("lock poisoned")
                    .insert(event.id, event.clone());
                let (worker, in_flight) = (self.clone(), in_flight.clone());
                tasks.spawn(async move {
                    worker.deliver(&event).await;
                    in_flight.lock().expect("lock poisoned").remove(&event.id);
                    drop(permit);
                });
            }
        }
        janitor.abort();
        gauges.abort();
        let drained = tokio::time::timeout(cfg.grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        let left: Vec<Claimed> = in_flight
            .lock()
            .expect("lock poisoned")
            .drain()
            .map(|(_, c)| c)
            .collect();
        for event in left {
            if let Err(e) = self.inner.inbox.release(&event, Utc::now()).await {
                tracing::warn!(event_id = %event.event_id, error = %e, "could not release claim; it returns after the lease");
            }
        }
    }

    async fn claim(
        &self,
        now: chrono::DateTime<Utc>,
        lease_until: chrono::DateTime<Utc>,
        limit: i64,
    ) -> crate::Result<Vec<Claimed>> {
        let deadline = self.inner.cfg.db.deadline();
        crate::inbox::within(deadline, self.inner.inbox.claim(now, lease_until, limit)).await
    }

    /// Claims one batch and delivers it to the end. For tests and one-shot runs.
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

    pub async fn run_once(&self) -> crate::Result<usize> {
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

    /// One claimed event through gate, delivery and completion.
    pub async fn deliver(&self, event: &Claimed) {
        let inner = &self.inner;
        let Some(target) = inner.targets.load().get(&event.integration).cloned() else {
            let now = Utc::now();
            if policy::orphaned(event.received_at, now, inner.cfg.orphan_grace) {
                tracing::warn!(integration = %event.integration, event_id = %event.event_id, "integration no longer configured; dead-lettered as integration_missing");
                let error = "integration_missing".to_string();
                self.finish(event, Completion::DeadLetter { error }, None)
                    .await;
                return;
            }
            tracing::warn!(integration = %event.integration, event_id = %event.event_id, "no configuration for this integration; will look again in a minute");
            let _ = inner
                .inbox
                .release(event, Utc::now() + chrono::Duration::seconds(60))
                .await;
            return;
        };
        // The ordering gate: hold the resource's lease while delivering, compare versions.
        let mut held: Option<(String, String)> = None;
        let mut version = None;
        if let Some((resource, incoming)) = target
            .ordering
            .as_ref()
            .and_then(|o| ordering_key(&event.body, o))
        {
            let token = format!("{:032x}", rand::random::<u128>());
            let now = Utc::now();
            let until = crate::time::after(now, inner.cfg.lease);
            let last = match inner
                .inbox
                .lock_resource(&event.integration, &resource, now, until, &token)
                .await
            {
                Ok(Some(stored)) => stored,
                Ok(None) | Err(_) => {
                    // Another delivery of this resource is in flight: try again shortly.
                    let _ = inner
                        .inbox
                        .release(event, Utc::now() + chrono::Duration::milliseconds(200))
                        .await;
                    return;
                }
            };
            held = Some((resource.clone(), token.clone()));
            let parsed = last.as_deref().and_then(Version::parse_stored);
            match policy::gate(parsed.as_ref(), &incoming) {
                Gate::Deliver => {
                    version = Some(Advance {
                        resource,
                        version: incoming.to_stored(),
                        token,
                        previous: last,
                    })
                }
                Gate::KindMismatch => {
                    Metrics::count(&inner.metrics.ordering_ungated, &event.integration)
                }
                gate => {
                    let reason = gate.ignored_reason().expect("stale or duplicate");
                    self.finish(event, Completion::Ignored { reason }, None)
                        .await;
                    self.unlock(event, held).await;
                    return;
                }
            }
        } else if target.ordering.is_some() {
            Metrics::count(&inner.metrics.ordering_ungated, &event.integration);
        }

        let started_at = Utc::now();
        let clock = Instant::now();
        // The attempt ends inside the claim's lease: past it another worker may claim the event
        // and send it again while this attempt still runs.
        let limit = policy::attempt_timeout(target.timeout, inner.cfg.lease);
        let send = deliver::send(
            &inner.client,
            &inner.destinations,
            &target,
            event,
            started_at,
        );
        let result = tokio::time::timeout(limit, send)
            .await
            .unwrap_or(policy::AttemptResult::Timeout);
        if let policy::AttemptResult::Refused(reason) = &result {
            tracing::warn!(integration = %event.integration, event_id = %event.event_id, reason = %reason, "destination refused; the event is dead-lettered");
        }
        let elapsed = clock.elapsed();
        let duration_ms = elapsed.as_millis() as i64;
        Metrics::observe(
            &inner.metrics.delivery_duration,
            &event.integration,
            elapsed.as_secs_f64(),
        );
        let jitter = rand::random_range(-1.0..=1.0);
        let attempt_no = u32::try_from(event.attempt).unwrap_or(u32::MAX);
        let outcome = policy::decide(&result, attempt_no, &target.schedule, jitter);
        let (status_code, error) = match &result {
            policy::AttemptResult::Status { code, .. } => (Some(i64::from(*code)), None),
            policy::AttemptResult::Timeout => (None, Some("timeout".to_string())),
            policy::AttemptResult::Connect(e) => (None, Some(format!("connect: {e}"))),
            policy::AttemptResult::Refused(r) => (None, Some(format!("refused: {r}"))),
        };
        let attempt = Attempt {
            started_at,
            duration_ms,
            status_code,
            error,
        };
        let completion = match outcome {
            Outcome::Processed => {
                // The number that says whether webhooks are healthy: provider's signature to done.
                let since = event.signed_at.unwrap_or(event.received_at);
                let latency = (Utc::now() - since).num_milliseconds().max(0) as f64 / 1000.0;
                Metrics::observe(
                    &inner.metrics.completion_latency,
                    &event.integration,
                    latency,
                );
                Completion::Processed { version }
            }
            Outcome::Retry { delay, error } => Completion::Retry {
                next_attempt_at: crate::time::after(Utc::now(), delay),
                error,
            },
            Outcome::DeadLetter { error } => Completion::DeadLetter { error },
        };
        self.finish(event, completion, Some(&attempt)).await;
        self.unlock(event, held).await;
    }

    async fn unlock(&self, event: &Claimed, held: Option<(String, String)>) {
        let Some((resource, token)) = held else {
            return;
        };
        let unlocked = self
            .inner
            .inbox
            .unlock_resource(&event.integration, &resource, &token)
            .await;
        if let Err(e) = unlocked {
            tracing::warn!(integration = %event.integration, error = %e, "could not release a resource lease; it expires by itself");
        }
    }

    async fn finish(&self, event: &Claimed, completion: Completion, attempt: Option<&Attempt>) {
        let label = match &completion {
            Completion::Processed { .. } => "processed",
            Completion::Retry { .. } => "retry",
            Completion::DeadLetter { .. } => "dead_letter",
            Completion::Ignored { .. } => "ignored",
        };
        self.inner.metrics.delivery(&event.integration, label);
        let status = attempt.and_then(|a| a.status_code);
        match self
            .inner
            .completer
            .complete(event, completion, attempt.cloned(), Utc::now())
            .await
        {
            Ok(true) => tracing::info!(
                integration = %event.integration, event_id = %event.event_id,
                event_type = event.event_type.as_deref().unwrap_or("-"), attempt = event.attempt,
                outcome = label, status, "delivery finished"
            ),
            Ok(false) => tracing::warn!(
                integration = %event.integration, event_id = %event.event_id, attempt = event.attempt,
                "lease lost before the outcome was recorded; another worker owns the event now"
            ),
            Err(e) => tracing::error!(
                integration = %event.integration, event_id = %event.event_id, attempt = event.attempt, error = %e,
                "recording the outcome failed; the event is retried after its lease"
            ),
        }
    }

    pub fn inbox(&self) -> &Inbox {
        &self.inner.inbox
    }

    pub(crate) fn targets_snapshot(&self) -> Arc<Targets> {
        self.inner.targets.load_full()
    }
}

/// Resource id and version from the body; `None` when either is missing (delivered ungated).
fn ordering_key(body: &[u8], o: &crate::crd::OrderingSpec) -> Option<(String, Version)> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let resource = match json.pointer(&o.resource_id_pointer)? {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    Some((
        resource,
        Version::from_json(json.pointer(&o.version_pointer)?)?,
    ))
}

/// Keeps the inbox gauges (events by status, oldest pending age) current for `/metrics`.
async fn refresh_inbox_gauges(inbox: Inbox, metrics: Arc<Metrics>) {
    let mut tick = tokio::time::interval(Duration::from_secs(15));
    loop {
        tick.tick().await;
        match inbox.stats(Utc::now()).await {
            Ok(stats) => metrics.set_inbox(&stats),
            Err(e) => tracing::debug!(error = %e, "could not read inbox figures for metrics"),
        }
    }
}
