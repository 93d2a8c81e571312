//! The dedupe rule of a group-committed batch, with the database's answers passed in: no I/O.
//!
//! Each event gets the outcome it would have had, had the events been inserted one after the other
//! in arrival order: a signature digest seen twice is a replay, an event id seen twice a duplicate
//! (or a conflict when the bodies differ, the first body kept). The database is asked three things
//! in turn, and each stage names the events to ask about and takes the answer:
//! [`Nonces`] (which digests were fresh), [`Inserts`] (which rows were inserted) and [`Known`]
//! (the stored body hash of each id already taken). [`Decided`] then names the conflicts to count
//! and the digests to give back, as a rolled-back attempt would have left them.

use super::{InsertOutcome, NewEvent};
use std::collections::{HashMap, HashSet};

/// (integration, event id): the inbox's unique key.
pub(super) type Key = (String, String);

/// What the rule reads of one event.
#[derive(Debug, Clone, Copy)]
pub(super) struct Incoming<'e> {
    pub integration: &'e str,
    pub event_id: &'e str,
    pub body_sha256: &'e [u8],
    /// The signature digest, for an event whose id the signature does not cover.
    pub nonce: Option<&'e [u8]>,
    /// Listed by the provider's API (catch-up) rather than received as a webhook.
    pub caught_up: bool,
}

/// What the rule reads of a stored row whose id an event also has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stored {
    pub body_sha256: Vec<u8>,
    /// The row was stored by catch-up.
    pub caught_up: bool,
}

impl<'e> From<&'e NewEvent> for Incoming<'e> {
    fn from(ev: &'e NewEvent) -> Self {
        Self {
            integration: &ev.integration,
            event_id: &ev.event_id,
            body_sha256: &ev.body_sha256,
            nonce: ev.needs_nonce.then_some(&ev.digest[..]),
            caught_up: ev.arrival == super::Arrival::CatchUp,
        }
    }
}

impl Incoming<'_> {
    pub fn key(&self) -> Key {
        (self.integration.to_string(), self.event_id.to_string())
    }
}

/// The events and the outcomes decided so far, by arrival index.
#[derive(Debug)]
struct Batch<'e> {
    events: Vec<Incoming<'e>>,
    out: Vec<Option<InsertOutcome>>,
}

/// Stage 1: a digest repeated inside the batch is a replay of its first copy; the first copies
/// are claimed in the database, where a digest still remembered is a replay too.
#[derive(Debug)]
pub(super) struct Nonces<'e> {
    batch: Batch<'e>,
    ask: Vec<usize>,
}

impl<'e> Nonces<'e> {
    pub fn new(events: Vec<Incoming<'e>>) -> Self {
        let mut out = vec![None; events.len()];
        let mut seen = HashSet::new();
        let mut ask = Vec::new();
        for (i, ev) in events.iter().enumerate() {
            let Some(digest) = ev.nonce else { continue };
            if seen.insert((ev.integration, digest)) {
                ask.push(i);
            } else {
                out[i] = Some(InsertOutcome::Replay);
            }
        }
        Self {
            batch: Batch { events, out },
            ask,
        }
    }

    /// The events whose digest to claim. Their digests are distinct: PostgreSQL refuses an
    /// `ON CONFLICT DO UPDATE` that would touch one row twice.
    pub fn ask(&self) -> &[usize] {
        &self.ask
    }

    /// `fresh[k]`: whether the digest of `ask()[k]` was claimed (not remembered from earlier).
    pub fn answer(mut self, fresh: &[bool]) -> Inserts<'e> {
        assert_eq!(fresh.len(), self.ask.len(), "one answer per digest claimed");
        for (&i, &fresh) in self.ask.iter().zip(fresh) {
            if !fresh {
                self.batch.out[i] = Some(InsertOutcome::Replay);
            }
        }
        // Arrival order, not the order of the stages, decides which copy of an id is first.
        let mut leaders = HashSet::new();
        let (ask, followers) = (0..self.batch.events.len())
            .filter(|&i| self.batch.out[i].is_none())
            .partition(|&i| {
                let ev = &self.batch.events[i];
                leaders.insert((ev.integration, ev.event_id))
            });
        Inserts {
            batch: self.batch,
            ask,
            followers,
        }
    }
}

/// Stage 2: the first event of each (integration, event id) left is inserted; the others wait
/// to be compared with whatever row holds their id.
#[derive(Debug)]
pub(super) struct Inserts<'e> {
    batch: Batch<'e>,
    ask: Vec<usize>,
    followers: Vec<usize>,
}

impl<'e> Inserts<'e> {
    /// The events to insert; their keys are distinct.
    pub fn ask(&self) -> &[usize] {
        &self.ask
    }

    /// The row id of each key the insert created; a key missing was already taken.
    pub fn answer(mut self, ids: &HashMap<Key, i64>) -> Known<'e> {
        let mut taken = Vec::new();
        for &i in &self.ask {
            match ids.get(&self.batch.events[i].key()) {
                Some(&id) => self.batch.out[i] = Some(InsertOutcome::Inserted { id }),
                None => taken.push(i),
            }
        }
        taken.append(&mut self.followers);
        Known {
            batch: self.batch,
            ask: taken,
        }
    }
}

/// Stage 3: an event whose id was taken is a provider retry when its body matches the stored
/// one, and a conflict otherwise (also when no row could be read back). When either copy came
/// from catch-up it is a duplicate whatever the bytes: a provider's API renders an event in other
/// bytes than its webhook (Paddle's webhook adds `notification_id`, spacing differs), and the
/// id alone is the provider's word that it is the same event.
#[derive(Debug)]
pub(super) struct Known<'e> {
    batch: Batch<'e>,
    ask: Vec<usize>,
}

impl Known<'_> {
    /// The events whose stored body hash to read; empty when every event is decided.
    pub fn ask(&self) -> &[usize] {
        &self.ask
    }

    /// The stored body hash of each key asked about that exists.
    pub fn answer(mut self, stored: &HashMap<Key, Stored>) -> Decided {
        let mut conflicts = Vec::new();
        for &i in &self.ask {
            let ev = &self.batch.events[i];
            let same = stored.get(&ev.key()).is_some_and(|s| {
                s.body_sha256[..] == ev.body_sha256[..] || s.caught_up || ev.caught_up
            });
            self.batch.out[i] = Some(if same {
                InsertOutcome::Duplicate
            } else {
                conflicts.push(i);
                InsertOutcome::Conflict
            });
        }
        let events = &self.batch.events;
        let forget = self
            .ask
            .iter()
            .copied()
            .filter(|&i| events[i].nonce.is_some())
            .collect();
        Decided {
            outcomes: self
                .batch
                .out
                .into_iter()
                .map(|o| o.expect("every stage decides what it asked about"))
                .collect(),
            conflicts,
            forget,
        }
    }
}

/// Every event's outcome, and what is left to write before the batch commits.
#[derive(Debug, PartialEq)]
pub(super) struct Decided {
    outcomes: Vec<InsertOutcome>,
    conflicts: Vec<usize>,
    forget: Vec<usize>,
}

impl Decided {
    /// The conflicts, each counted on the row it collided with.
    pub fn conflicts(&self) -> &[usize] {
        &self.conflicts
    }

    /// The events not stored whose digest was claimed: their digests are given back, as a
    /// rolled-back attempt would have left them.
    pub fn forget(&self) -> &[usize] {
        &self.forget
    }

    pub fn outcomes(self) -> Vec<InsertOutcome> {
        self.outcomes
    }
}

#[cfg(test)]
#[path = "dedupe_tests.rs"]
mod tests;
