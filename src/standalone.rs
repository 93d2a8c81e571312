//! `hookgate standalone`: receiver (and, later, workers) from manifest files on one machine.

use crate::inbox::Inbox;
use crate::manifest;
use crate::metrics::Metrics;
use crate::receiver::Receiver;
use crate::receiver::route::RouteTable;
use crate::{Error, Result};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct Config {
    pub files: Vec<PathBuf>,
    pub listen: SocketAddr,
    pub admin_listen: Option<SocketAddr>,
    pub database_url: String,
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

/// Serves until `shutdown` resolves.
pub async fn run(
    cfg: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let (table, inbox) = prepare(&cfg).await?;
    let mut routes: Vec<_> = table.iter().collect();
    routes.sort_by(|a, b| a.path.cmp(&b.path));
    for r in routes {
        let keys: Vec<&str> = r.verifier.keys().iter().map(|k| k.id.as_str()).collect();
        tracing::info!(integration = %r.integration, path = %r.path, scheme = r.verifier.scheme().name(), keys = ?keys, "route ready");
    }
    let metrics = Arc::new(Metrics::new());
    let receiver = Receiver::new(table, inbox, metrics.clone());
    let pruner = receiver.spawn_nonce_pruner(Duration::from_secs(600));

    let listener = bind(cfg.listen).await?;
    tracing::info!(addr = %listener.local_addr().map_err(io(cfg.listen))?, database = %crate::inbox::redact_url(&cfg.database_url), "receiver listening");
    if let Some(addr) = cfg.admin_listen {
        let admin = bind(addr).await?;
        tracing::info!(%addr, "admin endpoints (/metrics, /healthz, /readyz) listening");
        let router = admin_router(receiver.clone(), metrics);
        tokio::spawn(async move { axum::serve(admin, router).await });
    }
    let served = axum::serve(listener, receiver.router())
        .with_graceful_shutdown(shutdown)
        .await;
    pruner.abort();
    receiver.inbox().close().await;
    served.map_err(io(cfg.listen))
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

/// `/metrics`, `/healthz` (process up), `/readyz` (routes loaded and the inbox answers).
pub fn admin_router(receiver: Receiver, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(move || async move { metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(receiver)
}

async fn ready(State(rx): State<Receiver>) -> (StatusCode, &'static str) {
    if rx.routes().is_empty() {
        return (StatusCode::SERVICE_UNAVAILABLE, "no routes loaded");
    }
    match rx.inbox().ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "inbox unreachable"),
    }
}
