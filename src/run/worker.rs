//! `hookgate worker --namespace NS` in a cluster.

use super::route_watch::watch_routes;

/// `hookgate worker --namespace NS`: workers whose delivery targets come from the compiled route
/// Secrets (read access to Secrets in that namespace, like a receiver), not from files.
pub async fn run(
    namespace: String,
    database_url: &str,
    admin_listen: Option<std::net::SocketAddr>,
    cfg: crate::worker::WorkerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> super::Result<()> {
    let client = crate::run::kube_client().await?;
    let inbox = crate::inbox::Inbox::connect_with(database_url, cfg.db).await?;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    let worker =
        crate::worker::Worker::new(inbox.clone(), Default::default(), cfg, metrics.clone())
            .awaiting_targets();
    if let Some(addr) = admin_listen {
        crate::http::admin::spawn(
            addr,
            metrics,
            worker.ready_check(),
            crate::http::listener::Limits::admin(crate::http::listener::HEADER_TIMEOUT),
        )
        .await?;
    }
    let watch = tokio::spawn({
        let worker = worker.clone();
        watch_routes(client, namespace, move |table| {
            worker.swap_targets(crate::worker::targets(&table))
        })
    });
    tracing::info!("workers running; delivery targets come from compiled route Secrets");
    worker.run(shutdown).await;
    watch.abort();
    inbox.close().await;
    Ok(())
}
