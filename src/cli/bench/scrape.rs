//! Counters and histograms read from a child's `/metrics`: how the pipeline phase sees what
//! share of its deliveries the receiver handed over to the workers of its own process, and how
//! many claims the workers made for the rest; how the half-rate phase and the pipeline steps see
//! the receiver's own timing of its answers and transactions, and how the steps see the workers'
//! timing of their claims and completions.

use anyhow::Context;
use std::net::SocketAddr;
use std::time::Duration;

/// The events handed over at intake (`src/metrics/register.rs`), summed over integrations.
pub const HANDED_OVER: &str = "hookgate_events_handed_over_total";
/// The workers' claims, found something or not (`src/metrics/register.rs`), summed.
pub const CLAIMS: &str = "hookgate_claims_total";

/// Duplicates the receiver answered from its memory of committed keys (`src/metrics/register.rs`).
pub const REMEMBERED: &str = "hookgate_duplicates_remembered_total";

/// The receiver's group commit (`src/metrics/register.rs`): events committed, and transactions.
pub const BATCHED_EVENTS: &str = "hookgate_intake_batch_size_sum";
pub const BATCHES: &str = "hookgate_intake_batch_size_count";

/// The receiver's 2xx answers: the seconds they took, summed, and how many (`src/metrics/register.rs`).
pub const ANSWER_SECONDS: &str = "hookgate_receiver_request_duration_seconds_sum";
pub const ANSWERS: &str = "hookgate_receiver_request_duration_seconds_count";

/// The receiver's 2xx answers and its transactions, timed (`src/metrics/register.rs`).
const ANSWER_BUCKETS: &str = "hookgate_receiver_request_duration_seconds_bucket";
const COMMIT_BUCKETS: &str = "hookgate_intake_commit_duration_seconds_bucket";
/// The workers' claims and completion transactions, timed (`src/metrics/register.rs`).
const CLAIM_BUCKETS: &str = "hookgate_claim_duration_seconds_bucket";
const COMPLETION_BUCKETS: &str = "hookgate_completion_commit_duration_seconds_bucket";

/// Each of `names` summed, from one read of the `/metrics` of the admin listener at `admin`.
pub async fn counters<const N: usize>(
    admin: SocketAddr,
    names: [&str; N],
) -> anyhow::Result<[f64; N]> {
    let text = exposition(admin).await?;
    Ok(names.map(|name| crate::metrics::counter_sum(&text, name)))
}

/// The cumulative buckets of each histogram of `names` (`…_bucket`), summed over labels but
/// `le`, from one read (`crate::metrics::histogram_buckets`).
pub async fn histograms<const N: usize>(
    admin: SocketAddr,
    names: [&str; N],
) -> anyhow::Result<[Vec<(f64, f64)>; N]> {
    let text = exposition(admin).await?;
    Ok(names.map(|name| crate::metrics::histogram_buckets(&text, name)))
}

/// The receiver's histograms of its 2xx answers and of its transactions, from one read.
pub async fn timed(admin: SocketAddr) -> anyhow::Result<[Vec<(f64, f64)>; 2]> {
    histograms(admin, [ANSWER_BUCKETS, COMMIT_BUCKETS]).await
}

/// The workers' histograms of their claims and of their completion transactions, from one read.
pub async fn workers_timed(admin: SocketAddr) -> anyhow::Result<[Vec<(f64, f64)>; 2]> {
    histograms(admin, [CLAIM_BUCKETS, COMPLETION_BUCKETS]).await
}

/// `more`'s cumulative buckets added to `sum`'s, bound by bound: the same histogram read from
/// several processes. An empty `sum` takes `more`'s.
pub fn add_buckets(sum: &mut Vec<(f64, f64)>, more: &[(f64, f64)]) {
    if sum.is_empty() {
        sum.extend_from_slice(more);
        return;
    }
    for (le, n) in sum.iter_mut() {
        *n += more.iter().find(|(l, _)| l == le).map_or(0.0, |(_, m)| *m);
    }
}

/// The `q` quantile (0.99 for the p99, 1 for the slowest) of each of two histograms observed
/// between two reads ([`timed`], [`workers_timed`]) in ms: bounds of their doubling buckets,
/// infinite past the last one (`None`: nothing observed).
pub fn own_bounds_ms(
    before: &[Vec<(f64, f64)>; 2],
    after: &[Vec<(f64, f64)>; 2],
    q: f64,
) -> [Option<f64>; 2] {
    [0, 1].map(|k| crate::metrics::quantile_bound(&before[k], &after[k], q).map(|s| s * 1e3))
}

async fn exposition(admin: SocketAddr) -> anyhow::Result<String> {
    let url = format!("http://{admin}/metrics");
    Ok(reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .with_context(|| format!("reading {url}"))?
        .text()
        .await?)
}

#[cfg(test)]
mod tests {
    use super::add_buckets;

    #[test]
    fn buckets_of_two_processes_add_bound_by_bound() {
        let mut sum = Vec::new();
        add_buckets(
            &mut sum,
            &[(0.001, 1.0), (0.002, 3.0), (f64::INFINITY, 4.0)],
        );
        add_buckets(
            &mut sum,
            &[(0.001, 0.0), (0.002, 2.0), (f64::INFINITY, 5.0)],
        );
        assert_eq!(sum, [(0.001, 1.0), (0.002, 5.0), (f64::INFINITY, 9.0)]);
    }
}
