//! The admin port: `/metrics` (Prometheus), `/healthz` (the process answers), `/readyz` (this
//! role can do its job: routes or targets loaded, and the inbox reachable).

use crate::http::listener::{Limits, Slots, serve};
use crate::metrics::Metrics;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use futures::future::BoxFuture;
use std::net::SocketAddr;
use std::sync::Arc;

/// Answers why the role is not ready, if it is not.
pub type ReadyCheck = Arc<dyn Fn() -> BoxFuture<'static, Result<(), &'static str>> + Send + Sync>;

pub fn router(metrics: Arc<Metrics>, ready: ReadyCheck) -> Router {
    Router::new()
        .route("/metrics", get(move || async move { metrics.encode() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.clone();
                async move {
                    match ready().await {
                        Ok(()) => (StatusCode::OK, "ready"),
                        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
                    }
                }
            }),
        )
}

/// Binds and serves the admin port in the background.
pub async fn spawn(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    ready: ReadyCheck,
    limits: Limits,
) -> Result<SocketAddr, super::Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(super::Error::bind(addr))?;
    let addr = listener.local_addr().map_err(super::Error::bind(addr))?;
    tracing::info!(%addr, "admin endpoints (/metrics, /healthz, /readyz) listening");
    let slots = Slots::new(limits).reported(&metrics, "admin");
    let app = router(metrics, ready);
    tokio::spawn(serve(listener, app, slots, std::future::pending()));
    Ok(addr)
}

/// The controller is ready when its process runs; leadership is visible in the Lease.
pub fn always_ready() -> ReadyCheck {
    Arc::new(|| Box::pin(async { Ok(()) }))
}
