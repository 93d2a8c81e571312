//! Status written by the controller. Never holds key material.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WebhookIntegrationStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The public path the receiver serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<KeyStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_rotation_at: Option<String>,
    /// Inbox figures (controller with `--database-url`), refreshed at most every 30 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letters: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_pending_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_received_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedupe_conflicts: Option<i64>,
}

impl WebhookIntegrationStatus {
    /// Fills the traffic figures from this integration's inbox rows.
    pub fn set_traffic(&mut self, stats: &[crate::inbox::InboxStat]) {
        let waiting = |s: &&crate::inbox::InboxStat| {
            matches!(s.status.as_str(), "pending" | "retry" | "processing")
        };
        self.pending = Some(stats.iter().filter(waiting).map(|s| s.count).sum());
        self.dead_letters = Some(
            stats
                .iter()
                .filter(|s| s.status == "dead_letter")
                .map(|s| s.count)
                .sum(),
        );
        self.oldest_pending_seconds = stats
            .iter()
            .filter(waiting)
            .filter_map(|s| s.oldest_age_seconds)
            .max();
        self.last_received_at = stats
            .iter()
            .filter_map(|s| s.last_received_at)
            .max()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        self.dedupe_conflicts = Some(stats.iter().map(|s| s.dedupe_conflicts).sum());
    }
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    pub id: String,
    /// Active | Retiring | Retired
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retire_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<String>,
}

/// A condition following the Kubernetes API conventions (`metav1.Condition` shape).
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// True | False | Unknown
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
