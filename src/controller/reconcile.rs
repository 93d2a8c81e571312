//! The reconciler: read what the plan needs, then carry the plan out (compiled route Secret,
//! status, events). Decisions live in `plan`; this file only does I/O.

use super::compiled;
use super::generated::{self, Owned, Rotation};
use super::ownership::Claim;
use super::plan::{self, Inputs, Note};
use crate::crd::WebhookIntegration;
use crate::inbox::Inbox;
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

/// Removes the compiled route when its integration is deleted.
pub const FINALIZER: &str = "hookgate.dev/route";
const MANAGER: &str = "hookgate-controller";
/// How often status traffic figures (pending, deadLetters, ...) are refreshed at most.
pub const TRAFFIC_REFRESH: std::time::Duration = std::time::Duration::from_secs(30);

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
    let mut secrets = secrets;
    let mut effective = wi.clone();
    let mut generated_note = None;
    let mut scheduled = None;
    let mut owned_keys = None;
    let mut foreign_secret = None;
    let mut rotate_next_second = false;
    if wi.spec.rotation.as_ref().is_some_and(|r| r.generate) {
        // A Secret of that name that this integration does not own is never adopted.
        let (owned, data, rotated, deferred) =
            match generated_keys(wi, &ctx.client, &namespace, now).await? {
                Ok(keys) => keys,
                Err(name) => {
                    foreign_secret = Some(format!("{namespace}/{name}"));
                    (
                        Owned::new(Vec::new(), None),
                        Default::default(),
                        None,
                        false,
                    )
                }
            };
        rotate_next_second = deferred;
        effective.spec.keys.extend(owned.key_specs(&wi.name_any()));
        secrets.insert(
            (namespace.clone(), generated::secret_name(&wi.name_any())),
            data.clone(),
        );
        generated_note = rotated;
        scheduled = generated::next_scheduled(&owned, every(wi));
        owned_keys = Some((owned, data));
    }
    let own_route = compiled::secret_name(&namespace, &wi.name_any());
    let (claims, retired) = route_claims(&ctx.client, &ctx.namespace, &own_route).await?;
    let mut plan = plan::plan(&Inputs {
        wi: &effective,
        secrets: &secrets,
        missing: &missing,
        last_used: &last_used,
        claims: &claims,
        retired: &retired,
        foreign_secret: foreign_secret.as_deref(),
        now,
    });
    if let Some(note) = generated_note {
        plan.notes.insert(0, note);
    }
    // Generated keys that left status (retired for longer than keepRetired) leave the Secret
    // too. Only after a successful plan: a failed one carries the old status over unchanged.
    if let (Some((owned, mut data)), true) = (owned_keys, plan.manifests.is_some()) {
        let listed: Vec<&str> = plan.status.keys.iter().map(|k| k.id.as_str()).collect();
        let expired: Vec<String> = owned
            .ids
            .iter()
            .filter(|id| !listed.contains(&id.as_str()))
            .cloned()
            .collect();
        if !expired.is_empty() {
            data.retain(|id, _| !expired.contains(id));
            write_owned(wi, &ctx.client, &namespace, &data, owned.handled.clone()).await?;
            plan.notes.push(Note {
                warning: false,
                reason: "KeyRemoved",
                note: format!(
                    "removed retired generated key(s) {} from Secret {namespace}/{}",
                    expired.join(", "),
                    generated::secret_name(&wi.name_any())
                ),
            });
        }
    }
    if let Some(at) = scheduled {
        let next = plan
            .status
            .next_rotation_at
            .as_deref()
            .and_then(|t| t.parse::<DateTime<Utc>>().ok());
        if next.is_none_or(|n| at < n) {
            plan.status.next_rotation_at =
                Some(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        }
        if let Ok(wait) = (at - now).to_std() {
            plan.requeue_after = plan
                .requeue_after
                .min(wait.max(std::time::Duration::from_secs(1)));
        }
    }

    if rotate_next_second {
        plan.requeue_after = plan.requeue_after.min(std::time::Duration::from_secs(1));
    }
    if let Some(inbox) = &ctx.inbox {
        let integration = format!("{namespace}/{}", wi.name_any());
        match inbox.stats_of(Some(&integration), now).await {
            Ok(stats) => {
                super::plan::set_traffic(&mut plan.status, &stats);
                // Traffic figures stay fresh: look again within 30 s.
                plan.requeue_after = plan.requeue_after.min(TRAFFIC_REFRESH);
            }
            Err(e) => tracing::warn!(error = %e, "could not read inbox figures for status"),
        }
    }
    if plan.remove_route {
        delete_route(wi, ctx).await?;
    }
    if let Some(manifests) = plan.manifests.take() {
        let route = compiled::secret(&ctx.namespace, wi, manifests, &plan.retired);
        let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
        let applied = routes
            .patch(
                &route.name_any(),
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&route),
            )
            .await;
        match applied {
            Ok(_) => {}
            // The API server refused the route (too large, invalid): say so in status rather than
            // retrying in silence. Its message names the object, never a Secret's values.
            Err(kube::Error::Api(e)) if (400..500).contains(&e.code) && e.code != 409 => {
                let message = format!("the compiled route was refused: {}", e.message);
                plan::route_refused(&mut plan, message);
            }
            Err(e) => return Err(e.into()),
        }
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

/// The path claims recorded on every compiled route in the controller's namespace, and the
/// retired key ids recorded on `own` (this integration's route).
async fn route_claims(
    client: &Client,
    namespace: &str,
    own: &str,
) -> Result<(Vec<Claim>, Vec<String>), ReconcileError> {
    let routes: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let list = routes
        .list_metadata(&ListParams::default().labels(compiled::ROUTE_LABEL))
        .await?;
    let (mut claims, mut retired) = (Vec::new(), Vec::new());
    for m in list.items {
        let secret = Secret {
            metadata: m.metadata,
            ..Default::default()
        };
        if secret.name_any() == own {
            retired = compiled::recorded_retired(&secret);
        }
        claims.extend(compiled::recorded_claim(&secret));
    }
    Ok((claims, retired))
}

/// Deletes this integration's compiled route, if there is one.
async fn delete_route(wi: &WebhookIntegration, ctx: &Context) -> Result<(), ReconcileError> {
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    let routes: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let name = compiled::secret_name(&namespace, &wi.name_any());
    match routes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn cleanup(wi: &WebhookIntegration, ctx: &Context) -> Result<Action, ReconcileError> {
    delete_route(wi, ctx).await?;
    let namespace = wi.namespace().unwrap_or_else(|| "default".into());
    tracing::info!(integration = %format!("{namespace}/{}", wi.name_any()), "compiled route removed");
    Ok(Action::await_change())
}

/// Every Secret the spec references (keys and delivery signing), decoded; and those missing.
pub async fn read_secrets(
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
                let data = crate::route::secret_values(s);
                secrets.insert((namespace.to_string(), name.to_string()), data);
            }
            None => missing.push(name.to_string()),
        }
    }
    Ok((secrets, missing))
}

fn every(wi: &WebhookIntegration) -> Option<std::time::Duration> {
    let every = wi.spec.rotation.as_ref()?.every.as_deref()?;
    crate::crd::validate::duration("spec.rotation.every", every).ok()
}

/// Reads the owned key Secret and adds a key when one is due (first key, the rotate annotation
/// changed, or `rotation.every` elapsed). Returns the keys, their values and the event to emit.
async fn generated_keys(
    wi: &WebhookIntegration,
    client: &Client,
    namespace: &str,
    now: DateTime<Utc>,
) -> Result<Result<GeneratedKeys, String>, ReconcileError> {
    let name = generated::secret_name(&wi.name_any());
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = api.get_opt(&name).await?;
    if let Some(secret) = &existing {
        let ours = secret
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == wi.metadata.uid.as_ref());
        if !ours {
            return Ok(Err(name));
        }
    }
    let handled = existing
        .as_ref()
        .and_then(|s| s.annotations().get(generated::HANDLED_ANNOTATION).cloned());
    let mut data = existing
        .map(crate::route::secret_values)
        .unwrap_or_default();
    let owned = Owned::new(data.keys().cloned().collect(), handled);
    let requested = wi.annotations().get(generated::ROTATE_ANNOTATION).cloned();
    let Some(why) = generated::due(&owned, requested.as_deref(), every(wi), now) else {
        return Ok(Ok((owned, data, None, false)));
    };
    let id = generated::key_id(now);
    if data.contains_key(&id) {
        // Ids carry the second they were made in, and this second's key exists (a rotation
        // asked for right after the first key): rotate in the next second, not at the next
        // resync.
        return Ok(Ok((owned, data, None, true)));
    }
    data.insert(
        id.clone(),
        generated::new_secret(wi.spec.scheme.type_).into_bytes(),
    );
    let owned = Owned::new(data.keys().cloned().collect(), requested.or(owned.handled));
    write_owned(wi, client, namespace, &data, owned.handled.clone()).await?;
    let reason = match why {
        Rotation::First => "first key",
        Rotation::Requested => "rotation requested with the hookgate.dev/rotate annotation",
        Rotation::Scheduled => "rotation.every elapsed",
    };
    let note = Note {
        warning: false,
        reason: "KeyGenerated",
        note: format!("generated key {id} in Secret {namespace}/{name} ({reason})"),
    };
    Ok(Ok((owned, data, Some(note), false)))
}

/// The owned keys, their values, the event of a key generated now, and whether a rotation that
/// is due had to wait for the next second.
type GeneratedKeys = (
    Owned,
    std::collections::BTreeMap<String, Vec<u8>>,
    Option<Note>,
    bool,
);

/// Applies the owned key Secret whole: server-side apply drops any key this manager left out.
async fn write_owned(
    wi: &WebhookIntegration,
    client: &Client,
    namespace: &str,
    data: &std::collections::BTreeMap<String, Vec<u8>>,
    handled: Option<String>,
) -> Result<(), ReconcileError> {
    let name = generated::secret_name(&wi.name_any());
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.to_string()),
            annotations: handled.map(|h| [(generated::HANDLED_ANNOTATION.to_string(), h)].into()),
            owner_references: wi.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone())))
                .collect(),
        ),
        ..Default::default()
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&secret),
    )
    .await?;
    Ok(())
}
