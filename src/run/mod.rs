//! Entry points: one function per role that wires core, inbox and role together and serves until
//! shutdown. The CLI parses flags into these configs; nothing below this module starts a process.

pub mod controller;
mod error;
pub mod receiver;
mod route_watch;
pub mod standalone;
pub mod watch_backoff;
pub mod worker;

pub use error::{Error, Result};
pub use route_watch::{RouteSecrets, watch_routes};

/// The one way a role connects to the Kubernetes API: the kubeconfig (`KUBECONFIG`, then
/// `~/.kube/config`), else the pod's service account.
pub async fn kube_client() -> Result<kube::Client> {
    kube::Client::try_default()
        .await
        .map_err(Error::KubeConnect)
}

/// One shutdown for the several tasks of a role: a receiver of it for each task, each waited on
/// with [`stopped`].
fn fan_out(
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> tokio::sync::watch::Receiver<bool> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    stopped
}

/// Resolves once the shutdown given to [`fan_out`] has.
async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
