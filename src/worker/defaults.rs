//! Worker settings when no flag sets them. One place, read by `WorkerConfig::default()` and by
//! the `hookgate worker`/`standalone` flags, so the two cannot drift apart.

use std::time::Duration;

/// `--concurrency`. 16 left the workers waiting on claims at ~2.7k events/s on two cores where 32
/// kept up with 4.5k/s (docs/performance.md); a slot holds no database connection, only its
/// event (a pool holds at most twice this many events, so 64 MiB at the 1 MiB body limit).
pub const CONCURRENCY: usize = 32;
/// The most `--concurrency` accepts: far beyond any destination's use, and small enough that the
/// pool's bookkeeping (twice as many events, the semaphore's permits) cannot overflow.
pub const MAX_CONCURRENCY: usize = 10_000;
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
