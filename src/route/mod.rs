//! A `WebhookIntegration` plus its Secrets, compiled into what the receiver needs per request
//! (parsed keys, header names, limits) and what a worker needs per delivery. Compiled once per
//! route build, never per request; the controller and `hookgate standalone` share `compile`.

pub mod catch_up;
mod compile;
pub mod fields;
pub mod json_pointers;
mod secrets;
mod source_ranges;
pub mod target;
pub mod versions;

pub use compile::{compile, scheme};
pub use fields::EventFilter;
pub use secrets::{Secrets, secret_values};
pub use source_ranges::SourceRanges;
pub use versions::Versions;

use crate::signature::Verifier;
use governor::Quota;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use target::DeliveryTarget;

/// Where a per-event value is read from, after verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The first of these headers that is present (lower-case names).
    Headers(Vec<String>),
    /// An RFC 6901 pointer into the JSON body.
    Pointer(String),
    /// A parameter of a form-encoded body (`application/x-www-form-urlencoded`).
    Form(String),
    /// The hex SHA-256 of the signature that matched.
    SignatureDigest,
    /// The first of these that yields a value.
    FirstOf(Vec<Source>),
}

impl Source {
    /// Whether the value comes from what the signature covers (the body, or the signature
    /// itself), so that it needs no separate replay nonce.
    pub fn signed(&self) -> bool {
        match self {
            Source::Headers(_) => false,
            Source::Pointer(_) | Source::Form(_) | Source::SignatureDigest => true,
            Source::FirstOf(all) => all.iter().all(Source::signed),
        }
    }

    /// The JSON pointers it reads, added to `out`.
    pub fn pointers<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Source::Pointer(p) => out.push(p),
            Source::FirstOf(all) => all.iter().for_each(|s| s.pointers(out)),
            Source::Headers(_) | Source::Form(_) | Source::SignatureDigest => {}
        }
    }
}

/// Meta's verify token: a secret, so never printed.
#[derive(Clone)]
pub struct VerifyToken(pub Vec<u8>);

impl std::fmt::Debug for VerifyToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VerifyToken([redacted])")
    }
}

/// Everything the receiver needs to handle one integration's requests.
#[derive(Debug)]
pub struct CompiledRoute {
    /// `namespace/name`
    pub integration: String,
    pub path: String,
    pub verifier: Verifier,
    /// `scheme.verifyTokenRef` (Meta): answers the unsigned subscription `GET`.
    pub verify_token: Option<VerifyToken>,
    pub event_id: Source,
    pub event_type: Source,
    pub tolerance: Duration,
    pub nonce_retention: Duration,
    pub allow: EventFilter,
    /// `events.versionPointer` and `supported`: events of other versions are dead-lettered.
    pub versions: Option<Versions>,
    /// The pointers of `event_id`, `event_type` and `versions`, read from the body in one pass;
    /// empty when none reads the body as JSON.
    pub json: json_pointers::Pointers,
    pub max_body_bytes: usize,
    /// `limits.requestsPerSecond` and `burst`, for verified requests. The limiter itself lives in
    /// the receiver, so that it survives a rebuild of the route.
    pub rate: Option<Quota>,
    /// Shared with the workers, which look targets up by integration.
    pub delivery: Arc<DeliveryTarget>,
    /// `spec.sourceRanges`: checked before anything else; empty allows every address.
    pub source_ranges: SourceRanges,
    /// `spec.catchUp`, for the workers' catch-up runs.
    pub catch_up: Option<Arc<catch_up::CatchUpTarget>>,
}

impl CompiledRoute {
    /// Whether `event_type` passes `events.allow`. A missing type passes only without a filter.
    pub fn allows(&self, event_type: Option<&str>) -> bool {
        self.allow.allows(event_type)
    }
}

/// Routes by path. Swapped whole when configuration changes.
#[derive(Debug, Default)]
pub struct RouteTable {
    routes: HashMap<String, Arc<CompiledRoute>>,
}

impl RouteTable {
    /// Fails when two routes claim the same path, naming both integrations.
    pub fn new(routes: Vec<CompiledRoute>) -> Result<Self, String> {
        let mut table = HashMap::new();
        for r in routes {
            if let Some(prev) = table.get(&r.path) {
                let prev: &Arc<CompiledRoute> = prev;
                return Err(format!(
                    "path {} is claimed by both {} and {}",
                    r.path, prev.integration, r.integration
                ));
            }
            table.insert(r.path.clone(), Arc::new(r));
        }
        Ok(Self { routes: table })
    }

    pub fn get(&self, path: &str) -> Option<&Arc<CompiledRoute>> {
        self.routes.get(path)
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<CompiledRoute>> {
        self.routes.values()
    }
}

#[cfg(test)]
mod compile_tests;
