//! Leader election on a real Lease: two controllers, the leader SIGKILLed, the other takes over
//! within the lease duration, and only the leader ever writes.

use crate::fixtures::{Release, Role, condition, get_json, ok, wait_for};
use crate::harness::ApiServer;
use std::time::{Duration, Instant};

/// The controller's lease duration (src/controller/run.rs).
const LEASE: Duration = Duration::from_secs(15);

fn holder(server: &ApiServer, ns: &str) -> Option<String> {
    let (found, stdout, _) = crate::fixtures::output(
        server.kubectl(&[
            "get",
            "lease",
            "hookgate-controller",
            "-n",
            ns,
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ]),
        None,
    );
    (found && !stdout.trim().is_empty()).then(|| stdout.trim().to_string())
}

fn integration(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}-keys, namespace: {ns}}}\nstringData: {{v1: whsec_leader_{name}}}\n---\napiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: {name}-keys, key: v1}}}}]\n  delivery: {{url: \"http://127.0.0.1:9/hooks\"}}\n"
    )
}

/// `reportingInstance` of every event about `name`.
fn reporters(server: &ApiServer, ns: &str, name: &str) -> Vec<String> {
    let events = get_json(server, &["events.events.k8s.io", "-n", ns]);
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["regarding"]["name"] == name)
        .map(|e| {
            e["reportingInstance"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

async fn wait_ready(server: &ApiServer, ns: &str, name: &str) {
    wait_for(
        &format!("{name} Ready"),
        Duration::from_secs(60),
        async || {
            let wi = get_json(server, &["whi", name, "-n", ns]);
            condition(&wi, "Ready").is_some_and(|c| c["status"] == "True")
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_follower_takes_over_when_the_leader_is_killed_and_only_the_leader_writes() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "lead").await;
    let mut a = Some(Role::controller(server, &r, "ctl-a"));
    let mut b = Some(Role::controller(server, &r, "ctl-b"));
    let t = r.tenant.as_str();
    wait_for("a Lease holder", Duration::from_secs(30), async || {
        holder(server, &r.namespace).is_some()
    })
    .await;
    let leader = holder(server, &r.namespace).unwrap();
    server.apply(&integration(t, "first"));
    wait_ready(server, t, "first").await;
    let first = reporters(server, t, "first");
    assert!(!first.is_empty(), "the leader recorded events");
    assert!(
        first.iter().all(|r| *r == leader),
        "only the leader {leader} writes: {first:?}"
    );

    let (killed, survivor) = if leader == "ctl-a" {
        (a.take(), "ctl-b")
    } else {
        (b.take(), "ctl-a")
    };
    drop(killed); // SIGKILL: the Lease is not released
    let killed_at = Instant::now();
    wait_for(
        "the survivor holds the Lease",
        LEASE + Duration::from_secs(15),
        async || holder(server, &r.namespace).as_deref() == Some(survivor),
    )
    .await;
    let takeover = killed_at.elapsed();
    println!("leader {leader} killed; {survivor} took over after {takeover:?} (lease {LEASE:?})");
    assert!(
        takeover <= LEASE + Duration::from_secs(5),
        "takeover took {takeover:?}"
    );

    server.apply(&integration(t, "second"));
    wait_ready(server, t, "second").await;
    let second = reporters(server, t, "second");
    assert!(!second.is_empty());
    assert!(
        second.iter().all(|r| r == survivor),
        "only the new leader writes: {second:?}"
    );
    let lease = ok(
        server.kubectl(&[
            "get",
            "lease",
            "hookgate-controller",
            "-n",
            &r.namespace,
            "-o",
            "jsonpath={.spec.leaseTransitions}",
        ]),
        None,
    );
    assert!(
        lease.trim().parse::<u32>().unwrap() >= 1,
        "a transition was recorded: {lease}"
    );
    drop((a, b));
    r.drop_database().await;
}
