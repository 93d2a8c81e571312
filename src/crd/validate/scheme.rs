//! Checks of `spec.scheme` and the keys it needs.

use super::*;

pub(super) fn scheme(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
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
        .unwrap_or(crate::crd::defaults::SIGNED_PAYLOAD);
    let template =
        Template::parse(payload).map_err(|e| FieldError::new("spec.scheme.signedPayload", e))?;
    let ts_header = s
        .timestamp_header
        .as_deref()
        .unwrap_or(crate::crd::defaults::TIMESTAMP_HEADER);
    if template.uses_timestamp() && ts_header.is_empty() {
        return Err(FieldError::new(
            "spec.scheme.signedPayload",
            "uses {timestamp} but timestampHeader is empty",
        ));
    }
    if !ts_header.is_empty() && !template.uses_timestamp() {
        // The freshness window would check a value nobody signed: a captured request replays
        // forever with a new timestamp header.
        return Err(FieldError::new(
            "spec.scheme.signedPayload",
            format!(
                "does not include {{timestamp}}, so the {ts_header} header is not signed: add \
                 {{timestamp}}, or set timestampHeader: \"\" if the provider sends none"
            ),
        ));
    }
    let id_header = s
        .event_id_header
        .as_deref()
        .unwrap_or(crate::crd::defaults::EVENT_ID_HEADER);
    if template.uses_event_id() && id_header.is_empty() {
        return Err(FieldError::new(
            "spec.scheme.signedPayload",
            "uses {event_id} but eventIdHeader is empty",
        ));
    }
    Ok(())
}
