//! A path claimed by integrations in two namespaces belongs to the one created first: the later
//! one is refused (PathConflict, naming the owner) and never routed; deleting the owner hands the
//! path over. On a private server, since the controller watches every namespace here.

use crate::fixtures::{Release, Role, Signer, condition, get_json, ok, post, wait_for, wait_ready};
use crate::harness::ApiServer;
use std::time::Duration;

fn integration(ns: &str, secret: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: keys, namespace: {ns}}}\nstringData: {{v1: {secret}}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: stripe, namespace: {ns}}}\nspec:\n  path: /hooks/payments/stripe\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: keys, key: v1}}}}]\n  delivery: {{url: \"http://127.0.0.1:9/{ns}\"}}\n"
    )
}

fn body(n: u32) -> String {
    format!(r#"{{"id":"evt_own_{n}","type":"invoice.paid","data":{{}}}}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_belongs_to_its_first_claimant_across_namespaces() {
    let Some(server) = ApiServer::start() else {
        return;
    };
    let r = Release::install_cluster_wide(&server, "own").await;
    let _controller = Role::controller(&server, &r, "own-0");
    let mut receiver = Role::receiver(&server, &r);
    // The owner's namespace sorts after the newcomer's: the old name-order rule picked the newcomer.
    let owner_ns = server.namespace("zz-payments");
    let newcomer_ns = server.namespace("aa-attacker");
    server.apply(&integration(&owner_ns, "whsec_owner_secret"));
    wait_ready(&server, &owner_ns, "stripe", Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later creationTimestamp
    server.apply(&integration(&newcomer_ns, "whsec_newcomer_secret"));
    wait_for(
        "the newcomer refused with PathConflict",
        Duration::from_secs(60),
        async || {
            let wi = get_json(&server, &["whi", "stripe", "-n", &newcomer_ns]);
            condition(&wi, "Ready").is_some_and(|c| {
                c["reason"] == "PathConflict" && c["message"].as_str().unwrap().contains(&owner_ns)
            })
        },
    )
    .await;
    let routes = r.routes(&server);
    assert_eq!(routes.len(), 1, "only the owner is compiled: {routes:?}");

    let client = server.client().await;
    let owner = Signer::fetch(&client, &owner_ns, "stripe").await;
    let newcomer = Signer::fetch(&client, &newcomer_ns, "stripe").await;
    receiver.wait_ready("receiver").await;
    wait_for("the owner routed", Duration::from_secs(30), async || {
        post(&receiver.url(), &owner.sign(&body(1), None)).await.0 == 200
    })
    .await;
    let (status, _) = post(&receiver.url(), &newcomer.sign(&body(2), None)).await;
    assert_eq!(
        status, 401,
        "the newcomer's key does not open the owner's path"
    );

    // Deleting the owner hands the path over.
    ok(
        server.kubectl(&["delete", "whi", "stripe", "-n", &owner_ns, "--timeout=60s"]),
        None,
    );
    wait_ready(&server, &newcomer_ns, "stripe", Duration::from_secs(60)).await;
    wait_for("the newcomer routed", Duration::from_secs(30), async || {
        post(&receiver.url(), &newcomer.sign(&body(3), None))
            .await
            .0
            == 200
    })
    .await;
    r.drop_database().await;
}
