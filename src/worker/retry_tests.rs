use super::*;
use chrono::TimeZone;

const S: fn(u64) -> Duration = Duration::from_secs;

fn status(code: u16, secs: Option<u64>) -> AttemptResult {
    let retry_after = secs.map(S);
    AttemptResult::Status { code, retry_after }
}
fn retry(secs: u64, error: &str) -> Outcome {
    let (delay, error) = (S(secs), error.to_owned());
    Outcome::Retry { delay, error }
}
fn dead(error: &str) -> Outcome {
    let error = error.to_owned();
    Outcome::DeadLetter { error }
}
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2015, 10, 21, 7, 0, 0).unwrap()
}

#[test]
fn decide_follows_the_status_table() {
    let sched = crate::crd::defaults::retry_schedule();
    let d = |r: &AttemptResult, attempt| decide(r, attempt, &sched, 0.0);
    for code in [200, 201, 204, 299] {
        assert_eq!(d(&status(code, None), 1), Outcome::Processed);
    }
    for code in [408, 425, 429, 500, 502, 503, 599] {
        let want = retry(120, &format!("HTTP {code}"));
        assert_eq!(d(&status(code, None), 2), want, "code {code}");
    }
    // A Retry-After on a final status changes nothing.
    let finals = [100, 199, 300, 301, 302, 308, 400, 401, 404, 409, 410, 499];
    for code in finals.into_iter().chain([600]) {
        let want = dead(&format!("HTTP {code}"));
        assert_eq!(d(&status(code, Some(5)), 1), want, "code {code}");
    }
    assert_eq!(d(&AttemptResult::Timeout, 1), retry(30, "timeout"));
    let refused = AttemptResult::Connect("connection refused".into());
    let want = retry(600, "connect: connection refused");
    assert_eq!(d(&refused, 3), want);
    let policy = AttemptResult::Refused("169.254.169.254 is a cloud metadata address".into());
    let want = dead("refused: 169.254.169.254 is a cloud metadata address");
    assert_eq!(
        d(&policy, 1),
        want,
        "a refusal is final on the first attempt"
    );
}

#[test]
fn an_attempt_is_recorded_by_its_status_or_its_failure() {
    let cases = [
        (status(204, None), Some(204), None),
        (status(503, Some(5)), Some(503), None),
        (AttemptResult::Timeout, None, Some("timeout")),
        (
            AttemptResult::Connect("dns: no such host".into()),
            None,
            Some("connect: dns: no such host"),
        ),
        (
            AttemptResult::Refused("127.0.0.1 is loopback".into()),
            None,
            Some("refused: 127.0.0.1 is loopback"),
        ),
    ];
    for (result, code, error) in cases {
        let want = (code, error.map(str::to_owned));
        assert_eq!(result.record(), want, "{}", result.describe());
    }
    assert_eq!(status(418, None).describe(), "HTTP 418");
}

#[test]
fn jitter_is_exactly_plus_or_minus_ten_percent() {
    let sched = crate::crd::defaults::retry_schedule();
    let cases = [
        (1, 1.0, 33_000),
        (1, -1.0, 27_000),
        (1, 0.5, 31_500),
        (6, 1.0, 95_040_000),
        // Out-of-range or NaN input from a caller cannot widen the band.
        (1, 7.0, 33_000),
        (1, f64::NAN, 30_000),
        (0, 0.0, 30_000),
    ];
    for (attempt, jitter, millis) in cases {
        let got = retry_delay(attempt, &sched, jitter);
        assert_eq!(got, Some(Duration::from_millis(millis)), "{jitter}");
    }
    let got = decide(&AttemptResult::Timeout, 1, &sched, -1.0);
    assert_eq!(got, retry(27, "timeout"));
}

#[test]
fn retry_after_is_honoured_only_on_429_and_503_without_jitter() {
    let sched = crate::crd::defaults::retry_schedule();
    let cases = [
        (429, Some(7), retry(7, "HTTP 429")),
        (503, Some(0), retry(0, "HTTP 503")),
        (503, Some(999_999), retry(86_400, "HTTP 503")),
        (500, Some(7), retry(33, "HTTP 500")),
        (408, Some(7), retry(33, "HTTP 408")),
    ];
    for (code, secs, want) in cases {
        assert_eq!(decide(&status(code, secs), 1, &sched, 1.0), want);
    }
    // A garbage header parses to None, and None means the schedule applies.
    let retry_after = parse_retry_after("soon", now());
    assert_eq!(retry_after, None);
    let garbage = AttemptResult::Status {
        code: 429,
        retry_after,
    };
    let got = decide(&garbage, 1, &sched, 0.0);
    assert_eq!(got, retry(30, "HTTP 429"));
}

#[test]
fn exhausted_schedule_dead_letters_with_the_last_error() {
    let sched = [S(1), S(1)];
    let d = |r: &AttemptResult, attempt| decide(r, attempt, &sched, 0.0);
    assert_eq!(d(&status(503, None), 1), retry(1, "HTTP 503"));
    assert_eq!(d(&AttemptResult::Timeout, 2), retry(1, "timeout"));
    let want = dead("HTTP 503 (retry schedule exhausted after 3 attempts)");
    assert_eq!(d(&status(503, Some(5)), 3), want);
    assert_eq!(retry_delay(3, &sched, 0.0), None);
    // With no schedule the first failure is final.
    let refused = AttemptResult::Connect("dns: no such host".into());
    let want = dead("connect: dns: no such host (retry schedule exhausted after 1 attempts)");
    assert_eq!(decide(&refused, 1, &[], 0.0), want);
    let ok = decide(&status(200, None), 7, &[], 0.0);
    assert_eq!(ok, Outcome::Processed);
}

#[test]
fn retry_after_parses_seconds_and_http_dates() {
    let cases = [
        ("120", Some(120)),
        (" 0 ", Some(0)),
        ("90000", Some(86_400)),
        ("99999999999999999999999", Some(86_400)),
        ("Wed, 21 Oct 2015 07:28:00 GMT", Some(28 * 60)),
        ("Wednesday, 21-Oct-15 07:28:00 GMT", Some(28 * 60)),
        ("Wed Oct 21 07:28:00 2015", Some(28 * 60)),
        ("Wed, 21 Oct 2015 06:00:00 GMT", Some(0)),
        ("Sat, 31 Oct 2015 07:00:00 GMT", Some(86_400)),
        ("", None),
        ("-5", None),
        ("+5", None),
        ("1.5", None),
        ("abc", None),
        ("Wed, 32 Oct 2015 07:28:00 GMT", None),
    ];
    for (value, want) in cases {
        let got = parse_retry_after(value, now());
        assert_eq!(got, want.map(S), "{value:?}");
    }
}

#[test]
fn an_attempt_ends_inside_its_lease() {
    let s = Duration::from_secs;
    assert_eq!(attempt_timeout(s(10), s(60)), s(10));
    assert_eq!(attempt_timeout(s(10), s(2)), Duration::from_millis(1500));
    assert_eq!(attempt_timeout(s(300), s(60)), s(45));
}

#[test]
fn an_event_is_orphaned_once_it_has_waited_the_grace() {
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let hour = Duration::from_secs(3600);
    assert!(!orphaned(t0, t0 + chrono::Duration::minutes(59), hour));
    assert!(orphaned(t0, t0 + chrono::Duration::minutes(60), hour));
    assert!(
        !orphaned(t0, t0 - chrono::Duration::days(1), hour),
        "a clock behind"
    );
    assert!(orphaned(
        DateTime::<Utc>::MIN_UTC,
        DateTime::<Utc>::MAX_UTC,
        hour
    ));
}

#[test]
fn an_unconfigured_event_is_rechecked_each_minute_until_the_grace() {
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
    let hour = Duration::from_secs(3600);
    let minutes = |m| t0 + chrono::Duration::minutes(m);
    let cases = [
        (minutes(0), Unconfigured::Recheck(S(60))),
        (minutes(59), Unconfigured::Recheck(S(60))),
        (minutes(60), Unconfigured::DeadLetter),
        (minutes(-60), Unconfigured::Recheck(S(60))),
    ];
    for (now, want) in cases {
        assert_eq!(unconfigured(t0, now, hour), want, "{now}");
    }
    assert_eq!(
        unconfigured(t0, t0, Duration::ZERO),
        Unconfigured::DeadLetter
    );
}
