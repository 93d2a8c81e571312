//! The reconciler: read what the plan needs, then carry the plan out (compiled route Secret,
//! status, events). Decisions live in `plan`; this file only does I/O.

use super::compiled;
use super::plan::{self, Inputs};
use crate::crd::WebhookIntegration;
use crate::inbox::Inbox;
use crate::receiver::route::Secrets;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Api, Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;

/// Removes the compiled route when its integration is deleted.
pub const FINALIZER: &str = "hookgate.dev/route";
const MANAGER: &str = "hookgate-controller";

pub struct Context {
    pub client: Client,
    /// Where compiled route Secrets are written (the controller's and receivers' namespace).
    pub namespace: String,
    /// For `lastUsedAt`: which key verified each event. Optional.
    pub inbox: Option<Inbox>,
    pub recorder: Recorder,
    pub clock: fn() -> DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ReconcileError(#[from] pub crate::Error);

impl From<kube::Error> for ReconcileError {
    fn from(e: kube::Error) -> Self {
        ReconcileError(e.into())
    }
}

pub async fn reconcile(
    wi: Arc<WebhookIntegration>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReconcileError>> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let api: Api<WebhookIntegration> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, wi, |event| async {
        match event {
            Finalizer::Apply(wi) => apply(&wi, &ctx).await,
            Finalizer::Cleanup(wi) => cleanup(&wi, &ctx).await,
        }
    })
    .await
}

async fn apply(wi: &WebhookIntegration, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let (secrets, missing) = read_secrets(wi, &ctx.client, &namespace).await?;
    let last_used = match &ctx.inbox {
        Some(inbox) => inbox
            .keys_last_used(&format!("{namespace}/{}", wi.name_any()))
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not read key usage from the inbox");
                HashMap::new()
            }),
        None => HashMap::new(),
    };
    let now = (ctx.clock)();
    let plan = plan::plan(&Inputs {
        wi,
        secrets: &secrets,
        missing: &missing,
        last_used: &last_used,
        now,
    });

    if let Some(manifests) = plan.manifests {
        let route = compiled::secret(&ctx.namespace, wi, manifests);
        let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        routes
            .patch(
                &route.name_any(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&route),
            )
            .await?;
    }
    let api: Api<WebhookIntegration> = Api::namespaced(ctx.client.clone(), &namespace);
    let status = serde_json::json!({ "status": plan.status });
    api.patch_status(
        &wi.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await?;
    let reference = wi.object_ref(&());
    for note in plan.notes {
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.into(),
            note: Some(note.note),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, "could not publish an event");
        }
    }
    Ok(Action::requeue(plan.requeue_after))
}

async fn cleanup(wi: &WebhookIntegration, ctx: &Context) -> Result<Action, ReconcileError> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = compiled::secret_name(&namespace, &wi.name_any());
    match routes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(integration = %format!("{namespace}/{}", wi.name_any()), "compiled route removed");
    Ok(Action::await_change())
}

/// Every Secret the spec references (keys and delivery signing), decoded; and those missing.
async fn read_secrets(
    wi: &WebhookIntegration,
    client: &Client,
    namespace: &str,
) -> Result<(Secrets, Vec<String>), ReconcileError> {
    let mut names: Vec<&str> = wi
        .spec
        .keys
        .iter()
        .map(|k| k.secret_ref.name.as_str())
        .collect();
    if let Some(r) = &wi.spec.delivery.signing_secret_ref {
        names.push(&r.name);
    }
    names.sort_unstable();
    names.dedup();
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let (mut secrets, mut missing) = (Secrets::new(), Vec::new());
    for name in names {
        match api.get_opt(name).await? {
            Some(s) => {
                let mut data: std::collections::BTreeMap<String, Vec<u8>> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                for (k, v) in s.string_data.unwrap_or_default() {
                    data.insert(k, v.into_bytes());
                }
                secrets.insert((namespace.to_string(), name.to_string()), data);
            }
            None => missing.push(name.to_string()),
        }
    }
    Ok((secrets, missing))
}
