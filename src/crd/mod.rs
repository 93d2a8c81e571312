//! The `WebhookIntegration` custom resource (`hookgate.dev/v1alpha1`).
//!
//! Field names are the public contract. Defaults live in [`defaults`] so the CRD schema, the Rust
//! validation and the compiled route agree on them.

pub mod defaults;
mod delivery;
pub mod limits;
mod status;
pub mod validate;

use chrono::{DateTime, Utc};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use delivery::{DeliverySpec, EventFilter, Limits, OrderingSpec, RetentionSpec, RetrySpec};
pub use status::{Condition, KeyStatus, WebhookIntegrationStatus};

/// One provider integration: how its webhooks are signed, which keys may sign them, what to accept
/// and where to deliver it.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq)]
#[kube(
    group = "hookgate.dev",
    version = "v1alpha1",
    kind = "WebhookIntegration",
    namespaced,
    shortname = "whi",
    status = "WebhookIntegrationStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Route","type":"string","jsonPath":".status.route"}"#,
    printcolumn = r#"{"name":"Active-Key","type":"string","jsonPath":".status.keys[?(@.phase==\"Active\")].id"}"#,
    printcolumn = r#"{"name":"Retiring","type":"string","jsonPath":".status.keys[?(@.phase==\"Retiring\")].id"}"#,
    printcolumn = r#"{"name":"Pending","type":"integer","jsonPath":".status.pending"}"#,
    printcolumn = r#"{"name":"DLQ","type":"integer","jsonPath":".status.deadLetters"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "size(self.keys) > 0 || (has(self.rotation) && has(self.rotation.generate) && self.rotation.generate)",
    "message": "keys: at least one key is required unless rotation.generate is true"
}, {
    "rule": "!(has(self.rotation) && has(self.rotation.generate) && self.rotation.generate) || self.scheme.type in ['github', 'slack', 'shopify', 'standard-webhooks', 'hmac-sha256', 'twitch', 'gitlab']",
    "message": "rotation.generate: only for shared-secret schemes whose secret we choose (github, slack, shopify, standard-webhooks, hmac-sha256, twitch, gitlab)"
}, {
    "rule": "!has(self.catchUp) || self.catchUp.provider == self.scheme.type",
    "message": "catchUp.provider must be the integration's own scheme.type (stripe, github or paddle)"
}]))]
pub struct WebhookIntegrationSpec {
    /// Public path of the receiver route. Default: `/hooks/{namespace}/{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^/[A-Za-z0-9._~/-]*$"), length(max = 512))]
    pub path: Option<String>,
    /// How the provider signs its requests.
    pub scheme: SchemeSpec,
    /// Where the event id comes from. Default: the scheme's own (e.g. `X-GitHub-Delivery`, Stripe body `/id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<FieldSource>,
    /// Where the event type comes from. Default: the scheme's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<FieldSource>,
    /// Freshness and replay protection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySpec>,
    /// Keys that may sign, oldest first; the last key that is not retired is the active one.
    /// May be empty only with `rotation.generate`, where the controller adds its own keys.
    // A list map keyed by id: the API server refuses a repeated id, as standalone validation does.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    #[schemars(length(max = limits::MAX_KEYS))]
    pub keys: Vec<KeySpec>,
    /// Which event types are delivered; others are recorded as `ignored`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventFilter>,
    /// Where accepted events go.
    pub delivery: DeliverySpec,
    /// Per-route request limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Client addresses allowed to call the route: IPv4 or IPv6 CIDRs (`192.0.2.0/24`,
    /// `2001:db8::/32`) or single addresses. Others get 403 before their signature is checked.
    /// Empty or absent: every address. Behind proxies, see the receiver's `--trusted-proxies`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::MAX_SOURCE_RANGES), transform = limits::source_ranges)]
    pub source_ranges: Vec<String>,
    /// Deliver events of one resource in version order; older versions are ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<OrderingSpec>,
    /// How long finished events keep their body and their dedupe key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionSpec>,
    /// Staged key rotation (controller only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<RotationSpec>,
    /// Pull the provider's event list on a schedule and store what the inbox never received
    /// (workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUpSpec>,
}

impl WebhookIntegrationSpec {
    /// Every Secret key the spec reads: the keys, the delivery signing secret, Meta's verify token.
    pub fn secret_refs(&self) -> Vec<&SecretKeyRef> {
        let mut refs: Vec<&SecretKeyRef> = self.keys.iter().map(|k| &k.secret_ref).collect();
        refs.extend(&self.delivery.signing_secret_ref);
        refs.extend(&self.scheme.verify_token_ref);
        refs.extend(self.catch_up.as_ref().map(|c| &c.credential_ref));
        refs
    }
}

/// Which provider API catch-up reads. Each must be the integration's own scheme.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CatchUpProvider {
    /// `GET /v1/events` with the secret (or restricted) key.
    Stripe,
    /// A repository webhook's deliveries; missing ones are redelivered through the API.
    Github,
    /// `GET /events` with an API key.
    Paddle,
}

/// Catch-up with the provider's API: on every `interval`, list the events of the last `lookback`
/// and store (Stripe, Paddle) or have redelivered (GitHub) those the inbox does not hold.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(self.provider == 'github') == has(self.github)",
    "message": "github is required for provider github and applies only to it"
}]))]
pub struct CatchUpSpec {
    pub provider: CatchUpProvider,
    /// Secret key holding the API credential: Stripe secret or restricted key (read access to
    /// events), GitHub token (repository hooks: read and write), Paddle API key. Never logged.
    pub credential_ref: SecretKeyRef,
    /// How often to catch up. Default `10m`; at least `1m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::catch_up_interval)]
    pub interval: Option<String>,
    /// How far back each run looks. Default `72h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::catch_up_lookback)]
    pub lookback: Option<String>,
    /// The API's base URL, for tests and private endpoints: `https://…`, or `http://` to a
    /// loopback host only (127.0.0.1, ::1, localhost). Default: the provider's public API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^?#]+$"), length(max = 2048))]
    pub api_base_url: Option<String>,
    /// Provider `github`: the repository webhook whose deliveries to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GithubCatchUp>,
}

/// A repository webhook. GitHub App webhooks (which need an App JWT) are not supported yet.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GithubCatchUp {
    /// `owner/repo`.
    #[schemars(
        regex(pattern = r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"),
        length(max = 201)
    )]
    pub repository: String,
    /// The webhook's id (Settings > Webhooks, the number in the hook's URL).
    #[schemars(range(min = 1), extend("format" = "int64"))]
    pub hook_id: u64,
}

/// How the controller moves keys through Active -> Retiring -> Retired.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RotationSpec {
    /// How long a superseded key stays accepted (Retiring) when it has no `retireAt`. Default `72h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::rotation_overlap)]
    pub overlap: Option<String>,
    /// How long Retired keys stay listed in status, for rollback. Default `7d`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::keep_retired)]
    pub keep_retired: Option<String>,
    /// The controller generates and owns the signing secret (`<name>-signing-keys`); HMAC schemes only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub generate: bool,
    /// With `generate`: rotate automatically this often, e.g. `720h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::rotation_every)]
    pub every: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SchemeType {
    Stripe,
    Github,
    StandardWebhooks,
    Slack,
    Shopify,
    HmacSha256,
    Ed25519,
    Discord,
    Twilio,
    Twitch,
    Zoom,
    Meta,
    Gitlab,
    Paddle,
    Square,
    Sendgrid,
    Linear,
}

/// The signature scheme. The header and payload fields apply to `hmac-sha256` and `ed25519` only.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.type in ['hmac-sha256', 'ed25519'] || !(has(self.signatureHeader) || has(self.timestampHeader) || has(self.eventIdHeader) || has(self.keyIdHeader) || has(self.signedPayload) || has(self.encoding) || has(self.signaturePrefix))",
    "message": "signatureHeader, timestampHeader, eventIdHeader, keyIdHeader, signedPayload, encoding and signaturePrefix apply only to type hmac-sha256 or ed25519"
}, {
    "rule": "(self.type in ['twilio', 'square']) == has(self.publicUrl)",
    "message": "publicUrl is required for type twilio and square (the exact URL configured at the provider) and applies only to them"
}, {
    "rule": "(self.type == 'meta') == has(self.verifyTokenRef)",
    "message": "verifyTokenRef is required for type meta and applies only to it"
}]))]
pub struct SchemeSpec {
    #[serde(rename = "type")]
    pub type_: SchemeType,
    /// Header with the signature. Default `X-Signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_header: Option<String>,
    /// Header with the unix-seconds timestamp. Default `X-Timestamp`; empty = provider sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    /// Header with the event id used in `signedPayload`. Default `X-Event-Id`; empty = none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id_header: Option<String>,
    /// Header naming the signing key. Default `X-Key-Id`; empty = try every accepted key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id_header: Option<String>,
    /// What is signed. Placeholders: `{timestamp}`, `{event_id}`, `{body}` (raw header values).
    /// Default `{timestamp}.{event_id}.{body}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_payload: Option<String>,
    /// Signature encoding. Default `hex` (`base64` for ed25519).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<SignatureEncoding>,
    /// Text before the encoded signature, e.g. `sha256=`. Default empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_prefix: Option<String>,
    /// `twilio` and `square` only: the exact public URL configured at the provider (scheme, host,
    /// port and path, no query), which the provider signs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^https?://[^?#]+$"), length(max = 2048))]
    pub public_url: Option<String>,
    /// `meta` only: the Secret key holding the verify token entered in the Meta app dashboard,
    /// answered on `GET ?hub.mode=subscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_token_ref: Option<SecretKeyRef>,
}

#[derive(Deserialize, Serialize, Clone, Copy, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SignatureEncoding {
    Hex,
    Base64,
}

/// A value taken from a request header or from the JSON body.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.header) != has(self.jsonPointer)",
    "message": "set exactly one of header or jsonPointer"
}]))]
pub struct FieldSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// RFC 6901 pointer into the JSON body, e.g. `/id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(/.*)?$"))]
    pub json_pointer: Option<String>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplaySpec {
    /// Maximum |now - signed timestamp|, e.g. `5m`. Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::tolerance)]
    pub tolerance: Option<String>,
    /// How long a signature is remembered to catch re-sent captures. Default `24h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(ms|s|m|h|d))+$"), transform = limits::nonce_retention)]
    pub nonce_retention: Option<String>,
}

/// One key in the ring, read from a Secret in the integration's namespace.
#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KeySpec {
    #[schemars(regex(pattern = r"^[A-Za-z0-9._-]{1,64}$"))]
    pub id: String,
    pub secret_ref: SecretKeyRef,
    /// After this instant the key is rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire_at: Option<DateTime<Utc>>,
}

#[derive(Deserialize, Serialize, Clone, Debug, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}
