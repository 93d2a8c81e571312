//! `events.versionPointer` and `events.supported`: which event versions an integration delivers.
//! Decided after verification, on the parsed body; an event of another version is still stored
//! (it is authentic) but goes straight to the dead letters, never to the destination.

use super::json_pointers::Found;
use std::collections::HashSet;

/// The reason recorded (as `last_error`) on an event of an unsupported version.
pub const UNSUPPORTED: &str = "unsupported_event_version";

/// Longest version text quoted in the recorded reason; a longer one is only called too long.
const MAX_QUOTED: usize = 128;

/// The compiled version rule of one route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub pointer: String,
    pub supported: HashSet<String>,
}

impl Versions {
    /// `spec.events.versionPointer` and `supported` of a validated spec; `None` without a pointer.
    pub fn of(spec: &crate::crd::WebhookIntegrationSpec) -> Option<Self> {
        let events = spec.events.as_ref()?;
        Some(Self {
            pointer: events.version_pointer.clone()?,
            supported: events.supported.iter().cloned().collect(),
        })
    }

    /// `None` when the event may be delivered; otherwise the reason to record, starting with
    /// [`UNSUPPORTED`]. A body that is not JSON, or has no version at the pointer, or a version
    /// that is neither a string nor a number, is unsupported: nothing says it is one we know.
    /// `version` is what the body holds at [`Versions::pointer`].
    pub fn refuse(&self, version: Option<&Found>) -> Option<String> {
        let version = match version {
            // Numbers in their JSON form: `2`, `2.1`; `supported: ["2"]` matches 2.
            Some(found) => match found.text() {
                Some(v) => v,
                None => return Some(format!("{UNSUPPORTED}: not a string or number")),
            },
            None => return Some(format!("{UNSUPPORTED}: missing")),
        };
        if self.supported.contains(&version) {
            return None;
        }
        let printable = version.len() <= MAX_QUOTED && !version.chars().any(char::is_control);
        Some(if printable {
            format!("{UNSUPPORTED}: {version:?}")
        } else {
            format!("{UNSUPPORTED}: too long or not printable")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn stripe() -> Versions {
        Versions {
            pointer: "/api_version".into(),
            supported: ["2024-06-20", "2", "1.5"].map(String::from).into(),
        }
    }

    #[test]
    fn only_supported_versions_pass_and_the_reason_names_the_version() {
        let long = "x".repeat(MAX_QUOTED + 1);
        let table: Vec<(Option<Value>, Option<&str>)> = vec![
            (Some(json!({"api_version": "2024-06-20"})), None),
            (Some(json!({"api_version": 2})), None),
            (Some(json!({"api_version": 1.5})), None),
            (
                Some(json!({"api_version": "2023-10-16"})),
                Some("unsupported_event_version: \"2023-10-16\""),
            ),
            (
                Some(json!({"api_version": 3})),
                Some("unsupported_event_version: \"3\""),
            ),
            // Text, not numbers: "2.0" is not "2".
            (
                Some(json!({"api_version": "2.0"})),
                Some("unsupported_event_version: \"2.0\""),
            ),
            (
                Some(json!({"api_version": 2.0})),
                Some("unsupported_event_version: \"2.0\""),
            ),
            (
                Some(json!({"id": "evt"})),
                Some("unsupported_event_version: missing"),
            ),
            (
                Some(json!({"api_version": null})),
                Some("unsupported_event_version: not a string or number"),
            ),
            (
                Some(json!({"api_version": ["2"]})),
                Some("unsupported_event_version: not a string or number"),
            ),
            (Some(json!("2")), Some("unsupported_event_version: missing")),
            (None, Some("unsupported_event_version: missing")),
            (
                Some(json!({"api_version": long})),
                Some("unsupported_event_version: too long or not printable"),
            ),
            (
                Some(json!({"api_version": "a\nb"})),
                Some("unsupported_event_version: too long or not printable"),
            ),
        ];
        for (body, reason) in table {
            assert_eq!(
                stripe()
                    .refuse(
                        body.as_ref()
                            .and_then(|j| j.pointer("/api_version"))
                            .map(Found::from)
                            .as_ref()
                    )
                    .as_deref(),
                reason,
                "{body:?}"
            );
        }
    }
}
