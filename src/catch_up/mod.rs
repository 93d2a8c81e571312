//! Catch-up with the provider's API (`spec.catchUp`): webhooks get lost upstream (an outage on
//! our side longer than the provider retries, a provider bug), so the workers list the provider's
//! recent events on a schedule and store what the inbox never received, under the same dedupe key
//! a webhook would have had (Stripe, Paddle), or have the provider redeliver it (GitHub).
//!
//! - one file per provider ([`stripe`], [`paddle`], [`github`]): the request and the page parser,
//!   pure and tested with the shapes of the providers' API references;
//! - [`http`]: the bearer credential, retries with backoff on 429 and 5xx (`Retry-After`);
//! - [`schedule`]: when a pass is due and which due passes start first; [`pass`]: one pass;
//!   [`CatchUp`]: the loop of a process, which runs passes of different integrations side by side.
//!
//! Only one process runs an integration's pass at a time, whatever the number of workers: a
//! PostgreSQL advisory lock (a lease on SQLite), see `inbox::catch_up`. The pass results go to
//! the `catch_up_runs` table, which the controller reads for status.

pub mod error;
pub mod github;
pub mod http;
pub mod paddle;
pub mod pass;
pub mod schedule;
pub mod stripe;

pub use error::Error;
pub use pass::Ran;

use crate::inbox::Inbox;
use crate::metrics::Metrics;
use crate::route::RouteTable;
use crate::route::catch_up::CatchUpTarget;
use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// One event as a provider's list shows it: its JSON in the bytes the API sent, and when the
/// provider created it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub body: bytes::Bytes,
    pub created: Option<DateTime<Utc>>,
}

/// One page of a list; `next` is the cursor of the following page, `None` at the end.
#[derive(Debug)]
pub struct Page {
    pub events: Vec<Listed>,
    pub next: Option<String>,
}

/// Catch-up targets by integration (`namespace/name`).
pub type Targets = HashMap<String, Arc<CatchUpTarget>>;

/// The catch-up targets of every route in a table.
pub fn targets(table: &RouteTable) -> Targets {
    table
        .iter()
        .filter_map(|r| Some((r.integration.clone(), r.catch_up.clone()?)))
        .collect()
}

/// How long passes may take at shutdown to give their locks back.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Connections a busy worker uses besides catch-up: 6-7 measured (docs/performance.md, round 22).
const WORKER_CONNECTIONS: u32 = 8;

/// How many passes fit beside the rest of a worker in a pool of `max_connections`, at most
/// `wanted` and at least one. On PostgreSQL a pass holds one connection for its lock for as long
/// as it runs and borrows a second while it stores a page.
pub fn passes_for_pool(wanted: usize, max_connections: u32) -> usize {
    let room = max_connections.saturating_sub(WORKER_CONNECTIONS) / 2;
    wanted.min(room as usize).max(1)
}

#[derive(Debug, Clone)]
pub struct Config {
    pub backoff: http::Backoff,
    /// The longest one pass may take.
    pub run_timeout: Duration,
    /// How often the loop looks for a due integration.
    pub tick: Duration,
    /// Most passes (of different integrations) in progress at once in this process.
    pub passes: usize,
    /// The first look after start falls within this (or the interval, if shorter).
    pub first_look: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            backoff: http::Backoff::default(),
            run_timeout: Duration::from_secs(5 * 60),
            tick: Duration::from_secs(5),
            passes: crate::crd::defaults::CATCH_UP_PASSES,
            first_look: Duration::from_secs(60),
        }
    }
}

impl Config {
    /// The defaults, with `passes` as many as fit in the pool of `inbox` ([`passes_for_pool`]):
    /// on PostgreSQL, capped at `db.max_connections`; on SQLite a pass holds no connection (its
    /// lock is a lease row), so all of them.
    pub fn for_pool(passes: usize, inbox: &Inbox, db: &crate::inbox::DbLimits) -> Self {
        let fit = match inbox {
            Inbox::Postgres(_) => passes_for_pool(passes, db.max_connections),
            Inbox::Sqlite(_) => passes,
        };
        if fit < passes {
            tracing::info!(
                wanted = passes,
                passes = fit,
                db_max_connections = db.max_connections,
                "catch-up runs fewer passes at once: each holds a connection of the pool"
            );
        }
        Self {
            passes: fit,
            ..Self::default()
        }
    }
}

/// The catch-up loop of one process. Cheap to clone.
#[derive(Clone)]
pub struct CatchUp {
    inner: Arc<Inner>,
}

/// Every integration's catch-up counters from zero ([`Metrics::declare_catch_up`]), so that the
/// first failed run after a start counts towards `HookgateCatchUpFailing`.
fn declare_series(metrics: &Metrics, targets: &Targets) {
    for integration in targets.keys() {
        metrics.declare_catch_up(integration, &Error::METRIC_LABELS);
    }
}

struct Inner {
    inbox: Inbox,
    api: http::Api,
    metrics: Arc<Metrics>,
    targets: ArcSwap<Targets>,
    cfg: Config,
}

impl CatchUp {
    pub fn new(inbox: Inbox, targets: Targets, metrics: Arc<Metrics>, cfg: Config) -> Self {
        declare_series(&metrics, &targets);
        Self {
            inner: Arc::new(Inner {
                api: http::Api::new(cfg.backoff),
                inbox,
                metrics,
                targets: ArcSwap::from_pointee(targets),
                cfg,
            }),
        }
    }

    /// Replaces the targets (the compiled routes changed); a pass running keeps its own.
    pub fn swap_targets(&self, targets: Targets) {
        declare_series(&self.inner.metrics, &targets);
        self.inner.targets.store(Arc::new(targets));
    }

    /// Runs one pass of `integration` now; `None` when it has no `spec.catchUp`.
    pub async fn pass(&self, integration: &str, ignore_schedule: bool) -> Option<Ran> {
        let target = self.inner.targets.load().get(integration).cloned()?;
        Some(pass::run(&self.ctx(None), &target, Utc::now(), ignore_schedule).await)
    }

    fn ctx(&self, stop: Option<watch::Receiver<bool>>) -> pass::Ctx<'_> {
        pass::Ctx {
            inbox: &self.inner.inbox,
            api: &self.inner.api,
            metrics: &self.inner.metrics,
            run_timeout: self.inner.cfg.run_timeout,
            stop,
        }
    }

    /// Looks for due integrations every `tick`, and whenever a pass ends, until `shutdown`. Passes
    /// of different integrations run side by side, at most `passes` at once, so that one provider
    /// that hangs (up to `run_timeout`) or rate-limits delays only its own integration; an
    /// integration has at most one pass in progress per process (and, through its lock, in all).
    /// At shutdown, passes in progress stop and give their locks back.
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut looks: HashMap<String, DateTime<Utc>> = HashMap::new();
        let mut intervals: HashMap<String, Duration> = HashMap::new();
        let mut passes: JoinSet<()> = JoinSet::new();
        let mut running: HashMap<tokio::task::Id, String> = HashMap::new();
        let (stop, stopping) = watch::channel(false);
        let cfg = &self.inner.cfg;
        loop {
            let targets = self.inner.targets.load_full();
            let now = Utc::now();
            looks.retain(|name, _| targets.contains_key(name));
            intervals.retain(|name, _| targets.contains_key(name));
            for (name, t) in targets.iter() {
                let (window, u) = (cfg.first_look, rand::random());
                match intervals.insert(name.clone(), t.interval) {
                    None => {
                        looks.insert(
                            name.clone(),
                            schedule::first_look(now, t.interval, window, u),
                        );
                    }
                    Some(old) if old != t.interval => {
                        if let Some(at) = looks.get_mut(name) {
                            *at = schedule::rescheduled(*at, old, t.interval, now, window, u);
                        }
                    }
                    Some(_) => {}
                }
            }
            let busy: HashSet<String> = running.values().cloned().collect();
            let free = cfg.passes.saturating_sub(running.len());
            let due = schedule::to_start(&looks, &busy, now, free);
            for name in due.start {
                let target = targets[&name].clone();
                let (this, stopping) = (self.clone(), stopping.clone());
                let task = passes.spawn(async move {
                    let ctx = this.ctx(Some(stopping));
                    let ran = pass::run(&ctx, &target, Utc::now(), false).await;
                    tracing::debug!(integration = %target.integration, ran = ?ran, "catch-up look");
                });
                running.insert(task.id(), name);
            }
            let metrics = &self.inner.metrics;
            metrics.catch_up_running.set(running.len() as i64);
            metrics.catch_up_waiting.set(due.waiting as i64);
            tokio::select! {
                _ = &mut shutdown => {
                    // Passes give their locks back; one that cannot within the grace is dropped
                    // (its PostgreSQL session closes; a SQLite lease runs out).
                    let _ = stop.send(true);
                    let _ = tokio::time::timeout(STOP_GRACE, async {
                        while passes.join_next().await.is_some() {}
                    })
                    .await;
                    passes.shutdown().await;
                    self.inner.metrics.catch_up_running.set(0);
                    self.inner.metrics.catch_up_waiting.set(0);
                    return;
                }
                ended = passes.join_next_with_id(), if !passes.is_empty() => {
                    let id = match ended {
                        Some(Ok((id, ()))) => id,
                        Some(Err(e)) => {
                            tracing::error!(error = %e, "a catch-up pass ended abnormally");
                            e.id()
                        }
                        None => continue,
                    };
                    if let Some(name) = running.remove(&id)
                        && let Some(t) = targets.get(&name)
                    {
                        looks.insert(name, schedule::next_look(Utc::now(), t.interval, rand::random()));
                    }
                }
                _ = tokio::time::sleep(cfg.tick) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::passes_for_pool;

    #[test]
    fn passes_fit_beside_a_busy_worker_in_the_pool_and_one_always_runs() {
        // (wanted, pool) -> passes
        let cases = [
            ((4, 16), 4),
            ((4, 4), 1),
            ((4, 9), 1),
            ((4, 12), 2),
            ((64, 100), 46),
            ((2, 1000), 2),
            ((1, 16), 1),
        ];
        for ((wanted, pool), want) in cases {
            assert_eq!(passes_for_pool(wanted, pool), want, "{wanted} in {pool}");
        }
    }
}
