//! Defaults users should not have to type. One place, so schema docs, validation and the compiled
//! route cannot drift apart.

use super::SchemeType;
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
/// `spec.catchUp.interval` when unset, and the shortest accepted: providers rate-limit their APIs.
pub const CATCH_UP_INTERVAL: Duration = Duration::from_secs(10 * 60);
pub const CATCH_UP_MIN_INTERVAL: Duration = Duration::from_secs(60);
/// `spec.catchUp.lookback` when unset: as long as Stripe and GitHub retry a failed delivery.
pub const CATCH_UP_LOOKBACK: Duration = Duration::from_secs(72 * 60 * 60);
/// Events younger than this are left to the webhook probably in flight: catching them up would
/// be harmless (dedupe) but would count them as missing when they are not.
pub const CATCH_UP_SETTLE: Duration = Duration::from_secs(2 * 60);
/// Passes of different integrations a worker process runs at once (`--catch-up-passes`): a
/// provider that hangs or rate-limits holds up its own integration's pass, not the others'.
pub const CATCH_UP_PASSES: usize = 4;
/// The most `--catch-up-passes` accepts.
pub const CATCH_UP_MAX_PASSES: usize = 256;

/// `spec.catchUp.apiBaseUrl` when unset: the provider's public API.
pub fn catch_up_api(provider: super::CatchUpProvider) -> &'static str {
    match provider {
        super::CatchUpProvider::Stripe => "https://api.stripe.com",
        super::CatchUpProvider::Github => "https://api.github.com",
        super::CatchUpProvider::Paddle => "https://api.paddle.com",
    }
}

/// `/hooks/{namespace}/{name}`
pub fn path(namespace: &str, name: &str) -> String {
    format!("/hooks/{namespace}/{name}")
}

/// Where a scheme reads an event's id or type when the spec does not say. A list of these is
/// tried in order; the first present wins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DefaultSource {
    Header(String),
    Pointer(&'static str),
    /// A parameter of a form-encoded body.
    Form(&'static str),
    /// The hex SHA-256 of the signature that matched: for providers that send no event id, a
    /// re-sent request is then a duplicate of the first.
    SignatureDigest,
}

use DefaultSource::{Form, Header, Pointer, SignatureDigest};

fn header(name: &str) -> DefaultSource {
    Header(name.to_string())
}

/// The event id as each provider documents it. For the generic schemes it is the event id header
/// when one is configured, else the body's `/id`.
pub fn event_id(scheme: SchemeType, generic_event_id_header: Option<&str>) -> Vec<DefaultSource> {
    match scheme {
        SchemeType::Stripe => vec![Pointer("/id")],
        SchemeType::Github => vec![header("X-GitHub-Delivery")],
        // Svix sends the same headers under its own prefix.
        SchemeType::StandardWebhooks => vec![header("webhook-id"), header("svix-id")],
        SchemeType::Slack => vec![Pointer("/event_id")],
        SchemeType::Shopify => vec![header("X-Shopify-Webhook-Id")],
        SchemeType::HmacSha256 | SchemeType::Ed25519 => match generic_event_id_header {
            Some(h) => vec![Header(h.to_string())],
            None => vec![Pointer("/id")],
        },
        SchemeType::Discord => vec![Pointer("/id"), SignatureDigest],
        SchemeType::Twilio => vec![header("I-Twilio-Idempotency-Token"), SignatureDigest],
        SchemeType::Twitch => vec![header("Twitch-Eventsub-Message-Id")],
        SchemeType::Zoom | SchemeType::Meta | SchemeType::Sendgrid => vec![SignatureDigest],
        SchemeType::Gitlab => vec![header("X-Gitlab-Event-UUID")],
        SchemeType::Paddle => vec![Pointer("/event_id")],
        SchemeType::Square => vec![Pointer("/event_id")],
        SchemeType::Linear => vec![header("Linear-Delivery")],
    }
}

/// The event type as each provider documents it; empty when the provider has none.
pub fn event_type(scheme: SchemeType) -> Vec<DefaultSource> {
    match scheme {
        SchemeType::Github => vec![header("X-GitHub-Event")],
        SchemeType::Shopify => vec![header("X-Shopify-Topic")],
        SchemeType::Slack => vec![Pointer("/event/type")],
        SchemeType::Stripe
        | SchemeType::StandardWebhooks
        | SchemeType::HmacSha256
        | SchemeType::Ed25519
        | SchemeType::Square => vec![Pointer("/type")],
        // A webhook event's type is `/event/type`; an interaction has only the numeric `/type`.
        SchemeType::Discord => vec![Pointer("/event/type"), Pointer("/type")],
        SchemeType::Twilio => vec![Form("EventType")],
        SchemeType::Twitch => vec![header("Twitch-Eventsub-Subscription-Type")],
        SchemeType::Zoom => vec![Pointer("/event")],
        SchemeType::Meta => vec![Pointer("/object")],
        SchemeType::Gitlab => vec![header("X-Gitlab-Event")],
        SchemeType::Paddle => vec![Pointer("/event_type")],
        // The body is an array of events, each with its own type.
        SchemeType::Sendgrid => vec![],
        SchemeType::Linear => vec![header("Linear-Event")],
    }
}

/// `spec.replay.tolerance` when unset: the provider's own window where it documents one.
pub fn tolerance(scheme: SchemeType) -> Duration {
    match scheme {
        SchemeType::Twitch => Duration::from_secs(10 * 60),
        SchemeType::Linear => Duration::from_secs(60),
        _ => TOLERANCE,
    }
}
