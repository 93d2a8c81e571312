//! Checks of `spec.scheme` and the keys it needs.

use super::*;

pub(super) fn scheme(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
    let s = &spec.scheme;
    let wants_url = matches!(s.type_, SchemeType::Twilio | SchemeType::Square);
    match (&s.public_url, wants_url) {
        (None, true) => {
            return Err(FieldError::new(
                "spec.scheme.publicUrl",
                "required for twilio and square: the exact URL configured at the provider, which it signs",
            ));
        }
        (Some(_), false) => {
            return Err(FieldError::new(
                "spec.scheme.publicUrl",
                "applies only to type twilio or square",
            ));
        }
        (Some(url), true) => public_url(url)?,
        (None, false) => {}
    }
    match (&s.verify_token_ref, s.type_ == SchemeType::Meta) {
        (None, true) => {
            return Err(FieldError::new(
                "spec.scheme.verifyTokenRef",
                "required for meta: the Secret key holding the verify token set in the Meta app",
            ));
        }
        (Some(_), false) => {
            return Err(FieldError::new(
                "spec.scheme.verifyTokenRef",
                "applies only to type meta",
            ));
        }
        (Some(r), true) => secret_ref("spec.scheme.verifyTokenRef", r)?,
        (None, false) => {}
    }
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

/// An absolute http(s) URL without query or fragment: the provider signs it byte for byte, and
/// the request's query string is appended to it at verification.
fn public_url(url: &str) -> Result<(), FieldError> {
    let field = "spec.scheme.publicUrl";
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Err(FieldError::new(
            field,
            "must start with https:// or http://",
        ));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(FieldError::new(field, "must name a host"));
    }
    if url.len() > 2048 || !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(FieldError::new(
            field,
            "must be at most 2048 visible ASCII characters",
        ));
    }
    if url.contains(['?', '#']) {
        return Err(FieldError::new(
            field,
            "must not carry a query or fragment: the request's own query string is appended",
        ));
    }
    Ok(())
}

fn secret_ref(field: &str, r: &crate::crd::SecretKeyRef) -> Result<(), FieldError> {
    if r.name.is_empty() || r.name.len() > 253 {
        return Err(FieldError::new(
            format!("{field}.name"),
            "must be 1-253 characters",
        ));
    }
    if r.key.is_empty() || r.key.len() > 253 {
        return Err(FieldError::new(
            format!("{field}.key"),
            "must be 1-253 characters",
        ));
    }
    Ok(())
}
