//! Who `kubectl hookgate dlq` records as having replayed or purged: the user the API server
//! authenticates for this kubeconfig, asked with a SelfSubjectReview (`authentication.k8s.io/v1`,
//! allowed to every authenticated user). Only a change asks; listing never calls the API.

use crate::cli::dlq::{DlqCommand, os_user};
use crate::inbox::{Actor, ActorSource};
use anyhow::Context;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};

/// The Kubernetes user behind `client`.
pub async fn kubernetes_user(client: &kube::Client) -> anyhow::Result<Actor> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .context("asking the API server who you are (SelfSubjectReview)")?;
    let name = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .filter(|n| !n.is_empty())
        .context("the API server's SelfSubjectReview names no user")?;
    Ok(Actor {
        name,
        source: ActorSource::Kubernetes,
    })
}

/// The actor of `command`: the Kubernetes user for a change; when the cluster cannot say (no
/// kubeconfig, API server unreachable, a cluster before 1.28), the OS user, with a warning, so
/// that the inbox stays manageable and the record says which identity it holds.
pub async fn dlq_actor(client: Option<&kube::Client>, command: &DlqCommand) -> Actor {
    if !command.changes() {
        return os_user();
    }
    let asked = match client {
        Some(c) => kubernetes_user(c).await,
        None => Err(anyhow::anyhow!("no Kubernetes client")),
    };
    asked.unwrap_or_else(|e| {
        let fallback = os_user();
        eprintln!(
            "warning: cannot learn your Kubernetes user ({}); recording the OS user {:?} instead",
            super::one_line(&e),
            fallback.name
        );
        fallback
    })
}
