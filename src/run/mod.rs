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
