//! The webhook receiver: an axum router whose one fallback handler looks the path up in a route
//! table that can be swapped atomically while requests are in flight.

pub mod client;
mod handler;
pub mod limits;
mod memory;
mod read;
pub mod refusal_log;
mod reply;
mod store;

use crate::http::reply::Reply;
use crate::inbox::{BatchFigures, GroupCommit, GroupCommitConfig, Inbox, Recent};
use crate::metrics::Metrics;
use crate::route::RouteTable;
use arc_swap::ArcSwap;
use axum::Router;
use chrono::{DateTime, Utc};
use limits::{Limiters, RouteLimiter};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The time source; tests pin it to check window and retirement edges exactly.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// How long a client may take to send its body before it gets 408 (slow-loris guard).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// A routing table and the rate limiters of its routes, swapped together.
struct Routing {
    table: Arc<RouteTable>,
    limiters: HashMap<String, Arc<RouteLimiter>>,
}

/// Shared receiver state. Cheap to clone.
#[derive(Clone)]
pub struct Receiver {
    routes: Arc<ArcSwap<Routing>>,
    /// Outlives every table, so that a reload does not reset the rate limits.
    limits: Arc<Limiters>,
    /// False until the first table arrives (cluster mode waits for the first complete list).
    loaded: Arc<std::sync::atomic::AtomicBool>,
    inbox: Inbox,
    /// Inserts go through here: one transaction for many concurrent requests.
    intake: GroupCommit,
    /// The keys it committed recently: a retry of one is answered without a transaction.
    recent: Arc<Recent>,
    /// Stores new events leased to the workers of this process while they have room (standalone).
    handoff: Option<crate::inbox::Handoff>,
    /// Without workers of its own, on PostgreSQL: wakes those of other processes.
    notifier: Option<crate::inbox::Notifier>,
    clock: Clock,
    metrics: Arc<Metrics>,
    body_timeout: Duration,
    /// One line budget for the whole process, whatever the route.
    refusal_log: Arc<refusal_log::RefusalLog>,
    /// Proxies in front that append to `X-Forwarded-For` (`--trusted-proxies`).
    trusted_proxies: u8,
}

impl Receiver {
    /// Must be called within a Tokio runtime: it starts the group-commit task.
    pub fn new(
        routes: RouteTable,
        inbox: Inbox,
        metrics: Arc<Metrics>,
        commit: GroupCommitConfig,
    ) -> Self {
        let intake = GroupCommit::start(inbox.clone(), commit, Some(batch_figures(&metrics)));
        declare_series(&metrics, &routes);
        let limits = Arc::new(Limiters::new(limits::UNVERIFIED_RPS));
        let refusal_log = Arc::new(refusal_log::RefusalLog::new(
            refusal_log::REFUSAL_LOG_RPS,
            metrics.refusal_logs_dropped.clone(),
        ));
        let notifier = match &inbox {
            Inbox::Postgres(pool) => Some(crate::inbox::Notifier::start(pool.clone())),
            Inbox::Sqlite(_) => None,
        };
        let recent = Arc::new(Recent::new(commit.recent));
        memory::confirm(&recent, inbox.clone(), metrics.clone());
        Self {
            routes: Arc::new(ArcSwap::from_pointee(Routing::new(routes, &limits))),
            limits,
            loaded: Arc::new(true.into()),
            inbox,
            intake,
            recent,
            handoff: None,
            notifier,
            clock: Arc::new(Utc::now),
            metrics,
            body_timeout: BODY_TIMEOUT,
            refusal_log,
            trusted_proxies: client::TRUSTED_PROXIES,
        }
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the group-commit settings (the previous batching task winds down) and the memory
    /// of committed keys (a fresh one).
    pub fn with_group_commit(mut self, cfg: GroupCommitConfig) -> Self {
        self.recent = Arc::new(Recent::new(cfg.recent));
        memory::confirm(&self.recent, self.inbox.clone(), self.metrics.clone());
        self.intake =
            GroupCommit::start(self.inbox.clone(), cfg, Some(batch_figures(&self.metrics)));
        self
    }

    /// Requests per second that may fail verification on one route (0: no limit). The limiters
    /// start afresh.
    pub fn with_unverified_rps(mut self, rps: u32) -> Self {
        self.limits = Arc::new(Limiters::new(rps));
        let table = self.routes.load().table.clone();
        self.routes
            .store(Arc::new(Routing::bind(table, &self.limits)));
        self
    }

    /// Stores new events already leased to the workers at the other end of `handoff` while they
    /// have room, and hands them over once committed, instead of leaving them for a claim. The
    /// events it has no place for are stored pending, and the workers told of them: its own
    /// through the hand-over, other processes' (`hookgate worker` beside a receiver that
    /// delivers) by the notification as without a hand-over.
    pub fn with_handoff(mut self, handoff: crate::inbox::Handoff) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// Refusal lines per second the process writes (0: all); the budget starts afresh.
    pub fn with_refusal_log_rps(mut self, per_second: u32) -> Self {
        self.refusal_log = Arc::new(refusal_log::RefusalLog::new(
            per_second,
            self.metrics.refusal_logs_dropped.clone(),
        ));
        self
    }

    pub fn with_body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// How many proxies in front append to `X-Forwarded-For`: the client of a route with
    /// `spec.sourceRanges` is the entry that many from the right (0: the peer address).
    pub fn with_trusted_proxies(mut self, hops: u8) -> Self {
        self.trusted_proxies = hops;
        self
    }

    /// The slots of the listener that serves this receiver within `limits`, reported in its
    /// metrics as `listener="receiver"`.
    pub fn slots(&self, limits: crate::http::listener::Limits) -> crate::http::listener::Slots {
        crate::http::listener::Slots::new(limits).reported(&self.metrics, "receiver")
    }

    /// Counts the listener's own 503 `overloaded` answers under the route's integration, like
    /// every other answer (a path no route serves is not counted, as for `unknown_route`).
    pub fn on_shed(&self) -> crate::http::listener::OnShed {
        let (routes, metrics) = (self.routes.clone(), self.metrics.clone());
        Arc::new(move |path: &str| {
            if let Some(route) = routes.load().table.get(path) {
                metrics.request(
                    &route.integration,
                    crate::http::reply::Reply::Overloaded.outcome(),
                );
            }
        })
    }

    /// Replaces the whole routing table; requests already running keep the table they started with.
    pub fn swap_routes(&self, table: RouteTable) {
        declare_series(&self.metrics, &table);
        self.routes
            .store(Arc::new(Routing::new(table, &self.limits)));
        self.loaded
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Marks the table as not loaded yet: readiness waits for the first `swap_routes`.
    pub fn awaiting_routes(self) -> Self {
        self.loaded
            .store(false, std::sync::atomic::Ordering::Release);
        self
    }

    /// Whether a routing table has been loaded (it may legitimately be empty).
    pub fn routes_loaded(&self) -> bool {
        self.loaded.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Whether a retry of a key it committed is answered from memory now: the memory is on and
    /// was confirmed against the purges recorded within the last few seconds.
    pub fn answers_from_memory(&self) -> bool {
        self.recent.answers(std::time::Instant::now())
    }

    pub fn routes(&self) -> Arc<RouteTable> {
        self.routes.load().table.clone()
    }

    pub fn inbox(&self) -> &Inbox {
        &self.inbox
    }

    /// Writes the key use noted since the last write (the controller's `lastUsedAt`): call it once
    /// the receiver stopped taking requests, before the inbox closes.
    pub async fn flush_key_use(&self) {
        self.intake.flush_key_use().await;
    }

    /// Ready once the routing table is loaded (in a cluster: the first complete list of
    /// compiled routes, which may be empty) and the inbox answers.
    pub fn ready_check(&self) -> crate::http::admin::ReadyCheck {
        let rx = self.clone();
        Arc::new(move || {
            let rx = rx.clone();
            Box::pin(async move {
                if !rx.routes_loaded() {
                    return Err("routes not loaded yet");
                }
                rx.inbox().ping().await.map_err(|_| "inbox unreachable")
            })
        })
    }

    pub fn router(&self) -> Router {
        // Behind one Arc: axum clones the state for every request, and the receiver's dozen
        // shared handles would each be cloned and dropped again.
        Router::new()
            .fallback(handler::handle)
            .with_state(Arc::new(self.clone()))
    }

    /// Periodically forgets signature digests whose replay window has passed.
    pub fn spawn_nonce_pruner(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let rx = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                match rx.inbox.prune_nonces((rx.clock)()).await {
                    Ok(n) if n > 0 => {
                        tracing::debug!(removed = n, "pruned expired signature nonces")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "could not prune signature nonces"),
                }
            }
        })
    }
}

impl Routing {
    fn new(table: RouteTable, limits: &Limiters) -> Self {
        Self::bind(Arc::new(table), limits)
    }

    fn bind(table: Arc<RouteTable>, limits: &Limiters) -> Self {
        let limiters = limits.bind(&table);
        Self { table, limiters }
    }
}

/// The answers whose counts alerts and dashboards read, counted from zero for every route
/// ([`Metrics::declare_outcomes`]); other outcomes' series appear when they first happen.
const COUNTED_FROM_ZERO: &[Reply] = &[
    Reply::Accepted,
    Reply::Duplicate,
    Reply::Ignored,
    Reply::InvalidSignature,
    Reply::Malformed,
    Reply::TimestampOutsideWindow,
    Reply::InboxUnavailable,
    Reply::Overloaded,
];

/// The intake's transactions: `hookgate_intake_batch_size` and `hookgate_intake_commit_duration_seconds`.
fn batch_figures(metrics: &Metrics) -> BatchFigures {
    BatchFigures {
        sizes: metrics.intake_batch_size.clone(),
        durations: metrics.intake_commit_duration.clone(),
    }
}

fn declare_series(metrics: &Metrics, table: &RouteTable) {
    let outcomes: Vec<&str> = COUNTED_FROM_ZERO.iter().map(Reply::outcome).collect();
    for route in table.iter() {
        Metrics::declare_outcomes(&metrics.requests, &route.integration, &outcomes);
        metrics.declare_keys(
            &route.integration,
            route.verifier.keys().iter().map(|k| k.id.as_str()),
        );
    }
}
