//! The audit line of a refused request: one `info` line per non-2xx answer, with a request id,
//! the integration, the reason, the peer and the time taken, and never a header value, signature
//! or body. A flood of refusals (a scanner, a forger, a misconfigured provider) must not turn
//! into a flood of log lines, so the lines share one per-process budget; what the budget drops
//! is counted in `hookgate_refusal_logs_dropped_total` and announced on the next line written.

use axum::http::{HeaderMap, HeaderValue};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use prometheus_client::metrics::counter::Counter;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Refusal lines per second (and burst) one receiver process writes; the rest are counted only.
/// The single default for the flag and for `Receiver::new`.
pub const REFUSAL_LOG_RPS: u32 = 50;

/// The request and response header carrying the request id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest incoming request id that is reused as it is.
const MAX_REQUEST_ID_LEN: usize = 128;

/// One refused request, as logged.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    pub request_id: &'a str,
    /// `namespace/name`, or `None` when no route matched.
    pub integration: Option<&'a str>,
    /// The error code of the JSON answer (`invalid_signature`, `unknown_route`, ...).
    pub reason: &'static str,
    /// The scheme's finer reason for a failed verification (`signature_mismatch`, ...).
    pub detail: Option<&'static str>,
    pub source: Option<IpAddr>,
    pub elapsed: Duration,
}

/// The line budget and what it dropped. One per receiver process.
pub struct RefusalLog {
    limiter: Option<DefaultDirectRateLimiter>,
    dropped: Counter,
    /// Dropped since the last line written: reported on that next line.
    pending: AtomicU64,
}

impl RefusalLog {
    /// `per_second` 0: every refusal is logged. `dropped` is the registered metric.
    pub fn new(per_second: u32, dropped: Counter) -> Self {
        Self {
            limiter: NonZeroU32::new(per_second).map(|n| RateLimiter::direct(Quota::per_second(n))),
            dropped,
            pending: AtomicU64::new(0),
        }
    }

    /// Writes the line if the budget allows, else counts it as dropped.
    pub fn record(&self, r: &Refusal<'_>) {
        if self.limiter.as_ref().is_some_and(|l| l.check().is_err()) {
            self.dropped.inc();
            self.pending.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let suppressed = self.pending.swap(0, Ordering::Relaxed);
        tracing::info!(
            request_id = %r.request_id,
            integration = r.integration.unwrap_or("none"),
            reason = r.reason,
            detail = r.detail.unwrap_or("-"),
            source = %r.source.map_or_else(|| "unknown".to_string(), |a| a.to_string()),
            duration_ms = r.elapsed.as_millis() as u64,
            suppressed,
            "request refused"
        );
    }
}

/// The request's id: the caller's `X-Request-Id` when it is short and made of safe characters
/// (it ends up in logs and in a response header), else a fresh random one.
pub fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|id| sane(id))
        .map_or_else(fresh_id, str::to_string)
}

/// 1-128 characters of `A-Z a-z 0-9 - _ . : /` (UUIDs, ULIDs, trace ids, `prefix:id` forms).
fn sane(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/".contains(&b))
}

/// 128 random bits in hex.
fn fresh_id() -> String {
    const_hex::encode(rand::random::<[u8; 16]>())
}

/// The id as a header value; the id is always one (sane or hex).
pub fn header_value(id: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_id(id: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(REQUEST_ID_HEADER, HeaderValue::from_bytes(id).unwrap());
        h
    }

    fn is_fresh(id: &str) -> bool {
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
    }

    #[test]
    fn sane_incoming_ids_are_kept_and_others_replaced() {
        let longest = "a".repeat(MAX_REQUEST_ID_LEN);
        let too_long = "a".repeat(MAX_REQUEST_ID_LEN + 1);
        let kept: &[&str] = &[
            "req-1",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "gh:delivery/72d3162e",
            &longest,
        ];
        for id in kept {
            assert_eq!(request_id(&with_id(id.as_bytes())), *id);
        }
        let replaced: &[&[u8]] = &[
            b"",
            too_long.as_bytes(),
            b"has space",
            b"new\tline",
            b"quote\"",
            b"x=1;y=2",
            b"<script>",
            "caf\u{e9}".as_bytes(),
            b"\xff\xfe",
        ];
        for id in replaced {
            let got = request_id(&with_id(id));
            assert!(is_fresh(&got), "{id:?} -> {got}");
        }
        let none = request_id(&HeaderMap::new());
        assert!(is_fresh(&none), "{none}");
        assert_ne!(none, request_id(&HeaderMap::new()), "fresh ids differ");
    }

    #[test]
    fn every_id_given_back_is_a_valid_header_value() {
        for id in ["req-1", &fresh_id(), &"z".repeat(MAX_REQUEST_ID_LEN)] {
            assert!(header_value(id).is_some(), "{id}");
        }
    }

    fn refusal() -> Refusal<'static> {
        Refusal {
            request_id: "r",
            integration: None,
            reason: "unknown_route",
            detail: None,
            source: None,
            elapsed: Duration::ZERO,
        }
    }

    #[test]
    fn the_budget_drops_and_counts_what_is_over_it() {
        let dropped = Counter::default();
        let log = RefusalLog::new(3, dropped.clone());
        for _ in 0..10 {
            log.record(&refusal());
        }
        // A burst of 3 within one second; the test runs well inside it.
        assert_eq!(dropped.get(), 7);
        assert_eq!(log.pending.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn zero_means_every_refusal_is_written() {
        let dropped = Counter::default();
        let log = RefusalLog::new(0, dropped.clone());
        for _ in 0..1000 {
            log.record(&refusal());
        }
        assert_eq!(dropped.get(), 0);
    }
}
