//! How `hookgate dlq` prints: tables, one event in full, bodies shown safely.

use super::*;

pub(super) fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(super) fn opt_time(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map_or_else(|| "-".to_string(), time)
}

/// Control characters (terminal escapes, line breaks) as visible escapes, for one-line cells.
pub(super) fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

/// Like [`one_line`] but keeps line breaks and tabs, for a body printed as text.
pub(super) fn printable(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_control() && !matches!(c, '\n' | '\t') {
                Box::new(c.escape_default())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

pub(super) fn list_table(rows: &[DeadLetter]) -> String {
    let mut out = format!(
        "{:<6} {:<28} {:<36} {:<32} {:<8} {:<20} {}\n",
        "ID", "INTEGRATION", "EVENT_ID", "TYPE", "ATTEMPTS", "DEAD_LETTERED", "LAST_ERROR"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<6} {:<28} {:<36} {:<32} {:<8} {:<20} {}\n",
            r.id,
            one_line(&r.integration),
            one_line(&r.event_id),
            one_line(r.event_type.as_deref().unwrap_or("-")),
            r.attempts,
            opt_time(&r.dead_lettered_at),
            one_line(r.last_error.as_deref().unwrap_or("-")),
        ));
    }
    out
}

pub(super) fn audit_table(rows: &[AuditRecord]) -> String {
    let mut out = format!(
        "{:<6} {:<20} {:<7} {:<32} {:<10} {:<6} {}\n",
        "ID", "AT", "ACTION", "ACTOR", "SOURCE", "EVENTS", "SELECTOR"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<6} {:<20} {:<7} {:<32} {:<10} {:<6} {}\n",
            r.id,
            time(&r.at),
            one_line(&r.action),
            one_line(&r.actor),
            r.actor_source.as_str(),
            r.event_count,
            one_line(&r.selector),
        ));
    }
    out
}

/// The body as it is shown: `(text, "utf-8")`, or `(base64, "base64")` when it is not UTF-8.
pub(super) fn body_repr(body: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(body) {
        Ok(text) => (text.to_string(), "utf-8"),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(body),
            "base64",
        ),
    }
}

/// The event as one JSON object: `body` is the text (or base64, see `body_encoding`), and
/// `attempts` the delivery history.
pub(super) fn show_json(ev: &EventDetail) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(ev)?;
    let obj = v.as_object_mut().context("event detail is an object")?;
    obj.remove("body_base64");
    let (body, encoding) = body_repr(&ev.body);
    obj.insert("body".into(), body.into());
    obj.insert("body_encoding".into(), encoding.into());
    Ok(v)
}

pub(super) fn show_text(ev: &EventDetail) -> String {
    let mut out = String::new();
    let mut field = |name: &str, value: String| {
        out.push_str(&format!("{:<18}{}\n", format!("{name}:"), value));
    };
    field("id", ev.id.to_string());
    field("integration", one_line(&ev.integration));
    field("event_id", one_line(&ev.event_id));
    field(
        "event_type",
        one_line(ev.event_type.as_deref().unwrap_or("-")),
    );
    field("status", ev.status.clone());
    field("scheme", ev.scheme.clone());
    field("key_id", one_line(&ev.key_id));
    field("signed_at", opt_time(&ev.signed_at));
    field("received_at", time(&ev.received_at));
    field("attempts", ev.attempt_count.to_string());
    field("next_attempt_at", opt_time(&ev.next_attempt_at));
    field("locked_until", opt_time(&ev.locked_until));
    field("processed_at", opt_time(&ev.processed_at));
    field("dead_lettered_at", opt_time(&ev.dead_lettered_at));
    if let Some(reason) = &ev.ignored_reason {
        field("ignored_reason", one_line(reason));
    }
    field(
        "last_error",
        one_line(ev.last_error.as_deref().unwrap_or("-")),
    );
    field("dedupe_conflicts", ev.dedupe_conflicts.to_string());
    field(
        "content_type",
        one_line(ev.content_type.as_deref().unwrap_or("-")),
    );
    field("body_sha256", ev.body_sha256.clone());

    out.push_str("headers:\n");
    match ev.headers.as_array() {
        Some(pairs) if pairs.is_empty() => out.push_str("  (none)\n"),
        Some(pairs) => {
            for pair in pairs {
                match pair.as_array().map(Vec::as_slice) {
                    Some([serde_json::Value::String(k), serde_json::Value::String(v)]) => {
                        out.push_str(&format!("  {}: {}\n", one_line(k), one_line(v)));
                    }
                    _ => out.push_str(&format!("  {}\n", one_line(&pair.to_string()))),
                }
            }
        }
        None => out.push_str(&format!("  {}\n", one_line(&ev.headers.to_string()))),
    }

    match ev.body_purged_at {
        Some(at) => out.push_str(&format!(
            "body: purged at {} (retention); the SHA-256 above is of the original\n",
            time(&at)
        )),
        None => {
            let (body, encoding) = body_repr(&ev.body);
            let body = if encoding == "utf-8" {
                printable(&body)
            } else {
                body
            };
            out.push_str(&format!("body ({} bytes, {encoding}):\n", ev.body.len()));
            out.push_str(&body);
            if !body.ends_with('\n') {
                out.push('\n');
            }
        }
    }

    out.push_str(&format!("delivery attempts ({}):\n", ev.attempts.len()));
    if !ev.attempts.is_empty() {
        out.push_str(&format!(
            "  {:<8} {:<20} {:<11} {:<6} {:<12} {}\n",
            "ATTEMPT", "STARTED", "DURATION_MS", "STATUS", "OUTCOME", "ERROR"
        ));
        for a in &ev.attempts {
            out.push_str(&format!(
                "  {:<8} {:<20} {:<11} {:<6} {:<12} {}\n",
                a.attempt,
                time(&a.started_at),
                a.duration_ms,
                a.status_code.map_or_else(|| "-".into(), |c| c.to_string()),
                one_line(&a.outcome),
                one_line(a.error.as_deref().unwrap_or("-")),
            ));
        }
    }
    out
}
