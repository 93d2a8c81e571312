//! Checks of the fields only the workers read.

use super::*;

/// Fields only the workers read: delivery timing, forwarded headers, ordering, retention.
pub(super) fn worker_fields(spec: &WebhookIntegrationSpec) -> Result<(), FieldError> {
    let d = &spec.delivery;
    if let Some(t) = &d.timeout {
        duration("spec.delivery.timeout", t)?;
    }
    for (i, h) in d.forward_headers.iter().enumerate() {
        header_name(&format!("spec.delivery.forwardHeaders[{i}]"), h)?;
    }
    if let Some(r) = &d.retry {
        for (i, step) in r.schedule.iter().enumerate() {
            duration(&format!("spec.delivery.retry.schedule[{i}]"), step)?;
        }
    }
    if let Some(o) = &spec.ordering {
        for (name, p) in [
            ("resourceIdPointer", &o.resource_id_pointer),
            ("versionPointer", &o.version_pointer),
        ] {
            if !p.starts_with('/') {
                return Err(FieldError::new(
                    format!("spec.ordering.{name}"),
                    "must be a JSON pointer starting with '/'",
                ));
            }
        }
    }
    if let Some(r) = &spec.retention {
        if let Some(v) = &r.payload {
            duration("spec.retention.payload", v)?;
        }
        if let Some(v) = &r.dedupe {
            duration("spec.retention.dedupe", v)?;
        }
    }
    Ok(())
}
