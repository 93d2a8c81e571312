//! What a worker needs to deliver one integration's events, compiled once with the route.

use crate::crd::defaults;
use crate::crd::validate::{self, FieldError};
use crate::crd::{OrderingSpec, WebhookIntegrationSpec};
use crate::route::Secrets;
use crate::signature::{KeyMaterial, standard_webhooks};
use std::fmt;
use std::time::Duration;

pub struct DeliveryTarget {
    /// `namespace/name`
    pub integration: String,
    /// The integration's namespace: its Services are the destinations `--destinations namespace` allows.
    pub namespace: String,
    /// Parsed once here: every attempt would otherwise parse it (IDNA included) twice.
    pub url: reqwest::Url,
    /// HMAC key (the bytes behind `whsec_`) for Standard Webhooks signatures on deliveries.
    pub signing_secret: Option<Vec<u8>>,
    /// Lower-case header names copied from the original request.
    pub forward_headers: Vec<String>,
    pub timeout: Duration,
    pub schedule: Vec<Duration>,
    pub ordering: Option<OrderingSpec>,
    pub retention_payload: Duration,
    pub retention_dedupe: Duration,
}

// The signing secret must never reach logs.
impl fmt::Debug for DeliveryTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeliveryTarget")
            .field("integration", &self.integration)
            .field("url", &crate::redact::url_origin(self.url.as_str()))
            .field("signed", &self.signing_secret.is_some())
            .field("forward_headers", &self.forward_headers)
            .field("timeout", &self.timeout)
            .field("schedule", &self.schedule)
            .field("ordering", &self.ordering)
            .finish()
    }
}

fn or_default(
    field: &str,
    value: Option<&String>,
    default: Duration,
) -> Result<Duration, FieldError> {
    value.map_or(Ok(default), |v| validate::duration(field, v))
}

/// Compiles the delivery side of a validated spec. `signature_headers` are the scheme's own
/// signature headers, which may never be forwarded.
pub fn compile(
    spec: &WebhookIntegrationSpec,
    namespace: &str,
    integration: &str,
    secrets: &Secrets,
    signature_headers: &[&str],
) -> Result<DeliveryTarget, FieldError> {
    let d = &spec.delivery;
    let signing_secret = match &d.signing_secret_ref {
        None => None,
        Some(r) => {
            let field = "spec.delivery.signingSecretRef";
            let raw = super::compile::secret_value(secrets, namespace, field, r)?;
            match standard_webhooks::parse_key(raw) {
                Ok(KeyMaterial::Hmac(bytes)) => Some(bytes),
                Ok(KeyMaterial::Ed25519(_) | KeyMaterial::EcdsaP256(_)) => {
                    return Err(FieldError::new(
                        field,
                        "must be a whsec_ (HMAC) secret, not a public key",
                    ));
                }
                Err(e) => return Err(FieldError::new(field, format!("unusable secret: {e}"))),
            }
        }
    };
    let mut forward_headers = Vec::with_capacity(d.forward_headers.len());
    for (i, h) in d.forward_headers.iter().enumerate() {
        let h = h.to_ascii_lowercase();
        if signature_headers.contains(&h.as_str())
            || crate::redact::NEVER_STORED_HEADERS.contains(&h.as_str())
        {
            return Err(FieldError::new(
                format!("spec.delivery.forwardHeaders[{i}]"),
                format!("{h} carries a signature or credential and is never forwarded"),
            ));
        }
        forward_headers.push(h);
    }
    let schedule = match &d.retry {
        Some(r) if !r.schedule.is_empty() => r
            .schedule
            .iter()
            .enumerate()
            .map(|(i, s)| validate::duration(&format!("spec.delivery.retry.schedule[{i}]"), s))
            .collect::<Result<_, _>>()?,
        _ => defaults::retry_schedule(),
    };
    let retention = spec.retention.clone().unwrap_or_default();
    Ok(DeliveryTarget {
        integration: integration.to_string(),
        namespace: namespace.to_string(),
        // Validation has already refused a URL that does not parse.
        url: reqwest::Url::parse(&d.url)
            .map_err(|e| FieldError::new("spec.delivery.url", format!("not a URL: {e}")))?,
        signing_secret,
        forward_headers,
        timeout: or_default(
            "spec.delivery.timeout",
            d.timeout.as_ref(),
            defaults::DELIVERY_TIMEOUT,
        )?,
        schedule,
        ordering: spec.ordering.clone(),
        retention_payload: or_default(
            "spec.retention.payload",
            retention.payload.as_ref(),
            defaults::RETENTION_PAYLOAD,
        )?,
        retention_dedupe: or_default(
            "spec.retention.dedupe",
            retention.dedupe.as_ref(),
            defaults::RETENTION_DEDUPE,
        )?,
    })
}
