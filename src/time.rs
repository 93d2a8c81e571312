//! Instants plus or minus a configured duration, saturating at chrono's range instead of
//! panicking: no duration in a manifest or a flag can crash a role through time arithmetic.

use chrono::{DateTime, TimeDelta, Utc};
use std::time::Duration;

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// `t + d`, or the latest representable instant.
pub fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t.checked_add_signed(delta(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `t - d`, or the earliest representable instant.
pub fn before(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    t.checked_sub_signed(delta(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_at_both_ends_and_is_exact_inside() {
        let t: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(
            after(t, Duration::from_secs(60)),
            "2026-01-01T00:01:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            before(t, Duration::from_secs(60)),
            "2025-12-31T23:59:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(after(t, Duration::MAX), DateTime::<Utc>::MAX_UTC);
        assert_eq!(before(t, Duration::MAX), DateTime::<Utc>::MIN_UTC);
        assert_eq!(
            after(DateTime::<Utc>::MAX_UTC, Duration::from_secs(1)),
            DateTime::<Utc>::MAX_UTC
        );
    }
}
