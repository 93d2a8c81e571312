//! Counters read from a child's `/metrics`: how the pipeline phase sees what share of its
//! deliveries the receiver handed over to the workers of its own process, and how many claims
//! the workers made for the rest.

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

/// Each of `names` summed, from one read of the `/metrics` of the admin listener at `admin`.
pub async fn counters<const N: usize>(
    admin: SocketAddr,
    names: [&str; N],
) -> anyhow::Result<[f64; N]> {
    let url = format!("http://{admin}/metrics");
    let text = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .with_context(|| format!("reading {url}"))?
        .text()
        .await?;
    Ok(names.map(|name| crate::metrics::counter_sum(&text, name)))
}
