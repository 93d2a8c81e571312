//! `hookgate receiver` in a cluster: serve webhooks on routes compiled by the controller, and
//! with `--with-workers` deliver them too, handed over in memory like `hookgate standalone`.

use super::route_watch::watch_routes;
use crate::receiver::Receiver;
use crate::worker::Worker;

/// Settings of `hookgate receiver`.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: std::net::SocketAddr,
    pub admin_listen: Option<std::net::SocketAddr>,
    pub database_url: String,
    /// Where the controller writes compiled routes: the receiver's own namespace.
    pub namespace: String,
    pub commit: crate::inbox::GroupCommitConfig,
    pub listener: crate::http::listener::Limits,
    pub body_timeout: std::time::Duration,
    /// Per route, requests per second that may fail verification (0: no limit).
    pub unverified_rps: u32,
    /// Refusal log lines per second for the process (0: all).
    pub refusal_log_rps: u32,
    /// Proxies in front that append to `X-Forwarded-For` (`spec.sourceRanges`).
    pub trusted_proxies: u8,
    pub db: crate::inbox::DbLimits,
    /// Workers in this process, which the receiver hands its new events to (`--with-workers`).
    pub worker: Option<crate::worker::WorkerConfig>,
}

/// Serves webhooks from the routes the controller compiles, until `shutdown` resolves.
pub async fn run(
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> super::Result<()> {
    let client = crate::run::kube_client().await?;
    let inbox =
        crate::inbox::Inbox::connect_as(&cfg.database_url, "hookgate receiver", cfg.db).await?;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    metrics.watch_pool(&inbox);
    let receiver = Receiver::new(
        crate::route::RouteTable::default(),
        inbox.clone(),
        metrics.clone(),
        cfg.commit,
    )
    .with_body_timeout(cfg.body_timeout)
    .with_unverified_rps(cfg.unverified_rps)
    .with_refusal_log_rps(cfg.refusal_log_rps)
    .with_trusted_proxies(cfg.trusted_proxies)
    .awaiting_routes();
    // Catch-up stays with `hookgate worker`: these workers deliver what this receiver takes in,
    // and claim like any worker when it has nothing to hand over.
    let (worker, receiver) = match cfg.worker.clone() {
        Some(w) => {
            let worker = Worker::new(inbox.clone(), Default::default(), w, metrics.clone())
                .awaiting_targets();
            let (worker, handoff) = worker.with_handoff();
            (Some(worker), receiver.with_handoff(handoff))
        }
        None => (None, receiver),
    };
    let watch = tokio::spawn({
        let (receiver, worker) = (receiver.clone(), worker.clone());
        watch_routes(client, cfg.namespace.clone(), move |table| {
            if let Some(w) = &worker {
                w.swap_targets(crate::worker::targets(&table));
            }
            receiver.swap_routes(table)
        })
    });
    let pruner = receiver.spawn_nonce_pruner(std::time::Duration::from_secs(600));
    if let Some(addr) = cfg.admin_listen {
        crate::http::admin::spawn(
            addr,
            metrics,
            receiver.ready_check(),
            crate::http::listener::Limits::admin(cfg.listener.header_timeout),
        )
        .await?;
    }
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(crate::http::Error::bind(cfg.listen))?;
    tracing::info!(addr = %cfg.listen, namespace = %cfg.namespace, "receiver listening; routes come from compiled route Secrets");
    let stopped = super::fan_out(shutdown);
    let signal = super::stopped;
    let workers = worker.map(|worker| {
        tracing::info!(
            concurrency = cfg.worker.as_ref().map(|w| w.concurrency),
            "workers running beside the receiver"
        );
        let rx = stopped.clone();
        tokio::spawn(async move { worker.run(signal(rx)).await })
    });
    let served = crate::http::listener::serve_counting(
        listener,
        receiver.router(),
        receiver.slots(cfg.listener),
        receiver.on_shed(),
        signal(stopped),
    )
    .await;
    // The workers finish or release what they hold, the events handed over included.
    if let Some(w) = workers {
        let _ = w.await;
    }
    watch.abort();
    pruner.abort();
    receiver.flush_key_use().await;
    receiver.inbox().close().await;
    served.map_err(super::Error::serve(cfg.listen))
}
