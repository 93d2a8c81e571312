//! Spec checks that need more than the CRD schema can say. Standalone runs them on every manifest;
//! the controller runs the same ones before compiling a route.

mod catch_up;
mod delivery;
mod scheme;
mod source;

pub use source::source_ranges;

pub use catch_up::api_base_url;

use super::{FieldSource, SchemeType, WebhookIntegrationSpec, limits};
use crate::destination;
use crate::signature::Template;
use std::collections::HashSet;
use std::time::Duration;

/// A problem with one field, named by its path from the object root (`spec.keys[1].id`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Parses `5m`, `24h`, `1h30m`; zero is refused. Only the CRD schema's grammar
/// (`^([0-9]+(ms|s|m|h|d))+$`) is accepted, so a manifest means the same here as in the cluster.
pub fn duration(field: &str, value: &str) -> Result<Duration, FieldError> {
    if !crd_duration_syntax(value) {
        return Err(FieldError::new(
            field,
            format!(
                "invalid duration {value:?}: use digits and ms, s, m, h or d, e.g. 5m or 1h30m"
            ),
        ));
    }
    if value.len() as u64 > limits::DURATION_MAX_LENGTH {
        return Err(FieldError::new(
            field,
            format!("at most {} characters", limits::DURATION_MAX_LENGTH),
        ));
    }
    let max = limits::max_duration(field);
    match humantime::parse_duration(value) {
        Ok(d) if max.is_some_and(|m| d > m) => Err(FieldError::new(
            field,
            format!(
                "must be at most {}",
                limits::written(max.unwrap_or_default())
            ),
        )),
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(FieldError::new(field, "must be greater than zero")),
        Err(e) => Err(FieldError::new(
            field,
            format!("invalid duration {value:?}: {e}"),
        )),
    }
}

/// `^([0-9]+(ms|s|m|h|d))+$`
fn crd_duration_syntax(value: &str) -> bool {
    let mut rest = value.as_bytes();
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = match rest {
            [b'm', b's', ..] => 2,
            [b's' | b'm' | b'h' | b'd', ..] => 1,
            _ => return false,
        };
        rest = &rest[unit..];
    }
    true
}

fn header_name(field: &str, value: &str) -> Result<(), FieldError> {
    axum::http::HeaderName::from_bytes(value.as_bytes())
        .map(|_| ())
        .map_err(|_| FieldError::new(field, format!("{value:?} is not a valid HTTP header name")))
}

fn source(field: &str, s: &FieldSource) -> Result<(), FieldError> {
    match (&s.header, &s.json_pointer) {
        (Some(h), None) => header_name(&format!("{field}.header"), h),
        (None, Some(p)) if p.is_empty() || p.starts_with('/') => Ok(()),
        (None, Some(_)) => Err(FieldError::new(
            format!("{field}.jsonPointer"),
            "must be empty or start with '/'",
        )),
        _ => Err(FieldError::new(
            field,
            "set exactly one of header or jsonPointer",
        )),
    }
}

/// `events.versionPointer` and `events.supported`: both or neither; a pointer; no empty or
/// repeated version.
fn versions(e: &super::EventFilter) -> Result<(), FieldError> {
    match (&e.version_pointer, e.supported.is_empty()) {
        (None, true) => return Ok(()),
        (None, false) => {
            return Err(FieldError::new(
                "spec.events.supported",
                "applies only with versionPointer",
            ));
        }
        (Some(_), true) => {
            return Err(FieldError::new(
                "spec.events.supported",
                "at least one version is required with versionPointer",
            ));
        }
        (Some(p), false) if !p.starts_with('/') || p.len() > 512 => {
            return Err(FieldError::new(
                "spec.events.versionPointer",
                "must be a JSON pointer starting with '/' (at most 512 characters)",
            ));
        }
        (Some(_), false) => {}
    }
    if e.supported.len() > limits::MAX_EVENT_VERSIONS {
        return Err(FieldError::new(
            "spec.events.supported",
            format!("at most {} entries", limits::MAX_EVENT_VERSIONS),
        ));
    }
    let mut seen = HashSet::new();
    for (i, v) in e.supported.iter().enumerate() {
        if v.is_empty() || v.len() > 512 {
            return Err(FieldError::new(
                format!("spec.events.supported[{i}]"),
                "must be 1 to 512 characters",
            ));
        }
        if !seen.insert(v) {
            return Err(FieldError::new(
                format!("spec.events.supported[{i}]"),
                format!("duplicate version {v:?}"),
            ));
        }
    }
    Ok(())
}

/// Whether the controller may choose the secret: the provider must accept one we give it. Public
/// keys (ed25519, discord, sendgrid) and secrets the provider issues (stripe, twilio, zoom, meta,
/// paddle, square, linear) cannot be generated here.
fn generated_keys_fit(t: SchemeType) -> bool {
    matches!(
        t,
        SchemeType::Github
            | SchemeType::Slack
            | SchemeType::Shopify
            | SchemeType::StandardWebhooks
            | SchemeType::HmacSha256
            | SchemeType::Twitch
            | SchemeType::Gitlab
    )
}

/// Every check, first failure wins (it names its field).
pub fn spec(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
    if let Some(p) = &spec.path {
        let ok = p.starts_with('/') && !p.contains("//") && p.len() <= 512;
        let chars = p
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._~/-".contains(&b));
        if !ok || !chars || (p.len() > 1 && p.ends_with('/')) {
            return Err(FieldError::new(
                "spec.path",
                "must start with '/', use only A-Z a-z 0-9 . _ ~ - /, and have no empty segment",
            ));
        }
    }
    scheme::scheme(spec)?;
    if let Some(s) = &spec.event_id {
        source("spec.eventId", s)?;
    }
    if let Some(s) = &spec.event_type {
        source("spec.eventType", s)?;
    }
    if let Some(r) = &spec.replay {
        if let Some(t) = &r.tolerance {
            duration("spec.replay.tolerance", t)?;
        }
        if let Some(t) = &r.nonce_retention {
            duration("spec.replay.nonceRetention", t)?;
        }
    }
    let generate = spec.rotation.as_ref().is_some_and(|r| r.generate);
    if spec.keys.is_empty() && !generate {
        return Err(FieldError::new("spec.keys", "at least one key is required"));
    }
    if generate && !generated_keys_fit(spec.scheme.type_) {
        return Err(FieldError::new(
            "spec.rotation.generate",
            "only for shared-secret schemes whose secret we choose (github, slack, shopify, standard-webhooks, hmac-sha256, twitch, gitlab)",
        ));
    }
    if let Some(r) = &spec.rotation {
        for (name, v) in [
            ("overlap", &r.overlap),
            ("keepRetired", &r.keep_retired),
            ("every", &r.every),
        ] {
            if let Some(v) = v {
                duration(&format!("spec.rotation.{name}"), v)?;
            }
        }
        if r.every.is_some() && !generate {
            return Err(FieldError::new(
                "spec.rotation.every",
                "applies only with generate: true",
            ));
        }
    }
    let d = &spec.delivery;
    let allow = spec.events.as_ref().map_or(0, |e| e.allow.len());
    for (field, len, max) in [
        ("spec.keys", spec.keys.len(), limits::MAX_KEYS),
        ("spec.events.allow", allow, limits::MAX_EVENT_PATTERNS),
        (
            "spec.delivery.forwardHeaders",
            d.forward_headers.len(),
            limits::MAX_FORWARD_HEADERS,
        ),
        (
            "spec.delivery.retry.schedule",
            d.retry.as_ref().map_or(0, |r| r.schedule.len()),
            limits::MAX_RETRY_STEPS,
        ),
    ] {
        if len > max {
            return Err(FieldError::new(field, format!("at most {max} entries")));
        }
    }
    let mut ids = HashSet::new();
    for (i, k) in spec.keys.iter().enumerate() {
        let valid = !k.id.is_empty()
            && k.id.len() <= 64
            && k.id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !valid {
            return Err(FieldError::new(
                format!("spec.keys[{i}].id"),
                "must match [A-Za-z0-9._-]{1,64}",
            ));
        }
        if !ids.insert(&k.id) {
            return Err(FieldError::new(
                format!("spec.keys[{i}].id"),
                format!("duplicate key id {:?}", k.id),
            ));
        }
        if k.secret_ref.name.is_empty() || k.secret_ref.key.is_empty() {
            return Err(FieldError::new(
                format!("spec.keys[{i}].secretRef"),
                "name and key are required",
            ));
        }
    }
    let allow = spec
        .events
        .as_ref()
        .map(|e| e.allow.as_slice())
        .unwrap_or_default();
    if let Some(i) = allow.iter().position(|p| p.is_empty()) {
        return Err(FieldError::new(
            format!("spec.events.allow[{i}]"),
            "empty pattern",
        ));
    }
    if let Some(e) = &spec.events {
        versions(e)?;
    }
    match reqwest::Url::parse(&spec.delivery.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            // Only literal addresses and known names are decided here; workers check every
            // resolved address again when they connect.
            destination::check_url(&u).map_err(|refusal| {
                FieldError::new(
                    "spec.delivery.url",
                    format!("{refusal}; deliveries never go there"),
                )
            })?;
        }
        _ => {
            return Err(FieldError::new(
                "spec.delivery.url",
                "must be an absolute http(s) URL",
            ));
        }
    }
    delivery::worker_fields(spec)?;
    source_ranges(&spec.source_ranges)?;
    catch_up::catch_up(spec)?;
    if let Some(l) = &spec.limits {
        if l.max_body_bytes
            .is_some_and(|b| b == 0 || b > 64 * 1024 * 1024)
        {
            return Err(FieldError::new(
                "spec.limits.maxBodyBytes",
                "must be between 1 and 67108864",
            ));
        }
        for (field, value, max) in [
            (
                "spec.limits.requestsPerSecond",
                l.requests_per_second,
                limits::MAX_REQUESTS_PER_SECOND,
            ),
            ("spec.limits.burst", l.burst, limits::MAX_BURST),
        ] {
            if value.is_some_and(|v| v == 0 || v > max) {
                return Err(FieldError::new(
                    field,
                    format!("must be between 1 and {max}"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
