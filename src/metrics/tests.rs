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

#[test]
fn each_listener_reports_its_load_at_every_scrape_under_its_name() {
    let m = Metrics::new();
    // No listener, no series: a role without one does not claim a load of zero.
    assert!(!m.encode().contains("hookgate_http_"));
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let read = in_flight.clone();
    m.watch_listener(
        "receiver",
        Arc::new(move || ListenerLoad {
            open_connections: 5,
            max_connections: 1024,
            requests_in_flight: read.load(std::sync::atomic::Ordering::Relaxed),
            max_requests_in_flight: 128,
            connections_dropped: 2,
            requests_refused: 9,
        }),
    );
    m.watch_listener("admin", Arc::new(ListenerLoad::default));
    let text = m.encode();
    for line in [
        "# TYPE hookgate_http_open_connections gauge\n",
        "hookgate_http_open_connections{listener=\"receiver\"} 5\n",
        "hookgate_http_max_connections{listener=\"receiver\"} 1024\n",
        "hookgate_http_requests_in_flight{listener=\"receiver\"} 3\n",
        "hookgate_http_max_requests_in_flight{listener=\"receiver\"} 128\n",
        "hookgate_http_open_connections{listener=\"admin\"} 0\n",
        "# TYPE hookgate_http_connections_dropped counter\n",
        "hookgate_http_connections_dropped_total{listener=\"receiver\"} 2\n",
        "# TYPE hookgate_http_requests_refused counter\n",
        "hookgate_http_requests_refused_total{listener=\"receiver\"} 9\n",
        "hookgate_http_requests_refused_total{listener=\"admin\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    // Read at the scrape, not when the listener was reported.
    in_flight.store(7, std::sync::atomic::Ordering::Relaxed);
    assert!(
        m.encode()
            .contains("hookgate_http_requests_in_flight{listener=\"receiver\"} 7\n")
    );
    // A listener reported again under the same name replaces the first: one series each.
    m.watch_listener("receiver", Arc::new(ListenerLoad::default));
    let text = m.encode();
    assert_eq!(
        text.matches("hookgate_http_requests_in_flight{listener=\"receiver\"}")
            .count(),
        1,
        "{text}"
    );
    assert!(text.contains("hookgate_http_requests_in_flight{listener=\"receiver\"} 0\n"));
}

#[test]
fn a_process_without_a_database_pool_or_workers_serves_none_of_their_series() {
    // A controller without --database-url claims no pool at all, and a receiver without workers
    // no delivery slots, rather than a load of zero against a cap of zero (the figures of a
    // watched pool: tests/it/db_pool_cap.rs; of working slots: tests/it/worker/lifecycle.rs).
    let text = Metrics::new().encode();
    assert!(!text.contains("hookgate_db_"), "{text}");
    assert!(!text.contains("hookgate_delivery_max_slots"), "{text}");
    assert!(!text.contains("hookgate_delivery_slots_in_use"), "{text}");
}

#[test]
fn delivery_slots_are_read_at_each_scrape() {
    let m = Metrics::new();
    let in_use = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let read = in_use.clone();
    m.watch_delivery_slots(Arc::new(move || SlotLoad {
        in_use: read.load(std::sync::atomic::Ordering::Relaxed),
        max: 32,
    }));
    let text = m.encode();
    for line in [
        "# TYPE hookgate_delivery_slots_in_use gauge\n",
        "hookgate_delivery_slots_in_use 3\n",
        "hookgate_delivery_max_slots 32\n",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    in_use.store(32, std::sync::atomic::Ordering::Relaxed);
    assert!(m.encode().contains("hookgate_delivery_slots_in_use 32\n"));
}
