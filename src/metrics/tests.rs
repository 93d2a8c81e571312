use super::*;

#[test]
fn declared_series_start_at_zero_and_keep_their_counts_when_declared_again() {
    let m = Metrics::new();
    m.delivery("pay/stripe", "retry");
    Metrics::declare_outcomes(&m.deliveries, "pay/stripe", &["retry", "dead_letter"]);
    m.declare_keys("pay/stripe", ["v1", "v2"]);
    m.declare_catch_up("pay/stripe", &["network"]);
    m.verified("pay/stripe", "v2");
    m.declare_keys("pay/stripe", ["v2"]);
    let text = m.encode();
    for line in [
        "hookgate_delivery_attempts_total{integration=\"pay/stripe\",outcome=\"retry\"} 1\n",
        "hookgate_delivery_attempts_total{integration=\"pay/stripe\",outcome=\"dead_letter\"} 0\n",
        "hookgate_verified_requests_total{integration=\"pay/stripe\",key=\"v1\"} 0\n",
        "hookgate_verified_requests_total{integration=\"pay/stripe\",key=\"v2\"} 1\n",
        "hookgate_catch_up_errors_total{integration=\"pay/stripe\",reason=\"network\"} 0\n",
        "hookgate_catch_up_missing_total{integration=\"pay/stripe\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[test]
fn reconcile_errors_are_exposed_by_label() {
    let m = Metrics::new();
    // A family without series is left out of the exposition altogether.
    assert!(!m.encode().contains("reconcile_errors"));
    m.reconcile_error("patch_status");
    m.reconcile_error("patch_status");
    m.reconcile_error("read_secret");
    let text = m.encode();
    for line in [
        "# TYPE hookgate_reconcile_errors counter\n",
        "hookgate_reconcile_errors_total{error=\"patch_status\"} 2\n",
        "hookgate_reconcile_errors_total{error=\"read_secret\"} 1\n",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[test]
fn verified_requests_are_counted_by_key() {
    let m = Metrics::new();
    assert!(!m.encode().contains("verified_requests"));
    m.verified("pay/stripe", "v1");
    m.verified("pay/stripe", "v1");
    m.verified("pay/stripe", "v2");
    let text = m.encode();
    for line in [
        "# TYPE hookgate_verified_requests counter\n",
        "hookgate_verified_requests_total{integration=\"pay/stripe\",key=\"v1\"} 2\n",
        "hookgate_verified_requests_total{integration=\"pay/stripe\",key=\"v2\"} 1\n",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

fn phase_lines(m: &Metrics) -> Vec<String> {
    let mut lines: Vec<String> = m
        .encode()
        .lines()
        .filter(|l| l.starts_with("hookgate_key_phase{"))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

#[test]
fn key_phases_keep_one_series_per_key_and_drop_keys_that_left() {
    let m = Metrics::new();
    m.set_key_phases("pay/stripe", [("v1", "Active")]);
    m.set_key_phases("ops/github", [("a", "Active")]);
    assert_eq!(
        phase_lines(&m),
        [
            "hookgate_key_phase{integration=\"ops/github\",key=\"a\",phase=\"Active\"} 1",
            "hookgate_key_phase{integration=\"pay/stripe\",key=\"v1\",phase=\"Active\"} 1",
        ]
    );
    // Rotation: v1 retires, v2 takes over; the Active series of v1 goes away, not to 0.
    m.set_key_phases("pay/stripe", [("v1", "Retiring"), ("v2", "Active")]);
    assert_eq!(
        phase_lines(&m),
        [
            "hookgate_key_phase{integration=\"ops/github\",key=\"a\",phase=\"Active\"} 1",
            "hookgate_key_phase{integration=\"pay/stripe\",key=\"v1\",phase=\"Retiring\"} 1",
            "hookgate_key_phase{integration=\"pay/stripe\",key=\"v2\",phase=\"Active\"} 1",
        ]
    );
    // v1 removed from the spec; another integration is untouched.
    m.set_key_phases("pay/stripe", [("v2", "Active")]);
    assert_eq!(
        phase_lines(&m),
        [
            "hookgate_key_phase{integration=\"ops/github\",key=\"a\",phase=\"Active\"} 1",
            "hookgate_key_phase{integration=\"pay/stripe\",key=\"v2\",phase=\"Active\"} 1",
        ]
    );
    // The integration deleted.
    m.set_key_phases("pay/stripe", []);
    assert_eq!(
        phase_lines(&m),
        ["hookgate_key_phase{integration=\"ops/github\",key=\"a\",phase=\"Active\"} 1"]
    );
    m.clear_key_phases();
    assert!(phase_lines(&m).is_empty());
    // Cleared, the index forgets too: a later set starts from nothing.
    m.set_key_phases("ops/github", [("b", "Active")]);
    assert_eq!(
        phase_lines(&m),
        ["hookgate_key_phase{integration=\"ops/github\",key=\"b\",phase=\"Active\"} 1"]
    );
}
