//! The pipeline's decisions, free of I/O so that they are tested on their own: whether a rate
//! was sustained, which rate to try next, and how long each event took to be delivered.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::time::Duration;

/// Completion latency (scheduled send → processed) a sustainable rate keeps its p99 under.
pub const LATENCY_LIMIT: Duration = Duration::from_secs(1);

/// One rate tried: what was offered, and what came in and out.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Events per second the open loop scheduled.
    pub offered: f64,
    /// Requests that did not get `200 {"duplicate":false}` (refused, failed, or never sent).
    pub not_accepted: usize,
    /// Whether the load fell too far behind its schedule and stopped sending.
    pub stopped_behind: bool,
    /// The most connections the load generator had open: the requests in flight it needed.
    pub connections: usize,
    /// Events accepted per second over the load.
    pub intake: f64,
    /// The answers' p99, from each request's scheduled instant.
    pub intake_p99_ms: f64,
    /// Events delivered to the sink per second over the load.
    pub delivered: f64,
    /// Events stored but not delivered when the load ended.
    pub pending: i64,
    /// Completion latency, from each request's scheduled instant to its `processed_at`.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub sustainable: bool,
    /// CPU per accepted event during the load, by process (Linux only).
    pub cpu: Option<super::cpu::PerEvent>,
    /// Of the events accepted during the load, the percentage handed over to the workers of the
    /// receiver's process (`None`: its counters could not be read).
    pub handed_pct: Option<f64>,
    /// The workers' claims during the load per 1,000 accepted events (`None`: as above).
    pub claims_per_1k: Option<f64>,
    /// WAL bytes written per accepted event, from the load's start until its events were
    /// delivered or the latency limit passed: the insert, the hand-over or claim, the completion.
    pub wal_bytes_per_event: Option<f64>,
    /// What PostgreSQL's autovacuum did in the bench's database from the load's start until its
    /// events were delivered (`None`: nothing), work on the same cores that the figures include.
    pub autovacuum: Option<String>,
    /// The p99 of the receiver's 2xx answers and of its transactions during the load, as it
    /// timed them itself: the bounds of its doubling buckets, in ms (`None`: not read, or over
    /// the last bucket).
    pub own_answers_p99_ms: Option<f64>,
    pub own_commits_p99_ms: Option<f64>,
    /// The same bounds for the slowest of each: a stall of a few hundred ms holds up every
    /// request in flight, too few of them to move a p99, but enough for the load generator's
    /// connections to run out (`None`: not read, or over the last bucket).
    pub own_answers_max_ms: Option<f64>,
    pub own_commits_max_ms: Option<f64>,
    /// The mean of the receiver's 2xx answers during the load, from its histogram's sum and
    /// count (exact, not a bucket bound), in ms. With every connection of the open loop busy,
    /// Little's law leaves each request connections / rate of round trip on average; what the
    /// mean does not take of it was spent outside the handler.
    pub own_answers_mean_ms: Option<f64>,
    /// The same of the workers' claims and of their completion transactions, over every
    /// process of the step.
    pub own_claims_p99_ms: Option<f64>,
    pub own_completions_p99_ms: Option<f64>,
    /// How late the open loop's requests left, p99 in ms: the part of `intake_p99_ms` spent
    /// before a request reached its connection (`None`: nothing sent).
    pub sent_late_p99_ms: Option<f64>,
    /// Of that lateness, what the connection cap caused: the share of the requests sent that
    /// found every connection busy and waited for one, and the share of the load's run the load
    /// generator spent so waiting, in percent. Late requests beyond those waits were the load
    /// generator's own delay.
    pub waited_at_cap_pct: Option<f64>,
    pub blocked_at_cap_pct: Option<f64>,
}

/// Sustainable: every event accepted, a backlog under one second of traffic at the end, and
/// completion latency p99 within [`LATENCY_LIMIT`].
pub fn sustainable(rate: f64, not_accepted: usize, pending: i64, p99: Duration) -> bool {
    not_accepted == 0 && (pending as f64) < rate && p99 <= LATENCY_LIMIT
}

/// The highest rate sustained so far.
pub fn best(tried: &[(f64, bool)]) -> Option<f64> {
    tried
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(r, _)| *r)
        .reduce(f64::max)
}

/// How far the search moves from a rate before it has one that held and one that did not. The
/// first rate (the closed loop's delivery rate) is seldom more than a quarter off, and doubling
/// or halving spent one of the few 60 s steps on a rate far from the answer.
const STRIDE: f64 = 1.25;

/// The next rate to try: `start` first; up by [`STRIDE`] while every rate held, down by it while
/// none did; then bisect between the highest rate that held and the lowest above it that did
/// not. A failure below a success (noise) is ignored: the question is how high it can go.
pub fn next_rate(start: f64, tried: &[(f64, bool)]) -> f64 {
    let ok = best(tried);
    let bad = tried
        .iter()
        .filter(|(r, held)| !held && ok.is_none_or(|o| *r > o))
        .map(|(r, _)| *r)
        .reduce(f64::min);
    let next = match (ok, bad) {
        (None, None) => start,
        (Some(o), None) => o * STRIDE,
        (None, Some(b)) => b / STRIDE,
        (Some(o), Some(b)) => (o + b) / 2.0,
    };
    next.round().max(1.0)
}

/// Event `k` of a run was due at `start + k / rate` and processed at `processed[k]` (`None`:
/// not yet at `read_at`, which is then its latency's lower bound: counted, not dropped).
pub fn completion_latencies(
    start: DateTime<Utc>,
    rate: f64,
    processed: &[Option<DateTime<Utc>>],
    read_at: DateTime<Utc>,
) -> Vec<Duration> {
    processed
        .iter()
        .enumerate()
        .map(|(k, done)| {
            let due = start + chrono::Duration::microseconds((k as f64 / rate * 1e6) as i64);
            (done.unwrap_or(read_at) - due)
                .to_std()
                .unwrap_or(Duration::ZERO)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_holds_with_a_small_backlog_and_a_fast_p99_only() {
        let ms = Duration::from_millis;
        assert!(sustainable(1000.0, 0, 999, ms(1000)));
        assert!(
            !sustainable(1000.0, 0, 1000, ms(10)),
            "one second of backlog"
        );
        assert!(!sustainable(1000.0, 0, 0, ms(1001)), "p99 over a second");
        assert!(!sustainable(1000.0, 1, 0, ms(10)), "an event refused");
    }

    #[test]
    fn the_search_steps_up_or_down_by_a_quarter_then_bisects() {
        assert_eq!(next_rate(1000.0, &[]), 1000.0);
        assert_eq!(next_rate(1000.0, &[(1000.0, true)]), 1250.0);
        assert_eq!(next_rate(1000.0, &[(1000.0, false)]), 800.0);
        assert_eq!(next_rate(1000.0, &[(1000.0, false), (800.0, false)]), 640.0);
        let bracketed = [(1000.0, true), (1250.0, false)];
        assert_eq!(next_rate(1000.0, &bracketed), 1125.0);
        let narrower = [(1000.0, true), (1250.0, false), (1125.0, true)];
        assert_eq!(next_rate(1000.0, &narrower), 1188.0);
        assert_eq!(best(&narrower), Some(1125.0));
        assert_eq!(best(&[(10.0, false)]), None);
    }

    #[test]
    fn a_failure_below_a_success_does_not_pull_the_search_down() {
        let noisy = [(1000.0, true), (800.0, false)];
        assert_eq!(next_rate(1000.0, &noisy), 1250.0);
        assert_eq!(next_rate(1.0, &[(1.0, false)]), 1.0, "never below 1/s");
    }

    #[test]
    fn latency_counts_from_the_schedule_and_unfinished_events_count_too() {
        let t0 = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap();
        let at = |ms| Some(t0 + chrono::Duration::milliseconds(ms));
        let read = t0 + chrono::Duration::seconds(5);
        // 10 events/s: due at 0, 100, 200, 300 ms.
        let l = completion_latencies(t0, 10.0, &[at(50), at(400), None, at(250)], read);
        let ms: Vec<u128> = l.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![50, 300, 4800, 0], "clock skew clamps to zero");
    }
}
