//! The retry rule: what an attempt's result means for its event (processed, retried or
//! dead-lettered), how long the next retry waits, how long an attempt may run, and when an event
//! of an unconfigured integration stops waiting. Pure and synchronous: `now` and the jitter come
//! in as parameters, so each rule is tested here without a clock, a network or a store. The
//! default schedule is `crd::defaults::retry_schedule()`.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

/// A destination cannot park an event for longer than a day with one header.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// The error of an event dead-lettered because its integration stayed unconfigured.
pub const INTEGRATION_MISSING: &str = "integration_missing";

/// How long an event of an unconfigured integration is put back before it is looked at again.
pub const RECHECK_UNCONFIGURED: Duration = Duration::from_secs(60);

/// What one delivery attempt produced.
pub enum AttemptResult {
    /// The destination answered.
    Status {
        code: u16,
        retry_after: Option<Duration>,
    },
    Timeout,
    /// Connection refused/reset, DNS, TLS...: the error text (no secrets).
    Connect(String),
    /// The destination policy refused the host or an address it resolved to: why.
    Refused(String),
}

impl AttemptResult {
    /// The attempt in an event's error: `HTTP 503`, `timeout`, `connect: ...`, `refused: ...`.
    pub fn describe(&self) -> String {
        match self {
            AttemptResult::Status { code, .. } => format!("HTTP {code}"),
            AttemptResult::Timeout => "timeout".to_owned(),
            AttemptResult::Connect(text) => format!("connect: {text}"),
            AttemptResult::Refused(reason) => format!("refused: {reason}"),
        }
    }

    /// The attempt's own record: the status code when the destination answered, else what kept
    /// it from answering.
    pub fn record(&self) -> (Option<i64>, Option<String>) {
        match self {
            AttemptResult::Status { code, .. } => (Some(i64::from(*code)), None),
            other => (None, Some(other.describe())),
        }
    }
}

/// The decision after an attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Processed,
    Retry { delay: Duration, error: String },
    DeadLetter { error: String },
}

/// `attempt`: 1-based number of the attempt just made. `schedule`: `spec.delivery.retry.schedule`.
/// `jitter`: a value in [-1.0, 1.0] supplied by the caller (random in production) scaling ±10 %.
pub fn decide(result: &AttemptResult, attempt: u32, schedule: &[Duration], jitter: f64) -> Outcome {
    let retry_after = match *result {
        AttemptResult::Status { code, .. } if (200..300).contains(&code) => {
            return Outcome::Processed;
        }
        // Only 429 and 503 define Retry-After as "come back then"; on other codes it is ignored.
        AttemptResult::Status { code, retry_after } if retryable(code) => {
            retry_after.filter(|_| matches!(code, 429 | 503))
        }
        // 3xx is final too: destinations must not redirect webhooks, and following one would
        // re-send a signed body to a host the integration never named.
        AttemptResult::Status { .. } => {
            let error = result.describe();
            return Outcome::DeadLetter { error };
        }
        AttemptResult::Timeout | AttemptResult::Connect(_) => None,
        // Retrying cannot help: the same URL is refused until its integration changes.
        AttemptResult::Refused(_) => {
            let error = result.describe();
            return Outcome::DeadLetter { error };
        }
    };
    let error = result.describe();
    // The schedule bounds the number of retries even when the destination asks for more.
    let Some(scheduled) = retry_delay(attempt, schedule, jitter) else {
        let error = format!("{error} (retry schedule exhausted after {attempt} attempts)");
        return Outcome::DeadLetter { error };
    };
    // The destination named a time: jitter could land before it. The cap guards callers that
    // built `retry_after` without `parse_retry_after`.
    let delay = retry_after.map_or(scheduled, |ra| ra.min(MAX_RETRY_AFTER));
    Outcome::Retry { delay, error }
}

/// "Not now" rather than "never": request timeout, too early, too many requests, server fault.
fn retryable(code: u16) -> bool {
    matches!(code, 408 | 425 | 429 | 500..=599)
}

/// The delay before retry number `attempt` (i.e. after attempt `attempt` failed):
/// `schedule[attempt-1]` with ±10 % jitter; `None` when the schedule is exhausted.
/// Attempt 0 is treated as 1 rather than dead-lettering an event over a caller's off-by-one.
pub fn retry_delay(attempt: u32, schedule: &[Duration], jitter: f64) -> Option<Duration> {
    let base = *schedule.get((attempt as usize).saturating_sub(1))?;
    // NaN would poison the arithmetic (0 s delay); out-of-range values would break the ±10 %.
    let jitter = if jitter.is_nan() { 0.0 } else { jitter };
    let jitter = jitter.clamp(-1.0, 1.0);
    // Rounded to whole nanoseconds so ±10 % of a schedule step is exact (30 s -> 33 s), which
    // float-seconds arithmetic does not promise.
    let nanos = base.as_nanos() as f64;
    let shifted = (nanos + (nanos * jitter / 10.0).round()).max(0.0) as u128;
    let secs = u64::try_from(shifted / 1_000_000_000).unwrap_or(u64::MAX);
    Some(Duration::new(secs, (shifted % 1_000_000_000) as u32))
}

/// Parses a Retry-After header value: delta-seconds or an HTTP-date (relative to `now`); `None`
/// when unparseable; a date in the past is `Duration::ZERO`. Capped at 24 h.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Too many digits for u64 is still a valid (huge) delay, so it caps rather than fails.
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    // RFC 9110 makes recipients accept IMF-fixdate plus the obsolete RFC 850 and asctime forms.
    let at = DateTime::parse_from_rfc2822(value)
        .map(|d| d.with_timezone(&Utc))
        .or_else(|_| {
            NaiveDateTime::parse_from_str(value, "%A, %d-%b-%y %H:%M:%S GMT").map(|d| d.and_utc())
        })
        .or_else(|_| {
            NaiveDateTime::parse_from_str(value, "%a %b %e %H:%M:%S %Y").map(|d| d.and_utc())
        })
        .ok()?;
    let delay = (at - now).to_std().unwrap_or(Duration::ZERO);
    Some(delay.min(MAX_RETRY_AFTER))
}

/// How long one attempt may run: the integration's timeout, capped at three quarters of the
/// claim's lease, so an attempt always ends (and is recorded) before its claim can pass to
/// another worker.
pub fn attempt_timeout(configured: Duration, lease: Duration) -> Duration {
    configured.min(lease.mul_f64(0.75))
}

/// Whether an event whose integration is not configured has waited long enough for it: past
/// the grace it is dead-lettered instead of deferred again (saturating: any clock is fine).
pub fn orphaned(received_at: DateTime<Utc>, now: DateTime<Utc>, grace: Duration) -> bool {
    let waited = (now - received_at).to_std().unwrap_or_default();
    waited >= grace
}

/// What becomes of a claimed event whose integration is not configured (deleted, or not known
/// to this worker yet).
#[derive(Debug, Clone, PartialEq)]
pub enum Unconfigured {
    /// It has waited the grace: dead-letter it with [`INTEGRATION_MISSING`].
    DeadLetter,
    /// Put it back, without counting an attempt, to be looked at again after this long.
    Recheck(Duration),
}

/// The rule for an event of an unconfigured integration, `grace` being `--orphan-grace`.
pub fn unconfigured(
    received_at: DateTime<Utc>,
    now: DateTime<Utc>,
    grace: Duration,
) -> Unconfigured {
    if orphaned(received_at, now, grace) {
        Unconfigured::DeadLetter
    } else {
        Unconfigured::Recheck(RECHECK_UNCONFIGURED)
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
