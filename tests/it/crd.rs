//! The committed CRD is generated output: it must match what `hookgate crdgen` prints.

use hookgate::cli::crd_yaml;

const COMMITTED: &str = include_str!("../../crds/webhookintegrations.hookgate.dev.yaml");

#[test]
fn committed_crd_matches_the_types() {
    assert!(
        COMMITTED == crd_yaml(),
        "crds/webhookintegrations.hookgate.dev.yaml is stale: run \
         `cargo run -- crdgen > crds/webhookintegrations.hookgate.dev.yaml` and commit it"
    );
}

#[test]
fn crdgen_subcommand_prints_the_committed_crd() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookgate"))
        .arg("crdgen")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), COMMITTED);
}

#[test]
fn crd_has_the_contracted_names_and_status_subresource() {
    let crd: serde_yaml::Value = serde_yaml::from_str(COMMITTED).unwrap();
    assert_eq!(crd["spec"]["group"], "hookgate.dev");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["kind"], "WebhookIntegration");
    assert_eq!(crd["spec"]["names"]["shortNames"][0], "whi");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    let columns: Vec<&str> = version["additionalPrinterColumns"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        columns,
        [
            "Ready",
            "Route",
            "Active-Key",
            "Retiring",
            "Pending",
            "DLQ",
            "Age"
        ]
    );
    assert!(version["subresources"]["status"].is_mapping());
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let required: Vec<&str> = spec["required"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    let rule = spec["x-kubernetes-validations"][0]["rule"]
        .as_str()
        .unwrap();
    assert!(
        rule.contains("size(self.keys) > 0"),
        "keys required unless generated: {rule}"
    );
    for field in ["scheme", "delivery"] {
        assert!(
            required.contains(&field),
            "{field} must be required: {required:?}"
        );
    }
    let types: Vec<&str> = spec["properties"]["scheme"]["properties"]["type"]["enum"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(
        types,
        [
            "stripe",
            "github",
            "standard-webhooks",
            "slack",
            "shopify",
            "hmac-sha256",
            "ed25519",
            "discord",
            "twilio",
            "twitch",
            "zoom",
            "meta",
            "gitlab",
            "paddle",
            "square",
            "sendgrid",
            "linear"
        ]
    );
    // Rules the API server enforces that a plain schema cannot express.
    let rules = spec["properties"]["scheme"]["x-kubernetes-validations"]
        .as_sequence()
        .unwrap();
    assert!(rules[0]["rule"].as_str().unwrap().contains("hmac-sha256"));
}

/// The chart cannot read Rust constants, so its worker values are a copy of
/// `src/worker/defaults.rs`; this keeps the copy honest (a chart install and `hookgate worker`
/// with no flags must behave the same).
#[test]
fn chart_worker_values_are_the_worker_defaults() {
    use hookgate::worker::defaults;
    let values: serde_yaml::Value =
        serde_yaml::from_str(include_str!("../../charts/hookgate/values.yaml")).unwrap();
    let w = &values["worker"];
    let duration = |key: &str| -> std::time::Duration {
        let text = w[key].as_str().unwrap_or_else(|| panic!("worker.{key}"));
        *text.parse::<humantime::Duration>().unwrap()
    };
    assert_eq!(
        w["concurrency"].as_u64(),
        Some(defaults::CONCURRENCY as u64),
        "worker.concurrency"
    );
    assert_eq!(duration("lease"), defaults::LEASE, "worker.lease");
    assert_eq!(duration("poll"), defaults::POLL, "worker.poll");
    assert_eq!(
        w["graceSeconds"]
            .as_u64()
            .map(std::time::Duration::from_secs),
        Some(defaults::GRACE),
        "worker.graceSeconds"
    );
}

/// The chart checks each duration it passes as a flag against a copy of the binary's ranges
/// (`hookgate.durationRanges` in `_helpers.tpl`), so that `helm install` fails naming the value
/// where the pod would stop at start. This keeps the copy equal to `cli::args::bounds`, and every
/// duration flag in the templates going through the check.
#[test]
fn chart_duration_ranges_are_the_binarys_and_every_duration_flag_is_checked() {
    use hookgate::cli::bounds::DURATIONS;
    use std::time::Duration;
    let helpers = include_str!("../../charts/hookgate/templates/_helpers.tpl");
    let start = helpers
        .find("{{- define \"hookgate.durationRanges\" -}}")
        .expect("hookgate.durationRanges in _helpers.tpl");
    let block = &helpers[start..];
    let block = &block[block.find('\n').unwrap() + 1..block.find("{{- end }}").unwrap()];
    let ranges: std::collections::BTreeMap<String, [String; 2]> =
        serde_yaml::from_str(block).unwrap();
    let parse = |s: &str| -> Duration { *s.parse::<humantime::Duration>().unwrap() };
    for (flag, [min, max]) in &ranges {
        let span = DURATIONS
            .iter()
            .find(|s| s.flag == flag)
            .unwrap_or_else(|| panic!("{flag} is in the chart's ranges but not a duration flag"));
        assert_eq!(
            (parse(min), parse(max)),
            (span.min, span.max),
            "{flag}: the chart's range differs from src/cli/args/bounds.rs"
        );
    }

    let templates = [
        ("_helpers.tpl", helpers),
        (
            "receiver-deployment.yaml",
            include_str!("../../charts/hookgate/templates/receiver-deployment.yaml"),
        ),
        (
            "worker-deployment.yaml",
            include_str!("../../charts/hookgate/templates/worker-deployment.yaml"),
        ),
        (
            "controller-deployment.yaml",
            include_str!("../../charts/hookgate/templates/controller-deployment.yaml"),
        ),
        (
            "migrate-job.yaml",
            include_str!("../../charts/hookgate/templates/migrate-job.yaml"),
        ),
    ];
    let mut checked = std::collections::BTreeSet::new();
    for (file, text) in templates {
        for span in DURATIONS {
            assert!(
                !text.lines().any(|l| l.trim() == format!("- {}", span.flag)),
                "{file} passes {} without hookgate.durationFlag",
                span.flag
            );
            if text.contains(&format!(
                "\"hookgate.durationFlag\" (list \"{}\"",
                span.flag
            )) {
                checked.insert(span.flag.to_string());
            }
        }
    }
    assert_eq!(
        checked,
        ranges.keys().cloned().collect(),
        "the ranges listed are exactly the duration flags the chart passes"
    );
}

/// Every count the chart passes as a flag has a range in the values schema inside the binary's
/// (`cli::args::bounds::COUNTS`, and `--db-max-connections`'s), so a value the schema lets
/// through never stops a pod at start.
#[test]
fn chart_count_ranges_lie_inside_the_binarys() {
    use hookgate::cli::bounds::COUNTS;
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../charts/hookgate/values.schema.json")).unwrap();
    let db = (
        hookgate::inbox::MIN_CONNECTIONS as usize,
        hookgate::inbox::MAX_CONNECTIONS as usize,
    );
    let flag = |name: &str| {
        COUNTS
            .iter()
            .find(|(f, ..)| *f == name)
            .map(|&(_, lo, hi)| (lo, hi))
            .unwrap_or_else(|| panic!("{name} is not in bounds::COUNTS"))
    };
    for (key, range) in [
        ("receiver.groupCommit.maxBatch", flag("--commit-batch")),
        (
            "receiver.groupCommit.concurrency",
            flag("--commit-concurrency"),
        ),
        ("receiver.dedupeCache.mib", flag("--dedupe-cache-mib")),
        (
            "receiver.listener.maxConnections",
            flag("--max-connections"),
        ),
        ("receiver.listener.maxInFlight", flag("--max-in-flight")),
        ("receiver.workers.concurrency", flag("--concurrency")),
        ("receiver.workers.handoffEvents", flag("--handoff-events")),
        ("worker.concurrency", flag("--concurrency")),
        ("worker.catchUpPasses", flag("--catch-up-passes")),
        ("database.maxConnections", db),
        ("#roleDatabase.maxConnections", db),
    ] {
        let node = match key.strip_prefix('#') {
            Some(def) => {
                let (name, field) = def.split_once('.').unwrap();
                &schema["definitions"][name]["properties"][field]
            }
            None => key
                .split('.')
                .fold(&schema, |n, part| &n["properties"][part]),
        };
        let end = |k: &str| {
            node[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{key} has no {k} in values.schema.json"))
                as usize
        };
        let (lo, hi) = (end("minimum"), end("maximum"));
        assert!(
            range.0 <= lo && hi <= range.1,
            "{key}: the schema allows {lo}-{hi}, the binary {}-{}",
            range.0,
            range.1
        );
    }
}
