//! kube-apiserver stopped for 20 s (etcd keeps running) under webhook traffic: the receiver keeps
//! serving from its last routes, and the controller and receiver resume their watches afterwards
//! without a restart.

use crate::fixtures::{Release, Role, Signer, condition, get_json, post, wait_for};
use crate::harness::ApiServer;
use std::time::{Duration, Instant};

fn integration(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-keys, namespace: {ns}}}\nstringData: {{v1: whsec_outage_{name}}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: {name}-keys, key: v1}}}}]\n  delivery: {{url: \"http://127.0.0.1:9/hooks\"}}\n"
    )
}

fn body(name: &str, n: usize) -> String {
    format!(r#"{{"id":"evt_{name}_{n}","type":"invoice.paid","data":{{}}}}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn receiver_serves_through_an_api_server_outage_and_watches_resume() {
    // A server of its own: stopping the shared one would break the tests beside this one.
    let Some(server) = ApiServer::start() else {
        return;
    };
    let r = Release::install(&server, "outage").await;
    let mut controller = Role::controller(&server, &r, "out-0");
    let mut receiver = Role::receiver(&server, &r);
    let t = r.tenant.as_str();
    server.apply(&integration(t, "before"));
    wait_for("before Ready", Duration::from_secs(60), async || {
        condition(&get_json(&server, &["whi", "before", "-n", t]), "Ready")
            .is_some_and(|c| c["status"] == "True")
    })
    .await;
    let signer = Signer::fetch(&server.client().await, t, "before").await;
    receiver.wait_ready("receiver").await;
    wait_for(
        "the receiver routes before",
        Duration::from_secs(30),
        async || {
            post(&receiver.url(), &signer.sign(&body("before", 0), None))
                .await
                .0
                == 200
        },
    )
    .await;

    server.stop_apiserver();
    let stopped = Instant::now();
    // The outage is real: nothing answers on the API server's address any more.
    let probe = server
        .kubectl(&["get", "--raw", "/readyz", "--request-timeout=5s"])
        .output()
        .unwrap();
    assert!(
        !probe.status.success(),
        "the API server still answers after it was stopped"
    );
    let (mut sent, mut failed) = (0, Vec::new());
    while stopped.elapsed() < Duration::from_secs(20) {
        sent += 1;
        let (status, text) = post(&receiver.url(), &signer.sign(&body("before", sent), None)).await;
        if status != 200 {
            failed.push(format!("{status} {text}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "during a 20 s API-server outage: {sent} valid requests, {} failed",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "valid requests failed during the outage: {failed:?}"
    );
    server.start_apiserver();

    // Both watches resume: a new integration is reconciled and routed, with no restart.
    let resumed = Instant::now();
    server.apply(&integration(t, "after"));
    wait_for("after Ready", Duration::from_secs(90), async || {
        condition(&get_json(&server, &["whi", "after", "-n", t]), "Ready")
            .is_some_and(|c| c["status"] == "True")
    })
    .await;
    let after = Signer::fetch(&server.client().await, t, "after").await;
    wait_for(
        "the receiver routes after",
        Duration::from_secs(90),
        async || {
            post(&receiver.url(), &after.sign(&body("after", 0), None))
                .await
                .0
                == 200
        },
    )
    .await;
    println!(
        "watches resumed: a new integration routed {:?} after the server came back",
        resumed.elapsed()
    );
    // Resumed, not restarted: both processes are the ones started before the outage.
    for (role, what) in [(&mut receiver, "receiver"), (&mut controller, "controller")] {
        assert!(
            role.proc.0.try_wait().unwrap().is_none(),
            "the {what} exited"
        );
    }
    r.drop_database().await;
}
