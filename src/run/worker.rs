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
    let inbox = crate::inbox::Inbox::connect_as(database_url, "hookgate worker", cfg.db).await?;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    metrics.watch_pool(&inbox);
    let catch_up_cfg = crate::catch_up::Config::for_pool(cfg.catch_up_passes, &inbox, &cfg.db);
    let worker =
        crate::worker::Worker::new(inbox.clone(), Default::default(), cfg, metrics.clone())
            .awaiting_targets();
    let catch_up = crate::catch_up::CatchUp::new(
        inbox.clone(),
        Default::default(),
        metrics.clone(),
        catch_up_cfg,
    );
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
        let (worker, catch_up) = (worker.clone(), catch_up.clone());
        watch_routes(client, namespace, move |table| {
            catch_up.swap_targets(crate::catch_up::targets(&table));
            worker.swap_targets(crate::worker::targets(&table))
        })
    });
    tracing::info!("workers running; delivery targets come from compiled route Secrets");
    // Catch-up stops at the signal, beside the deliveries' drain rather than after it, so that
    // both fit in the pod's termination grace (`--grace` + 15 s in the chart).
    let stopped = super::fan_out(shutdown);
    let catching_up = tokio::spawn({
        let stopped = super::stopped(stopped.clone());
        async move { catch_up.run(stopped).await }
    });
    worker.run(super::stopped(stopped)).await;
    let _ = catching_up.await;
    watch.abort();
    inbox.close().await;
    Ok(())
}
