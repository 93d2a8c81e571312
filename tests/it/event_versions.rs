//! `events.versionPointer` / `supported` over real HTTP on both backends: a supported version is
//! delivered; an unsupported or missing one is stored, answered 200, dead-lettered with
//! `unsupported_event_version` and never reaches the destination; once the spec supports it, a
//! replay delivers it.

use crate::common::destination::Destination;
use crate::common::loopback::Served;
use crate::common::*;
use hookgate::inbox::{Apply, DeadLetterFilter, Inbox, ReplaySelector};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use std::sync::Arc;
use std::time::Duration;

fn manifests(dest: &str, supported: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: t}}
stringData: {{stripe: whsec_test_receiver_secret}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: stripe, namespace: t}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: keys, key: stripe}}}}]
  events: {{versionPointer: /api_version, supported: {supported}}}
  delivery: {{url: "{dest}"}}
"#
    )
}

fn body(id: &str, version: Option<serde_json::Value>) -> String {
    let mut b = serde_json::json!({"id": id, "type": "invoice.paid"});
    if let Some(v) = version {
        b["api_version"] = v;
    }
    b.to_string()
}

/// Runs one worker until the inbox has nothing left to deliver (no pending, retry or
/// processing row), then a little longer, so that a wrong delivery would have happened.
async fn deliver_all(h: &Harness) {
    let targets = worker::targets(&h.receiver.routes());
    let cfg = WorkerConfig {
        concurrency: 4,
        lease: Duration::from_secs(2),
        poll: Duration::from_millis(20),
        grace: Duration::from_secs(1),
        ..Default::default()
    };
    let w = Worker::new(
        h.receiver.inbox().clone(),
        targets,
        cfg,
        Arc::new(Metrics::new()),
    );
    let running = crate::common::running::start([w]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let waiting = h
            .receiver
            .inbox()
            .backlog(chrono::Utc::now())
            .await
            .unwrap()
            .iter()
            .filter(|s| s.status != "dead_letter")
            .map(|s| s.count)
            .sum::<i64>();
        if waiting == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not delivered");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
}

async fn unsupported_versions_are_dead_lettered_never_delivered(inbox: Inbox) {
    let dest = Destination::start().await;
    let h = harness_with(inbox, &manifests(&dest.url, r#"["2024-06-20", "2"]"#));
    let served = Served::start(&h.receiver).await;
    let cases = [
        ("evt_current", Some("2024-06-20".into())),
        ("evt_number", Some(2.into())),
        ("evt_old", Some("2023-10-16".into())),
        ("evt_none", None),
    ];
    for (id, version) in cases {
        let b = body(id, version);
        let (path, headers) = h.sign("t/stripe", &b, opts());
        let (status, json) = served.post(&path, &headers, b).await;
        assert_eq!(
            (status, json),
            (200, accepted()),
            "{id}: authentic, so stored"
        );
    }
    deliver_all(&h).await;

    let mut delivered: Vec<String> = dest
        .received()
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["id"].to_string())
        .collect();
    delivered.sort();
    assert_eq!(delivered, [r#""evt_current""#, r#""evt_number""#]);

    let inbox = h.receiver.inbox();
    let mut dead = inbox
        .dead_letters(&DeadLetterFilter::default())
        .await
        .unwrap();
    dead.sort_by(|a, b| a.event_id.cmp(&b.event_id));
    let seen: Vec<_> = dead
        .iter()
        .map(|d| (d.event_id.as_str(), d.last_error.as_deref(), d.attempts))
        .collect();
    assert_eq!(
        seen,
        [
            ("evt_none", Some("unsupported_event_version: missing"), 0),
            (
                "evt_old",
                Some("unsupported_event_version: \"2023-10-16\""),
                0
            ),
        ]
    );
    assert!(dead.iter().all(|d| d.dead_lettered_at.is_some()));
    assert!(
        h.metrics.encode().contains(
            "hookgate_delivery_attempts_total{integration=\"t/stripe\",outcome=\"dead_letter\"} 2"
        ),
        "counted as dead letters"
    );

    // The spec now supports the old version: a replay delivers it.
    h.receiver.swap_routes(
        load(&manifests(
            &dest.url,
            r#"["2024-06-20", "2", "2023-10-16"]"#,
        ))
        .route_table()
        .unwrap(),
    );
    let old = dead.iter().find(|d| d.event_id == "evt_old").unwrap().id;
    let replayed = inbox
        .replay_dead_letters(&ReplaySelector::Ids(vec![old]), t0(), Apply::By(&tester()))
        .await
        .unwrap();
    assert_eq!(replayed, [old]);
    deliver_all(&h).await;
    let received = dest.received();
    assert_eq!(received.len(), 3);
    assert!(String::from_utf8_lossy(&received[2].body).contains("evt_old"));
    assert_eq!(
        inbox
            .dead_letters(&DeadLetterFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

on_both_backends!(unsupported_versions_are_dead_lettered_never_delivered);
