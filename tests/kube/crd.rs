//! The CRD as the API server sees it: Established, explained, its CEL rules compiled, every invalid
//! integration refused with the field named, every example accepted.

use crate::fixtures::{ok, output};
use crate::harness::ApiServer;

/// A WebhookIntegration whose spec is a valid baseline with `change` merged over it.
fn integration(name: &str, ns: &str, spec: &str) -> String {
    format!(
        "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}"
    )
}

const KEYS: &str = "  keys: [{id: v1, secretRef: {name: k, key: v1}}]\n";
const DELIVERY: &str = "  delivery: {url: \"http://billing:8080/hooks\"}\n";

/// (case, spec, the field the API server must name in its refusal).
fn invalid_specs() -> Vec<(&'static str, String, &'static str)> {
    let base = |extra: &str| format!("  scheme: {{type: stripe}}\n{KEYS}{DELIVERY}{extra}");
    vec![
        (
            "bad duration",
            base("  replay: {tolerance: 5 minutes}\n"),
            "spec.replay.tolerance",
        ),
        (
            "both header and jsonPointer",
            base("  eventId: {header: X-Id, jsonPointer: /id}\n"),
            "spec.eventId",
        ),
        (
            "path without a slash",
            base("  path: hooks/stripe\n"),
            "spec.path",
        ),
        (
            "path with a space",
            base("  path: \"/hooks/a b\"\n"),
            "spec.path",
        ),
        (
            "duplicate key ids",
            format!(
                "  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: k, key: a}}}}, {{id: v1, secretRef: {{name: k, key: b}}}}]\n{DELIVERY}"
            ),
            "spec.keys[1]",
        ),
        (
            "unknown scheme",
            format!("  scheme: {{type: paypal}}\n{KEYS}{DELIVERY}"),
            "spec.scheme.type",
        ),
        (
            "retireAt not a time",
            format!(
                "  scheme: {{type: stripe}}\n  keys: [{{id: v1, retireAt: tomorrow, secretRef: {{name: k, key: v1}}}}]\n{DELIVERY}"
            ),
            "spec.keys[0].retireAt",
        ),
        (
            "key id with a space",
            format!(
                "  scheme: {{type: stripe}}\n  keys: [{{id: \"v 1\", secretRef: {{name: k, key: v1}}}}]\n{DELIVERY}"
            ),
            "spec.keys[0].id",
        ),
        (
            "delivery url not http",
            format!(
                "  scheme: {{type: stripe}}\n{KEYS}  delivery: {{url: \"ftp://billing/hooks\"}}\n"
            ),
            "spec.delivery.url",
        ),
        (
            "no keys and no generated rotation",
            format!("  scheme: {{type: stripe}}\n{DELIVERY}"),
            "spec",
        ),
        (
            "signatureHeader on a named scheme",
            format!("  scheme: {{type: stripe, signatureHeader: X-Sig}}\n{KEYS}{DELIVERY}"),
            "spec.scheme",
        ),
        (
            "retry schedule entry not a duration",
            format!(
                "  scheme: {{type: stripe}}\n{KEYS}  delivery: {{url: \"http://b/h\", retry: {{schedule: [30s, soon]}}}}\n"
            ),
            "spec.delivery.retry.schedule[1]",
        ),
        (
            "missing delivery",
            format!("  scheme: {{type: stripe}}\n{KEYS}"),
            "spec.delivery",
        ),
        (
            "empty secret name",
            format!(
                "  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: \"\", key: v1}}}}]\n{DELIVERY}"
            ),
            "spec.keys[0].secretRef.name",
        ),
        (
            "body limit of zero",
            base("  limits: {maxBodyBytes: 0}\n"),
            "spec.limits.maxBodyBytes",
        ),
        (
            "unknown encoding",
            format!("  scheme: {{type: hmac-sha256, encoding: rot13}}\n{KEYS}{DELIVERY}"),
            "spec.scheme.encoding",
        ),
        (
            "timeout without a unit",
            base("  delivery: {url: \"http://b/h\", timeout: \"10\"}\n"),
            "spec.delivery.timeout",
        ),
        // Maxima (src/crd/limits.rs), enforced by the schema's CEL rules and bounds.
        (
            "tolerance over a day",
            base("  replay: {tolerance: 1d1s}\n"),
            "spec.replay.tolerance",
        ),
        (
            "timeout over 5m",
            base("  delivery: {url: \"http://b/h\", timeout: 301s}\n"),
            "spec.delivery.timeout",
        ),
        (
            "retry step over 30d",
            base("  delivery: {url: \"http://b/h\", retry: {schedule: [1s, 31d]}}\n"),
            "spec.delivery.retry.schedule[1]",
        ),
        (
            "a duration too large for an int64",
            base("  retention: {payload: 99999999999999999999d}\n"),
            "spec.retention.payload",
        ),
        (
            "rate over 100000",
            base("  limits: {requestsPerSecond: 100001}\n"),
            "spec.limits.requestsPerSecond",
        ),
        // The provider schemes' own fields (issue 15): the scheme's CEL rules and publicUrl's
        // pattern, as src/crd/validate/scheme.rs checks them in standalone.
        (
            "twilio without publicUrl",
            format!("  scheme: {{type: twilio}}\n{KEYS}{DELIVERY}"),
            "spec.scheme",
        ),
        (
            "square without publicUrl",
            format!("  scheme: {{type: square}}\n{KEYS}{DELIVERY}"),
            "spec.scheme",
        ),
        (
            "publicUrl on a scheme that signs no URL",
            format!(
                "  scheme: {{type: stripe, publicUrl: \"https://h.example.com/x\"}}\n{KEYS}{DELIVERY}"
            ),
            "spec.scheme",
        ),
        (
            "publicUrl with a query",
            format!(
                "  scheme: {{type: twilio, publicUrl: \"https://h.example.com/x?a=1\"}}\n{KEYS}{DELIVERY}"
            ),
            "spec.scheme.publicUrl",
        ),
        (
            "publicUrl not http(s)",
            format!(
                "  scheme: {{type: square, publicUrl: \"ftp://h.example.com/x\"}}\n{KEYS}{DELIVERY}"
            ),
            "spec.scheme.publicUrl",
        ),
        (
            "meta without verifyTokenRef",
            format!("  scheme: {{type: meta}}\n{KEYS}{DELIVERY}"),
            "spec.scheme",
        ),
        (
            "verifyTokenRef on a scheme other than meta",
            format!(
                "  scheme: {{type: github, verifyTokenRef: {{name: m, key: t}}}}\n{KEYS}{DELIVERY}"
            ),
            "spec.scheme",
        ),
        (
            "verifyTokenRef with an empty name",
            format!(
                "  scheme: {{type: meta, verifyTokenRef: {{name: \"\", key: t}}}}\n{KEYS}{DELIVERY}"
            ),
            "spec.scheme.verifyTokenRef.name",
        ),
        // sourceRanges (issue 17): the items' pattern and maxItems; the exact parse (host bits,
        // IPv4-mapped IPv6) is src/crd/validate/source.rs, as InvalidSpec.
        (
            "a source range with an octet over 255",
            base("  sourceRanges: [192.0.2.0/24, 10.0.0.300/8]\n"),
            "spec.sourceRanges[1]",
        ),
        (
            "a host name as a source range",
            base("  sourceRanges: [hooks.stripe.com]\n"),
            "spec.sourceRanges[0]",
        ),
        (
            "an IPv6 prefix over 128",
            base("  sourceRanges: [\"2001:db8::/129\"]\n"),
            "spec.sourceRanges[0]",
        ),
        (
            "more than 256 source ranges",
            base(&format!(
                "  sourceRanges: [{}]\n",
                vec!["192.0.2.0/24"; 257].join(", ")
            )),
            "spec.sourceRanges",
        ),
        // events.versionPointer and catchUp (issue 17): the CEL rules that pair fields.
        (
            "a version pointer without supported versions",
            base("  events: {versionPointer: /api_version}\n"),
            "spec.events",
        ),
        (
            "catch-up from another provider than the scheme",
            base("  catchUp: {provider: paddle, credentialRef: {name: api, key: key}}\n"),
            "catchUp.provider",
        ),
        (
            "github catch-up without its repository hook",
            format!(
                "  scheme: {{type: github}}\n{KEYS}{DELIVERY}  catchUp: {{provider: github, credentialRef: {{name: api, key: key}}}}\n"
            ),
            "spec.catchUp",
        ),
        (
            "generated keys for a secret the provider issues",
            format!("  scheme: {{type: zoom}}\n{KEYS}{DELIVERY}  rotation: {{generate: true}}\n"),
            "rotation.generate",
        ),
    ]
}

#[test]
fn crd_is_established_explained_and_refuses_every_invalid_integration() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    server.ensure_crd();

    let crd = ok(
        server.kubectl(&[
            "get",
            "crd",
            "webhookintegrations.hookgate.dev",
            "-o",
            "json",
        ]),
        None,
    );
    let crd: serde_json::Value = serde_json::from_str(&crd).unwrap();
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    let established = conditions
        .iter()
        .find(|c| c["type"] == "Established")
        .unwrap();
    assert_eq!(established["status"], "True", "{conditions:?}");

    // Applying it again is a no-op that the API server has nothing to warn about (it warned on
    // schemars' uint32/uint64 formats before they became int32/int64).
    let (applied, _, stderr) = output(
        server.kubectl(&["apply", "--server-side", "-f", crate::fixtures::CRD]),
        None,
    );
    assert!(applied && !stderr.contains("Warning"), "{stderr}");

    // Discovery of a new CRD lags its Established condition by a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let explained = loop {
        let (found, stdout, stderr) = output(server.kubectl(&["explain", "whi.spec"]), None);
        if found {
            break stdout;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl explain whi.spec: {stderr}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    for field in [
        "scheme",
        "keys",
        "delivery",
        "rotation",
        "replay",
        "sourceRanges",
        "catchUp",
        "events",
    ] {
        assert!(
            explained.contains(field),
            "kubectl explain whi.spec lacks {field}:\n{explained}"
        );
    }
    let explained = ok(server.kubectl(&["explain", "whi.spec.keys.retireAt"]), None);
    assert!(explained.contains("rejected"), "{explained}");

    let ns = server.namespace("crd");
    let cases = invalid_specs();
    assert!(cases.len() >= 20);
    let mut wrong = Vec::new();
    for (i, (case, spec, field)) in cases.iter().enumerate() {
        let yaml = integration(&format!("bad-{i}"), &ns, spec);
        let (accepted, stdout, stderr) = output(
            server.kubectl(&["create", "-f", "-", "-o", "name"]),
            Some(&yaml),
        );
        if accepted {
            wrong.push(format!("{case}: accepted ({})", stdout.trim()));
        } else if !stderr.contains(field) || !stderr.contains("is invalid") {
            wrong.push(format!(
                "{case}: refused without naming {field}: {}",
                stderr.trim()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "the API server's verdicts differ:\n{}",
        wrong.join("\n")
    );
    let listed = ok(
        server.kubectl(&["get", "whi", "-n", &ns, "-o", "name"]),
        None,
    );
    assert_eq!(listed.trim(), "", "nothing invalid was stored");
}

#[test]
fn every_example_is_accepted() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    server.ensure_crd();
    let mut namespaces = std::collections::BTreeSet::new();
    // Every example integration, counted from the files: adding an example needs no edit here.
    let mut expected = 0;
    for entry in std::fs::read_dir(crate::fixtures::root().join("config/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            expected += text
                .lines()
                .filter(|l| l.trim() == "kind: WebhookIntegration")
                .count();
            for line in text.lines() {
                if let Some(rest) = line.split("namespace: ").nth(1) {
                    namespaces.insert(rest.trim_end_matches('}').trim().to_string());
                }
            }
        }
    }
    assert!(namespaces.len() >= 3, "{namespaces:?}");
    for ns in &namespaces {
        let (_, _, _) = output(server.kubectl(&["create", "namespace", ns]), None);
    }
    // Server-side dry run: the API server validates and admits every object, and stores none.
    let applied = ok(
        server.kubectl(&[
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            "config/examples",
            "-o",
            "name",
        ]),
        None,
    );
    let integrations = applied
        .lines()
        .filter(|l| l.contains("webhookintegration"))
        .count();
    assert!(expected >= 16, "found the examples: {expected}");
    assert_eq!(integrations, expected, "{applied}");
}
