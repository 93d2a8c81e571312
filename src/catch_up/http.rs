//! Calls to a provider's API: the bearer credential, bounded retries with backoff on 429 and 5xx
//! (honouring `Retry-After`), and the classification of every other answer. [`verdict`] is the
//! rule, without I/O; [`Api::send`] carries it out.

use super::error::{Error, Result};
use crate::route::catch_up::Credential;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// A request a provider module built: no I/O, so it can be checked in a unit test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub post: bool,
    pub url: String,
    /// Provider headers besides `Authorization`.
    pub headers: Vec<(&'static str, String)>,
}

/// A 2xx answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: bytes::Bytes,
    /// The `Link` header (GitHub's pagination).
    pub link: Option<String>,
}

/// How a run retries one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Attempts per request, the first included.
    pub attempts: u32,
    /// The delay after the first failure; it doubles up to `max`.
    pub first: Duration,
    pub max: Duration,
    /// A `Retry-After` longer than this ends the run instead: the next run comes anyway.
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            attempts: 4,
            first: Duration::from_secs(1),
            max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// What to do with one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Done,
    Retry(Duration),
    Fail(Error),
}

/// What an answer says, as [`verdict`] reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen<'a> {
    pub status: u16,
    pub retry_after: Option<&'a str>,
    /// GitHub: `x-ratelimit-remaining: 0` (a 403 that is a rate limit).
    pub quota_exhausted: bool,
    pub body: &'a [u8],
}

/// The answer's verdict on attempt `attempt` (1-based). `message` comes scrubbed of the credential.
pub fn verdict(
    seen: Seen<'_>,
    attempt: u32,
    b: &Backoff,
    now: DateTime<Utc>,
    cred: &Credential,
) -> Verdict {
    let backoff = || {
        let shift = attempt.saturating_sub(1).min(16);
        b.first.saturating_mul(1 << shift).min(b.max)
    };
    let last = attempt >= b.attempts;
    let message = || cred.scrub(&provider_message(seen.body));
    match seen.status {
        200..=299 => Verdict::Done,
        429 | 403 if seen.status == 429 || seen.quota_exhausted => {
            let wait = seen
                .retry_after
                .and_then(|v| parse_retry_after(v, now))
                .unwrap_or_else(backoff);
            if last || wait > b.max_retry_after {
                Verdict::Fail(Error::RateLimited { attempts: attempt })
            } else {
                Verdict::Retry(wait)
            }
        }
        401 => Verdict::Fail(Error::Unauthorized {
            status: 401,
            message: message(),
        }),
        403 => Verdict::Fail(Error::Forbidden(message())),
        500..=599 if last => Verdict::Fail(Error::Unavailable {
            status: seen.status,
            attempts: attempt,
        }),
        500..=599 => Verdict::Retry(backoff()),
        status => Verdict::Fail(Error::Refused {
            status,
            message: message(),
        }),
    }
}

/// Delta-seconds or an HTTP-date.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(s) = value.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = DateTime::parse_from_rfc2822(value).ok()?;
    Some((at.with_timezone(&Utc) - now).to_std().unwrap_or_default())
}

/// The error message of a provider's error body: Stripe `error.message`, Paddle `error.detail`,
/// GitHub `message`. At most 300 characters; never the body itself.
pub fn provider_message(body: &[u8]) -> String {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let text = ["/error/message", "/error/detail", "/message"]
        .iter()
        .find_map(|p| json.pointer(p).and_then(|v| v.as_str()))
        .unwrap_or("no message");
    text.chars().take(300).collect()
}

/// An HTTP client for providers' APIs.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    backoff: Backoff,
}

impl Api {
    pub fn new(backoff: Backoff) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            // A redirect could carry the credential elsewhere; providers' APIs do not redirect.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("hookgate/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("HTTP client builds");
        Self { client, backoff }
    }

    /// Sends `req` with the credential, retrying as [`verdict`] says.
    pub async fn send(&self, req: &Request, cred: &Credential) -> Result<Answer> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let builder = if req.post {
                self.client.post(&req.url)
            } else {
                self.client.get(&req.url)
            };
            let mut builder = builder.bearer_auth(cred.expose());
            for (name, value) in &req.headers {
                builder = builder.header(*name, value);
            }
            let response = match builder.send().await {
                Ok(r) => r,
                Err(e) if attempt < self.backoff.attempts => {
                    tracing::debug!(error = %network(&e), attempt, "provider API unreachable; retrying");
                    tokio::time::sleep(self.backoff.first * attempt).await;
                    continue;
                }
                Err(e) => return Err(Error::Network(network(&e))),
            };
            let status = response.status().as_u16();
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let retry_after = header("retry-after");
            let quota_exhausted = header("x-ratelimit-remaining").as_deref() == Some("0");
            let link = header("link");
            let body = response
                .bytes()
                .await
                .map_err(|e| Error::Network(network(&e)))?;
            let seen = Seen {
                status,
                retry_after: retry_after.as_deref(),
                quota_exhausted,
                body: &body,
            };
            match verdict(seen, attempt, &self.backoff, Utc::now(), cred) {
                Verdict::Done => return Ok(Answer { status, body, link }),
                Verdict::Retry(wait) => {
                    tracing::debug!(
                        status,
                        attempt,
                        wait_ms = wait.as_millis() as u64,
                        "provider API asked to retry"
                    );
                    tokio::time::sleep(wait).await;
                }
                Verdict::Fail(e) => return Err(e),
            }
        }
    }
}

/// A transport error without its URL (reqwest prints the URL, whose query may name cursors;
/// the credential is in a header, never in the URL, but the origin is all a log needs).
fn network(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    match e.url() {
        Some(u) => format!("{kind} ({})", u.origin().ascii_serialization()),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-12-01T10:00:00Z".parse().unwrap()
    }

    fn run(status: u16, retry_after: Option<&str>, exhausted: bool, attempt: u32) -> Verdict {
        let b = Backoff::default();
        let cred = Credential::new("sk_test_secret_1234".into());
        let body = br#"{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_secret_1234"}}"#;
        let seen = Seen {
            status,
            retry_after,
            quota_exhausted: exhausted,
            body,
        };
        verdict(seen, attempt, &b, at(), &cred)
    }

    #[test]
    fn each_answer_is_done_retried_or_failed() {
        let s = Duration::from_secs;
        let cases = [
            (run(200, None, false, 1), Verdict::Done),
            (run(429, Some("2"), false, 1), Verdict::Retry(s(2))),
            (
                run(429, Some("Tue, 01 Dec 2026 10:00:05 GMT"), false, 1),
                Verdict::Retry(s(5)),
            ),
            // No Retry-After: the backoff, doubling.
            (run(429, None, false, 3), Verdict::Retry(s(4))),
            // Longer than a run should wait: the next run comes anyway.
            (
                run(429, Some("600"), false, 1),
                Verdict::Fail(Error::RateLimited { attempts: 1 }),
            ),
            (
                run(429, Some("1"), false, 4),
                Verdict::Fail(Error::RateLimited { attempts: 4 }),
            ),
            // GitHub's primary rate limit is a 403 with no quota left.
            (run(403, Some("3"), true, 1), Verdict::Retry(s(3))),
            (run(503, None, false, 1), Verdict::Retry(s(1))),
            (run(500, None, false, 2), Verdict::Retry(s(2))),
            (
                run(502, None, false, 4),
                Verdict::Fail(Error::Unavailable {
                    status: 502,
                    attempts: 4,
                }),
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
    }

    #[test]
    fn refusals_carry_the_provider_message_without_the_credential() {
        let Verdict::Fail(e) = run(401, None, false, 1) else {
            panic!("401 fails")
        };
        assert_eq!(e.metric_label(), "unauthorized");
        let text = e.to_string();
        assert!(
            text.contains("Invalid API Key provided: [redacted]"),
            "{text}"
        );
        assert!(!text.contains("sk_test_secret_1234"), "{text}");
        for (status, label) in [(403, "forbidden"), (404, "refused"), (400, "refused")] {
            let Verdict::Fail(e) = run(status, None, false, 1) else {
                panic!("{status} fails")
            };
            assert_eq!(e.metric_label(), label);
        }
    }

    #[test]
    fn provider_messages_are_read_from_each_documented_shape() {
        let cases: [(&[u8], &str); 4] = [
            (br#"{"error":{"message":"stripe says"}}"#, "stripe says"),
            (
                br#"{"error":{"code":"forbidden","detail":"paddle says"}}"#,
                "paddle says",
            ),
            (
                br#"{"message":"Bad credentials","documentation_url":"x"}"#,
                "Bad credentials",
            ),
            (b"<html>", "no message"),
        ];
        for (body, want) in cases {
            assert_eq!(provider_message(body), want);
        }
    }
}
