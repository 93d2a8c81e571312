//! Reading and writing WebhookIntegrations for the plugin, and errors that name the object.
//!
//! Integrations are read and written as untyped JSON: a read-modify-write of `spec.keys` must
//! keep fields this plugin does not know (a newer CRD), so only the parts the plugin needs are
//! decoded, and leniently.

use crate::crd::{KeyStatus, RotationSpec, WebhookIntegration};
use anyhow::{Context, anyhow, bail};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::Value;

/// The integration a command works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub name: String,
}

impl Target {
    /// `name` or `namespace/name`; `-n` may repeat the namespace of `namespace/name` but not
    /// contradict it.
    pub fn parse(arg: &str, flag: Option<&str>, default_namespace: &str) -> anyhow::Result<Self> {
        let (namespace, name) = match arg.split_once('/') {
            None => (flag.unwrap_or(default_namespace), arg),
            Some((ns, name)) => {
                if ns.is_empty() || name.is_empty() || name.contains('/') {
                    bail!("{arg:?}: give the integration as name or namespace/name");
                }
                if let Some(flag) = flag.filter(|f| *f != ns) {
                    bail!("{arg:?} is in namespace {ns:?} but --namespace says {flag:?}");
                }
                (ns, name)
            }
        };
        if name.is_empty() {
            bail!("the integration name is empty");
        }
        Ok(Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// `WebhookIntegration pay/stripe`
    pub fn display(&self) -> String {
        format!("WebhookIntegration {}/{}", self.namespace, self.name)
    }

    /// `Secret pay/<name>`
    pub fn secret_display(&self, secret: &str) -> String {
        format!("Secret {}/{secret}", self.namespace)
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        let resource = ApiResource::erase::<WebhookIntegration>(&());
        Api::namespaced_with(client.clone(), &self.namespace, &resource)
    }
}

/// What the plugin needs of one integration, as read.
#[derive(Debug, Clone)]
pub struct Integration {
    pub resource_version: Option<String>,
    /// `spec.keys` exactly as stored, unknown fields included.
    pub keys: Vec<Value>,
    pub status_keys: Vec<KeyStatus>,
    pub rotation: RotationSpec,
}

impl Integration {
    /// Ids in `spec.keys`, in order.
    pub fn key_ids(&self) -> Vec<&str> {
        self.keys.iter().filter_map(|k| k["id"].as_str()).collect()
    }

    /// The key the controller last reported as Active.
    pub fn active_key(&self) -> Option<&str> {
        let active = self.status_keys.iter().rev().find(|k| k.phase == "Active");
        active.map(|k| k.id.as_str())
    }

    /// `spec.rotation.overlap`, or the default.
    pub fn overlap(&self) -> String {
        let default = crate::crd::defaults::ROTATION_OVERLAP.as_secs();
        let default = match default {
            s if s % 3600 == 0 => format!("{}h", s / 3600),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{s}s"),
        };
        self.rotation.overlap.clone().unwrap_or(default)
    }
}

/// `(keys: v1, v2)`, or `(no keys)`.
pub fn id_list(ids: &[&str]) -> String {
    if ids.is_empty() {
        "(no keys)".into()
    } else {
        format!("(keys: {})", ids.join(", "))
    }
}

pub async fn get(client: &Client, target: &Target) -> anyhow::Result<Integration> {
    let object = target
        .api(client)
        .get(&target.name)
        .await
        .map_err(|e| api_error(e, &target.display()))?;
    let what = target.display();
    let keys = match &object.data["spec"]["keys"] {
        Value::Null => Vec::new(),
        Value::Array(keys) => keys.clone(),
        _ => bail!("{what}: spec.keys is not a list"),
    };
    let status_keys = match &object.data["status"]["keys"] {
        Value::Null => Vec::new(),
        keys => serde_json::from_value(keys.clone())
            .with_context(|| format!("{what}: cannot read status.keys"))?,
    };
    let rotation = match &object.data["spec"]["rotation"] {
        Value::Null => RotationSpec::default(),
        rotation => serde_json::from_value(rotation.clone())
            .with_context(|| format!("{what}: cannot read spec.rotation"))?,
    };
    Ok(Integration {
        resource_version: object.metadata.resource_version,
        keys,
        status_keys,
        rotation,
    })
}

/// Replaces `spec.keys` with a JSON merge patch that only applies if the integration is still at
/// the version that was read, so a concurrent edit fails instead of being overwritten.
pub async fn patch_keys(
    client: &Client,
    target: &Target,
    read: &Integration,
    keys: Vec<Value>,
) -> anyhow::Result<()> {
    let mut body = serde_json::json!({ "spec": { "keys": keys } });
    if let Some(rv) = &read.resource_version {
        body["metadata"] = serde_json::json!({ "resourceVersion": rv });
    }
    let result = target
        .api(client)
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(&body))
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Err(anyhow!(
            "{} was changed by someone else after it was read (resourceVersion {}); nothing was \
             written, run the command again",
            target.display(),
            read.resource_version.as_deref().unwrap_or("?")
        )),
        Err(e) => Err(api_error(e, &target.display())),
    }
}

/// A merge patch without precondition, for fields that are set whole (annotations, overlap).
pub async fn merge(client: &Client, target: &Target, body: &Value) -> anyhow::Result<()> {
    target
        .api(client)
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .map_err(|e| api_error(e, &target.display()))?;
    Ok(())
}

/// An API error as one sentence naming the object (`what`, e.g. `Secret pay/stripe-keys`).
/// Uses only the server's status message, which for Secrets never carries values.
pub fn api_error(e: kube::Error, what: &str) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => match s.code {
            404 if what.starts_with("WebhookIntegration ")
                && s.message == "the server could not find the requested resource" =>
            {
                anyhow!(
                    "{what} not found: this cluster does not serve webhookintegrations.hookgate.dev \
                 (is the hookgate CRD installed?)"
                )
            }
            404 => anyhow!("{what} not found"),
            401 => anyhow!("{what}: unauthorized ({}); check the kubeconfig", s.message),
            403 => anyhow!("{what}: forbidden: {}", s.message),
            409 => anyhow!("{what}: conflict: {}", s.message),
            422 => anyhow!("{what}: rejected by the API server: {}", s.message),
            code => anyhow!("{what}: the API server answered {code}: {}", s.message),
        },
        e => anyhow!("{what}: cannot reach the Kubernetes API: {e}"),
    }
}
