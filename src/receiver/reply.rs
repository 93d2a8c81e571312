//! The receiver's decisions that need no I/O: which [`Reply`] a refused signature, a spent rate
//! limit or an insert gets, whether a signed timestamp is fresh enough, and which event ids and
//! types can be stored.

use crate::http::reply::Reply;
use crate::inbox::InsertOutcome;
use crate::inbox::Result;
use crate::signature::Rejection;
use chrono::{DateTime, Utc};
use std::time::Duration;

pub(super) use crate::route::fields::storable;

/// A request that failed verification, once the unverified budget allowed an answer at all.
pub(super) fn refused(rejection: &Rejection) -> Reply {
    match rejection {
        Rejection::Malformed(_) => Reply::Malformed,
        Rejection::InvalidSignature(_) => Reply::InvalidSignature,
    }
}

/// 429, with the wait rounded up to whole seconds (the header cannot say less than one).
pub(super) fn rate_limited(wait: Duration) -> Reply {
    Reply::RateLimited {
        retry_after_secs: wait.as_secs_f64().ceil() as u64,
    }
}

/// Whether `signed` (unix seconds) is within `tolerance` of `now`, either way. Exact to the
/// millisecond, so `|now - signed| == tolerance` is still inside; in i128, so that no timestamp
/// a client can send overflows.
pub(super) fn within_window(now: DateTime<Utc>, signed: i64, tolerance: Duration) -> bool {
    let skew_ms = (i128::from(now.timestamp_millis()) - i128::from(signed) * 1000).unsigned_abs();
    skew_ms <= tolerance.as_millis()
}

/// The answer once the inbox has had its say. Replays and conflicts answer as duplicates: the
/// provider must stop retrying either way, and a conflict keeps the first body.
pub(super) fn stored(result: &Result<InsertOutcome>, ignored: bool) -> Reply {
    match result {
        Ok(InsertOutcome::Inserted { .. }) if ignored => Reply::Ignored,
        Ok(InsertOutcome::Inserted { .. }) => Reply::Accepted,
        Ok(InsertOutcome::Duplicate | InsertOutcome::Replay | InsertOutcome::Conflict) => {
            Reply::Duplicate
        }
        Err(_) => Reply::InboxUnavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::Error;

    #[test]
    fn every_rejection_has_its_reply() {
        let table = [
            (Rejection::Malformed("missing_header"), Reply::Malformed),
            (Rejection::Malformed(""), Reply::Malformed),
            (
                Rejection::InvalidSignature("signature_mismatch"),
                Reply::InvalidSignature,
            ),
            (Rejection::InvalidSignature(""), Reply::InvalidSignature),
        ];
        for (rejection, reply) in table {
            assert_eq!(refused(&rejection), reply, "{rejection:?}");
        }
    }

    #[test]
    fn every_insert_result_has_its_reply() {
        let unavailable = || Err(Error::Unavailable("batch failed".into()));
        let refused_row = || Err(Error::Database(sqlx::Error::PoolTimedOut));
        #[rustfmt::skip]
        let table: Vec<(Result<InsertOutcome>, bool, Reply)> = vec![
            (Ok(InsertOutcome::Inserted { id: 1 }), false, Reply::Accepted),
            (Ok(InsertOutcome::Inserted { id: 1 }), true, Reply::Ignored),
            (Ok(InsertOutcome::Duplicate), false, Reply::Duplicate),
            // A filtered-out type that is already stored answers as the duplicate it is.
            (Ok(InsertOutcome::Duplicate), true, Reply::Duplicate),
            (Ok(InsertOutcome::Replay), false, Reply::Duplicate),
            (Ok(InsertOutcome::Replay), true, Reply::Duplicate),
            (Ok(InsertOutcome::Conflict), false, Reply::Duplicate),
            (Ok(InsertOutcome::Conflict), true, Reply::Duplicate),
            (unavailable(), false, Reply::InboxUnavailable),
            (unavailable(), true, Reply::InboxUnavailable),
            (refused_row(), false, Reply::InboxUnavailable),
            (Err(Error::Config("x".into())), false, Reply::InboxUnavailable),
        ];
        for (result, ignored, reply) in table {
            assert_eq!(
                stored(&result, ignored),
                reply,
                "{result:?}, ignored {ignored}"
            );
        }
    }

    #[test]
    fn rate_limited_rounds_the_wait_up() {
        let table = [
            (Duration::ZERO, 0),
            (Duration::from_nanos(1), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1001), 2),
            (Duration::from_secs(59), 59),
            (Duration::MAX, u64::MAX),
        ];
        for (wait, secs) in table {
            assert_eq!(
                rate_limited(wait),
                Reply::RateLimited {
                    retry_after_secs: secs
                },
                "{wait:?}"
            );
        }
    }

    #[test]
    fn the_window_is_exact_to_the_millisecond_and_cannot_overflow() {
        const NOW: i64 = 1_700_000_000;
        let at = |secs: i64, ms: i64| {
            DateTime::from_timestamp_millis(secs * 1000 + ms).expect("valid instant")
        };
        let min = Duration::from_secs(300);
        #[rustfmt::skip]
        let table: &[(&str, DateTime<Utc>, i64, Duration, bool)] = &[
            ("same second", at(NOW, 0), NOW, min, true),
            ("exactly at tolerance, past", at(NOW, 0), NOW - 300, min, true),
            ("one second past, past", at(NOW, 0), NOW - 301, min, false),
            ("exactly at tolerance, future", at(NOW, 0), NOW + 300, min, true),
            ("one second past, future", at(NOW, 0), NOW + 301, min, false),
            ("one millisecond past, past", at(NOW, 1), NOW - 300, min, false),
            ("a millisecond closer, future", at(NOW, 1), NOW + 300, min, true),
            ("zero tolerance, same instant", at(NOW, 0), NOW, Duration::ZERO, true),
            ("zero tolerance, a millisecond on", at(NOW, 1), NOW, Duration::ZERO, false),
            ("a millisecond of tolerance", at(NOW, 1), NOW, Duration::from_millis(1), true),
            ("i64::MIN", at(NOW, 0), i64::MIN, min, false),
            ("i64::MAX", at(NOW, 0), i64::MAX, min, false),
            ("i64::MIN, endless tolerance", at(NOW, 0), i64::MIN, Duration::MAX, true),
            ("i64::MAX, endless tolerance", at(NOW, 0), i64::MAX, Duration::MAX, true),
            ("latest clock, i64::MIN", DateTime::<Utc>::MAX_UTC, i64::MIN, min, false),
            ("earliest clock, i64::MAX", DateTime::<Utc>::MIN_UTC, i64::MAX, min, false),
            ("latest clock, its own second", DateTime::<Utc>::MAX_UTC,
                DateTime::<Utc>::MAX_UTC.timestamp(), Duration::from_secs(1), true),
            ("earliest clock, its own second", DateTime::<Utc>::MIN_UTC,
                DateTime::<Utc>::MIN_UTC.timestamp(), Duration::ZERO, true),
        ];
        for &(case, now, signed, tolerance, inside) in table {
            assert_eq!(within_window(now, signed, tolerance), inside, "{case}");
        }
    }

    #[test]
    fn storable_fields_are_short_and_printable() {
        use crate::route::fields::MAX_FIELD_LEN;
        let longest = "a".repeat(MAX_FIELD_LEN);
        let too_long = "a".repeat(MAX_FIELD_LEN + 1);
        // Bytes, not characters: 256 two-byte characters are at the limit.
        let multibyte = "é".repeat(MAX_FIELD_LEN / 2);
        let multibyte_over = format!("{multibyte}a");
        let table: &[(&str, bool)] = &[
            ("evt_1", true),
            ("", true),
            (&longest, true),
            (&too_long, false),
            (&multibyte, true),
            (&multibyte_over, false),
            ("a\0b", false),
            ("line\nbreak", false),
            ("tab\t", false),
            ("del\u{7f}", false),
            ("c1\u{85}", false),
            ("emoji 🦀 and spaces", true),
        ];
        for &(field, ok) in table {
            assert_eq!(storable(field), ok, "{field:?}");
        }
    }
}
