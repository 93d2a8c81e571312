//! Spec checks that need more than the CRD schema can say. Standalone runs them on every manifest;
//! the controller runs the same ones before compiling a route.

use super::{FieldSource, SchemeType, WebhookIntegrationSpec};
use crate::receiver::verify::Template;
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

/// Parses `5m`, `24h`, `1h30m`; zero is refused.
pub fn duration(field: &str, value: &str) -> Result<Duration, FieldError> {
    match humantime::parse_duration(value) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(FieldError::new(field, "must be greater than zero")),
        Err(e) => Err(FieldError::new(
            field,
            format!("invalid duration {value:?}: {e}"),
        )),
    }
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
    scheme(spec)?;
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
    if spec.keys.is_empty() {
        return Err(FieldError::new("spec.keys", "at least one key is required"));
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
    if let Some(e) = &spec.events {
        if let Some(i) = e.allow.iter().position(|p| p.is_empty()) {
            return Err(FieldError::new(
                format!("spec.events.allow[{i}]"),
                "empty pattern",
            ));
        }
    }
    match reqwest::Url::parse(&spec.delivery.url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        _ => {
            return Err(FieldError::new(
                "spec.delivery.url",
                "must be an absolute http(s) URL",
            ));
        }
    }
    if let Some(l) = &spec.limits {
        if l.max_body_bytes
            .is_some_and(|b| b == 0 || b > 64 * 1024 * 1024)
        {
            return Err(FieldError::new(
                "spec.limits.maxBodyBytes",
                "must be between 1 and 67108864",
            ));
        }
        if l.requests_per_second == Some(0) {
            return Err(FieldError::new(
                "spec.limits.requestsPerSecond",
                "must be at least 1",
            ));
        }
        if l.burst == Some(0) {
            return Err(FieldError::new("spec.limits.burst", "must be at least 1"));
        }
    }
    Ok(())
}

fn scheme(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
    let s = &spec.scheme;
    let generic = matches!(s.type_, SchemeType::HmacSha256 | SchemeType::Ed25519);
    let fields = [
        ("signatureHeader", s.signature_header.is_some()),
        ("timestampHeader", s.timestamp_header.is_some()),
        ("eventIdHeader", s.event_id_header.is_some()),
        ("keyIdHeader", s.key_id_header.is_some()),
        ("signedPayload", s.signed_payload.is_some()),
        ("encoding", s.encoding.is_some()),
        ("signaturePrefix", s.signature_prefix.is_some()),
    ];
    if !generic {
        if let Some((name, _)) = fields.iter().find(|(_, set)| *set) {
            return Err(FieldError::new(
                format!("spec.scheme.{name}"),
                "applies only to type hmac-sha256 or ed25519",
            ));
        }
        return Ok(());
    }
    if let Some(h) = &s.signature_header {
        if h.is_empty() {
            return Err(FieldError::new(
                "spec.scheme.signatureHeader",
                "must not be empty",
            ));
        }
        header_name("spec.scheme.signatureHeader", h)?;
    }
    for (name, value) in [
        ("timestampHeader", &s.timestamp_header),
        ("eventIdHeader", &s.event_id_header),
        ("keyIdHeader", &s.key_id_header),
    ] {
        if let Some(h) = value.as_deref().filter(|h| !h.is_empty()) {
            header_name(&format!("spec.scheme.{name}"), h)?;
        }
    }
    let payload = s
        .signed_payload
        .as_deref()
        .unwrap_or(super::defaults::SIGNED_PAYLOAD);
    let template =
        Template::parse(payload).map_err(|e| FieldError::new("spec.scheme.signedPayload", e))?;
    let ts_header = s
        .timestamp_header
        .as_deref()
        .unwrap_or(super::defaults::TIMESTAMP_HEADER);
    if template.uses_timestamp() && ts_header.is_empty() {
        return Err(FieldError::new(
            "spec.scheme.signedPayload",
            "uses {timestamp} but timestampHeader is empty",
        ));
    }
    let id_header = s
        .event_id_header
        .as_deref()
        .unwrap_or(super::defaults::EVENT_ID_HEADER);
    if template.uses_event_id() && id_header.is_empty() {
        return Err(FieldError::new(
            "spec.scheme.signedPayload",
            "uses {event_id} but eventIdHeader is empty",
        ));
    }
    Ok(())
}
