use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn cluster() -> Policy {
    Policy {
        allow_loopback: false,
        api_server: vec![ip("10.96.0.1"), ip("fd00:10:96::1")],
        ..Policy::default()
    }
}

fn confined(allowed: &[&str]) -> Policy {
    Policy {
        scope: Scope::Namespace,
        allowed_hosts: allowed
            .iter()
            .map(|h| parse_allowed_host(h).unwrap())
            .collect(),
        ..cluster()
    }
}

/// `None`: allowed; `Some(fragment)`: refused with a reason containing the fragment.
type Expect = Option<&'static str>;

#[test]
fn addresses_under_each_policy() {
    let standalone = Policy::default();
    let cases: &[(&str, &Policy, Expect)] = &[
        (
            "169.254.169.254",
            &standalone,
            Some("cloud metadata address"),
        ),
        ("169.254.0.1", &standalone, Some("link-local")),
        ("169.254.255.255", &standalone, Some("link-local")),
        ("fe80::1", &standalone, Some("link-local")),
        ("febf:ffff::1", &standalone, Some("link-local")),
        ("fd00:ec2::254", &standalone, Some("cloud metadata address")),
        (
            "100.100.100.200",
            &standalone,
            Some("cloud metadata address"),
        ),
        ("168.63.129.16", &standalone, Some("cloud metadata address")),
        // The kernel connects an IPv4-mapped address over IPv4: the same refusal.
        (
            "::ffff:169.254.169.254",
            &standalone,
            Some("cloud metadata address"),
        ),
        ("::ffff:169.254.3.4", &standalone, Some("link-local")),
        // Neighbours of the refused ranges stay allowed.
        ("169.253.255.255", &standalone, None),
        ("169.255.0.0", &standalone, None),
        ("fec0::1", &standalone, None),
        ("fd00:ec2::253", &standalone, None),
        ("100.100.100.201", &standalone, None),
        // Standalone delivers to local sinks.
        ("127.0.0.1", &standalone, None),
        ("::1", &standalone, None),
        ("0.0.0.0", &standalone, None),
        ("10.96.0.1", &standalone, None),
        // In a pod, loopback is the pod itself; 0.0.0.0 connects there too.
        ("127.0.0.1", &cluster(), Some("loopback")),
        ("127.9.9.9", &cluster(), Some("loopback")),
        ("::1", &cluster(), Some("loopback")),
        ("::ffff:127.0.0.1", &cluster(), Some("loopback")),
        ("0.0.0.0", &cluster(), Some("loopback")),
        ("::", &cluster(), Some("loopback")),
        ("10.96.0.1", &cluster(), Some("Kubernetes API server")),
        (
            "::ffff:10.96.0.1",
            &cluster(),
            Some("Kubernetes API server"),
        ),
        ("fd00:10:96::1", &cluster(), Some("Kubernetes API server")),
        // Services and the Internet.
        ("10.96.0.2", &cluster(), None),
        ("10.244.1.7", &cluster(), None),
        ("203.0.113.9", &cluster(), None),
        ("2001:db8::1", &cluster(), None),
    ];
    let mut failures = Vec::new();
    for (addr, policy, want) in cases {
        let got = check_address(ip(addr), policy);
        let ok = match (want, &got) {
            (None, Ok(())) => true,
            (Some(fragment), Err(r)) => r.to_string().contains(fragment),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{addr} loopback={} api={:?}: want {want:?}, got {got:?}",
                policy.allow_loopback, policy.api_server
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn hosts_of_an_integration_in_namespace_shop() {
    let open = cluster();
    let none = confined(&[]);
    let allow = confined(&[
        "api.partner.example",
        "*.hooks.example",
        "203.0.113.9",
        "[2001:db8::1]",
    ]);
    let cases: &[(&str, &Policy, Expect)] = &[
        // Refused under every policy, before any lookup.
        (
            "http://metadata.google.internal/",
            &open,
            Some("cloud metadata host"),
        ),
        (
            "http://METADATA.google.internal./x",
            &open,
            Some("cloud metadata host"),
        ),
        (
            "http://metadata/computeMetadata/v1/",
            &open,
            Some("cloud metadata host"),
        ),
        ("http://metadata.goog/", &open, Some("cloud metadata host")),
        (
            "http://instance-data/latest/",
            &open,
            Some("cloud metadata host"),
        ),
        (
            "http://kubernetes.default.svc/api",
            &open,
            Some("Kubernetes API server"),
        ),
        (
            "https://kubernetes.default.svc.cluster.local:443/",
            &open,
            Some("Kubernetes API server"),
        ),
        (
            "https://kubernetes.default/",
            &open,
            Some("Kubernetes API server"),
        ),
        (
            "https://kubernetes.default.svc.corp.internal/",
            &open,
            Some("Kubernetes API server"),
        ),
        (
            "http://169.254.169.254/latest/meta-data/",
            &open,
            Some("cloud metadata address"),
        ),
        // Other spellings of the same address, normalized by the URL parser.
        ("http://0xa9fea9fe/", &open, Some("cloud metadata address")),
        ("http://2852039166/", &open, Some("cloud metadata address")),
        (
            "http://169.254.169.254./",
            &open,
            Some("cloud metadata address"),
        ),
        (
            "http://0251.0376.0251.0376/",
            &open,
            Some("cloud metadata address"),
        ),
        (
            "http://[::ffff:a9fe:a9fe]/",
            &open,
            Some("cloud metadata address"),
        ),
        (
            "http://[fd00:ec2::254]/",
            &open,
            Some("cloud metadata address"),
        ),
        ("http://[fe80::1]/", &open, Some("link-local")),
        ("http://10.96.0.1/", &open, Some("Kubernetes API server")),
        // Open: any Service, any external host.
        ("http://billing.payments.svc:8080/", &open, None),
        ("http://billing.shop.svc.cluster.local/", &open, None),
        ("https://api.partner.example/hook", &open, None),
        ("http://kubernetes-dashboard.default.svc/", &open, None),
        ("http://10.96.0.2/", &open, None),
        // Namespace: the integration's own Services, by the names that reach them.
        ("http://billing.shop/", &none, None),
        ("http://billing.shop.svc:8080/x", &none, None),
        ("http://billing.shop.svc.cluster.local/", &none, None),
        ("http://billing.shop.svc.cluster.local./", &none, None),
        (
            "http://billing.payments/",
            &none,
            Some("neither a Service of namespace shop"),
        ),
        (
            "http://billing.payments.svc/",
            &none,
            Some("neither a Service of namespace shop"),
        ),
        (
            "http://billing.payments.svc.cluster.local/",
            &none,
            Some("namespace shop"),
        ),
        // Another cluster domain is not this cluster's, and can be any DNS answer.
        (
            "http://billing.shop.svc.evil.example/",
            &none,
            Some("namespace shop"),
        ),
        // A bare name is looked up relative to the worker's namespace, not the integration's.
        ("http://billing/", &none, Some("namespace shop")),
        (
            "http://shop.svc.cluster.local/",
            &none,
            Some("namespace shop"),
        ),
        (
            "https://api.partner.example/",
            &none,
            Some("namespace shop"),
        ),
        ("http://10.96.0.2/", &none, Some("namespace shop")),
        (
            "http://kubernetes.default.svc/",
            &confined_in_default(),
            Some("Kubernetes API server"),
        ),
        // The allowlist: exact names and addresses, and subdomains of `*.` entries.
        ("https://api.partner.example/", &allow, None),
        ("https://API.partner.example./", &allow, None),
        ("https://eu.hooks.example/", &allow, None),
        ("https://a.b.hooks.example/", &allow, None),
        ("https://hooks.example/", &allow, Some("namespace shop")),
        ("https://evilhooks.example/", &allow, Some("namespace shop")),
        (
            "https://api.partner.example.evil.example/",
            &allow,
            Some("namespace shop"),
        ),
        ("http://203.0.113.9/", &allow, None),
        ("http://[2001:db8::1]:8443/", &allow, None),
        ("http://203.0.113.10/", &allow, Some("namespace shop")),
        ("http://billing.shop.svc/", &allow, None),
    ];
    let mut failures = Vec::new();
    for (url, policy, want) in cases {
        let url = reqwest::Url::parse(url).unwrap();
        let got = check_host(&Host::of(&url).unwrap(), "shop", policy);
        let ok = match (want, &got) {
            (None, Ok(())) => true,
            (Some(fragment), Err(r)) => r.to_string().contains(fragment),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{url} ({:?}): want {want:?}, got {got:?}",
                policy.scope
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn confined_in_default() -> Policy {
    confined(&["kubernetes.default.svc"])
}

#[test]
fn the_load_time_check_refuses_only_what_no_policy_allows() {
    for url in [
        "http://169.254.169.254/",
        "http://[fd00:ec2::254]/",
        "http://100.100.100.200/",
        "http://metadata.google.internal/",
        "https://kubernetes.default.svc/",
    ] {
        assert!(
            check_url(&reqwest::Url::parse(url).unwrap()).is_err(),
            "{url}"
        );
    }
    for url in [
        "http://127.0.0.1:9000/",
        "http://localhost/",
        "http://billing.payments.svc:8080/",
        "https://example.com/",
    ] {
        assert_eq!(
            check_url(&reqwest::Url::parse(url).unwrap()),
            Ok(()),
            "{url}"
        );
    }
}

#[test]
fn allowed_host_entries_are_normalized_or_refused() {
    for (entry, want) in [
        ("API.Partner.example.", "api.partner.example"),
        ("*.Hooks.example", "*.hooks.example"),
        ("[2001:DB8::1]", "2001:db8::1"),
        ("203.0.113.9", "203.0.113.9"),
    ] {
        assert_eq!(parse_allowed_host(entry).as_deref(), Ok(want), "{entry}");
    }
    for entry in [
        "",
        "*.",
        "*",
        "a..b",
        "https://x.example",
        "x.example:443",
        "a b",
    ] {
        assert!(parse_allowed_host(entry).is_err(), "{entry:?}");
    }
}

#[test]
fn a_refusal_names_the_host_never_the_url() {
    let url = reqwest::Url::parse("http://user:pa55@169.254.169.254/?token=s3cret").unwrap();
    let text = check_url(&url).unwrap_err().to_string();
    assert!(text.starts_with("169.254.169.254 "), "{text}");
    assert!(!text.contains("pa55") && !text.contains("s3cret"), "{text}");
}
