//! Loading the same YAML a user would `kubectl apply`: WebhookIntegrations and v1 Secrets, in
//! multi-document files or directories of them. Every error names the file, the object and the field.

mod error;
mod secret_values;

pub use error::{Error, Result};

use crate::crd::WebhookIntegration;
use crate::crd::validate::FieldError;
use crate::route::{self, CompiledRoute, RouteTable, Secrets};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// A WebhookIntegration with the file it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: String,
    pub integration: WebhookIntegration,
}

impl Loaded {
    pub fn object(&self) -> String {
        object_name("WebhookIntegration", &self.integration)
    }
}

/// Everything found in a set of manifest files.
#[derive(Debug, Default)]
pub struct Manifests {
    pub integrations: Vec<Loaded>,
    pub secrets: Secrets,
}

fn object_name<K: kube::Resource>(kind: &str, obj: &K) -> String {
    let ns = obj
        .meta()
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    format!(
        "{kind} {ns}/{}",
        obj.meta().name.clone().unwrap_or_default()
    )
}

fn manifest_err(
    file: &str,
    object: impl Into<String>,
    field: impl Into<String>,
    msg: impl Into<String>,
) -> Error {
    Error::Invalid {
        file: file.to_string(),
        object: object.into(),
        error: FieldError::new(field, msg),
    }
}

/// Expands directories (recursively, `.yaml`/`.yml`/`.json`, sorted) into files.
fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|source| Error::Io {
            path: p.display().to_string(),
            source,
        })?;
        if meta.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|source| Error::Io {
                    path: p.display().to_string(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            let nested: Vec<PathBuf> = entries
                .into_iter()
                .filter(|e| {
                    e.is_dir()
                        || matches!(
                            e.extension().and_then(|x| x.to_str()),
                            Some("yaml" | "yml" | "json")
                        )
                })
                .collect();
            out.extend(files(&nested)?);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Deserializes `value` as `T`, failing on unknown fields, with the field path in the error.
fn typed<T: DeserializeOwned>(value: serde_yaml::Value) -> std::result::Result<T, FieldError> {
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path| unknown.push(path.to_string());
    let de = serde_ignored::Deserializer::new(value, &mut record);
    let parsed: T = serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        FieldError::new(
            if field == "." { String::new() } else { field },
            e.into_inner().to_string(),
        )
    })?;
    // The derived CR type checks apiVersion and kind itself (above), so serde sees them as extra.
    match unknown
        .into_iter()
        .find(|f| f != "apiVersion" && f != "kind")
    {
        Some(field) => Err(FieldError::new(field, "unknown field")),
        None => Ok(parsed),
    }
}

/// Reads and parses every manifest under `paths`. Objects of other kinds are skipped with a warning.
pub fn load(paths: &[PathBuf]) -> Result<Manifests> {
    let mut m = Manifests::default();
    for path in files(paths)? {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
            path: file.clone(),
            source,
        })?;
        m.add_text(&file, &text)?;
    }
    Ok(m)
}

impl Manifests {
    /// Adds the objects of one multi-document YAML text; `source` names it in errors (a file
    /// path, or the compiled-route Secret it came from).
    pub fn add_text(&mut self, source: &str, text: &str) -> Result<()> {
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let object = format!("document {}", i + 1);
            let value = serde_yaml::Value::deserialize(doc)
                .map_err(|e| manifest_err(source, &object, "", format!("invalid YAML: {e}")))?;
            if value.is_null() {
                continue;
            }
            add(self, source, &object, value)?;
        }
        Ok(())
    }
}

fn add(m: &mut Manifests, file: &str, doc: &str, value: serde_yaml::Value) -> Result<()> {
    let get = |k: &str| value.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let (api_version, kind) = match (get("apiVersion"), get("kind")) {
        (Some(a), Some(k)) => (a, k),
        (None, _) => return Err(manifest_err(file, doc, "apiVersion", "missing")),
        (_, None) => return Err(manifest_err(file, doc, "kind", "missing")),
    };
    let named = |kind: &str| {
        let name = value
            .get("metadata")
            .and_then(|md| md.get("name"))
            .and_then(|n| n.as_str());
        let ns = value
            .get("metadata")
            .and_then(|md| md.get("namespace"))
            .and_then(|n| n.as_str());
        format!(
            "{kind} {}/{}",
            ns.unwrap_or("default"),
            name.unwrap_or("<unnamed>")
        )
    };
    match (api_version.as_str(), kind.as_str()) {
        ("hookgate.dev/v1alpha1", "WebhookIntegration") => {
            let object = named("WebhookIntegration");
            let wi: WebhookIntegration = typed(value).map_err(|error| Error::Invalid {
                file: file.into(),
                object: object.clone(),
                error,
            })?;
            if wi.metadata.name.as_deref().unwrap_or("").is_empty() {
                return Err(manifest_err(file, object, "metadata.name", "missing"));
            }
            if let Some(prev) = m.integrations.iter().find(|l| l.object() == object) {
                return Err(manifest_err(
                    file,
                    object,
                    "metadata.name",
                    format!("already defined in {}", prev.file),
                ));
            }
            m.integrations.push(Loaded {
                file: file.into(),
                integration: wi,
            });
        }
        (_, "WebhookIntegration") => {
            return Err(manifest_err(
                file,
                named(&kind),
                "apiVersion",
                format!("{api_version:?} is not served; use hookgate.dev/v1alpha1"),
            ));
        }
        ("v1", "Secret") => {
            let object = named("Secret");
            let secret: Secret = secret_values::shape(&value)
                .and_then(|()| typed(value).map_err(secret_values::without_values))
                .map_err(|error| Error::Invalid {
                    file: file.into(),
                    object: object.clone(),
                    error,
                })?;
            let ns = secret.namespace().unwrap_or_else(|| "default".into());
            let name = secret.name_any();
            if name.is_empty() {
                return Err(manifest_err(file, object, "metadata.name", "missing"));
            }
            let data = crate::route::secret_values(secret);
            if m.secrets.insert((ns, name), data).is_some() {
                return Err(manifest_err(
                    file,
                    object,
                    "metadata.name",
                    "Secret defined twice",
                ));
            }
        }
        _ => tracing::warn!(
            file,
            kind,
            api_version,
            "skipping object: hookgate standalone only reads WebhookIntegrations and v1 Secrets"
        ),
    }
    Ok(())
}

impl Manifests {
    /// Compiles every integration; the first invalid one stops with file, object and field.
    pub fn compile(&self) -> Result<Vec<CompiledRoute>> {
        self.integrations
            .iter()
            .map(|l| {
                route::compile(&l.integration, &self.secrets).map_err(|error| Error::Invalid {
                    file: l.file.clone(),
                    object: l.object(),
                    error,
                })
            })
            .collect()
    }

    /// Compiles into a route table, refusing two integrations on one path (named with both files).
    pub fn route_table(&self) -> Result<RouteTable> {
        let routes = self.compile()?;
        // `compile` keeps the order of `integrations`, so route i came from integration i.
        for (i, r) in routes.iter().enumerate() {
            if let Some(j) = routes[..i].iter().position(|p| p.path == r.path) {
                let (first, second) = (&self.integrations[j], &self.integrations[i]);
                return Err(manifest_err(
                    &second.file,
                    second.object(),
                    "spec.path",
                    format!(
                        "path {} is claimed by both {} (in {}) and this integration",
                        r.path,
                        first.object(),
                        first.file
                    ),
                ));
            }
        }
        RouteTable::new(routes).map_err(Error::PathConflict)
    }

    /// Finds an integration by `namespace/name` (or `name` in `default`).
    pub fn find(&self, which: &str) -> Option<&Loaded> {
        let (ns, name) = which.split_once('/').unwrap_or(("default", which));
        self.integrations.iter().find(|l| {
            l.integration.namespace().as_deref().unwrap_or("default") == ns
                && l.integration.name_any() == name
        })
    }
}

/// Convenience for callers holding one path.
pub fn load_one(path: &Path) -> Result<Manifests> {
    load(&[path.to_path_buf()])
}
