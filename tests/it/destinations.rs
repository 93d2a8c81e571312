//! Which destinations workers deliver to (SSRF, issue #12): real HTTP destinations on loopback,
//! events accepted through the real receiver, the real system resolver where a name is resolved
//! (`localhost`, from /etc/hosts). Nothing here connects to, or looks up, anything off loopback:
//! a cluster's DNS is stood in for by a resolver that answers 127.0.0.1 for every name.

use crate::common::destination::Destination;
use crate::common::*;
use hookgate::cli::send::SendOptions;
use hookgate::destination::{Policy, Scope};
use hookgate::inbox::{Inbox, ListFilter};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// One WebhookIntegration per (namespace/name, delivery URL).
fn manifests(integrations: &[(&str, String)]) -> String {
    let mut docs = Vec::new();
    let mut namespaces: Vec<&str> = integrations
        .iter()
        .map(|(i, _)| i.split_once('/').unwrap().0)
        .collect();
    namespaces.dedup();
    for ns in namespaces {
        docs.push(format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: keys, namespace: {ns}}}\nstringData: {{hmac: destinations-test}}\n"
        ));
    }
    for (integration, url) in integrations {
        let (ns, name) = integration.split_once('/').unwrap();
        docs.push(format!(
            "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec:\n  scheme: {{type: hmac-sha256, keyIdHeader: \"\"}}\n  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]\n\
             \x20 delivery: {{url: \"{url}\"}}\n"
        ));
    }
    docs.join("---\n")
}

fn port(dest: &Destination) -> u16 {
    reqwest::Url::parse(&dest.url).unwrap().port().unwrap()
}

fn cfg(destinations: Policy) -> WorkerConfig {
    WorkerConfig {
        destinations,
        ..Default::default()
    }
}

/// Answers 127.0.0.1 for every name, as a cluster's DNS answers a Service's address.
struct ClusterDns;

impl Resolve for ClusterDns {
    fn resolve(&self, _: Name) -> Resolving {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Box::pin(async move { Ok(Box::new(std::iter::once(addr)) as Addrs) })
    }
}

/// Accepts one event for each integration, runs one worker pass over them and returns
/// (status, attempts, last_error) per integration.
async fn deliver_once(
    inbox: Inbox,
    integrations: &[(&str, String)],
    policy: Policy,
    dns: Option<Arc<dyn Resolve>>,
) -> Vec<(String, String, i64, Option<String>)> {
    let h = harness_with(inbox, &manifests(integrations));
    for (integration, _) in integrations {
        let sent = SendOptions {
            event_id: Some(format!("ev-{integration}")),
            ..opts()
        };
        let r = h.send(integration, "{}", sent).await;
        assert_eq!(r.json, accepted(), "{integration}");
    }
    let targets = worker::targets(&h.receiver.routes());
    let inbox = h.receiver.inbox().clone();
    let metrics = Arc::new(Metrics::new());
    let w = match dns {
        Some(dns) => Worker::with_dns(inbox.clone(), targets, cfg(policy), metrics, dns),
        None => Worker::new(inbox.clone(), targets, cfg(policy), metrics),
    };
    assert_eq!(w.run_once().await.unwrap(), integrations.len());
    let mut rows: Vec<_> = inbox
        .list(&ListFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.integration, e.status, e.attempts, e.last_error))
        .collect();
    rows.sort();
    rows
}

fn received_from(dest: &Destination) -> Vec<String> {
    let mut got: Vec<String> = dest
        .received()
        .iter()
        .map(|r| r.header("hookgate-integration"))
        .collect();
    got.sort();
    got
}

fn refused(integration: &str, reason: &str) -> (String, String, i64, Option<String>) {
    let error = format!("refused: {reason}");
    (integration.into(), "dead_letter".into(), 1, Some(error))
}

fn processed(integration: &str) -> (String, String, i64, Option<String>) {
    (integration.into(), "processed".into(), 1, None)
}

/// 127.0.0.1 stands in for the API server's address (KUBERNETES_SERVICE_HOST): a name that
/// resolves to it, through the real resolver, is refused at connect time as a literal is; the
/// event is dead-lettered on its first attempt; another integration of the same worker pass is
/// delivered.
async fn the_api_server_is_refused_by_resolved_address_and_others_still_deliver(inbox: Inbox) {
    let api = Destination::start().await;
    let ok = Destination::start_on("127.0.0.2:0").await;
    let integrations = [
        ("w/by-name", format!("http://localhost:{}/x", port(&api))),
        ("w/by-address", format!("http://127.0.0.1:{}/x", port(&api))),
        ("w/ok", format!("http://127.0.0.2:{}/x", port(&ok))),
    ];
    let policy = Policy {
        api_server: vec![IpAddr::from([127, 0, 0, 1])],
        ..Policy::default()
    };
    let rows = deliver_once(inbox, &integrations, policy, None).await;
    let reason = "127.0.0.1 is the Kubernetes API server's address (KUBERNETES_SERVICE_HOST)";
    assert_eq!(
        rows,
        vec![
            refused("w/by-address", reason),
            refused("w/by-name", reason),
            processed("w/ok"),
        ]
    );
    assert!(api.received().is_empty(), "nothing reached the API server");
    assert_eq!(received_from(&ok), ["w/ok"]);
}

/// In a pod, loopback is the worker itself: a name resolving there is refused. Standalone keeps
/// delivering to local sinks by name and by address.
async fn loopback_is_refused_in_a_cluster_and_delivered_to_in_standalone(inbox: Inbox) {
    let sink = Destination::start().await;
    let integrations = [
        ("w/by-name", format!("http://localhost:{}/x", port(&sink))),
        (
            "w/by-address",
            format!("http://127.0.0.1:{}/x", port(&sink)),
        ),
    ];
    let cluster = Policy {
        allow_loopback: false,
        ..Policy::default()
    };
    let (_dir, second) = sqlite_inbox().await;
    let rows = deliver_once(inbox, &integrations, cluster, None).await;
    let reason = "127.0.0.1 is loopback, which in a cluster is the worker's own pod";
    assert_eq!(
        rows,
        vec![
            refused("w/by-address", reason),
            refused("w/by-name", reason)
        ]
    );
    assert!(sink.received().is_empty());

    let rows = deliver_once(second, &integrations, Policy::default(), None).await;
    assert_eq!(
        rows,
        vec![processed("w/by-address"), processed("w/by-name")]
    );
    assert_eq!(received_from(&sink), ["w/by-address", "w/by-name"]);
}

/// `--destinations namespace`: an integration in `shop` reaches Services of `shop` and the
/// allowed external hosts, nothing else; open (the default) reaches every Service.
async fn namespace_scope_confines_each_integration_to_its_namespace(inbox: Inbox) {
    let sink = Destination::start().await;
    let p = port(&sink);
    let integrations = [
        ("shop/own", format!("http://sink.shop.svc:{p}/x")),
        (
            "shop/own-fqdn",
            format!("http://sink.shop.svc.cluster.local:{p}/x"),
        ),
        (
            "shop/other-namespace",
            format!("http://sink.payments.svc:{p}/x"),
        ),
        (
            "shop/partner",
            format!("http://hooks.partner.example:{p}/x"),
        ),
        ("shop/unlisted", format!("http://hooks.other.example:{p}/x")),
    ];
    let confined = Policy {
        scope: Scope::Namespace,
        allowed_hosts: vec!["hooks.partner.example".into()],
        ..Policy::default()
    };
    let (_dir, second) = sqlite_inbox().await;
    let rows = deliver_once(inbox, &integrations, confined, Some(Arc::new(ClusterDns))).await;
    let outside = |host: &str| {
        format!(
            "{host} is neither a Service of namespace shop nor an allowed external host (destinations: namespace)"
        )
    };
    assert_eq!(
        rows,
        vec![
            refused("shop/other-namespace", &outside("sink.payments.svc")),
            processed("shop/own"),
            processed("shop/own-fqdn"),
            processed("shop/partner"),
            refused("shop/unlisted", &outside("hooks.other.example")),
        ]
    );
    assert_eq!(
        received_from(&sink),
        ["shop/own", "shop/own-fqdn", "shop/partner"]
    );

    let rows = deliver_once(
        second,
        &integrations,
        Policy::default(),
        Some(Arc::new(ClusterDns)),
    )
    .await;
    assert!(
        rows.iter().all(|r| r.1 == "processed"),
        "open scope delivers everywhere: {rows:?}"
    );
}

on_both_backends!(
    the_api_server_is_refused_by_resolved_address_and_others_still_deliver,
    loopback_is_refused_in_a_cluster_and_delivered_to_in_standalone,
    namespace_scope_confines_each_integration_to_its_namespace,
);
