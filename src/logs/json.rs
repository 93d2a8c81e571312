//! The JSON log format (`--log-format json`): tracing-subscriber's own JSON lines, built in one
//! buffer; and the timestamps of both formats.
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
use std::time::UNIX_EPOCH;
use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_serde::AsSerde;
use tracing_serde::fields::AsMap;
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Json, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::registry::LookupSpan;

/// A line's timestamp as tracing-subscriber's `SystemTime` writes it (RFC 3339, UTC, six
/// decimals: `2026-12-03T11:38:31.448997Z`). Its formatter writes seven padded integers through
/// `fmt`, some 2,400 instructions a line, which was 3% of the receiver's instructions per request
/// and as much of a delivery's (docs/performance.md, round 20); humantime's writes the same text
/// from one buffer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timestamps;

/// 10000-01-01T00:00:00Z: humantime writes four-digit years only.
const FIRST_FIVE_DIGIT_YEAR: u64 = 253_402_300_800;

/// The instant as humantime writes it, or `None` where it cannot (before 1970, from year 10000).
fn rfc3339_micros(t: std::time::SystemTime) -> Option<humantime::Rfc3339Timestamp> {
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    (since.as_secs() < FIRST_FIVE_DIGIT_YEAR).then(|| humantime::format_rfc3339_micros(t))
}

impl FormatTime for Timestamps {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        match rfc3339_micros(std::time::SystemTime::now()) {
            Some(stamp) => write!(w, "{stamp}"),
            // A clock set outside humantime's range still gets a timestamp, the stock way.
            None => SystemTime.format_time(w),
        }
    }
}

/// One JSON object per line: `timestamp`, `level`, `fields` (with `message`) and `target`.
pub struct JsonLines {
    in_span: format::Format<Json, Timestamps>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self {
            in_span: format::Format::default().json().with_timer(Timestamps),
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
        Timestamps.format_time(&mut Writer::new(&mut timestamp))?;
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
    use super::{JsonLines, Timestamps, rfc3339_micros};
    use chrono::{DateTime, SecondsFormat, Utc};
    use std::io::Write;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};
    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::fmt::format::Writer;
    use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

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

    /// The text chrono writes for the same instant, in the stock formatter's shape.
    fn chrono_text(t: std::time::SystemTime) -> String {
        DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Micros, true)
    }

    #[test]
    fn timestamps_are_the_stock_text() {
        let instants = [
            0,               // the epoch
            951_782_400,     // 2000-02-29, a leap day of a century divisible by 400
            4_107_542_399,   // 2100-02-28T23:59:59, a century that is not a leap year
            1_796_298_511,   // a working day in 2026
            253_402_300_799, // 9999-12-31T23:59:59, the last second humantime writes
        ];
        for secs in instants {
            for micros in [0, 1, 448_997, 999_999] {
                let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
                let ours = rfc3339_micros(t).expect("in range").to_string();
                assert_eq!(ours, chrono_text(t), "{secs}s {micros}µs");
            }
        }
        // Nanoseconds are cut, not rounded, as the stock formatter does.
        let t = UNIX_EPOCH + Duration::from_nanos(1_999_999_999);
        assert_eq!(
            rfc3339_micros(t).unwrap().to_string(),
            "1970-01-01T00:00:01.999999Z"
        );
    }

    #[test]
    fn instants_humantime_cannot_write_are_left_to_the_stock_formatter() {
        assert!(rfc3339_micros(UNIX_EPOCH - Duration::from_secs(1)).is_none());
        let year_10000 = UNIX_EPOCH + Duration::from_secs(253_402_300_800);
        assert!(rfc3339_micros(year_10000).is_none());
    }

    #[test]
    fn a_line_now_has_the_stock_shape() {
        let (mut ours, mut stock) = (String::new(), String::new());
        Timestamps.format_time(&mut Writer::new(&mut ours)).unwrap();
        SystemTime
            .format_time(&mut Writer::new(&mut stock))
            .unwrap();
        assert_eq!(ours.len(), stock.len(), "{ours} / {stock}");
        // Ours is taken first, the stock one a moment later.
        let (a, b) = (
            humantime::parse_rfc3339(&ours).unwrap(),
            humantime::parse_rfc3339(&stock).unwrap(),
        );
        assert!(
            b >= a && b.duration_since(a).unwrap() < Duration::from_secs(1),
            "{ours} then {stock}"
        );
    }
}
