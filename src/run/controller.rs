//! `hookgate controller`: leader election on a Lease, then the reconcile loop over
//! WebhookIntegrations, re-triggered by changes to the Secrets they reference.

use crate::controller::reconcile::{Context, reconcile};
use crate::crd::WebhookIntegration;
use crate::inbox::Inbox;
use crate::metrics::Metrics;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::finalizer;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    /// The controller's own namespace: compiled routes and the leader Lease live here.
    pub namespace: String,
    /// Only watch integrations in this namespace; all namespaces when `None`.
    pub watch_namespace: Option<String>,
    /// The inbox, for each key's `lastUsedAt`; optional.
    pub database_url: Option<String>,
    /// This replica's identity in the Lease (the pod name).
    pub identity: String,
    /// Admin endpoints (/metrics, /healthz, /readyz); `None` disables them.
    pub admin_listen: Option<std::net::SocketAddr>,
    /// Deadlines and pool cap of the inbox connections.
    pub db: crate::inbox::DbLimits,
}

fn references(wi: &WebhookIntegration, secret: &str) -> bool {
    wi.spec.secret_refs().iter().any(|r| r.name == secret)
}

fn error_policy(
    wi: Arc<WebhookIntegration>,
    error: &finalizer::Error<crate::controller::Error>,
    metrics: &Metrics,
) -> Action {
    metrics.reconcile_error(crate::controller::error::metric_label(error));
    tracing::warn!(integration = %format!("{}/{}", wi.namespace().unwrap_or_default(), wi.name_any()), error = %error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(30))
}

/// Reconciles while this replica holds the Lease; stops at `shutdown`.
pub async fn run(
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> super::Result<()> {
    let client = crate::run::kube_client().await?;
    // Counted even without an admin port to serve them: one code path either way.
    let metrics = Arc::new(Metrics::new());
    if let Some(addr) = cfg.admin_listen {
        crate::http::admin::spawn(
            addr,
            metrics.clone(),
            crate::http::admin::always_ready(),
            crate::http::listener::Limits::admin(crate::http::listener::HEADER_TIMEOUT),
        )
        .await?;
    }
    let inbox = match &cfg.database_url {
        Some(url) => Some(Inbox::connect_as(url, "hookgate controller", cfg.db).await?),
        None => None,
    };
    if let Some(inbox) = &inbox {
        metrics.watch_pool(inbox);
    }
    let lease = LeaseManagerBuilder::new(client.clone(), "hookgate-controller")
        .with_namespace(cfg.namespace.clone())
        .with_identity(cfg.identity.clone())
        .with_duration(15)
        .with_grace(5)
        .build()
        .await
        .map_err(|e| super::Error::LeaderElection(e.to_string()))?;
    let (mut leader, lease_task) = lease.watch().await;
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "hookgate-controller".into(),
            instance: Some(cfg.identity.clone()),
        },
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        namespace: cfg.namespace.clone(),
        inbox,
        recorder,
        clock: chrono::Utc::now,
        metrics: metrics.clone(),
    });
    tokio::pin!(shutdown);
    loop {
        tracing::info!(identity = %cfg.identity, "waiting for leadership");
        tokio::select! {
            _ = &mut shutdown => break,
            changed = leader.wait_for(|l| *l) => if changed.is_err() { break },
        }
        tracing::info!(identity = %cfg.identity, "leading: reconciling WebhookIntegrations");
        let controller = controller(&client, &cfg, ctx.clone(), metrics.clone());
        tokio::select! {
            _ = &mut shutdown => break,
            _ = controller => break,
            _ = leader.wait_for(|l| !*l) => tracing::warn!("lost leadership; stopping reconciles"),
        }
        // The new leader exports the phases now; ours would go stale beside its series.
        metrics.clear_key_phases();
    }
    drop(leader);
    let _ = lease_task.await;
    Ok(())
}

fn controller(
    client: &Client,
    cfg: &Config,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
) -> impl Future<Output = ()> {
    let (wis, secrets): (Api<WebhookIntegration>, Api<Secret>) = match &cfg.watch_namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let controller = Controller::new(wis, watcher::Config::default())
        .trigger_backoff(crate::run::watch_backoff::WatchBackoff::default());
    let store = controller.store();
    controller
        .watches(
            secrets,
            watcher::Config::default(),
            move |secret: Secret| {
                let (ns, name) = (secret.namespace(), secret.name_any());
                store
                    .state()
                    .into_iter()
                    .filter(|wi| wi.namespace() == ns && references(wi, &name))
                    .map(|wi| ObjectRef::from_obj(&*wi))
                    .collect::<Vec<_>>()
            },
        )
        .run(
            reconcile,
            move |wi, error, _| error_policy(wi, error, &metrics),
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile stream");
            }
        })
}

#[cfg(test)]
mod tests {
    use super::references;
    use crate::crd::WebhookIntegration;

    #[test]
    fn a_secret_maps_to_the_integrations_that_reference_it() {
        let wi: WebhookIntegration = serde_json::from_value(serde_json::json!({
            "apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration",
            "metadata": {"name": "s", "namespace": "pay"},
            "spec": {"scheme": {"type": "stripe"},
                     "keys": [{"id": "v1", "secretRef": {"name": "keys", "key": "v1"}}],
                     "delivery": {"url": "http://x", "signingSecretRef": {"name": "delivery", "key": "k"}}}
        }))
        .unwrap();
        assert!(references(&wi, "keys"));
        assert!(
            references(&wi, "delivery"),
            "the delivery signing secret counts too"
        );
        assert!(!references(&wi, "unrelated"));
    }
}
