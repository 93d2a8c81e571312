//! `hookgate standalone`: receiver and workers from manifest files on one machine.

use super::{Error, Result};
use crate::catch_up::CatchUp;
use crate::inbox::Inbox;
use crate::manifest;
use crate::metrics::Metrics;
use crate::receiver::Receiver;
use crate::route::RouteTable;
use crate::worker::{self, Worker, WorkerConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct Config {
    pub files: Vec<PathBuf>,
    /// `None`: workers only (`hookgate worker`).
    pub listen: Option<SocketAddr>,
    pub admin_listen: Option<SocketAddr>,
    pub database_url: String,
    /// `None`: receiver only (`hookgate standalone --no-workers`).
    pub worker: Option<WorkerConfig>,
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
}

impl Config {
    /// The subcommand that runs this configuration, which names its database connections:
    /// `hookgate worker -f` runs the workers alone, without a listener.
    fn role(&self) -> &'static str {
        match self.listen {
            Some(_) => "hookgate standalone",
            None => "hookgate worker",
        }
    }
}

/// Loads and compiles the manifests, opens and migrates the inbox. Fails before anything listens.
pub async fn prepare(cfg: &Config) -> Result<(RouteTable, Inbox)> {
    let manifests = manifest::load(&cfg.files)?;
    if manifests.integrations.is_empty() {
        return Err(Error::Config(format!(
            "no WebhookIntegration found in {}",
            cfg.files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let table = manifests.route_table()?;
    let inbox = Inbox::connect_as(&cfg.database_url, cfg.role(), cfg.db).await?;
    inbox.migrate().await?;
    Ok((table, inbox))
}

/// Serves the receiver and runs the workers until `shutdown` resolves; then the receiver stops
/// accepting and the workers finish or release what they hold.
pub async fn run(
    cfg: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (table, inbox) = prepare(&cfg).await?;
    let mut routes: Vec<_> = table.iter().collect();
    routes.sort_by(|a, b| a.path.cmp(&b.path));
    for r in routes {
        let keys: Vec<&str> = r.verifier.keys().iter().map(|k| k.id.as_str()).collect();
        tracing::info!(integration = %r.integration, path = %r.path, scheme = r.verifier.scheme().name(), keys = ?keys, delivery = %crate::redact::url_origin(r.delivery.url.as_str()), "route ready");
    }
    let metrics = Arc::new(Metrics::new());
    metrics.watch_pool(&inbox);
    let targets = worker::targets(&table);
    // Catch-up runs where the workers run: `--no-workers` leaves it to `hookgate worker`.
    let catch_up = cfg.worker.as_ref().map(|w| {
        CatchUp::new(
            inbox.clone(),
            crate::catch_up::targets(&table),
            metrics.clone(),
            crate::catch_up::Config::for_pool(w.catch_up_passes, &inbox, &w.db),
        )
    });
    let receiver = Receiver::new(table, inbox.clone(), metrics.clone(), cfg.commit)
        .with_body_timeout(cfg.body_timeout)
        .with_unverified_rps(cfg.unverified_rps)
        .with_refusal_log_rps(cfg.refusal_log_rps)
        .with_trusted_proxies(cfg.trusted_proxies);
    // New events go to the workers leased at intake while they have room (docs/performance.md,
    // round 6): a claim would only read back what the receiver has in memory.
    let (worker, receiver) = match cfg.worker.clone() {
        Some(w) => {
            let worker = Worker::new(inbox, targets, w, metrics.clone());
            let (worker, handoff) = worker.with_handoff();
            (Some(worker), receiver.with_handoff(handoff))
        }
        None => (None, receiver),
    };

    let listener = match cfg.listen {
        Some(addr) => {
            let l = bind(addr).await?;
            tracing::info!(addr = %l.local_addr().map_err(crate::http::Error::bind(addr))?, database = %crate::redact::redact_url(&cfg.database_url), "receiver listening");
            Some((addr, l))
        }
        None => None,
    };
    if let Some(addr) = cfg.admin_listen {
        let ready = match (cfg.listen, &worker) {
            (None, Some(w)) => w.ready_check(),
            _ => receiver.ready_check(),
        };
        let limits = crate::http::listener::Limits::admin(cfg.listener.header_timeout);
        crate::http::admin::spawn(addr, metrics.clone(), ready, limits).await?;
    }
    let stopped = super::fan_out(shutdown);
    let signal = super::stopped;
    if let Some(w) = &cfg.worker {
        tracing::info!(concurrency = w.concurrency, "workers running");
    }
    let workers = worker.map(|worker| {
        let rx = stopped.clone();
        tokio::spawn(async move { worker.run(signal(rx)).await })
    });
    let catching_up = catch_up.map(|c| {
        let rx = stopped.clone();
        tokio::spawn(async move { c.run(signal(rx)).await })
    });
    let served = match listener {
        Some((addr, l)) => crate::http::listener::serve_counting(
            l,
            receiver.router(),
            receiver.slots(cfg.listener),
            receiver.on_shed(),
            signal(stopped),
        )
        .await
        .map_err(Error::serve(addr)),
        None => {
            signal(stopped).await;
            Ok(())
        }
    };
    if let Some(w) = workers {
        let _ = w.await;
    }
    if let Some(c) = catching_up {
        let _ = c.await;
    }
    receiver.flush_key_use().await;
    receiver.inbox().close().await;
    served
}

async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    Ok(TcpListener::bind(addr)
        .await
        .map_err(crate::http::Error::bind(addr))?)
}
