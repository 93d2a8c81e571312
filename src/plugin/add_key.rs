//! `add-key`: store a provider-issued key in a Secret (server-side apply) and append it to
//! `spec.keys`.
//!
//! Server-side apply removes fields a manager stops applying, so an apply that named only the new
//! data key would delete the keys earlier `add-key` runs stored with the same field manager (the
//! key that is now retiring, typically). Each apply therefore carries, unchanged, the data keys
//! this manager already owns, plus the new one; keys other managers own are never named.

use super::FIELD_MANAGER;
use super::cluster::{self, Target};
use anyhow::{Context, anyhow, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};
use std::io::Write;
use std::path::Path;

pub async fn add_key(
    client: &Client,
    target: &Target,
    id: &str,
    file: &Path,
    secret: Option<&str>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let id_ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !id_ok {
        bail!("--id {id:?}: use 1 to 64 of A-Z a-z 0-9 . _ -");
    }
    let value = std::fs::read(file).with_context(|| format!("--from-file {}", file.display()))?;
    if value.is_empty() || value == b"\n" || value == b"\r\n" {
        bail!("--from-file {}: the file is empty", file.display());
    }
    let wi = cluster::get(client, target).await?;
    let ids = wi.key_ids();
    let generated = wi.status_keys.iter().any(|k| k.id == id);
    if ids.contains(&id) || generated {
        bail!(
            "key {id:?} already in {} {}",
            target.display(),
            cluster::id_list(&ids)
        );
    }
    let secret_name = secret.map_or_else(|| format!("{}-keys", target.name), str::to_string);
    let secret_what = target.secret_display(&secret_name);

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &target.namespace);
    let current = secrets
        .get_opt(&secret_name)
        .await
        .map_err(|e| cluster::api_error(e, &secret_what))?;
    let mut data = current.as_ref().map(owned_data).unwrap_or_default();
    data.insert(id.to_string(), STANDARD.encode(&value).into());
    let mut metadata = json!({"name": secret_name, "namespace": target.namespace});
    if let Some(rv) = current.and_then(|s| s.metadata.resource_version) {
        // Applies only to the Secret as read, whose values were carried over.
        metadata["resourceVersion"] = rv.into();
    }
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "data": data});
    secrets
        .patch(
            &secret_name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|e| cluster::api_error(e, &secret_what))?;
    writeln!(out, "{secret_what}: stored key {id}")?;

    let mut keys = wi.keys.clone();
    keys.push(json!({"id": id, "secretRef": {"name": secret_name, "key": id}}));
    cluster::patch_keys(client, target, &wi, keys)
        .await
        .map_err(|e| {
            anyhow!(
                "{e:#}\nthe key is stored in {secret_what} but spec.keys was not changed; \
                 running the same add-key again finishes it"
            )
        })?;
    writeln!(out, "{}: appended key {id} to spec.keys", target.display())?;
    let previous = match wi.active_key() {
        Some(active) => format!("{active}, the active key until now,"),
        None => "the previously active key".into(),
    };
    writeln!(
        out,
        "Next: the controller makes {id} the active key; {previous} becomes Retiring: still \
         accepted for {} (spec.rotation.overlap) unless its retireAt says otherwise, then Retired.",
        wi.overlap()
    )?;
    writeln!(
        out,
        "Watch it with: kubectl hookgate keys {}/{}",
        target.namespace, target.name
    )?;
    Ok(())
}

/// The data keys (with their current, still encoded values) that this plugin's earlier applies
/// own.
fn owned_data(secret: &Secret) -> Map<String, Value> {
    let data = secret.data.clone().unwrap_or_default();
    let entries = secret.metadata.managed_fields.iter().flatten();
    let ours = entries.filter(|m| {
        m.manager.as_deref() == Some(FIELD_MANAGER)
            && m.operation.as_deref() == Some("Apply")
            && m.subresource.as_deref().unwrap_or("").is_empty()
    });
    let mut owned = Map::new();
    for entry in ours {
        let Some(Value::Object(fields)) = entry.fields_v1.as_ref().map(|f| &f.0["f:data"]) else {
            continue;
        };
        for field in fields.keys() {
            let Some(key) = field.strip_prefix("f:") else {
                continue;
            };
            if let Some(v) = data.get(key) {
                owned.insert(key.to_string(), STANDARD.encode(&v.0).into());
            }
        }
    }
    owned
}
