//! The largest value each duration and count of the spec accepts. One table, read by the CRD
//! schema (so `kubectl apply` refuses an excess with the field named) and by `validate` (so
//! standalone refuses it at load, before listening), so the two cannot disagree.
//!
//! With these bounds no time computation (nonce expiry, retries, rotation, retention) can leave
//! chrono's range, whatever a manifest says.

use schemars::Schema;
use std::time::Duration;

const DAY: u64 = 24 * 60 * 60;

/// (field, with any `[i]` index removed; maximum). README "Limits" lists the same.
pub const DURATIONS: &[(&str, Duration)] = &[
    ("spec.replay.tolerance", Duration::from_secs(DAY)),
    ("spec.replay.nonceRetention", Duration::from_secs(90 * DAY)),
    ("spec.delivery.timeout", Duration::from_secs(5 * 60)),
    (
        "spec.delivery.retry.schedule",
        Duration::from_secs(30 * DAY),
    ),
    ("spec.retention.payload", Duration::from_secs(3650 * DAY)),
    ("spec.retention.dedupe", Duration::from_secs(3650 * DAY)),
    ("spec.rotation.overlap", Duration::from_secs(365 * DAY)),
    ("spec.rotation.keepRetired", Duration::from_secs(3650 * DAY)),
    ("spec.rotation.every", Duration::from_secs(3650 * DAY)),
    ("spec.catchUp.interval", Duration::from_secs(DAY)),
    // Stripe lists events of the last 30 days only.
    ("spec.catchUp.lookback", Duration::from_secs(30 * DAY)),
];

/// Longest duration string: keeps the schema's validation rule cheap for the API server.
pub const DURATION_MAX_LENGTH: u64 = 32;
pub const MAX_RETRY_STEPS: usize = 32;
pub const MAX_KEYS: usize = 32;
pub const MAX_FORWARD_HEADERS: usize = 32;
pub const MAX_EVENT_PATTERNS: usize = 64;
pub const MAX_EVENT_VERSIONS: usize = 64;
pub const MAX_REQUESTS_PER_SECOND: u32 = 100_000;
pub const MAX_BURST: u32 = 100_000;
/// `spec.sourceRanges`: the providers that publish ranges list a few dozen at most (GitHub's
/// `hooks` about ten); a few hundred is room for a merged list, and keeps each request's
/// linear match trivial.
pub const MAX_SOURCE_RANGES: usize = 256;
/// Longest `spec.sourceRanges` entry: the longest IPv6 text with an IPv4 tail and `/128` is 49.
pub const SOURCE_RANGE_MAX_LENGTH: u64 = 64;

/// The API server's check of one `spec.sourceRanges` entry: an IPv4 address or CIDR exactly
/// (octets 0-255 without leading zeros, prefix 0-32), or the shape of an IPv6 one (hex digits,
/// colons and dots, prefix 0-128). `validate` parses the entry exactly (host bits, IPv4-mapped
/// IPv6, `::` rules). CEL's `isCIDR()` would be exact, but it exists from Kubernetes 1.31 and
/// the chart supports 1.27: a CRD with an unknown function is refused whole.
pub const SOURCE_RANGE_PATTERN: &str = concat!(
    r"^(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(/(3[0-2]|[12]?[0-9]))?",
    r"|[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(/(12[0-8]|1[01][0-9]|[1-9]?[0-9]))?)$"
);

/// Schema transform for `spec.sourceRanges`: bounds every item's length and shape.
pub fn source_ranges(schema: &mut Schema) {
    if let Some(items) = schema.get_mut("items").and_then(|v| v.as_object_mut()) {
        items.insert(
            "maxLength".into(),
            serde_json::Value::from(SOURCE_RANGE_MAX_LENGTH),
        );
        items.insert(
            "pattern".into(),
            serde_json::Value::from(SOURCE_RANGE_PATTERN),
        );
    }
}

/// The maximum of a duration field (`spec.delivery.retry.schedule[3]` looks up the list's).
pub fn max_duration(field: &str) -> Option<Duration> {
    let bare = field.split('[').next().unwrap_or(field);
    DURATIONS.iter().find(|(f, _)| *f == bare).map(|(_, d)| *d)
}

/// `max` as a manifest would write it: `30d`, `24h`, `5m`, `90s`.
pub fn written(max: Duration) -> String {
    let s = max.as_secs();
    match s {
        _ if s.is_multiple_of(DAY) => format!("{}d", s / DAY),
        _ if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s.is_multiple_of(60) => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// A CEL rule bounding a duration string of the CRD grammar (`^([0-9]+(ms|s|m|h|d))+$`) to
/// `max`. CEL's own `duration()` knows no days, so the rule sums the components itself.
fn cel_rule(max: Duration) -> serde_json::Value {
    let unit = |suffix: &str, len: u8, ms: u64| {
        format!("c.endsWith('{suffix}') ? int(c.substring(0, c.size() - {len})) * {ms}")
    };
    let sum = format!(
        "self.findAll('[0-9]+(ms|s|m|h|d)').map(c, {} : {} : {} : {} : int(c.substring(0, c.size() - 1)) * {}).sum()",
        unit("ms", 2, 1),
        unit("s", 1, 1000),
        unit("m", 1, 60_000),
        unit("h", 1, 3_600_000),
        DAY * 1000
    );
    serde_json::json!({
        "rule": format!("{sum} <= {}", max.as_millis()),
        "message": format!("must be at most {}", written(max)),
    })
}

/// Schema transform for a duration field named `field` (as in [`DURATIONS`]).
fn bound(schema: &mut Schema, field: &str) {
    let max = max_duration(field).expect("every duration field has a maximum");
    let length = (
        "maxLength".to_string(),
        serde_json::Value::from(DURATION_MAX_LENGTH),
    );
    let rules = (
        "x-kubernetes-validations".to_string(),
        serde_json::json!([cel_rule(max)]),
    );
    // A list of durations bounds its items.
    if let Some(items) = schema.get_mut("items").and_then(|v| v.as_object_mut()) {
        items.extend([length, rules]);
    } else {
        schema.insert(length.0, length.1);
        schema.insert(rules.0, rules.1);
    }
}

macro_rules! transforms {
    ($($name:ident => $field:literal),* $(,)?) => {
        $(pub fn $name(schema: &mut Schema) { bound(schema, $field) })*
    };
}

transforms! {
    tolerance => "spec.replay.tolerance",
    nonce_retention => "spec.replay.nonceRetention",
    delivery_timeout => "spec.delivery.timeout",
    retry_schedule => "spec.delivery.retry.schedule",
    retention_payload => "spec.retention.payload",
    retention_dedupe => "spec.retention.dedupe",
    rotation_overlap => "spec.rotation.overlap",
    keep_retired => "spec.rotation.keepRetired",
    rotation_every => "spec.rotation.every",
    catch_up_interval => "spec.catchUp.interval",
    catch_up_lookback => "spec.catchUp.lookback",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_field_has_its_maximum_and_indices_are_ignored() {
        assert_eq!(
            max_duration("spec.replay.tolerance"),
            Some(Duration::from_secs(DAY))
        );
        assert_eq!(
            max_duration("spec.delivery.retry.schedule[7]"),
            Some(Duration::from_secs(30 * DAY))
        );
        assert_eq!(max_duration("spec.unknown"), None);
    }

    #[test]
    fn the_cel_rule_names_the_bound_in_milliseconds() {
        let rule = cel_rule(Duration::from_secs(300));
        assert!(
            rule["rule"].as_str().unwrap().ends_with("<= 300000"),
            "{rule}"
        );
        assert_eq!(rule["message"], "must be at most 5m");
    }
}
