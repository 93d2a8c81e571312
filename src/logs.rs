//! The JSON log format (`--log-format json`): tracing-subscriber's own JSON lines, built in one
//! buffer.
//!
//! tracing-subscriber's JSON formatter serializes each line through an adaptor that validates and
//! copies every fragment separately (~90 writes for one `event received` line). Under load that
//! was a fifth of the receiver's instructions per request, SHA-256 aside (docs/performance.md,
//! round 7). This formatter serializes the same map, with the same serializers, into one buffer
//! and writes it once. Its lines are byte for byte tracing-subscriber's (the tests below compare
//! them); events inside a span, which only libraries open, go to tracing-subscriber's formatter
//! itself, which prints the span and its fields as well.

use serde::ser::{SerializeMap, Serializer as _};
use std::fmt;
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_serde::AsSerde;
use tracing_serde::fields::AsMap;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Json, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::registry::LookupSpan;

/// One JSON object per line: `timestamp`, `level`, `fields` (with `message`) and `target`.
pub struct JsonLines {
    in_span: format::Format<Json, SystemTime>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self {
            in_span: format::Format::default().json(),
        }
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // As the stock formatter decides: an explicit parent, else the current span (even for an
        // event marked as a root).
        let in_span = event.parent().is_some() || ctx.lookup_current().is_some();
        if in_span {
            return self.in_span.format_event(ctx, writer, event);
        }
        let mut timestamp = String::with_capacity(32);
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        // Events from the `log` crate carry their target in fields, as the stock formatter reads it.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let mut line = Vec::with_capacity(320);
        let mut json = serde_json::Serializer::new(&mut line);
        let serialized: Result<(), serde_json::Error> = (|| {
            let mut map = json.serialize_map(None)?;
            map.serialize_entry("timestamp", &timestamp)?;
            map.serialize_entry("level", &meta.level().as_serde())?;
            map.serialize_entry("fields", &event.field_map())?;
            map.serialize_entry("target", meta.target())?;
            map.end()
        })();
        serialized.map_err(|_| fmt::Error)?;
        line.push(b'\n');
        writer.write_str(std::str::from_utf8(&line).map_err(|_| fmt::Error)?)
    }
}

#[cfg(test)]
mod tests {
    use super::JsonLines;
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Lines;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// Every kind of field hookgate and its libraries log, then the same inside a span.
    fn emit() {
        let none: Option<u16> = None;
        tracing::info!(
            integration = %"team/orders",
            event_id = "evt_\"quoted\"\n",
            attempt = 3u64,
            delta = -2i64,
            ok = true,
            ratio = 0.5f64,
            status = none,
            keys = ?["a", "b"],
            "event received"
        );
        tracing::warn!(error = %std::io::Error::other("disk \u{1F4A5} full"), "insert failed");
        tracing::error!("plain message {} with args", 7);
        let span = tracing::info_span!("reconciling object", object.ref = "ns/a", n = 1u64);
        let _inside = span.enter();
        tracing::info!(phase = "Ready", "inside a span");
        tracing::info!(parent: None, "a root event while a span is entered");
    }

    /// What `subscriber` writes for [`emit`], with each line's timestamp blanked.
    fn lines_of(json_lines: bool) -> Vec<String> {
        let out = Lines::default();
        let builder = tracing_subscriber::fmt()
            .with_writer(out.clone())
            .with_ansi(false);
        let dispatch = if json_lines {
            tracing::Dispatch::new(builder.json().event_format(JsonLines::default()).finish())
        } else {
            tracing::Dispatch::new(builder.json().finish())
        };
        tracing::dispatcher::with_default(&dispatch, emit);
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| {
                let (head, rest) = l.split_at(l.find("\",\"level\"").unwrap());
                assert!(head.starts_with("{\"timestamp\":\"20"), "{l}");
                format!("{{\"timestamp\":\"-{rest}")
            })
            .collect()
    }

    #[test]
    fn lines_are_byte_for_byte_tracing_subscribers() {
        let (ours, stock) = (lines_of(true), lines_of(false));
        assert_eq!(ours.len(), 5, "{ours:#?}");
        assert_eq!(ours, stock);
        assert!(
            ours[3].contains("\"span\""),
            "the span is printed: {}",
            ours[3]
        );
    }
}
