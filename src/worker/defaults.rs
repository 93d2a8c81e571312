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
/// `hookgate standalone --handoff-events`: new events the receiver may hold for the workers of
/// its process, stored leased and waiting in memory for a slot. The slots' own count (32) was the
/// room until round 15; events beyond it were stored for claims, each a second rewrite of its row
/// in PostgreSQL, and at ~5,000 events/s a moment's delay turned into claims that slowed the
/// workers further. 4,096 kept every event handed over at 5,600/s (docs/performance.md).
pub const HANDOFF_EVENTS: usize = 4096;
/// The most `--handoff-events` accepts.
pub const MAX_HANDOFF_EVENTS: usize = 1_000_000;
/// `hookgate standalone --handoff-bytes`: the body bytes of those events, as many as the slots
/// hold at the 1 MiB body limit.
pub const HANDOFF_BYTES: usize = 32 << 20;
/// Not a flag: past its slots, the receiver holds events for the workers only while the pool
/// took one within this and that one had waited less: longer, and they would be better claimed in
/// due order than kept waiting in memory. At most an eighth of the lease, so that an event held
/// never comes near the ¾ of its lease an attempt needs (`worker::slots`).
pub const HANDOFF_MAX_WAIT: Duration = Duration::from_secs(1);
/// Not a flag: how long an integration holding its share of the slots may go without a delivery
/// ending before the share binds it (if none has timed out yet) and its further events go back to
/// the inbox rather than wait in memory (`worker::fair`). Deliveries to a working destination end
/// within milliseconds of each other. A whole number of seconds, as deferrals are.
pub const STALL: Duration = Duration::from_secs(1);
/// Not a flag: the longest a stalled integration's event is deferred at once. Deferrals grow with
/// how long the destination has been stalled, so an hour's outage costs each event a few
/// rewrites; ten minutes is how late a recovered destination may start getting them again.
pub const DEFER_MAX: Duration = Duration::from_secs(10 * 60);
/// `--lease`
pub const LEASE: Duration = Duration::from_secs(60);
/// `--poll`
pub const POLL: Duration = Duration::from_millis(250);
/// `--grace`
pub const GRACE: Duration = Duration::from_secs(30);
/// `--orphan-grace`
pub const ORPHAN_GRACE: Duration = Duration::from_secs(60 * 60);
/// Not a flag: how often a worker process refreshes its inbox gauges. One of the processes on a
/// database reads the backlog for all of them each time (`inbox::gauges`).
pub const GAUGES_EVERY: Duration = Duration::from_secs(15);
/// Not a flag: the retention janitor's period.
pub const JANITOR_EVERY: Duration = Duration::from_secs(10 * 60);
