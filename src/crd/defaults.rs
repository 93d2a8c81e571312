//! Defaults users should not have to type. One place, so schema docs, validation and the compiled
//! route cannot drift apart.

use super::{FieldSource, SchemeType};
use std::time::Duration;

pub const TOLERANCE: Duration = Duration::from_secs(5 * 60);
pub const NONCE_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);
pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
pub const SIGNATURE_HEADER: &str = "X-Signature";
pub const TIMESTAMP_HEADER: &str = "X-Timestamp";
pub const EVENT_ID_HEADER: &str = "X-Event-Id";
pub const KEY_ID_HEADER: &str = "X-Key-Id";
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
pub const RETENTION_PAYLOAD: Duration = Duration::from_secs(7 * 24 * 60 * 60);
pub const RETENTION_DEDUPE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// `spec.delivery.retry.schedule` when unset.
pub fn retry_schedule() -> Vec<Duration> {
    [30, 2 * 60, 10 * 60, 60 * 60, 6 * 60 * 60, 24 * 60 * 60]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(72 * 60 * 60);
pub const KEEP_RETIRED: Duration = Duration::from_secs(7 * 24 * 60 * 60);
pub const SIGNED_PAYLOAD: &str = "{timestamp}.{event_id}.{body}";

/// `/hooks/{namespace}/{name}`
pub fn path(namespace: &str, name: &str) -> String {
    format!("/hooks/{namespace}/{name}")
}

fn header(h: &str) -> FieldSource {
    FieldSource {
        header: Some(h.into()),
        json_pointer: None,
    }
}

fn pointer(p: &str) -> FieldSource {
    FieldSource {
        header: None,
        json_pointer: Some(p.into()),
    }
}

/// The event id as each provider documents it. For the generic schemes it is the event id header
/// when one is configured, else the body's `/id`.
pub fn event_id(scheme: SchemeType, generic_event_id_header: Option<&str>) -> FieldSource {
    match scheme {
        SchemeType::Stripe => pointer("/id"),
        SchemeType::Github => header("X-GitHub-Delivery"),
        SchemeType::StandardWebhooks => header("webhook-id"),
        SchemeType::Slack => pointer("/event_id"),
        SchemeType::Shopify => header("X-Shopify-Webhook-Id"),
        SchemeType::HmacSha256 | SchemeType::Ed25519 => match generic_event_id_header {
            Some(h) => header(h),
            None => pointer("/id"),
        },
    }
}

/// The event type as each provider documents it.
pub fn event_type(scheme: SchemeType) -> FieldSource {
    match scheme {
        SchemeType::Github => header("X-GitHub-Event"),
        SchemeType::Shopify => header("X-Shopify-Topic"),
        SchemeType::Slack => pointer("/event/type"),
        SchemeType::Stripe
        | SchemeType::StandardWebhooks
        | SchemeType::HmacSha256
        | SchemeType::Ed25519 => pointer("/type"),
    }
}
