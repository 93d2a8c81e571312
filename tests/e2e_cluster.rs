//! End to end against a real cluster: apply the CRD and an integration, run the controller, and
//! rotate a key. Runs only when KUBECONFIG is set (this machine has no API server); otherwise it
//! prints why it is skipped. It creates and deletes its own namespace.

use hookgate::controller::run::{Config, run};
use hookgate::crd::WebhookIntegration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, CustomResourceExt};
use serde_json::json;
use std::time::{Duration, Instant};

async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn controller_programs_a_route_and_rotates_a_key() {
    if std::env::var_os("KUBECONFIG").is_none() {
        eprintln!(
            "SKIPPED e2e_cluster: KUBECONFIG is not set (no Kubernetes API server on this machine)"
        );
        return;
    }
    let client = Client::try_default()
        .await
        .expect("KUBECONFIG points at a reachable cluster");
    let pp = PatchParams::apply("hookgate-e2e").force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.patch(
        "webhookintegrations.hookgate.dev",
        &pp,
        &Patch::Apply(WebhookIntegration::crd()),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let ns = format!("hookgate-e2e-{:08x}", rand::random::<u32>());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let wis: Api<WebhookIntegration> = Api::namespaced(client.clone(), &ns);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stripe-keys"},
                        "stringData": {"v1": "whsec_e2e_one"}});
    secrets
        .patch("stripe-keys", &pp, &Patch::Apply(&secret))
        .await
        .unwrap();
    let wi = json!({"apiVersion": "hookgate.dev/v1alpha1", "kind": "WebhookIntegration", "metadata": {"name": "stripe"},
        "spec": {"scheme": {"type": "stripe"}, "rotation": {"overlap": "1h"},
                 "keys": [{"id": "v1", "secretRef": {"name": "stripe-keys", "key": "v1"}}],
                 "delivery": {"url": "http://billing:8080/hooks"}}});
    wis.patch("stripe", &pp, &Patch::Apply(&wi)).await.unwrap();

    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let cfg = Config {
        namespace: ns.clone(),
        watch_namespace: Some(ns.clone()),
        database_url: None,
        identity: "e2e".into(),
        admin_listen: None,
    };
    let controller = tokio::spawn(run(cfg, async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));

    let phase = |wi: &WebhookIntegration, id: &str| {
        wi.status
            .as_ref()
            .and_then(|s| s.keys.iter().find(|k| k.id == id))
            .map(|k| k.phase.clone())
    };
    wait_for("Ready and v1 Active", Duration::from_secs(60), async || {
        let wi = wis.get("stripe").await.unwrap();
        phase(&wi, "v1").as_deref() == Some("Active")
    })
    .await;
    let route = format!("route.{ns}.stripe");
    assert!(
        secrets.get_opt(&route).await.unwrap().is_some(),
        "compiled route written"
    );

    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stripe-keys"},
                        "stringData": {"v1": "whsec_e2e_one", "v2": "whsec_e2e_two"}});
    secrets
        .patch("stripe-keys", &pp, &Patch::Apply(&secret))
        .await
        .unwrap();
    let mut wi2 = wi.clone();
    wi2["spec"]["keys"] = json!([{"id": "v1", "secretRef": {"name": "stripe-keys", "key": "v1"}},
                                 {"id": "v2", "secretRef": {"name": "stripe-keys", "key": "v2"}}]);
    wis.patch("stripe", &pp, &Patch::Apply(&wi2)).await.unwrap();
    wait_for(
        "v1 Retiring, v2 Active",
        Duration::from_secs(60),
        async || {
            let wi = wis.get("stripe").await.unwrap();
            phase(&wi, "v1").as_deref() == Some("Retiring")
                && phase(&wi, "v2").as_deref() == Some("Active")
        },
    )
    .await;

    wis.delete("stripe", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        "compiled route removed by the finalizer",
        Duration::from_secs(60),
        async || secrets.get_opt(&route).await.unwrap().is_none(),
    )
    .await;
    stop.send(true).unwrap();
    let _ = controller.await;
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}
