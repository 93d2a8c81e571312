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
