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

/// `name`'s samples in a Prometheus text exposition, summed over their labels (0 when absent).
pub fn counter_sum(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            // `name{labels} value` or `name value`; not another metric that starts with `name`.
            let value = match rest.as_bytes().first()? {
                b'{' => rest.rsplit_once('}')?.1,
                b' ' => rest,
                _ => return None,
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .sum()
}

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
    Ok(names.map(|name| counter_sum(&text, name)))
}

#[cfg(test)]
mod tests {
    use super::{HANDED_OVER, counter_sum};

    #[test]
    fn a_counter_is_summed_over_its_labels_and_nothing_else() {
        let text = "\
# HELP hookgate_events_handed_over New events ...
# TYPE hookgate_events_handed_over counter
hookgate_events_handed_over_total{integration=\"a/x\"} 7
hookgate_events_handed_over_total{integration=\"b/y\"} 5
hookgate_events_handed_over_total_other{integration=\"a/x\"} 100
hookgate_requests_total{integration=\"a/x\",outcome=\"accepted\"} 12
";
        assert_eq!(counter_sum(text, HANDED_OVER), 12.0);
        assert_eq!(counter_sum(text, "hookgate_missing_total"), 0.0);
        assert_eq!(counter_sum("plain_total 3\n", "plain_total"), 3.0);
    }
}
