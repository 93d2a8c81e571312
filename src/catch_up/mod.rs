//! Catch-up with the provider's API (`spec.catchUp`): webhooks get lost upstream (an outage on
//! our side longer than the provider retries, a provider bug), so the workers list the provider's
//! recent events on a schedule and store what the inbox never received, under the same dedupe key
//! a webhook would have had (Stripe, Paddle), or have the provider redeliver it (GitHub).
//!
//! - one file per provider ([`stripe`], [`paddle`], [`github`]): the request and the page parser,
//!   pure and tested with the shapes of the providers' API references;
//! - [`http`]: the bearer credential, retries with backoff on 429 and 5xx (`Retry-After`);
//! - [`schedule`]: when a pass is due; [`pass`]: one pass; [`CatchUp`]: the loop of a process.
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
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

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

#[derive(Debug, Clone)]
pub struct Config {
    pub backoff: http::Backoff,
    /// The longest one pass may take.
    pub run_timeout: Duration,
    /// How often the loop looks for a due integration.
    pub tick: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            backoff: http::Backoff::default(),
            run_timeout: Duration::from_secs(5 * 60),
            tick: Duration::from_secs(5),
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
        Some(pass::run(&self.ctx(), &target, Utc::now(), ignore_schedule).await)
    }

    fn ctx(&self) -> pass::Ctx<'_> {
        pass::Ctx {
            inbox: &self.inner.inbox,
            api: &self.inner.api,
            metrics: &self.inner.metrics,
            run_timeout: self.inner.cfg.run_timeout,
        }
    }

    /// Looks for due integrations every `tick` until `shutdown`; passes run one at a time, so a
    /// process holds at most one database connection for catch-up. A pass cut short by shutdown
    /// drops its lock (the session closes, or the lease runs out).
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut next: HashMap<String, DateTime<Utc>> = HashMap::new();
        loop {
            let targets = self.inner.targets.load_full();
            next.retain(|name, _| targets.contains_key(name));
            let mut names: Vec<&String> = targets.keys().collect();
            names.sort();
            for name in names {
                let t = &targets[name];
                let now = Utc::now();
                let at = *next
                    .entry(name.clone())
                    .or_insert_with(|| schedule::first_look(now, t.interval, rand::random()));
                if at > now {
                    continue;
                }
                let ctx = self.ctx();
                tokio::select! {
                    _ = &mut shutdown => return,
                    ran = pass::run(&ctx, t, now, false) => {
                        tracing::debug!(integration = %name, ran = ?ran, "catch-up look");
                    }
                }
                next.insert(
                    name.clone(),
                    schedule::next_look(Utc::now(), t.interval, rand::random()),
                );
            }
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(self.inner.cfg.tick) => {}
            }
        }
    }
}
