//! The rules every stored event field follows, wherever the event came from (a webhook through
//! the receiver, or the provider's API through catch-up): which types pass `events.allow`, how a
//! JSON value becomes a field, and which fields can be stored at all.

use crate::crd::WebhookIntegrationSpec;
use serde_json::Value;
use wildmatch::WildMatch;

/// Longest event id or type we store; longer ones are refused rather than truncated.
pub const MAX_FIELD_LEN: usize = 512;

/// Whether an event id or type can be stored as text. Control characters (NUL above all) are
/// refused as a bad request rather than let the database turn them into a 503.
pub fn storable(field: &str) -> bool {
    field.len() <= MAX_FIELD_LEN && !field.chars().any(char::is_control)
}

/// The value at RFC 6901 `pointer`: strings as they are, numbers in decimal, nothing else.
pub fn pointer_value(json: &Value, pointer: &str) -> Option<String> {
    super::json_pointers::Found::from(json.pointer(pointer)?).text()
}

/// `spec.events.allow`, compiled. An empty list means no filter, as leaving `events` out does.
#[derive(Debug, Clone, Default)]
pub struct EventFilter(Option<Vec<WildMatch>>);

impl EventFilter {
    pub fn of(spec: &WebhookIntegrationSpec) -> Self {
        Self(
            spec.events
                .as_ref()
                .filter(|e| !e.allow.is_empty())
                .map(|e| e.allow.iter().map(|p| WildMatch::new(p)).collect()),
        )
    }

    /// Whether no filter applies.
    pub fn is_open(&self) -> bool {
        self.0.is_none()
    }

    /// Whether `event_type` passes. A missing type passes only without a filter.
    pub fn allows(&self, event_type: Option<&str>) -> bool {
        match (&self.0, event_type) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(patterns), Some(t)) => patterns.iter().any(|p| p.matches(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_and_numbers_become_fields_and_nothing_else_does() {
        let j = json!({"s": "evt_1", "n": 42, "f": 1.5, "b": true, "o": {}, "z": null});
        assert_eq!(pointer_value(&j, "/s").as_deref(), Some("evt_1"));
        assert_eq!(pointer_value(&j, "/n").as_deref(), Some("42"));
        assert_eq!(pointer_value(&j, "/f").as_deref(), Some("1.5"));
        for p in ["/b", "/o", "/z", "/missing"] {
            assert_eq!(pointer_value(&j, p), None, "{p}");
        }
    }
}
