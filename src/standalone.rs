//! `hookgate standalone`: receiver and workers from manifest files on one machine.

use crate::inbox::Inbox;
use crate::manifest;
use crate::metrics::Metrics;
use crate::receiver::Receiver;
use crate::receiver::route::RouteTable;
use crate::worker::{self, Worker, WorkerConfig};
use crate::{Error, Result};
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
    pub worker: WorkerConfig,
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
    let inbox = Inbox::connect(&cfg.database_url).await?;
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
        tracing::info!(integration = %r.integration, path = %r.path, scheme = r.verifier.scheme().name(), keys = ?keys, delivery = %crate::inbox::url_origin(&r.delivery.url), "route ready");
    }
    let metrics = Arc::new(Metrics::new());
    let targets = worker::targets(&table);
    let receiver = Receiver::new(table, inbox.clone(), metrics.clone());
    let worker = Worker::new(inbox, targets, cfg.worker.clone(), metrics.clone());

    let listener = match cfg.listen {
        Some(addr) => {
            let l = bind(addr).await?;
            tracing::info!(addr = %l.local_addr().map_err(io(addr))?, database = %crate::inbox::redact_url(&cfg.database_url), "receiver listening");
            Some((addr, l))
        }
        None => None,
    };
    if let Some(addr) = cfg.admin_listen {
        let ready = match cfg.listen {
            Some(_) => crate::admin::receiver_ready(receiver.clone()),
            None => crate::admin::worker_ready(worker.clone()),
        };
        crate::admin::spawn(addr, metrics.clone(), ready).await?;
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let signal = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let workers = tokio::spawn({
        let (worker, rx) = (worker.clone(), stopped.clone());
        async move { worker.run(signal(rx)).await }
    });
    tracing::info!(concurrency = cfg.worker.concurrency, "workers running");
    let served = match listener {
        Some((addr, l)) => axum::serve(l, receiver.router())
            .with_graceful_shutdown(signal(stopped))
            .await
            .map_err(io(addr)),
        None => {
            signal(stopped).await;
            Ok(())
        }
    };
    let _ = workers.await;
    receiver.inbox().close().await;
    served
}

fn io(addr: SocketAddr) -> impl Fn(std::io::Error) -> Error {
    move |source| Error::Io {
        path: addr.to_string(),
        source,
    }
}

async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(io(addr))
}
