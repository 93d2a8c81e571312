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

#[cfg(test)]
mod tests {
    use super::counter_sum;

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
