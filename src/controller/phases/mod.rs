//! Staged key rotation as a pure function: spec keys, the previous status and a clock reading go
//! in; phases, the next status and the requeue instant come out. Keeping the clock and I/O outside
//! lets every edge (exactly at retireAt, rollback, restarts) be tested with fixed instants.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, SubsecRound, TimeDelta, Utc};

use crate::crd::{KeySpec, KeyStatus};

/// A Retiring key used this recently still has senders that have not switched to the new key.
const IN_USE_WINDOW: TimeDelta = TimeDelta::hours(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Active,
    Retiring,
    Retired,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Active => "Active",
            Phase::Retiring => "Retiring",
            Phase::Retired => "Retired",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        [Phase::Active, Phase::Retiring, Phase::Retired]
            .into_iter()
            .find(|p| p.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeyPlan {
    pub id: String,
    pub phase: Phase,
    pub since: DateTime<Utc>,
    pub retire_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PhaseChange {
    pub id: String,
    pub from: Option<Phase>,
    pub to: Phase,
}

#[derive(Debug, Clone, PartialEq)]
pub struct KeysPlan {
    /// Every spec key in spec order with its phase and effective retire time (the receiver's not-after), INCLUDING retired ones.
    pub keys: Vec<KeyPlan>,
    /// What goes into status.keys: `keys` minus retired keys older than keep_retired.
    pub status: Vec<KeyStatus>,
    pub active: Option<String>,
    pub retiring_in_use: Vec<String>,
    pub next_transition: Option<DateTime<Utc>>,
    pub changes: Vec<PhaseChange>,
}

/// The previous status entry with its strings parsed; anything unparseable counts as absent.
struct Prev {
    phase: Option<Phase>,
    since: Option<DateTime<Utc>>,
    retire_at: Option<DateTime<Utc>>,
    last_used_at: Option<DateTime<Utc>>,
}

fn parse_time(s: Option<&String>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

use crate::time::after as add;

pub fn plan_keys(
    spec_keys: &[KeySpec],
    previous: &[KeyStatus],
    last_used: &HashMap<String, DateTime<Utc>>,
    overlap: Duration,
    keep_retired: Duration,
    now: DateTime<Utc>,
) -> KeysPlan {
    let mut prev: HashMap<&str, Prev> = HashMap::new();
    for s in previous {
        prev.entry(s.id.as_str()).or_insert_with(|| Prev {
            phase: Phase::parse(&s.phase),
            since: parse_time(s.since.as_ref()),
            retire_at: parse_time(s.retire_at.as_ref()),
            last_used_at: parse_time(s.last_used_at.as_ref()),
        });
    }
    // Status keeps whole seconds; recording whole seconds from the start makes the next
    // reconcile, which reads them back, compute exactly the same instants.
    let stamp = now.trunc_subsecs(0);
    // Keys are appended newest-last, so an unrecorded key older than a recorded one is not new:
    // it was dropped from status after keep_retired. Treating it as new would restart its overlap
    // and let the receiver accept a retired key again.
    let last_recorded = spec_keys
        .iter()
        .rposition(|k| prev.contains_key(k.id.as_str()));

    let mut keys = Vec::with_capacity(spec_keys.len());
    let mut newer_usable = false;
    // Newest first: whether a key is superseded depends only on the keys after it.
    for (i, spec) in spec_keys.iter().enumerate().rev() {
        let p = prev.get(spec.id.as_str());
        let prev_phase = p.and_then(|p| p.phase);
        let retire_at = if let Some(explicit) = spec.retire_at {
            Some(explicit)
        } else if let Some(p) = p.filter(|_| prev_phase == Some(Phase::Retired)) {
            // Retirement is sticky without an explicit retireAt, so a rollback cannot revive it.
            Some(p.retire_at.or(p.since).map_or(stamp, |t| t.min(stamp)))
        } else if p.is_none() && last_recorded.is_some_and(|r| i < r) {
            // Real retire time forgotten; any past instant rejects it, a fixed one keeps it stable.
            Some(DateTime::UNIX_EPOCH)
        } else if newer_usable {
            let superseded_at = p
                .filter(|_| prev_phase == Some(Phase::Retiring))
                .and_then(|p| p.since)
                .unwrap_or(stamp);
            Some(add(superseded_at, overlap).trunc_subsecs(0))
        } else {
            None
        };
        let phase = match retire_at {
            Some(t) if now >= t => Phase::Retired,
            _ if newer_usable => Phase::Retiring,
            _ => Phase::Active,
        };
        newer_usable |= phase != Phase::Retired;
        let since = p
            .filter(|_| prev_phase == Some(phase))
            .and_then(|p| p.since)
            .unwrap_or(stamp);
        // The inbox may have restarted and forgotten a use the status still remembers.
        let last_used_at = last_used
            .get(&spec.id)
            .copied()
            .max(p.and_then(|p| p.last_used_at));
        keys.push(KeyPlan {
            id: spec.id.clone(),
            phase,
            since,
            retire_at,
            last_used_at,
        });
    }
    keys.reverse();

    let drop_at = |k: &KeyPlan| match (k.phase, k.retire_at) {
        (Phase::Retired, Some(t)) => Some(add(t, keep_retired)),
        _ => None,
    };
    // Strictly within the window, so the flag clears exactly at last_used + 1h and that instant
    // can be scheduled.
    let in_use_until = |k: &KeyPlan| match (k.phase, k.last_used_at) {
        (Phase::Retiring, Some(t)) => t.checked_add_signed(IN_USE_WINDOW).filter(|&u| u > now),
        _ => None,
    };

    let mut plan = KeysPlan {
        keys: Vec::new(),
        status: Vec::new(),
        active: None,
        retiring_in_use: Vec::new(),
        next_transition: None,
        changes: Vec::new(),
    };
    for k in &keys {
        let listed = drop_at(k).is_none_or(|d| now < d);
        if listed {
            plan.status.push(KeyStatus {
                id: k.id.clone(),
                phase: k.phase.as_str().to_string(),
                since: Some(format_time(k.since)),
                retire_at: k.retire_at.map(format_time),
                last_used_at: k.last_used_at.map(format_time),
            });
        }
        let from = prev.get(k.id.as_str()).and_then(|p| p.phase);
        // A key in neither the old nor the new status changed nothing anyone can see; reporting
        // it would repeat the same event on every reconcile.
        if from != Some(k.phase) && (listed || prev.contains_key(k.id.as_str())) {
            plan.changes.push(PhaseChange {
                id: k.id.clone(),
                from,
                to: k.phase,
            });
        }
        if k.phase == Phase::Active {
            plan.active = Some(k.id.clone());
        }
        if in_use_until(k).is_some() {
            plan.retiring_in_use.push(k.id.clone());
        }
        plan.next_transition = [k.retire_at, drop_at(k), in_use_until(k)]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .chain(plan.next_transition)
            .min();
    }
    plan.keys = keys;
    plan
}

#[cfg(test)]
mod tests;
