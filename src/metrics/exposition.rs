//! Reading a Prometheus text exposition back: the bench reads its children's `/metrics`, and
//! tests read a process's registry.

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

/// The cumulative buckets of the histogram whose bucket series is `name` (`…_bucket`), summed
/// over every label but `le`, as (upper bound, observations at or under it), in order of bound;
/// `+Inf` is [`f64::INFINITY`].
pub fn histogram_buckets(exposition: &str, name: &str) -> Vec<(f64, f64)> {
    let mut buckets: Vec<(f64, f64)> = Vec::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(name).and_then(|r| r.strip_prefix('{')) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once('}') else {
            continue;
        };
        let le = labels
            .split(',')
            .find_map(|l| l.strip_prefix("le=\"")?.strip_suffix('"'))
            .and_then(|b| match b {
                "+Inf" => Some(f64::INFINITY),
                b => b.parse::<f64>().ok(),
            });
        let n = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok());
        let (Some(le), Some(n)) = (le, n) else {
            continue;
        };
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, total)) => *total += n,
            None => buckets.push((le, n)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// The smallest bucket bound under which at least `q` (0..=1) of the observations made between
/// two readings of one histogram fall: an upper bound of their `q` quantile, as fine as the
/// buckets. `None` when nothing was observed in between.
pub fn quantile_bound(before: &[(f64, f64)], after: &[(f64, f64)], q: f64) -> Option<f64> {
    let earlier = |le: f64| {
        before
            .iter()
            .find(|(b, _)| *b == le)
            .map_or(0.0, |(_, n)| *n)
    };
    let grown: Vec<(f64, f64)> = after.iter().map(|&(le, n)| (le, n - earlier(le))).collect();
    let total = grown.last()?.1;
    if total <= 0.0 {
        return None;
    }
    grown
        .iter()
        .find(|(_, n)| *n >= q * total)
        .map(|(le, _)| *le)
}

#[cfg(test)]
mod tests {
    use super::{counter_sum, histogram_buckets, quantile_bound};

    const HISTOGRAM: &str = "\
# TYPE hookgate_receiver_request_duration_seconds histogram
hookgate_receiver_request_duration_seconds_sum{integration=\"a/x\"} 0.5
hookgate_receiver_request_duration_seconds_count{integration=\"a/x\"} 10
hookgate_receiver_request_duration_seconds_bucket{le=\"0.001\",integration=\"a/x\"} 2
hookgate_receiver_request_duration_seconds_bucket{le=\"0.002\",integration=\"a/x\"} 9
hookgate_receiver_request_duration_seconds_bucket{le=\"+Inf\",integration=\"a/x\"} 10
hookgate_receiver_request_duration_seconds_bucket{le=\"0.001\",integration=\"b/y\"} 0
hookgate_receiver_request_duration_seconds_bucket{le=\"0.002\",integration=\"b/y\"} 1
hookgate_receiver_request_duration_seconds_bucket{le=\"+Inf\",integration=\"b/y\"} 2
hookgate_other_bucket{le=\"0.001\"} 100
";

    #[test]
    fn buckets_are_summed_over_labels_but_le_and_ordered() {
        let b = histogram_buckets(
            HISTOGRAM,
            "hookgate_receiver_request_duration_seconds_bucket",
        );
        assert_eq!(b, vec![(0.001, 2.0), (0.002, 10.0), (f64::INFINITY, 12.0)]);
        assert!(histogram_buckets(HISTOGRAM, "hookgate_missing_bucket").is_empty());
    }

    #[test]
    fn the_quantile_bound_reads_only_what_was_observed_in_between() {
        let before = [(0.001, 2.0), (0.002, 10.0), (f64::INFINITY, 12.0)];
        // 10 more: 8 at or under 1 ms, 1 under 2 ms, 1 above.
        let after = [(0.001, 10.0), (0.002, 19.0), (f64::INFINITY, 22.0)];
        assert_eq!(quantile_bound(&before, &after, 0.5), Some(0.001));
        assert_eq!(quantile_bound(&before, &after, 0.8), Some(0.001));
        assert_eq!(quantile_bound(&before, &after, 0.9), Some(0.002));
        assert_eq!(quantile_bound(&before, &after, 0.99), Some(f64::INFINITY));
        // The slowest (q = 1) is in the first bucket holding every observation: 2 ms here, though
        // the +Inf bucket had one before.
        let calmer = [(0.001, 10.0), (0.002, 20.0), (f64::INFINITY, 22.0)];
        assert_eq!(quantile_bound(&before, &calmer, 1.0), Some(0.002));
        assert_eq!(quantile_bound(&before, &after, 1.0), Some(f64::INFINITY));
        // Read against nothing, the same buckets say otherwise: 19 of 22 under 2 ms.
        assert_eq!(quantile_bound(&[], &after, 0.8), Some(0.002));
        assert_eq!(quantile_bound(&after, &after, 0.5), None);
        assert_eq!(quantile_bound(&[], &[], 0.5), None);
    }

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
        assert_eq!(counter_sum(text, "hookgate_events_handed_over_total"), 12.0);
        assert_eq!(counter_sum(text, "hookgate_missing_total"), 0.0);
        assert_eq!(counter_sum("plain_total 3\n", "plain_total"), 3.0);
    }
}
