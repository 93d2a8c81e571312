//! `helm install`, `upgrade` and `uninstall` of charts/hookgate against the real API server, which
//! validates every object the chart renders. No pod ever runs here (no kubelet), so nothing waits
//! for rollouts, and the migration hook is handled by hand: its objects are created to prove the
//! API server admits them, and its command (`hookgate migrate`) runs as a host process.

use crate::fixtures::{CHART, CRD, hookgate, ok, output};
use crate::harness::ApiServer;

/// Stand-ins for the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs (not installable
/// here), so the production values' ServiceMonitor and PrometheusRule are created like the rest.
const MONITORING_CRDS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, plural: servicemonitors, listKind: ServiceMonitorList, singular: servicemonitor}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  names: {kind: PrometheusRule, plural: prometheusrules, listKind: PrometheusRuleList, singular: prometheusrule}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// Every object of a release's manifest exists; returns how many there are.
fn all_exist(server: &ApiServer, manifest: &str) -> usize {
    let names = ok(
        server.kubectl(&["get", "-f", "-", "-o", "name"]),
        Some(manifest),
    );
    names.lines().count()
}

fn install(server: &ApiServer, release: &str, ns: &str, extra: &[&str]) -> String {
    let mut args = vec!["install", release, CHART, "-n", ns, "--no-hooks"];
    args.extend_from_slice(extra);
    ok(server.helm(&args), None);
    ok(server.helm(&["get", "manifest", release, "-n", ns]), None)
}

/// Creates the release's hook objects (the migration Job and what it needs) and runs the Job's
/// command as a host process against a real database.
async fn run_hooks(server: &ApiServer, release: &str, ns: &str) {
    let hooks = ok(server.helm(&["get", "hooks", release, "-n", ns]), None);
    assert!(
        hooks.contains("kind: Job") && hooks.contains("migrate"),
        "{hooks}"
    );
    let created = ok(
        server.kubectl(&["create", "-n", ns, "-f", "-", "-o", "name"]),
        Some(&hooks),
    );
    assert!(
        created.contains(&format!("job.batch/{release}-hookgate-migrate")),
        "{created}"
    );
    let (admin, url) = crate::procs::fresh_database()
        .await
        .expect("DATABASE_URL is set");
    ok(hookgate(&["migrate", "--database-url", &url]), None);
    crate::procs::drop_database(&admin, &url).await;
}

fn deployment_replicas(server: &ApiServer, ns: &str, name: &str) -> String {
    ok(
        server.kubectl(&[
            "get",
            "deployment",
            name,
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.replicas}",
        ]),
        None,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn helm_installs_upgrades_and_uninstalls_the_chart() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    server.ensure_crd();
    let committed = std::fs::read_to_string(crate::fixtures::root().join(CRD)).unwrap();
    let shown = ok(server.helm(&["show", "crds", CHART]), None);
    assert!(
        shown.trim_start_matches("---\n").trim() == committed.trim(),
        "the chart's CRD (helm show crds) differs from {CRD}"
    );

    // Default values, with the database URL in a Secret of the user's.
    let ns = server.namespace("helm");
    ok(
        server.kubectl(&[
            "create",
            "secret",
            "generic",
            "db",
            "-n",
            &ns,
            "--from-literal=DATABASE_URL=postgres://hookgate:pw@db:5432/hookgate",
        ]),
        None,
    );
    let manifest = install(server, "hg", &ns, &["--set", "database.existingSecret=db"]);
    let objects = all_exist(server, &manifest);
    println!("default values: {objects} objects created");
    assert!(objects >= 15, "{manifest}");
    run_hooks(server, "hg", &ns).await;

    // helm upgrade with changed values reaches the objects.
    assert_eq!(
        deployment_replicas(server, &ns, "hg-hookgate-receiver"),
        "2"
    );
    ok(
        server.helm(&[
            "upgrade",
            "hg",
            CHART,
            "-n",
            &ns,
            "--no-hooks",
            "--reuse-values",
            "--set",
            "receiver.replicas=3",
            "--set",
            "worker.concurrency=8",
        ]),
        None,
    );
    assert_eq!(
        deployment_replicas(server, &ns, "hg-hookgate-receiver"),
        "3"
    );
    let args = ok(
        server.kubectl(&[
            "get",
            "deployment",
            "hg-hookgate-worker",
            "-n",
            &ns,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].args}",
        ]),
        None,
    );
    assert!(args.contains(r#""--concurrency","8""#), "{args}");

    // helm uninstall removes what it created (the CRD stays, as Helm does for crds/).
    ok(server.helm(&["uninstall", "hg", "-n", &ns]), None);
    let (_, left, _) = output(
        server.kubectl(&["get", "-f", "-", "-o", "name"]),
        Some(&manifest),
    );
    assert_eq!(left.trim(), "", "objects left after uninstall");
    ok(
        server.kubectl(&["get", "crd", "webhookintegrations.hookgate.dev"]),
        None,
    );

    // values-production.yaml (its database Secret is the user's, by name).
    server.apply(MONITORING_CRDS);
    ok(
        server.kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/servicemonitors.monitoring.coreos.com",
            "crd/prometheusrules.monitoring.coreos.com",
        ]),
        None,
    );
    let prod = server.namespace("helm-prod");
    ok(
        server.kubectl(&[
            "create",
            "secret",
            "generic",
            "hookgate-database",
            "-n",
            &prod,
            "--from-literal=DATABASE_URL=postgres://hookgate:pw@db:5432/hookgate",
        ]),
        None,
    );
    let manifest = install(
        server,
        "hgp",
        &prod,
        &["-f", "charts/hookgate/values-production.yaml"],
    );
    let objects = all_exist(server, &manifest);
    println!("production values: {objects} objects created");
    for kind in [
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "Ingress",
        "ServiceMonitor",
        "PrometheusRule",
        "PodDisruptionBudget",
    ] {
        assert!(
            manifest.contains(&format!("kind: {kind}")),
            "production renders a {kind}"
        );
    }
    run_hooks(server, "hgp", &prod).await;
    ok(server.helm(&["uninstall", "hgp", "-n", &prod]), None);
}
