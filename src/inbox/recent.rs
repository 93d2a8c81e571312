//! The keys a receiver committed recently, so that a provider's retry of one is answered as a
//! duplicate without a transaction.
//!
//! A duplicate otherwise costs an insert that finds the key taken and a read of the stored body
//! hash: two statements on the connection new events commit on, behind whatever batch holds it.
//! Retries come in bursts (a provider that timed out on a slow receiver sends its backlog again),
//! exactly when the database is busiest. Only what this process saw committed is remembered, with
//! the body's hash: a retry with the same body is the duplicate the inbox would have answered;
//! anything else (another body, a key not remembered, a key of another replica) goes to the
//! database as before.
//!
//! An entry answers for at most the configured time and at most half the integration's dedupe
//! retention as configured when it is asked, counted from the lookup (just after the event was
//! received and verified): the other half is the margin for the time the commit took and for the
//! janitor's clock, so an entry never outlives the row retention would delete. The memory is
//! bounded in bytes; the oldest entries go first.
//!
//! `hookgate dlq purge` deletes rows the memory may hold, in another process: a re-send of a
//! purged event must be new again. The memory answers only while it is confirmed: the receiver
//! reads the purges the audit trail recorded since its last look, every [`CONFIRM_EVERY`], and
//! forgets the keys they list ([`Recent::confirm`], [`PurgedKeys`]); the memory answers for
//! [`CONFIRMED_FOR`] from the start of the last confirmation. A purge committed after that start
//! is seen by a later one, so from [`CONFIRMED_FOR`] after its commit no receiver answers from a
//! memory that predates it: `hookgate dlq purge` waits that long before it returns. A receiver
//! that cannot reach the inbox stops answering from memory when the confirmation runs out.

use super::{NewEvent, RecordedPurge, Status};
use hashlink::LinkedHashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What an entry costs beside its key's bytes: the map's slot and links, the entry itself and
/// the allocator's headers. Measured: 200,000 entries of 43-byte keys took 204 bytes each of
/// resident memory (docs/performance.md, round 26).
const ENTRY_OVERHEAD: usize = 160;

/// How much the receiver remembers, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentConfig {
    /// The most bytes the entries may take; 0 remembers nothing.
    pub bytes: usize,
    /// The longest an entry lives.
    pub ttl: Duration,
}

/// How often a receiver confirms its memory against the purges recorded in the inbox.
pub const CONFIRM_EVERY: Duration = Duration::from_secs(1);

/// How long from the start of a confirmation the memory answers: [`CONFIRM_EVERY`] and room for a
/// confirmation that takes a while. Also how long `hookgate dlq purge` waits after its commit.
pub const CONFIRMED_FOR: Duration = Duration::from_secs(3);

/// The largest memory `--dedupe-cache-mib` takes.
pub const MAX_MIB: usize = 4096;

impl Default for RecentConfig {
    /// 16 MiB (about 80,000 Stripe-sized keys) for 5 minutes: a provider's retries of a burst it
    /// timed out on come within minutes; later ones go to the database.
    fn default() -> Self {
        Self {
            bytes: 16 << 20,
            ttl: Duration::from_secs(300),
        }
    }
}

struct Entry {
    body_sha256: [u8; 32],
    /// The lookup before its insert: its lifetime counts from here.
    since: Instant,
}

struct Entries {
    /// In the order remembered: the front is the oldest.
    map: LinkedHashMap<Box<str>, Entry>,
    bytes: usize,
    /// When the last confirmation started: the memory answers until [`CONFIRMED_FOR`] after it.
    confirmed_at: Option<Instant>,
    /// Moves each time a confirmation saw a purge: a note taken before cannot be remembered
    /// after, as its insert may predate that purge.
    epoch: u64,
    /// Entries dropped for room before their ttl, ever: retries of those go to the database.
    evicted: u64,
}

impl Entries {
    /// Whether `key` is held with this body and younger than `lifetime` at `now`.
    fn holds(&self, key: &str, body_sha256: &[u8; 32], lifetime: Duration, now: Instant) -> bool {
        self.map.get(key).is_some_and(|e| {
            now.saturating_duration_since(e.since) < lifetime && e.body_sha256 == *body_sha256
        })
    }

    fn answers(&self, now: Instant) -> bool {
        self.confirmed_at
            .is_some_and(|at| now.saturating_duration_since(at) < CONFIRMED_FOR)
    }
}

/// The keys committed recently with their body hashes. Cheap to share behind an `Arc`.
pub struct Recent {
    cfg: RecentConfig,
    entries: Mutex<Entries>,
}

/// The memory's key for `(integration, event_id)`: the integration's length first, so that no
/// two pairs make the same key whatever characters they hold.
fn key(integration: &str, event_id: &str) -> String {
    format!("{}:{integration}{event_id}", integration.len())
}

fn cost(key: &str) -> usize {
    key.len() + ENTRY_OVERHEAD
}

/// What the memory says of an event before it is inserted.
pub enum Recalled {
    /// Committed with this body: answer it as a duplicate.
    Duplicate,
    /// Not remembered: insert it, and pass the note to [`Recent::committed`] if it was inserted.
    Unknown(Note),
    /// The memory does not answer for it: it is off, or the event needs the database's word
    /// (a signature digest to remember, a dead letter the receiver stores itself).
    NotAsked,
}

/// What a confirmation makes the memory forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PurgedKeys {
    /// No purge since the last confirmation.
    Nothing,
    /// The (integration, event id) of every event the purges since the last confirmation deleted.
    Listed(Vec<(String, String)>),
    /// Everything: at the first confirmation (nothing says which purges the entries made before
    /// it predate), or when a purge's audit row lists only the first of its events.
    All,
}

impl PurgedKeys {
    /// What the purges recorded since the last confirmation deleted.
    pub fn of(purges: &[RecordedPurge]) -> Self {
        if purges.is_empty() {
            return Self::Nothing;
        }
        if purges
            .iter()
            .any(|p| usize::try_from(p.event_count).map_or(true, |n| n > p.events.len()))
        {
            return Self::All;
        }
        let keys = purges.iter().flat_map(|p| &p.events);
        Self::Listed(
            keys.map(|e| (e.integration.clone(), e.event_id.clone()))
                .collect(),
        )
    }
}

/// [`Recent::usage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Counted against `--dedupe-cache-mib`: the keys and [`ENTRY_OVERHEAD`] each.
    pub bytes: usize,
    /// Entries dropped for room before their ttl, since start.
    pub evicted: u64,
}

/// An event looked up before its insert, for remembering it once it committed.
pub struct Note {
    key: String,
    body_sha256: [u8; 32],
    since: Instant,
    epoch: u64,
}

impl Recent {
    pub fn new(cfg: RecentConfig) -> Self {
        Self {
            cfg,
            entries: Mutex::new(Entries {
                map: LinkedHashMap::new(),
                bytes: 0,
                confirmed_at: None,
                epoch: 0,
                evicted: 0,
            }),
        }
    }

    /// Whether the memory is on at all.
    pub fn enabled(&self) -> bool {
        self.cfg.bytes > 0 && !self.cfg.ttl.is_zero()
    }

    /// Looks `event` up at `now`; an entry answers for at most the ttl and `at_most` (half the
    /// integration's dedupe retention as configured now, so that an entry never outlives the row
    /// even when the retention was shortened after it was made).
    pub fn recall(&self, event: &NewEvent, at_most: Duration, now: Instant) -> Recalled {
        if !self.enabled() || event.needs_nonce || event.status == Status::DeadLetter {
            return Recalled::NotAsked;
        }
        let key = key(&event.integration, &event.event_id);
        let entries = self.entries.lock().expect("never poisoned");
        let lifetime = self.cfg.ttl.min(at_most);
        if entries.answers(now) && entries.holds(&key, &event.body_sha256, lifetime, now) {
            return Recalled::Duplicate;
        }
        Recalled::Unknown(Note {
            key,
            body_sha256: event.body_sha256,
            since: now,
            epoch: entries.epoch,
        })
    }

    /// Remembers the event `note` was taken of, which committed as new, for at most the ttl from
    /// the lookup; not if a purge was seen since the lookup.
    pub fn committed(&self, note: Note, now: Instant) {
        let Note {
            key,
            body_sha256,
            since,
            epoch,
        } = note;
        let size = cost(&key);
        if !self.enabled() || size > self.cfg.bytes {
            return;
        }
        let mut entries = self.entries.lock().expect("never poisoned");
        let entries = &mut *entries;
        if entries.epoch != epoch {
            return;
        }
        if entries.map.remove(key.as_str()).is_some() {
            entries.bytes -= size;
        }
        // The oldest first: expired ones, then as many as the budget needs.
        while let Some((k, e)) = entries.map.front() {
            let alive = now.saturating_duration_since(e.since) < self.cfg.ttl;
            if alive && entries.bytes + size <= self.cfg.bytes {
                break;
            }
            entries.evicted += u64::from(alive);
            entries.bytes -= cost(k);
            entries.map.pop_front();
        }
        entries.bytes += size;
        entries
            .map
            .insert(key.into_boxed_str(), Entry { body_sha256, since });
    }

    /// What the memory holds against its budget, and how many entries it ever dropped for room
    /// before their ttl.
    pub fn usage(&self) -> Usage {
        let entries = self.entries.lock().expect("never poisoned");
        Usage {
            bytes: entries.bytes,
            evicted: entries.evicted,
        }
    }

    /// Whether the memory answers at `now`: it is on and was confirmed within [`CONFIRMED_FOR`].
    pub fn answers(&self, now: Instant) -> bool {
        self.enabled() && self.entries.lock().expect("never poisoned").answers(now)
    }

    /// Records a confirmation that started at `asked_at` and found `purged` since the last one:
    /// those entries are forgotten, as their rows may be gone. Returns how many were.
    pub fn confirm(&self, purged: &PurgedKeys, asked_at: Instant) -> usize {
        let mut entries = self.entries.lock().expect("never poisoned");
        let entries = &mut *entries;
        let forgotten = match purged {
            PurgedKeys::Nothing => 0,
            PurgedKeys::Listed(keys) => {
                let mut n = 0;
                for (integration, event_id) in keys {
                    let key = key(integration, event_id);
                    if entries.map.remove(key.as_str()).is_some() {
                        entries.bytes -= cost(&key);
                        n += 1;
                    }
                }
                n
            }
            PurgedKeys::All => {
                let n = entries.map.len();
                entries.map.clear();
                entries.bytes = 0;
                n
            }
        };
        if *purged != PurgedKeys::Nothing {
            entries.epoch += 1;
        }
        // A confirmation that started before the last one recorded says nothing newer.
        if entries.confirmed_at.is_none_or(|at| at < asked_at) {
            entries.confirmed_at = Some(asked_at);
        }
        forgotten
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let entries = self.entries.lock().unwrap();
        (entries.map.len(), entries.bytes)
    }
}

#[cfg(test)]
#[path = "recent_tests.rs"]
mod tests;
