//! The range of every duration flag and of the listener's counts, in one table, checked before a
//! role opens anything (README "Flags' ranges" lists the same). Past these ends the roles broke:
//! `--poll 0s` claimed in a loop that never looked at the stop, a 30-day
//! `--db-statement-timeout` panicked SQLite's driver (its busy timeout is an `i32` of
//! milliseconds, as is PostgreSQL's `statement_timeout`), a `--max-in-flight` past tokio's
//! semaphore panicked it, a `--lease` of milliseconds delivered events twice, and a
//! `--commit-window` of seconds held requests past the provider's patience.

use anyhow::bail;
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
const HOUR: Duration = Duration::from_secs(60 * 60);
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The values a duration flag accepts, both ends included.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub flag: &'static str,
    pub min: Duration,
    pub max: Duration,
}

impl Span {
    pub const fn new(flag: &'static str, min: Duration, max: Duration) -> Self {
        Self { flag, min, max }
    }

    /// `value` when it is in range, or an error naming the flag and its range.
    pub fn check(&self, value: Duration) -> anyhow::Result<Duration> {
        if value < self.min || value > self.max {
            bail!(
                "{} must be from {} to {}, got {}",
                self.flag,
                humantime::format_duration(self.min),
                humantime::format_duration(self.max),
                humantime::format_duration(value)
            );
        }
        Ok(value)
    }
}

/// Opening a connection takes longer than a few milliseconds, even to a SQLite file.
pub const DB_ACQUIRE_TIMEOUT: Span =
    Span::new("--db-acquire-timeout", Duration::from_millis(100), DAY);
pub const DB_STATEMENT_TIMEOUT: Span =
    Span::new("--db-statement-timeout", Duration::from_millis(10), DAY);
pub const HEADER_TIMEOUT: Span = Span::new("--header-timeout", MS, HOUR);
pub const BODY_TIMEOUT: Span = Span::new("--body-timeout", MS, HOUR);
/// Every request of a batch waits out the window: a second is already far past a commit.
pub const COMMIT_WINDOW: Span = Span::new("--commit-window", Duration::ZERO, SECOND);
pub const DEDUPE_CACHE_TTL: Span = Span::new(
    "--dedupe-cache-ttl",
    Duration::ZERO,
    Duration::from_secs(30 * 24 * 60 * 60),
);
/// An attempt ends by 3/4 of the lease and its outcome must be written inside the rest.
pub const LEASE: Span = Span::new("--lease", SECOND, DAY);
pub const POLL: Span = Span::new("--poll", Duration::from_millis(10), HOUR);
pub const GRACE: Span = Span::new("--grace", Duration::ZERO, HOUR);
/// A year as `1year` parses (365.25 days), so that the error message reads `1year`.
pub const ORPHAN_GRACE: Span = Span::new(
    "--orphan-grace",
    Duration::ZERO,
    Duration::from_secs(31_557_600),
);

/// Every duration flag's range, for the tests and the README.
pub const DURATIONS: [Span; 10] = [
    DB_ACQUIRE_TIMEOUT,
    DB_STATEMENT_TIMEOUT,
    HEADER_TIMEOUT,
    BODY_TIMEOUT,
    COMMIT_WINDOW,
    DEDUPE_CACHE_TTL,
    LEASE,
    POLL,
    GRACE,
    ORPHAN_GRACE,
];

/// `--max-connections` and `--max-in-flight`: far more than one process can serve, and far
/// fewer than the permits a semaphore can hold.
pub const MAX_LISTENER_COUNT: usize = 1_000_000;

/// The range of every count flag, both ends included, for the tests (and the chart's, which
/// `tests/it/crd.rs` holds to it); each flag's own check uses the same constants.
pub const COUNTS: [(&str, usize, usize); 8] = [
    ("--max-connections", 1, MAX_LISTENER_COUNT),
    ("--max-in-flight", 1, MAX_LISTENER_COUNT),
    ("--commit-batch", 1, crate::inbox::MAX_BATCH),
    (
        "--commit-concurrency",
        1,
        crate::inbox::MAX_COMMIT_CONCURRENCY,
    ),
    ("--dedupe-cache-mib", 0, crate::inbox::MAX_DEDUPE_CACHE_MIB),
    (
        "--handoff-events",
        0,
        crate::worker::defaults::MAX_HANDOFF_EVENTS,
    ),
    ("--concurrency", 1, crate::worker::defaults::MAX_CONCURRENCY),
    (
        "--catch-up-passes",
        1,
        crate::crd::defaults::CATCH_UP_MAX_PASSES,
    ),
];

/// `value` when it is from 1 to [`MAX_LISTENER_COUNT`], or an error naming the flag.
pub fn listener_count(flag: &str, value: usize) -> anyhow::Result<usize> {
    count(flag, value, 1, MAX_LISTENER_COUNT)
}

/// `value` when it is from `min` to `max`, or an error naming the flag and its range.
pub fn count(flag: &str, value: usize, min: usize, max: usize) -> anyhow::Result<usize> {
    if !(min..=max).contains(&value) {
        bail!("{flag} must be from {min} to {max}, got {value}");
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::{Cli, Command};
    use clap::Parser;

    /// Every conversion `hookgate standalone` makes of its flags, as the CLI runs them.
    fn standalone(flag: &str, value: &str) -> anyhow::Result<()> {
        let cli = Cli::try_parse_from(["hookgate", "standalone", "-f", "x.yaml", flag, value])?;
        let Command::Standalone(a) = cli.command else {
            unreachable!("parsed as standalone")
        };
        let db = a.db.limits()?;
        a.listener.limits()?;
        a.commit.config(db)?;
        a.worker_config(db)?;
        Ok(())
    }

    fn text(d: Duration) -> String {
        humantime::format_duration(d).to_string()
    }

    #[test]
    fn every_duration_flag_takes_both_ends_and_refuses_past_them_naming_the_flag() {
        for span in DURATIONS {
            assert!(span.min <= span.max, "{span:?}");
            for inside in [span.min, span.max] {
                let taken = standalone(span.flag, &text(inside));
                assert!(taken.is_ok(), "{} {}: {taken:?}", span.flag, text(inside));
            }
            let mut outside = vec![span.max + MS];
            if let Some(below) = span.min.checked_sub(MS) {
                outside.push(below);
            }
            for value in outside {
                let e = standalone(span.flag, &text(value)).unwrap_err().to_string();
                assert_eq!(
                    e,
                    format!(
                        "{} must be from {} to {}, got {}",
                        span.flag,
                        text(span.min),
                        text(span.max),
                        text(value)
                    )
                );
            }
        }
    }

    #[test]
    fn every_count_flag_takes_both_ends_and_refuses_past_them_naming_the_flag() {
        for (flag, min, max) in COUNTS {
            for inside in [min, max] {
                let taken = standalone(flag, &inside.to_string());
                assert!(taken.is_ok(), "{flag} {inside}: {taken:?}");
            }
            let mut outside = vec![(max + 1).to_string(), usize::MAX.to_string()];
            if min > 0 {
                outside.push((min - 1).to_string());
            }
            for bad in outside {
                let e = standalone(flag, &bad).unwrap_err().to_string();
                assert_eq!(e, format!("{flag} must be from {min} to {max}, got {bad}"));
            }
        }
    }

    #[test]
    fn the_defaults_are_inside_their_ranges() {
        standalone("--listen", "127.0.0.1:8080").unwrap();
    }

    /// `--help` gives each range, written by hand beside the flag: this keeps the two equal.
    #[test]
    fn help_gives_each_range_as_the_table_has_it() {
        let cli = <Cli as clap::CommandFactory>::command();
        let standalone = cli.find_subcommand("standalone").expect("standalone");
        for span in DURATIONS {
            let arg = standalone
                .get_arguments()
                .find(|a| a.get_long() == span.flag.strip_prefix("--"))
                .unwrap_or_else(|| panic!("{} is a standalone flag", span.flag));
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let range = format!("{} to {}", text(span.min), text(span.max));
            assert!(
                help.contains(&range),
                "{}: {help:?} lacks {range:?}",
                span.flag
            );
        }
        for flag in ["max-connections", "max-in-flight"] {
            let arg = standalone
                .get_arguments()
                .find(|a| a.get_long() == Some(flag));
            let help = arg.and_then(|a| a.get_help()).map(|h| h.to_string());
            let range = format!("1-{MAX_LISTENER_COUNT}");
            assert!(help.is_some_and(|h| h.contains(&range)), "{flag}");
        }
    }
}
