//! The harness the worker tests share: the manifests (a destination on loopback per test), the
//! worker configuration, and [`Setup`], which sends signed events through the real receiver and
//! reads the inbox back on either backend.

use crate::common::destination::Destination;
use crate::common::*;
use chrono::{DateTime, Utc};
use hookgate::cli::send::SendOptions;
use hookgate::inbox::{Inbox, ReplaySelector};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use sqlx::Row;
use std::sync::Arc;
use std::time::Duration;

pub(crate) const DELIVERY_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub(crate) const SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: w}
stringData: {hmac: worker-test-secret, delivery: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
"#;

/// The test Secret and a `w/<name>` integration for each `(name, delivery)`, `delivery` being its
/// `spec.delivery` as a YAML flow mapping.
pub(crate) fn integrations(list: &[(&str, &str)]) -> String {
    let mut yaml = SECRET.to_string();
    for (name, delivery) in list {
        yaml += &format!(
            r#"---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {delivery}
"#
        );
    }
    yaml
}

pub(crate) fn manifests(dest: &str) -> String {
    format!(
        r#"{SECRET}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: orders, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery:
    url: "{dest}"
    signingSecretRef: {{name: keys, key: delivery}}
    forwardHeaders: [X-Request-Id, X-Trace-Id]
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: fast, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {{url: "{dest}", timeout: 300ms, retry: {{schedule: [100ms, 100ms]}}}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: closed, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {{url: "http://127.0.0.1:1/nothing-listens-here"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: ordered, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  ordering: {{resourceIdPointer: /data/id, versionPointer: /data/version}}
  delivery: {{url: "{dest}"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: short, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  retention: {{payload: 1h, dedupe: 2h}}
  delivery: {{url: "{dest}"}}
"#
    )
}

pub(crate) fn cfg() -> WorkerConfig {
    WorkerConfig {
        concurrency: 8,
        lease: Duration::from_secs(2),
        poll: Duration::from_millis(20),
        grace: Duration::from_secs(1),
        ..Default::default()
    }
}

/// (status, attempts, last_error, next_attempt_at) of one event.
pub(crate) type EventRow = (String, i64, Option<String>, Option<DateTime<Utc>>);

pub(crate) struct Setup {
    pub(crate) h: Harness,
    pub(crate) dest: Destination,
    /// Shared by every worker of the test, so counters add up across them.
    pub(crate) metrics: Arc<Metrics>,
}

impl Setup {
    pub(crate) async fn new(inbox: Inbox) -> Self {
        let dest = Destination::start().await;
        let yaml = manifests(&dest.url);
        Self::with_yaml(inbox, dest, &yaml)
    }

    pub(crate) fn with_yaml(inbox: Inbox, dest: Destination, yaml: &str) -> Self {
        Self {
            h: harness_with(inbox, yaml),
            dest,
            metrics: Arc::new(Metrics::new()),
        }
    }

    pub(crate) fn inbox(&self) -> &Inbox {
        self.h.receiver.inbox()
    }

    pub(crate) fn worker(&self) -> Worker {
        self.worker_with(cfg())
    }

    pub(crate) fn worker_with(&self, cfg: WorkerConfig) -> Worker {
        let targets = worker::targets(&self.h.receiver.routes());
        Worker::new(self.inbox().clone(), targets, cfg, self.metrics.clone())
    }

    /// Accepts one event through the receiver. Besides the provider's signature, the request
    /// carries two headers `orders` forwards and one nobody forwards.
    pub(crate) async fn event(&self, integration: &str, id: &str, body: &str) {
        let answer = self.send(integration, id, body).await;
        assert_eq!(answer, accepted(), "{integration} {id}");
    }

    /// Like [`Setup::event`], returning the receiver's answer instead of asserting it.
    pub(crate) async fn send(&self, integration: &str, id: &str, body: &str) -> serde_json::Value {
        let sent = SendOptions {
            event_id: Some(id.into()),
            ..opts()
        };
        let (path, mut headers) = self.h.sign(integration, body, sent);
        headers.push(("X-Request-Id".into(), format!("req-{id}")));
        headers.push(("X-Trace-Id".into(), format!("trace-{id}")));
        headers.push(("X-Unlisted".into(), format!("unlisted-{id}")));
        self.h.post(&path, &headers, body).await.json
    }

    /// Claims the test's workers made that found due events (`"some"`) or none (`"none"`).
    pub(crate) fn claims(&self, found: &str) -> u64 {
        let series = format!("hookgate_claims_total{{found=\"{found}\"}}");
        hookgate::metrics::counter_sum(&self.metrics.encode(), &series) as u64
    }

    /// (in use, max) of the test's workers' delivery slots, as `/metrics` serves them.
    pub(crate) fn slots(&self) -> (u64, u64) {
        let text = self.metrics.encode();
        let read = |series| hookgate::metrics::counter_sum(&text, series) as u64;
        (
            read("hookgate_delivery_slots_in_use"),
            read("hookgate_delivery_max_slots"),
        )
    }

    /// Until the test's workers have made `n` claims that found nothing: a pool started on an
    /// empty inbox has made its first claim, so what is stored from here reaches it only by a
    /// hand-over or a wake-up. A fixed 300 ms sleep stood here until round 49, which a starved
    /// machine could outlast.
    pub(crate) async fn past_empty_claims(&self, n: u64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.claims("none") < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {n} empty claims made within 20 s",
                self.claims("none")
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) async fn row(&self, event_id: &str) -> EventRow {
        on!(self.inbox(), pool => {
            let r = sqlx::query(
                "SELECT status, attempts, last_error, next_attempt_at FROM inbox_events WHERE event_id = $1",
            )
            .bind(event_id)
            .fetch_one(pool)
            .await
            .unwrap();
            (r.get(0), r.get(1), r.get(2), r.get(3))
        })
    }

    /// Replays the dead letter `event_id` as an operator would (by its row id), checking that it
    /// was the one replayed.
    pub(crate) async fn replay(&self, event_id: &str) {
        let id = self.row_id(event_id).await;
        let replayed = self
            .inbox()
            .replay_dead_letters(
                &ReplaySelector::Ids(vec![id]),
                Utc::now(),
                hookgate::inbox::Apply::By(&crate::common::tester()),
            )
            .await
            .unwrap();
        assert_eq!(replayed, vec![id], "replayed {event_id}");
    }

    /// The inbox row id of an event (of any integration; ids are unique per test).
    pub(crate) async fn row_id(&self, event_id: &str) -> i64 {
        on!(self.inbox(), pool => {
            sqlx::query_scalar("SELECT id FROM inbox_events WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap()
        })
    }

    /// (attempt, status code, error, outcome) of every recorded attempt, oldest first.
    pub(crate) async fn attempts(
        &self,
        event_id: &str,
    ) -> Vec<(i64, Option<i64>, Option<String>, String)> {
        on!(self.inbox(), pool => {
            sqlx::query(
                "SELECT a.attempt, a.status_code, a.error, a.outcome FROM delivery_attempts a \
                 JOIN inbox_events e ON e.id = a.event_row WHERE e.event_id = $1 ORDER BY a.id",
            )
            .bind(event_id)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect()
        })
    }

    /// Moves the instant an event finished (or, for a dead letter, arrived) back to `at`, so
    /// retention can be tested on the janitor's own clock without sleeping.
    pub(crate) async fn finished_at(&self, event_id: &str, at: DateTime<Utc>) {
        on!(self.inbox(), pool => {
            sqlx::query(
                "UPDATE inbox_events SET processed_at = CASE WHEN processed_at IS NULL THEN NULL ELSE $1 END, \
                 received_at = $1 WHERE event_id = $2",
            )
            .bind(at)
            .bind(event_id)
            .execute(pool)
            .await
            .unwrap();
        })
    }

    pub(crate) async fn body(&self, event_id: &str) -> Vec<u8> {
        on!(self.inbox(), pool => {
            sqlx::query_scalar("SELECT body FROM inbox_events WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap()
        })
    }

    pub(crate) async fn event_ids(&self) -> Vec<String> {
        on!(self.inbox(), pool => {
            sqlx::query_scalar("SELECT event_id FROM inbox_events ORDER BY event_id")
                .fetch_all(pool)
                .await
                .unwrap()
        })
    }

    /// Runs `workers` in the background until `done` holds (bounded), then shuts them down.
    pub(crate) async fn run_until<F, Fut>(&self, workers: Vec<Worker>, within: Duration, done: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let running = crate::common::running::start(workers);
        let deadline = tokio::time::Instant::now() + within;
        while !done().await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "workers did not finish in {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        running.stop().await;
    }

    pub(crate) async fn unfinished(&self) -> i64 {
        on!(self.inbox(), pool => {
            sqlx::query_scalar(
                "SELECT COUNT(*) FROM inbox_events WHERE status IN ('pending', 'retry', 'processing')",
            )
            .fetch_one(pool)
            .await
            .unwrap()
        })
    }
}

/// `at` lies within [`from`, `to`]. Compared in whole microseconds, PostgreSQL's precision:
/// truncating never moves a value across a bound that is itself truncated, so the bounds stay
/// exact on both backends, with no margin for a slow machine to miss.
pub(crate) fn assert_between(
    at: DateTime<Utc>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    what: &str,
) {
    let (at, from, to) = (
        at.timestamp_micros(),
        from.timestamp_micros(),
        to.timestamp_micros(),
    );
    assert!(
        (from..=to).contains(&at),
        "{what}: {at} µs is outside [{from}, {to}]"
    );
}

pub(crate) fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

/// A setup whose `w/orders` delivers to `s.dest`, and `w/bulk` to the destination returned.
pub(crate) async fn bulk_and_orders(inbox: Inbox) -> (Setup, Destination) {
    let bulk = Destination::start().await;
    let orders = Destination::start().await;
    let yaml = integrations(&[
        ("bulk", &format!(r#"{{url: "{}"}}"#, bulk.url)),
        ("orders", &format!(r#"{{url: "{}"}}"#, orders.url)),
    ]);
    (Setup::with_yaml(inbox, orders, &yaml), bulk)
}

/// Starts a pool of `concurrency` slots whose receiver hands it up to `handoff_events` (0: every
/// event stored for a claim), with a lease that outlasts the tests' hung deliveries (an attempt
/// may take ¾ of it) and no poll: only stores wake its claims.
pub(crate) fn running_pool(
    s: &mut Setup,
    concurrency: usize,
    handoff_events: usize,
) -> crate::common::running::Running {
    let (w, end) = s
        .worker_with(WorkerConfig {
            concurrency,
            lease: Duration::from_secs(60),
            poll: Duration::from_secs(3600),
            handoff_events,
            ..cfg()
        })
        .with_handoff();
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    crate::common::running::start([w])
}

/// Sends `w/bulk`'s b-0, b-1 and b-2 one after another to a running pool: b-1 hangs, so
/// `w/bulk` stays busy, and b-0 and b-2 answer within it, which tells the pool that `w/bulk`'s
/// destination answers: it may take every slot (`worker::fair`).
pub(crate) async fn bulk_answers_while_one_hangs(s: &Setup, bulk: &Destination) {
    bulk.script([
        crate::common::destination::Answer::After(Duration::from_millis(50)),
        crate::common::destination::Answer::Hang,
        crate::common::destination::Answer::After(Duration::from_millis(50)),
    ]);
    for (n, id) in ["b-0", "b-1", "b-2"].into_iter().enumerate() {
        s.event("w/bulk", id, "{}").await;
        bulk.wait_for(n + 1, Duration::from_secs(10)).await;
    }
}
