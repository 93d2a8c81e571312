//! Where a busy worker's next claim starts. Pure: the pool asks it which claim to make and tells
//! it what the claim returned.
//!
//! A full claim looks for expired leases and for every integration with waiting events, and walks
//! each one's waiting events from its oldest end, where the entries of events processed since the
//! last VACUUM pile up; while a backlog lasts, that walk grows with every event delivered. Between
//! full claims, a worker looks only at the integrations claims served in the last [`KEEP`], each
//! from the oldest due time it last claimed of it, past those entries. Rows due before that point
//! are only ever an insert that committed late, a released event or an expired lease, and the
//! next full claim, at most [`FULL_CLAIM_EVERY`] later, finds them. An integration not served
//! lately is looked at too, from its oldest end, once events of it are stored for a claim and the
//! signal names it (`inbox::Arrivals`); otherwise the next full claim finds it. Before, a quiet
//! tenant's events waited for that full claim, up to a second, while another integration kept
//! the pool busy (docs/performance.md, round 34).
//!
//! A full claim that finds nothing, or fewer events than it asked for, took all that was due.
//! Until events are stored for a claim (the signal of `inbox::Arrivals`) or a poll interval has
//! passed (a retry coming due, a lease expiring), another claim would find nothing either: the
//! pool waits instead. Without this rule a pool kept busy by handed-over events claimed each time
//! one of them woke it: hundreds of empty claims a second at 3,400 events/s (docs/performance.md,
//! round 14).

use crate::inbox::Claimed;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Longest time between two full claims of a busy worker.
pub const FULL_CLAIM_EVERY: Duration = Duration::from_secs(1);

/// How long the claims between full ones keep looking at an integration after a claim last
/// served it: its next events are claimed at once, not at the next full claim.
pub const KEEP: Duration = Duration::from_secs(10);

/// The most integrations those claims look at, the most recently served: each is one lookup in
/// every claim.
pub const KEPT: usize = 64;

/// Which claim to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Expired leases and every due row ([`crate::inbox::Inbox::claim`]).
    Full,
    /// Due rows of these integrations, each from its due time on
    /// ([`crate::inbox::Inbox::claim_due_from`]).
    From(Vec<(String, DateTime<Utc>)>),
}

/// An integration a claim served lately.
#[derive(Debug, Clone, Copy)]
struct Served {
    /// The oldest due time the last claim that served it took of it.
    from: DateTime<Utc>,
    at: Instant,
}

#[derive(Debug, Default)]
pub struct Cursor {
    served: BTreeMap<String, Served>,
    /// Integrations not served lately whose events were stored for a claim since: the next
    /// claims look at them from their oldest end, until one serves them or takes all that is due.
    stored: BTreeSet<String>,
    full_at: Option<Instant>,
    /// The last claim found nothing: the next looks from the start.
    drained_past: bool,
    /// When a full claim last found less than it asked for, until events are stored for a claim.
    drained_at: Option<Instant>,
}

impl Cursor {
    pub fn next(&self, now: Instant) -> Claim {
        let any = !self.served.is_empty() || !self.stored.is_empty();
        match self.full_at {
            Some(at)
                if !self.drained_past
                    && any
                    && now.saturating_duration_since(at) < FULL_CLAIM_EVERY =>
            {
                let from = self.served.iter().map(|(n, s)| (n.clone(), s.from));
                let stored = self
                    .stored
                    .iter()
                    .map(|n| (n.clone(), DateTime::UNIX_EPOCH));
                Claim::From(from.chain(stored).collect())
            }
            _ => Claim::Full,
        }
    }

    /// The integrations claims served lately, least recently first: within each turn of a claim,
    /// an integration not listed goes first, then in this order, so that claims too small for a
    /// turn of every integration serve each in turn.
    pub fn served(&self) -> Vec<String> {
        let mut by_time: Vec<(&Instant, &String)> =
            self.served.iter().map(|(n, s)| (&s.at, n)).collect();
        by_time.sort();
        by_time.into_iter().map(|(_, n)| n.clone()).collect()
    }

    /// Records what `claim`, asking for `asked` events, returned. An empty claim sends the next
    /// one back to a full claim: the region past the cursors is drained. A full claim that got
    /// fewer than it asked for took everything due: the pool waits before the next.
    /// Each integration the claim returned is served now, from the oldest due time it took of it.
    pub fn claimed(&mut self, claim: &Claim, batch: &[Claimed], asked: usize, now: Instant) {
        let full = *claim == Claim::Full;
        if full {
            self.full_at = Some(now);
        }
        self.drained_at = (full && batch.len() < asked).then_some(now);
        self.drained_past = batch.is_empty();
        if full || batch.len() < asked {
            // It looked at every integration stored for, and took all that was due of them.
            self.stored.clear();
        }
        let mut from: BTreeMap<&str, DateTime<Utc>> = BTreeMap::new();
        for (name, due) in batch
            .iter()
            .filter_map(|c| Some((c.integration.as_str(), c.due_at?)))
        {
            from.entry(name)
                .and_modify(|at| *at = (*at).min(due))
                .or_insert(due);
        }
        for (name, due) in from {
            let served = Served { from: due, at: now };
            self.stored.remove(name);
            self.served.insert(name.to_owned(), served);
        }
        self.served
            .retain(|_, s| now.saturating_duration_since(s.at) < KEEP);
        while self.served.len() > KEPT {
            let oldest = self.served.iter().min_by_key(|(_, s)| s.at);
            let name = oldest.map(|(n, _)| n.clone()).expect("more than KEPT");
            self.served.remove(&name);
        }
    }

    /// Events were stored for a claim, of `integrations` among others: the next claim may find
    /// them, and looks at those of them not served lately (at most [`KEPT`]).
    pub fn events_stored(&mut self, integrations: BTreeSet<String>) {
        self.drained_at = None;
        for name in integrations {
            if self.stored.len() >= KEPT {
                break;
            }
            if !self.served.contains_key(&name) {
                self.stored.insert(name);
            }
        }
    }

    /// How long to wait before a claim could find anything: zero unless the last full claim
    /// found less than it asked for and no event has been stored for a claim since, in which
    /// case the rest of the `poll` interval that began with that claim.
    pub fn wait_before_claim(&self, now: Instant, poll: Duration) -> Duration {
        match self.drained_at {
            Some(at) => poll.saturating_sub(now.saturating_duration_since(at)),
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
#[path = "cursor_tests.rs"]
mod tests;
