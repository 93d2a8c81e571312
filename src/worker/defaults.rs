//! Worker settings when no flag sets them. One place, read by `WorkerConfig::default()` and by
//! the `hookgate worker`/`standalone` flags, so the two cannot drift apart.

use std::time::Duration;

/// `--concurrency`
pub const CONCURRENCY: usize = 16;
/// `--lease`
pub const LEASE: Duration = Duration::from_secs(60);
/// `--poll`
pub const POLL: Duration = Duration::from_millis(250);
/// `--grace`
pub const GRACE: Duration = Duration::from_secs(30);
/// `--orphan-grace`
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);
/// Not a flag: the retention janitor's period.
pub const JANITOR_EVERY: Duration = Duration::from_secs(10 * 60);
