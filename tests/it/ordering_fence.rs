//! The ordering gate's stored version moves only for the worker that holds the resource's lock,
//! and only from the version it compared against: a worker that lost its lock and completes late
//! cannot move the version backwards; only a 2xx moves it at all; events the gate cannot place
//! are delivered ungated and counted. On PostgreSQL and SQLite.

use crate::common::destination::{Answer, Destination};
use crate::common::*;
use chrono::{Duration, Utc};
use hookgate::cli::send::SendOptions;
use hookgate::inbox::{Advance, Completion, Inbox};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use std::sync::Arc;

fn advance(version: &str, token: &str, previous: Option<&str>) -> Completion {
    Completion::Processed {
        version: Some(Advance {
            resource: "cus_1".into(),
            version: version.into(),
            token: token.into(),
            previous: previous.map(Into::into),
        }),
    }
}

async fn a_worker_that_lost_its_lock_cannot_move_the_version(inbox: Inbox) {
    let h = harness(inbox.clone());
    for id in ["evt_a", "evt_b"] {
        let r = h
            .send("t/stripe", &stripe_body(id, "invoice.paid"), opts())
            .await;
        assert_eq!(r.json, accepted());
    }
    let now = t0() + Duration::seconds(1);
    let claimed = inbox
        .claim(now, now + Duration::seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    // Worker A locks the resource and compares against "no version yet"; then it stalls.
    let lock =
        |at, token| inbox.lock_resource("t/stripe", "cus_1", at, at + Duration::seconds(2), token);
    assert_eq!(lock(now, "token-a").await.unwrap(), Some(None));
    // A's lock expires; B takes it and delivers version 5.
    let later = now + Duration::seconds(3);
    assert_eq!(lock(later, "token-b").await.unwrap(), Some(None));
    assert!(
        inbox
            .complete(&claimed[1], &advance("i:5", "token-b", None), None, later)
            .await
            .unwrap()
    );
    // A completes late with version 3: its event ends (its claim is still its own), the gate
    // stays at 5.
    assert!(
        inbox
            .complete(&claimed[0], &advance("i:3", "token-a", None), None, later)
            .await
            .unwrap()
    );
    let a = inbox.event_detail(claimed[0].id).await.unwrap().unwrap();
    assert_eq!(a.status, "processed");
    let after = later + Duration::seconds(10);
    assert_eq!(
        lock(after, "token-c").await.unwrap(),
        Some(Some("i:5".to_string()))
    );
}

fn ordered_manifests(dest: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: g}}
stringData: {{hmac: gate-test-secret}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: ordered, namespace: g}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  ordering: {{resourceIdPointer: /data/id, versionPointer: /data/version}}
  delivery: {{url: "{dest}"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: unreachable, namespace: g}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  ordering: {{resourceIdPointer: /data/id, versionPointer: /data/version}}
  delivery: {{url: "http://127.0.0.1:1/nothing-listens-here"}}
"#
    )
}

/// A receiver and one real worker delivering to a recording destination.
struct Gate {
    h: Harness,
    dest: Destination,
    worker: Worker,
    metrics: Arc<Metrics>,
}

impl Gate {
    async fn new(inbox: Inbox) -> Self {
        let dest = Destination::start().await;
        let h = harness_with(inbox, &ordered_manifests(&dest.url));
        let metrics = Arc::new(Metrics::new());
        let worker = Worker::new(
            h.receiver.inbox().clone(),
            worker::targets(&h.receiver.routes()),
            WorkerConfig::default(),
            metrics.clone(),
        );
        Self {
            h,
            dest,
            worker,
            metrics,
        }
    }

    fn inbox(&self) -> &Inbox {
        self.h.receiver.inbox()
    }

    /// Accepts one event and lets the worker deliver it, the destination answering `answer`.
    async fn deliver(&self, integration: &str, id: &str, body: &str, answer: Answer) {
        let sent = SendOptions {
            event_id: Some(id.into()),
            ..opts()
        };
        assert_eq!(
            self.h.send(integration, body, sent).await.json,
            accepted(),
            "{id}"
        );
        self.dest.script([answer]);
        assert_eq!(self.worker.run_once().await.unwrap(), 1, "{id}");
    }

    /// (version, updated_at, lock token) of a resource's fence.
    async fn fence(
        &self,
        integration: &str,
        resource: &str,
    ) -> (Option<String>, String, Option<String>) {
        on!(self.inbox(), pool => {
            sqlx::query_as(
                "SELECT version, CAST(updated_at AS TEXT), lock_token FROM resource_versions \
                 WHERE integration = $1 AND resource_id = $2",
            )
            .bind(integration)
            .bind(resource)
            .fetch_one(pool)
            .await
            .unwrap()
        })
    }

    async fn status(&self, event_id: &str) -> (String, Option<String>) {
        on!(self.inbox(), pool => {
            sqlx::query_as("SELECT status, last_error FROM inbox_events WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap()
        })
    }
}

fn versioned(resource: &str, version: impl serde::Serialize) -> String {
    serde_json::json!({"data": {"id": resource, "version": version}}).to_string()
}

/// README, ordering gate: "Only a 2xx advances the version". A newer version that the
/// destination does not take (5xx, 429, 4xx, a redirect, no connection) leaves the stored fence
/// exactly as it was, and releases the resource for the next delivery; once a retry of it is
/// taken, the fence moves.
async fn only_a_2xx_advances_the_version(inbox: Inbox) {
    let g = Gate::new(inbox).await;
    g.deliver(
        "g/ordered",
        "v1",
        &versioned("cus_1", 1),
        Answer::Status(200),
    )
    .await;
    let fence = g.fence("g/ordered", "cus_1").await;
    assert_eq!(
        (fence.0.as_deref(), fence.2.as_deref()),
        (Some("i:1"), None)
    );

    let refused = [
        (500, "retry"),
        (429, "retry"),
        (404, "dead_letter"),
        (409, "dead_letter"),
        (302, "dead_letter"),
    ];
    for (n, (code, status)) in refused.into_iter().enumerate() {
        let id = format!("v{}", n + 2);
        let body = versioned("cus_1", n + 2);
        g.deliver("g/ordered", &id, &body, Answer::Status(code))
            .await;
        assert_eq!(
            g.fence("g/ordered", "cus_1").await,
            fence,
            "HTTP {code} for version {} moved the fence",
            n + 2
        );
        let want = format!("HTTP {code}");
        assert_eq!(g.status(&id).await, (status.to_string(), Some(want)));
    }
    assert_eq!(g.dest.received().len(), 6, "each version was sent");

    // No connection at all: the fence of a resource never delivered stays empty.
    let sent = SendOptions {
        event_id: Some("nowhere".into()),
        ..opts()
    };
    let body = versioned("cus_2", 1);
    assert_eq!(
        g.h.send("g/unreachable", &body, sent).await.json,
        accepted()
    );
    assert_eq!(g.worker.run_once().await.unwrap(), 1);
    assert_eq!(g.status("nowhere").await.0, "retry");
    let (version, _, token) = g.fence("g/unreachable", "cus_2").await;
    assert_eq!((version, token), (None, None));

    // The retried version 2 is taken: now the fence moves, to 2 (3 is not due yet).
    let due = Utc::now() + Duration::seconds(40);
    let retries = g
        .inbox()
        .claim(due, due + Duration::seconds(60), 10)
        .await
        .unwrap();
    let v2 = retries
        .iter()
        .find(|c| c.event_id == "v2")
        .expect("v2 is due for its retry");
    g.dest.always(Answer::Status(200));
    g.worker.deliver(v2).await;
    assert_eq!(g.status("v2").await.0, "processed");
    let moved = g.fence("g/ordered", "cus_1").await;
    assert_eq!(moved.0.as_deref(), Some("i:2"));
    for c in retries.iter().filter(|c| c.event_id != "v2") {
        assert!(g.inbox().release(c, due).await.unwrap());
    }
}

/// README, ordering gate: "An event without the id or the version, or with a version of the
/// other kind, is delivered ungated and counted in `hookgate_ordering_ungated_total`." Each is
/// delivered once, none moves the fence of the resource it names.
async fn ungated_events_are_delivered_and_counted(inbox: Inbox) {
    let g = Gate::new(inbox).await;
    g.deliver(
        "g/ordered",
        "gated",
        &versioned("cus_9", 5),
        Answer::Status(200),
    )
    .await;
    let fence = g.fence("g/ordered", "cus_9").await;
    assert_eq!(fence.0.as_deref(), Some("i:5"));

    let ungated = [
        (
            "no-id",
            serde_json::json!({"data": {"version": 6}}).to_string(),
        ),
        (
            "no-version",
            serde_json::json!({"data": {"id": "cus_9"}}).to_string(),
        ),
        ("other-kind", versioned("cus_9", "2026-01-01T00:00:00Z")),
        ("fraction", versioned("cus_9", 4.5)),
        ("not-json", "version 7 of cus_9".to_string()),
    ];
    for (id, body) in &ungated {
        g.deliver("g/ordered", id, body, Answer::Status(200)).await;
        assert_eq!(g.status(id).await, ("processed".to_string(), None), "{id}");
        assert_eq!(g.fence("g/ordered", "cus_9").await, fence, "{id}");
    }
    let bodies: Vec<String> = g
        .dest
        .received()
        .iter()
        .skip(1)
        .map(|r| String::from_utf8(r.body.clone()).unwrap())
        .collect();
    let sent: Vec<String> = ungated.iter().map(|(_, b)| b.clone()).collect();
    assert_eq!(bodies, sent, "each delivered once, in turn");
    let text = g.metrics.encode();
    let line = r#"hookgate_ordering_ungated_total{integration="g/ordered"} 5"#;
    assert!(text.contains(line), "missing {line}:\n{text}");
}

on_both_backends!(
    a_worker_that_lost_its_lock_cannot_move_the_version,
    only_a_2xx_advances_the_version,
    ungated_events_are_delivered_and_counted,
);
