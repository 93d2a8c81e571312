//! `hookgate receiver --with-workers`: a receiver that delivers what it takes in, handed over in
//! memory without a claim, with targets from the same compiled route Secrets it routes by, under
//! the receiver's own ServiceAccount (no `hookgate worker` runs here). A second integration added
//! while it runs is delivered too: the workers follow the route watch.

use crate::destination::Destination;
use crate::fixtures::{Release, Role, post, sign, wait_for, wait_ready};
use crate::harness::ApiServer;
use std::time::Duration;

fn integration(ns: &str, name: &str, url: &str) -> String {
    format!(
        "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  scheme: {{type: standard-webhooks}}\n  rotation: {{generate: true}}\n  delivery: {{url: \"{url}\"}}\n"
    )
}

/// The sum of a counter's samples in a `/metrics` text.
fn counter(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_receiver_with_workers_delivers_what_it_takes_in_without_a_claim() {
    let Some(server) = ApiServer::shared() else {
        return;
    };
    let r = Release::install(server, "rdw").await;
    let dest = Destination::start().await;
    let _controller = Role::controller(server, &r, "rdw-0");
    let mut receiver = Role::receiver_with(
        server,
        &r,
        &[
            "--with-workers",
            "--poll",
            "100ms",
            "--db-max-connections",
            "6",
        ],
    );
    let t = r.tenant.as_str();
    server.apply(&integration(t, "first", &dest.url));
    wait_ready(server, t, "first", Duration::from_secs(60)).await;
    receiver.wait_ready("receiver").await;
    let client = server.client().await;
    let body = |name: &str, n: u32| format!(r#"{{"id":"evt_{name}_{n}","type":"a","data":{{}}}}"#);
    let send = async |name: &str, n: u32| {
        post(
            &receiver.url(),
            &sign(&client, t, name, &body(name, n), None).await,
        )
        .await
    };
    wait_for(
        "the receiver routes first",
        Duration::from_secs(30),
        async || send("first", 0).await.0 == 200,
    )
    .await;
    for n in 1..5 {
        assert_eq!(send("first", n).await.0, 200);
    }
    let got = dest.wait_for(5, Duration::from_secs(30)).await;
    assert_eq!(
        got.len(),
        5,
        "the receiver's workers delivered each event once"
    );

    // A second integration, added while the receiver runs: routed and delivered alike.
    server.apply(&integration(t, "second", &dest.url));
    wait_ready(server, t, "second", Duration::from_secs(60)).await;
    wait_for(
        "the receiver routes second",
        Duration::from_secs(30),
        async || send("second", 0).await.0 == 200,
    )
    .await;
    let got = dest.wait_for(6, Duration::from_secs(30)).await;
    assert_eq!(
        got.len(),
        6,
        "the event of the second integration delivered"
    );

    let metrics = receiver.metrics().await;
    let handed = counter(&metrics, "hookgate_events_handed_over_total");
    assert!(
        handed >= 6.0,
        "every event was handed over, none left for a claim: {handed}"
    );
    // The role reports how full its webhook port and its admin port are, against their caps
    // (the scrape is the admin port's one request in flight), and what each refused: nothing;
    // and its database pool's cap, the flag's, and its workers' slots (32 by default).
    for series in [
        "hookgate_db_max_connections 6",
        "hookgate_delivery_max_slots 32",
        r#"hookgate_http_max_connections{listener="receiver"} 1024"#,
        r#"hookgate_http_max_requests_in_flight{listener="receiver"} 128"#,
        r#"hookgate_http_requests_in_flight{listener="receiver"} 0"#,
        r#"hookgate_http_requests_in_flight{listener="admin"} 1"#,
        r#"hookgate_http_requests_refused_total{listener="receiver"} 0"#,
        r#"hookgate_http_requests_refused_total{listener="admin"} 0"#,
        r#"hookgate_http_connections_dropped_total{listener="receiver"} 0"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} missing from:\n{metrics}"
        );
    }
    let logs = receiver.logs();
    assert!(
        logs.contains("workers running beside the receiver"),
        "{logs}"
    );
    assert!(!logs.contains("whsec_"), "no key in the logs");
}
