//! The ordering gate as data. An integration with `spec.delivery.ordering` sends each resource's
//! events in version order: one delivery per resource at a time, under a lock the inbox keeps,
//! and never a version at or below the last one delivered. [`entry`] reads an event's key before
//! any lock is taken and [`verdict`] decides once the lock was asked for; the worker does the
//! locking, recording and unlocking. Pure and synchronous.

use crate::crd::OrderingSpec;
use crate::route::json_pointers::{Found, find};
use chrono::{DateTime, SecondsFormat, Utc};
use std::time::Duration;

/// How long an event is put back while another delivery of its resource holds the lock.
pub const BUSY_RECHECK: Duration = Duration::from_millis(200);

/// How a claimed event meets the gate, read from its body before any lock is taken.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// The integration does not order its events.
    Unordered,
    /// The integration orders its events but the body lacks a usable resource id or version:
    /// delivered ungated, and counted in `ordering_ungated`.
    Unkeyed,
    /// Take this resource's lock, then compare `version` with the stored one.
    Keyed { resource: String, version: Version },
}

pub fn entry(ordering: Option<&OrderingSpec>, body: &[u8]) -> Entry {
    let Some(spec) = ordering else {
        return Entry::Unordered;
    };
    match key(body, spec) {
        Some((resource, version)) => Entry::Keyed { resource, version },
        None => Entry::Unkeyed,
    }
}

/// Resource id and version from the body; `None` when either is missing or unusable.
fn key(body: &[u8], spec: &OrderingSpec) -> Option<(String, Version)> {
    let pointers = [
        spec.resource_id_pointer.as_str(),
        spec.version_pointer.as_str(),
    ];
    let [resource, version] = <[Option<Found>; 2]>::try_from(find(body, &pointers)?).ok()?;
    Some((resource?.text()?, Version::of(&version?)?))
}

/// The inbox's answer when asked for a resource's lock.
#[derive(Debug, Clone, PartialEq)]
pub enum Lock {
    /// Another delivery holds it, or the inbox could not be asked.
    Busy,
    /// Taken, with the stored form of the last delivered version, if any.
    Held(Option<String>),
}

/// What to do with a keyed event at the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Put the event back without counting an attempt; look again after this long.
    Requeue(Duration),
    /// Deliver; on success the stored version moves from `from` to `to` (stored forms), unless
    /// another delivery moved it first.
    Deliver { from: Option<String>, to: String },
    /// Deliver and leave the stored version alone: an integer and a timestamp cannot be
    /// ordered. Counted in `ordering_ungated`.
    DeliverUnfenced,
    /// Do not deliver: the event ends ignored, with this reason.
    Ignore { reason: &'static str },
}

pub fn verdict(lock: Lock, incoming: &Version) -> Verdict {
    let Lock::Held(stored) = lock else {
        return Verdict::Requeue(BUSY_RECHECK);
    };
    // A stored version that does not parse counts as none, so the resource is not stuck
    // behind it: the event is delivered and its version replaces it.
    let last = stored.as_deref().and_then(Version::parse_stored);
    match gate(last.as_ref(), incoming) {
        Gate::Deliver => Verdict::Deliver {
            from: stored,
            to: incoming.to_stored(),
        },
        Gate::KindMismatch => Verdict::DeliverUnfenced,
        stop @ (Gate::Stale | Gate::DuplicateVersion) => Verdict::Ignore {
            reason: stop
                .ignored_reason()
                .expect("stale and duplicate have reasons"),
        },
    }
}

/// A resource version for the ordering gate.
#[derive(Debug, Clone, PartialEq)]
pub enum Version {
    Int(i128),
    Time(DateTime<Utc>),
}

impl Version {
    /// From a JSON value: integers (JSON numbers without fraction, or strings of ASCII digits with
    /// optional leading '-', compared as numbers), or RFC 3339 strings. Anything else `None`.
    pub fn of(v: &Found) -> Option<Version> {
        match v {
            // as_i64/as_u64 are None for floats, so 4.5 (and 4.0, written with a fraction) fail.
            Found::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .map(Version::Int),
            // Counters often arrive as strings; compared as text, "9" would come after "10".
            Found::String(s) => parse_int(s).map(Version::Int).or_else(|| {
                let time = DateTime::parse_from_rfc3339(s).ok()?;
                Some(Version::Time(time.to_utc()))
            }),
            Found::Other => None,
        }
    }

    /// Stored text form, round-trips through `parse_stored` (e.g. "i:42",
    /// "t:2026-01-01T00:00:00.000000000Z").
    pub fn to_stored(&self) -> String {
        match self {
            Version::Int(i) => format!("i:{i}"),
            // Fixed nanosecond width and 'Z' so equal instants always store as equal text.
            Version::Time(t) => format!("t:{}", t.to_rfc3339_opts(SecondsFormat::Nanos, true)),
        }
    }

    pub fn parse_stored(s: &str) -> Option<Version> {
        if let Some(int) = s.strip_prefix("i:") {
            parse_int(int).map(Version::Int)
        } else {
            let time = DateTime::parse_from_rfc3339(s.strip_prefix("t:")?).ok()?;
            Some(Version::Time(time.to_utc()))
        }
    }
}

/// Stricter than `i128::from_str`, which would also take "+5".
fn parse_int(s: &str) -> Option<i128> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Deliver,
    Stale,
    DuplicateVersion,
    KindMismatch,
}

/// Compare an event's version with the last delivered one (`None` = resource never delivered).
/// Int vs Time -> `KindMismatch` (the worker delivers ungated and counts it).
pub fn gate(last: Option<&Version>, incoming: &Version) -> Gate {
    use std::cmp::Ordering;
    let order = match (last, incoming) {
        (None, _) => return Gate::Deliver,
        (Some(Version::Int(l)), Version::Int(i)) => i.cmp(l),
        (Some(Version::Time(l)), Version::Time(i)) => i.cmp(l),
        (Some(_), _) => return Gate::KindMismatch,
    };
    match order {
        Ordering::Greater => Gate::Deliver,
        Ordering::Equal => Gate::DuplicateVersion,
        Ordering::Less => Gate::Stale,
    }
}

impl Gate {
    /// The reason stored on an event the gate keeps from the destination.
    pub fn ignored_reason(self) -> Option<&'static str> {
        match self {
            Gate::Stale => Some("stale_version"),
            Gate::DuplicateVersion => Some("duplicate_version"),
            Gate::Deliver | Gate::KindMismatch => None,
        }
    }
}

#[cfg(test)]
#[path = "ordering_tests.rs"]
mod tests;
