//! `hookgate receiver` in a cluster: watch the compiled route Secrets of our own namespace and
//! swap the routing table whenever one changes. The table is rebuilt whole from the current set,
//! so a missed intermediate event cannot leave a stale route behind.

use super::Receiver;
use crate::controller::compiled::{self, ROUTE_LABEL};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use std::collections::BTreeMap;

/// The route Secrets currently known, fed by watch events.
#[derive(Default)]
pub struct RouteSecrets {
    current: BTreeMap<String, Secret>,
    /// Objects of a (re)list in progress; swapped in whole at `InitDone`.
    listing: Option<BTreeMap<String, Secret>>,
    /// Whether a complete list has been seen, i.e. the table may be published.
    synced: bool,
}

impl RouteSecrets {
    /// Applies one watch event; `true` when the table should be rebuilt.
    pub fn apply(&mut self, event: Event<Secret>) -> bool {
        match event {
            Event::Init => {
                self.listing = Some(BTreeMap::new());
                false
            }
            Event::InitApply(s) => {
                self.listing.get_or_insert_default().insert(s.name_any(), s);
                false
            }
            Event::InitDone => {
                self.current = self.listing.take().unwrap_or_default();
                self.synced = true;
                true
            }
            Event::Apply(s) => {
                self.current.insert(s.name_any(), s);
                self.synced
            }
            Event::Delete(s) => {
                self.current.remove(&s.name_any());
                self.synced
            }
        }
    }

    pub fn secrets(&self) -> Vec<Secret> {
        self.current.values().cloned().collect()
    }
}

/// Watches `namespace` until the stream ends (it retries with backoff on API errors), handing
/// every rebuilt table to `publish`.
pub async fn watch_routes(
    client: Client,
    namespace: String,
    publish: impl Fn(super::route::RouteTable),
) {
    let api: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().labels(ROUTE_LABEL);
    let mut events = watcher::watcher(api, config)
        .backoff(crate::watch_backoff::WatchBackoff::default())
        .boxed();
    let mut state = RouteSecrets::default();
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if state.apply(event) {
                    let table = compiled::table(&state.secrets());
                    tracing::info!(routes = table.len(), "routing table updated");
                    publish(table);
                }
            }
            Err(e) => tracing::warn!(error = %e, "watching route Secrets failed; retrying"),
        }
    }
}

/// Settings of `hookgate receiver`.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: std::net::SocketAddr,
    pub admin_listen: Option<std::net::SocketAddr>,
    pub database_url: String,
    /// Where the controller writes compiled routes: the receiver's own namespace.
    pub namespace: String,
    pub commit: crate::inbox::GroupCommitConfig,
    pub listener: crate::listener::Limits,
    pub body_timeout: std::time::Duration,
    /// Per route, requests per second that may fail verification (0: no limit).
    pub unverified_rps: u32,
    pub db: crate::inbox::DbLimits,
}

/// Serves webhooks from the routes the controller compiles, until `shutdown` resolves.
pub async fn run(
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> crate::Result<()> {
    let client = crate::kube_api::client().await?;
    let inbox = crate::inbox::Inbox::connect_with(&cfg.database_url, cfg.db).await?;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    let receiver = Receiver::new(
        super::route::RouteTable::default(),
        inbox,
        metrics.clone(),
        cfg.commit,
    )
    .with_body_timeout(cfg.body_timeout)
    .with_unverified_rps(cfg.unverified_rps)
    .awaiting_routes();
    let watch = tokio::spawn({
        let receiver = receiver.clone();
        watch_routes(client, cfg.namespace.clone(), move |table| {
            receiver.swap_routes(table)
        })
    });
    let pruner = receiver.spawn_nonce_pruner(std::time::Duration::from_secs(600));
    let io = |addr: std::net::SocketAddr| {
        move |source| crate::Error::Io {
            path: addr.to_string(),
            source,
        }
    };
    if let Some(addr) = cfg.admin_listen {
        crate::admin::spawn(
            addr,
            metrics,
            crate::admin::receiver_ready(receiver.clone()),
            crate::listener::Limits::admin(cfg.listener.header_timeout),
        )
        .await?;
    }
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(io(cfg.listen))?;
    tracing::info!(addr = %cfg.listen, namespace = %cfg.namespace, "receiver listening; routes come from compiled route Secrets");
    let served = crate::listener::serve(listener, receiver.router(), cfg.listener, shutdown).await;
    watch.abort();
    pruner.abort();
    receiver.inbox().close().await;
    served.map_err(io(cfg.listen))
}

/// `hookgate worker --namespace NS`: workers whose delivery targets come from the compiled route
/// Secrets (read access to Secrets in that namespace, like a receiver), not from files.
pub async fn run_workers(
    namespace: String,
    database_url: &str,
    admin_listen: Option<std::net::SocketAddr>,
    cfg: crate::worker::WorkerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> crate::Result<()> {
    let client = crate::kube_api::client().await?;
    let inbox = crate::inbox::Inbox::connect_with(database_url, cfg.db).await?;
    let metrics = std::sync::Arc::new(crate::metrics::Metrics::new());
    let worker =
        crate::worker::Worker::new(inbox.clone(), Default::default(), cfg, metrics.clone())
            .awaiting_targets();
    if let Some(addr) = admin_listen {
        crate::admin::spawn(
            addr,
            metrics,
            crate::admin::worker_ready(worker.clone()),
            crate::listener::Limits::admin(crate::listener::HEADER_TIMEOUT),
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

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn s(name: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(r: &RouteSecrets) -> Vec<String> {
        r.secrets().iter().map(|s| s.name_any()).collect()
    }

    #[test]
    fn table_is_published_only_after_a_complete_list() {
        let mut r = RouteSecrets::default();
        assert!(!r.apply(Event::Init));
        assert!(!r.apply(Event::InitApply(s("a"))));
        assert!(
            !r.apply(Event::Apply(s("early"))),
            "no partial table before the first list completes"
        );
        assert!(r.apply(Event::InitDone));
        assert_eq!(
            names(&r),
            ["a"],
            "the list replaces whatever came before it"
        );
        assert!(r.apply(Event::Apply(s("b"))));
        assert!(r.apply(Event::Delete(s("a"))));
        assert_eq!(names(&r), ["b"]);
    }

    #[test]
    fn a_relist_replaces_the_set_whole() {
        let mut r = RouteSecrets::default();
        r.apply(Event::Init);
        r.apply(Event::InitApply(s("a")));
        r.apply(Event::InitApply(s("b")));
        r.apply(Event::InitDone);
        // The watch restarts; `a` was deleted while we were disconnected.
        assert!(!r.apply(Event::Init));
        assert!(!r.apply(Event::InitApply(s("b"))));
        assert_eq!(
            names(&r),
            ["a", "b"],
            "the old set serves until the relist is complete"
        );
        assert!(r.apply(Event::InitDone));
        assert_eq!(names(&r), ["b"]);
    }
}
