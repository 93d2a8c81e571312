//! Worker settings when no flag sets them. One place, read by `WorkerConfig::default()` and by
//! the `hookgate worker`/`standalone` flags, so the two cannot drift apart.

use std::time::Duration;

/// `--concurrency`. 16 left the workers waiting on claims at ~2.7k events/s on two cores where 32
/// kept up with 4.5k/s (docs/performance.md); a slot holds no database connection, only its
/// event (32 MiB at the 1 MiB body limit).
pub const CONCURRENCY: usize = 32;
/// The most `--concurrency` accepts: far beyond any destination's use, and small enough that the
/// pool's bookkeeping (`HELD_PER_SLOT` times as many events, the semaphore's permits) cannot
/// overflow.
pub const MAX_CONCURRENCY: usize = 10_000;
/// Not a flag: events a pool may hold per delivery slot, counting those whose outcome is still
/// being written (they have shed their bodies, so they hold little memory). At twice the slots,
/// events waiting on completion commits held the claims back at ~9k events/s on two cores; four
/// still did, eight did not (docs/performance.md, round 5). The bound is what makes a slow
/// database slow the claims and the hand-overs too.
pub const HELD_PER_SLOT: usize = 8;
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
