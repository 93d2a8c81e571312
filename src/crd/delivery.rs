//! What a `WebhookIntegration` accepts and how it delivers: the event filter, the destination,
//! retries, ordering, retention and the per-integration limits.

use super::{SecretKeyRef, limits};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.versionPointer) == (has(self.supported) && size(self.supported) > 0)",
    "message": "versionPointer and a non-empty supported list go together"
}]))]
pub struct EventFilter {
    /// Glob patterns (`*` matches any run of characters, `?` one).
    #[serde(default)]
    #[schemars(length(max = limits::MAX_EVENT_PATTERNS))]
    pub allow: Vec<String>,
    /// RFC 6901 pointer to the event's version in the JSON body, e.g. Stripe's `/api_version`.
    /// An event whose version is not in `supported` (or that has none) is stored, answered 200,
    /// and dead-lettered with `unsupported_event_version`: never delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^/.*$"), length(max = 512))]
    pub version_pointer: Option<String>,
    /// The versions delivered, compared as text (a number in its JSON form, `2` or `2.1`).
    /// Required, and only allowed, with `versionPointer`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::MAX_EVENT_VERSIONS), inner(length(min = 1, max = 512)))]
    pub supported: Vec<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeliverySpec {
    /// http(s) URL that receives the events.
    #[schemars(regex(pattern = r"^https?://.+"))]
    pub url: String,
    /// Secret key holding a Standard Webhooks secret (`whsec_` + base64) used to sign every
    /// delivery (`webhook-id`, `webhook-timestamp`, `webhook-signature`). Unset: no signature headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret_ref: Option<SecretKeyRef>,
    /// Original request headers passed through to the destination (never the provider's signature).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::MAX_FORWARD_HEADERS))]
    pub forward_headers: Vec<String>,
    /// Per-attempt timeout, e.g. `10s`. Default `10s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::delivery_timeout)]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RetrySpec {
    /// Delay before each retry; an event gets one attempt plus one per entry, then is
    /// dead-lettered. Default `[30s, 2m, 10m, 1h, 6h, 24h]`; each delay gets ±10 % jitter.
    #[serde(default)]
    #[schemars(inner(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$")), length(max = limits::MAX_RETRY_STEPS), transform = limits::retry_schedule)]
    pub schedule: Vec<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OrderingSpec {
    /// JSON pointer to the resource id in the body, e.g. `/data/object/id`.
    #[schemars(regex(pattern = r"^/.*$"))]
    pub resource_id_pointer: String,
    /// JSON pointer to the version: an integer or an RFC 3339 timestamp, e.g. `/data/version`.
    #[schemars(regex(pattern = r"^/.*$"))]
    pub version_pointer: String,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RetentionSpec {
    /// Bodies of processed and ignored events are dropped after this. Default `7d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::retention_payload)]
    pub payload: Option<String>,
    /// Processed and ignored events (and so their dedupe keys) are deleted after this. Default `30d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::retention_dedupe)]
    pub dedupe: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Largest accepted body in bytes. Default 1048576 (1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // Kubernetes knows int32/int64 only; it warns on schemars' uint formats at every apply.
    #[schemars(range(min = 1, max = 67108864), extend("format" = "int64"))]
    pub max_body_bytes: Option<u64>,
    /// Sustained requests per second for this route. Default: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_REQUESTS_PER_SECOND), extend("format" = "int32"))]
    pub requests_per_second: Option<u32>,
    /// Requests allowed in a burst above the rate. Default: `requestsPerSecond`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = limits::MAX_BURST), extend("format" = "int32"))]
    pub burst: Option<u32>,
}
