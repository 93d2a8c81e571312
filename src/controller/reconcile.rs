//! The reconciler: reads what the plan needs, calls the plan and carries it out (generated keys
//! Secret, compiled route, status, events). Every decision is in [`plan`]; what is left here is
//! the order of the calls and what to do when one fails.

use super::generated;
use super::plan::{self, Inputs, Note, rotation};
use super::{Error, compiled};
use crate::crd::WebhookIntegration;
use crate::route::Secrets;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::{Api, Client, Resource, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;

pub use super::plan::TRAFFIC_REFRESH;

/// Removes the compiled route when its integration is deleted.
pub const FINALIZER: &str = "hookgate.dev/route";
const MANAGER: &str = "hookgate-controller";

/// The reconcile layer's error, under the name it had before [`Error`] split it by API call.
pub type ReconcileError = Error;

pub struct Context {
    pub client: Client,
    /// Where compiled route Secrets are written (the controller's and receivers' namespace).
    pub namespace: String,
    /// For `lastUsedAt`: which key verified each event. Optional.
    pub inbox: Option<crate::inbox::Inbox>,
    pub recorder: Recorder,
    pub clock: fn() -> DateTime<Utc>,
    /// `hookgate_key_phase`, set where status is written.
    pub metrics: Arc<crate::metrics::Metrics>,
}

pub async fn reconcile(
    wi: Arc<WebhookIntegration>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
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

async fn apply(wi: &WebhookIntegration, ctx: &Context) -> Result<Action, Error> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let integration = format!("{namespace}/{}", wi.name_any());
    let (mut secrets, missing) = read_secrets(wi, &ctx.client, &namespace).await?;
    let now = (ctx.clock)();
    let traffic = match &ctx.inbox {
        Some(inbox) => match inbox.traffic(&integration, now).await {
            Ok(traffic) => Some(traffic),
            Err(e) => {
                tracing::warn!(error = %e, "could not read key usage and inbox figures");
                None
            }
        },
        None => None,
    };
    let no_use = HashMap::new();
    let last_used = traffic.as_ref().map_or(&no_use, |t| &t.keys_last_used);
    let generated = match wi.spec.rotation.as_ref().is_some_and(|r| r.generate) {
        true => Some(generated_keys(wi, &ctx.client, &namespace, now).await?),
        false => None,
    };
    let effective = match &generated {
        Some(keys) => rotation::effective(wi, &namespace, keys, &mut secrets),
        None => wi.clone(),
    };
    let own_route = compiled::secret_name(&namespace, &wi.name_any());
    let (claims, retired) = route_claims(&ctx.client, &ctx.namespace, &own_route).await?;
    let mut plan = plan::plan(&Inputs {
        wi: &effective,
        secrets: &secrets,
        missing: &missing,
        last_used,
        claims: &claims,
        retired: &retired,
        foreign_secret: generated.as_ref().and_then(|k| k.foreign.as_deref()),
        now,
    });
    if let Some(keys) = generated
        && let Some(pruned) = rotation::finish(&mut plan, wi, &namespace, keys, now)
    {
        write_keys(&ctx.client, &namespace, &pruned).await?;
    }
    if let Some(traffic) = &traffic {
        plan::traffic::refresh(&mut plan, traffic);
    }
    if let (Some(inbox), Some(_)) = (&ctx.inbox, &wi.spec.catch_up) {
        match inbox.catch_up_run(&integration).await {
            Ok(run) => {
                let prev = wi.status.as_ref().map(|s| s.conditions.as_slice());
                let generation = wi.metadata.generation;
                plan::catch_up::set_catch_up(
                    &mut plan,
                    prev.unwrap_or_default(),
                    generation,
                    now,
                    run.as_ref(),
                );
            }
            Err(e) => tracing::warn!(error = %e, "could not read catch-up runs for status"),
        }
    }
    if plan.remove_route {
        delete_route(wi, ctx).await?;
    }
    if let Some(manifests) = plan.manifests.take() {
        let route = compiled::secret(&ctx.namespace, wi, manifests, &plan.retired);
        let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        let params = PatchParams::apply(MANAGER).force();
        let applied = routes
            .patch(&route.name_any(), &params, &Patch::Apply(&route))
            .await;
        if let Err(e) = applied {
            // A refused route is explained in status rather than retried in silence.
            match plan::refused_route(&e) {
                Some(message) => plan::route_refused(&mut plan, message),
                None => return Err(Error::ApplyRoute(e)),
            }
        }
    }
    let api: Api<WebhookIntegration> = Api::namespaced(ctx.client.clone(), &namespace);
    let status = serde_json::json!({ "status": plan.status });
    api.patch_status(
        &wi.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&status),
    )
    .await
    .map_err(Error::PatchStatus)?;
    // After the write, so the series say what status says.
    let phases = plan::phase_series(&plan.status.keys);
    ctx.metrics.set_key_phases(&integration, phases);
    publish(ctx, wi, plan.notes).await;
    Ok(Action::requeue(plan.requeue_after))
}

/// Events are best effort: a lost one is logged, and never fails the reconcile.
async fn publish(ctx: &Context, wi: &WebhookIntegration, notes: Vec<Note>) {
    let reference = wi.object_ref(&());
    for note in notes {
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
}

/// The path claims recorded on every compiled route in the controller's namespace, and the
/// retired key ids recorded on `own` (this integration's route).
async fn route_claims(
    client: &Client,
    namespace: &str,
    own: &str,
) -> Result<(Vec<super::ownership::Claim>, Vec<String>), Error> {
    let routes: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let list = routes
        .list_metadata(&ListParams::default().labels(compiled::ROUTE_LABEL))
        .await
        .map_err(Error::ListRoutes)?;
    let secrets = list.items.into_iter().map(|m| Secret {
        metadata: m.metadata,
        ..Default::default()
    });
    Ok(plan::inputs::route_records(secrets, own))
}

/// Deletes this integration's compiled route, if there is one.
async fn delete_route(wi: &WebhookIntegration, ctx: &Context) -> Result<(), Error> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = compiled::secret_name(&namespace, &wi.name_any());
    match routes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::DeleteRoute(e)),
    }
}

async fn cleanup(wi: &WebhookIntegration, ctx: &Context) -> Result<Action, Error> {
    delete_route(wi, ctx).await?;
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let integration = format!("{namespace}/{}", wi.name_any());
    ctx.metrics.set_key_phases(&integration, []);
    tracing::info!(integration = %integration, "compiled route removed");
    Ok(Action::await_change())
}

/// Every Secret the spec references (keys and delivery signing), decoded; and those missing.
pub async fn read_secrets(
    wi: &WebhookIntegration,
    client: &Client,
    namespace: &str,
) -> Result<(Secrets, Vec<String>), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let (mut secrets, mut missing) = (Secrets::new(), Vec::new());
    for name in plan::inputs::referenced_secrets(wi) {
        match api.get_opt(name).await.map_err(Error::ReadSecret)? {
            Some(s) => {
                let data = crate::route::secret_values(s);
                secrets.insert((namespace.to_string(), name.to_string()), data);
            }
            None => missing.push(name.to_string()),
        }
    }
    Ok((secrets, missing))
}

/// Reads the generated keys Secret and writes it back at once when a key is added, before the
/// plan: a key must exist in the Secret before any route or status names it.
async fn generated_keys(
    wi: &WebhookIntegration,
    client: &Client,
    namespace: &str,
    now: DateTime<Utc>,
) -> Result<rotation::Keys, Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let name = generated::secret_name(&wi.name_any());
    let existing = api.get_opt(&name).await.map_err(Error::ReadSecret)?;
    let keys = rotation::generate(wi, namespace, existing, now, generated::new_secret);
    if let Some(secret) = &keys.write {
        write_keys(client, namespace, secret).await?;
    }
    Ok(keys)
}

/// Applies the generated keys Secret whole: server-side apply drops any key this manager left out.
async fn write_keys(client: &Client, namespace: &str, secret: &Secret) -> Result<(), Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(MANAGER).force();
    api.patch(&secret.name_any(), &params, &Patch::Apply(secret))
        .await
        .map_err(Error::WriteKeys)?;
    Ok(())
}
