//! The one way a role connects to the Kubernetes API: the kubeconfig (`KUBECONFIG`, then
//! `~/.kube/config`), else the pod's service account; an error says which role could not.

use kube::Client;

pub async fn client() -> crate::Result<Client> {
    Client::try_default()
        .await
        .map_err(|e| crate::Error::Config(format!("cannot reach the Kubernetes API: {e}")))
}
