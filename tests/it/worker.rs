//! Delivery workers against real PostgreSQL and SQLite with a real HTTP destination on loopback.
//! Events enter through the real receiver, so every delivered event was verified first. What
//! holds on every inbox backend (retries, dead letters, replay, a killed worker's lease, the
//! ordering gate, retention) runs on both through `on_both_backends!`; what is PostgreSQL's alone
//! (the claim's query plan, several worker processes' SKIP LOCKED) stays a `#[sqlx::test]`.

use crate::common::destination::{Answer, Destination, Received};
use crate::common::*;
use chrono::{DateTime, Utc};
use hookgate::cli::send::SendOptions;
use hookgate::inbox::{Inbox, ReplaySelector};
use hookgate::metrics::Metrics;
use hookgate::worker::janitor::Swept;
use hookgate::worker::{self, Worker, WorkerConfig};
use serde_json::json;
use sqlx::{PgPool, Row};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const DELIVERY_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: keys, namespace: w}
stringData: {hmac: worker-test-secret, delivery: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
"#;

fn manifests(dest: &str) -> String {
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

    fn with_yaml(inbox: Inbox, dest: Destination, yaml: &str) -> Self {
        Self {
            h: harness_with(inbox, yaml),
            dest,
            metrics: Arc::new(Metrics::new()),
        }
    }

    pub(crate) fn inbox(&self) -> &Inbox {
        self.h.receiver.inbox()
    }

    fn worker(&self) -> Worker {
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
    async fn finished_at(&self, event_id: &str, at: DateTime<Utc>) {
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

    async fn body(&self, event_id: &str) -> Vec<u8> {
        on!(self.inbox(), pool => {
            sqlx::query_scalar("SELECT body FROM inbox_events WHERE event_id = $1")
                .bind(event_id)
                .fetch_one(pool)
                .await
                .unwrap()
        })
    }

    async fn event_ids(&self) -> Vec<String> {
        on!(self.inbox(), pool => {
            sqlx::query_scalar("SELECT event_id FROM inbox_events ORDER BY event_id")
                .fetch_all(pool)
                .await
                .unwrap()
        })
    }

    /// Runs `workers` in the background until `done` holds (bounded), then shuts them down.
    async fn run_until<F, Fut>(&self, workers: Vec<Worker>, within: Duration, done: F)
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

    async fn unfinished(&self) -> i64 {
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
fn assert_between(at: DateTime<Utc>, from: DateTime<Utc>, to: DateTime<Utc>, what: &str) {
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

fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

async fn delivers_original_body_with_signed_headers(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let body = r#"{"id":"o-1","type":"order.created","n":1}"#;
    // The request really carried the provider's signature: the receiver accepted it.
    let (_, signed) = s.h.sign("w/orders", body, opts());
    assert!(
        signed
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("x-signature"))
    );
    s.event("w/orders", "o-1", body).await;
    let before = Utc::now();
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let after = Utc::now();

    let got = s.dest.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.body, body.as_bytes());
    assert_eq!(r.header("content-type"), "application/json");
    assert_eq!(r.header("hookgate-integration"), "w/orders");
    assert_eq!(r.header("hookgate-event-type"), "order.created");
    assert_eq!(r.header("hookgate-attempt"), "1");
    // forwardHeaders passes its headers through with their values, and only those.
    assert_eq!(r.header("x-request-id"), "req-o-1");
    assert_eq!(r.header("x-trace-id"), "trace-o-1");
    assert!(
        !r.headers.contains_key("x-signature"),
        "the provider's signature is never forwarded"
    );
    assert!(
        !r.headers.contains_key("x-unlisted"),
        "not in forwardHeaders"
    );
    assert_webhook_id_format(&r.header("webhook-id"));
    let ts: i64 = r.header("webhook-timestamp").parse().unwrap();
    assert!(
        (before.timestamp()..=after.timestamp()).contains(&ts),
        "webhook-timestamp {ts} is the attempt's time"
    );
    assert!(r.header("webhook-signature").starts_with("v1,"));
    assert_signature_verifies(r);

    assert_eq!(s.row("o-1").await.0, "processed");
    assert_eq!(
        s.attempts("o-1").await,
        vec![(1, Some(200), None, "processed".to_string())]
    );
}

/// README: `webhook-id` is `msg_` followed by a hash. Checked on the header as delivered, not
/// against the function that computes it.
fn assert_webhook_id_format(id: &str) {
    let hash = id
        .strip_prefix("msg_")
        .unwrap_or_else(|| panic!("{id:?} starts with msg_"));
    assert!(
        hash.len() >= 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id:?}: msg_ and a hash"
    );
}

/// Checks the delivery signature with hookgate's own Standard Webhooks verifier.
fn assert_signature_verifies(r: &Received) {
    use hookgate::signature::{Key, Scheme, Unverified, Verifier, standard_webhooks};
    let material = standard_webhooks::parse_key(DELIVERY_SECRET.as_bytes()).unwrap();
    let v = Verifier::new(
        Scheme::StandardWebhooks,
        vec![Key {
            id: "d".into(),
            material,
            not_after: None,
        }],
    );
    v.verify(
        Unverified {
            query: None,
            headers: &r.headers,
            body: &r.body,
        },
        Utc::now(),
    )
    .expect("delivery signature verifies");
}

/// The same event keeps its `webhook-id` across retries, a replay and even a re-import as a new
/// row (it is derived from the integration and the event id); other events, and the same event
/// id in another integration, get other ids.
async fn webhook_ids_are_stable_per_event_and_distinct_between_events(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    let inbox = s.inbox();

    s.dest.script([Answer::Status(500)]);
    s.event("w/orders", "same", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    // The retry, claimed at the instant it falls due rather than waited for.
    let due = Utc::now() + secs(40);
    let retry = inbox.claim(due, due + secs(60), 10).await.unwrap();
    assert_eq!(retry.len(), 1);
    s.dest.script([Answer::Status(404)]);
    w.deliver(&retry[0]).await;
    assert_eq!(s.row("same").await.0, "dead_letter");
    let id = s.row_id("same").await;
    let replayed = inbox
        .replay_dead_letters(
            &ReplaySelector::Ids(vec![id]),
            Utc::now(),
            hookgate::inbox::Apply::By(&crate::common::tester()),
        )
        .await
        .unwrap();
    assert_eq!(replayed, vec![id]);
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(s.row("same").await.0, "processed");

    s.event("w/orders", "other", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    s.event("w/fast", "same", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);

    // Retention deletes the processed rows; the provider sends "other" again, a new row.
    let other_row = s.row_id("other").await;
    assert_eq!(
        inbox
            .delete_finished("w/orders", Utc::now() + secs(1))
            .await
            .unwrap(),
        2
    );
    s.event("w/orders", "other", "{}").await;
    assert_ne!(s.row_id("other").await, other_row, "a new row");
    assert_eq!(w.run_once().await.unwrap(), 1);

    let got = s.dest.received();
    let ids: Vec<String> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 6);
    for id in &ids {
        assert_webhook_id_format(id);
    }
    let (same, other, fast_same, other_again) = (&ids[0..3], &ids[3], &ids[4], &ids[5]);
    assert!(
        same.iter().all(|i| *i == same[0]),
        "attempts 1, 2 and the replay share one id: {same:?}"
    );
    assert_eq!(
        other, other_again,
        "the same event re-imported keeps its id"
    );
    let distinct: HashSet<&String> = [&same[0], other, fast_same].into_iter().collect();
    assert_eq!(distinct.len(), 3, "{ids:?}");
}

async fn each_destination_answer_has_its_outcome(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    let cases: Vec<(Answer, &str, &str)> = vec![
        (Answer::Status(204), "processed", ""),
        (Answer::Status(500), "retry", "HTTP 500"),
        (Answer::Status(503), "retry", "HTTP 503"),
        (Answer::Status(408), "retry", "HTTP 408"),
        (Answer::Status(425), "retry", "HTTP 425"),
        (Answer::Status(429), "retry", "HTTP 429"),
        (Answer::Status(404), "dead_letter", "HTTP 404"),
        (Answer::Status(410), "dead_letter", "HTTP 410"),
    ];
    for (i, (answer, status, error)) in cases.into_iter().enumerate() {
        let id = format!("case-{i}");
        s.dest.script([answer.clone()]);
        s.event("w/orders", &id, &format!(r#"{{"id":"{id}"}}"#))
            .await;
        let before = Utc::now();
        assert_eq!(w.run_once().await.unwrap(), 1);
        let after = Utc::now();
        let (got, attempts, last_error, next) = s.row(&id).await;
        assert_eq!((got.as_str(), attempts), (status, 1), "{answer:?}");
        assert_eq!(last_error.unwrap_or_default(), error, "{answer:?}");
        if status == "retry" {
            // First step of the default schedule (30 s), ±10 % jitter, from the instant the
            // attempt ended.
            assert_between(
                next.unwrap(),
                before + secs(27),
                after + secs(33),
                &format!("{answer:?}"),
            );
        } else {
            assert_eq!(next, None, "{answer:?}");
        }
    }
    assert_eq!(s.dest.received().len(), 8);
}

/// A destination that answers every request with `code` and a `Location` naming `to`.
async fn redirecting(code: u16, to: &str) -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    let to = to.to_string();
    let app = axum::Router::new().fallback(move || {
        let (seen, to) = (seen.clone(), to.clone());
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            (
                axum::http::StatusCode::from_u16(code).unwrap(),
                [(axum::http::header::LOCATION, to)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/moved", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, hits)
}

/// A redirect is final and never followed: the signed body must not go to a host the
/// integration never named. Each 3xx carries a `Location` to a second recording destination,
/// which must see nothing.
async fn redirects_are_dead_letters_and_never_followed(inbox: Inbox) {
    let elsewhere = Destination::start().await;
    let codes = [301, 302, 303, 307, 308];
    let mut yaml = SECRET.to_string();
    let mut redirectors = Vec::new();
    for code in codes {
        let (url, hits) = redirecting(code, &elsewhere.url).await;
        yaml += &format!(
            r#"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: r{code}, namespace: w}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {{url: "{url}"}}
"#
        );
        redirectors.push(hits);
    }
    let s = Setup::with_yaml(inbox, Destination::start().await, &yaml);
    for code in codes {
        s.event(&format!("w/r{code}"), &format!("moved-{code}"), "{}")
            .await;
    }
    assert_eq!(s.worker().run_once().await.unwrap(), codes.len());
    assert!(
        elsewhere.received().is_empty(),
        "a redirect was followed: {:?}",
        elsewhere.received()
    );
    for (code, hits) in codes.iter().zip(&redirectors) {
        let (status, attempts, error, _) = s.row(&format!("moved-{code}")).await;
        let want = format!("HTTP {code}");
        assert_eq!(
            (status.as_str(), attempts, error.as_deref()),
            ("dead_letter", 1, Some(want.as_str()))
        );
        assert_eq!(hits.load(Ordering::SeqCst), 1, "{code}");
    }
}

async fn timeouts_and_connection_errors_are_retried(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    s.dest.script([Answer::Hang]);
    s.event("w/fast", "slow", "{}").await;
    s.event("w/closed", "refused", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 2);
    let (status, attempts, error, _) = s.row("slow").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("retry", 1, Some("timeout"))
    );
    let (status, attempts, error, _) = s.row("refused").await;
    assert_eq!((status.as_str(), attempts), ("retry", 1));
    let error = error.unwrap();
    assert!(error.starts_with("connect: "), "{error}");
    assert!(
        !error.contains("127.0.0.1:1"),
        "errors leave the URL out: {error}"
    );
}

async fn retry_after_is_honoured(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([
        Answer::StatusRetryAfter(429, "7"),
        Answer::StatusRetryAfter(500, "7"),
    ]);
    s.event("w/orders", "ra-429", "{}").await;
    let before = Utc::now();
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let after = Utc::now();
    // Exactly the 7 s asked for: no jitter on a time the destination named.
    let next = s.row("ra-429").await.3.unwrap();
    assert_between(
        next,
        before + secs(7),
        after + secs(7),
        "429 Retry-After: 7",
    );
    // On a 500 Retry-After is not part of the contract: the schedule applies.
    s.event("w/orders", "ra-500", "{}").await;
    let before = Utc::now();
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let after = Utc::now();
    let next = s.row("ra-500").await.3.unwrap();
    assert_between(
        next,
        before + secs(27),
        after + secs(33),
        "500 ignores Retry-After",
    );
}

async fn exhausted_schedule_dead_letters_after_exactly_three_attempts(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.always(Answer::Status(500));
    s.event("w/fast", "doomed", "{}").await;
    s.run_until(vec![s.worker()], Duration::from_secs(30), || async {
        s.row("doomed").await.0 == "dead_letter"
    })
    .await;
    let got = s.dest.received();
    assert_eq!(got.len(), 3);
    let (_, attempts, error, _) = s.row("doomed").await;
    assert_eq!(attempts, 3);
    assert_eq!(
        error.unwrap(),
        "HTTP 500 (retry schedule exhausted after 3 attempts)"
    );
    let outcomes: Vec<String> = s
        .attempts("doomed")
        .await
        .into_iter()
        .map(|a| a.3)
        .collect();
    assert_eq!(outcomes, ["retry", "retry", "dead_letter"]);
    let numbers: Vec<String> = got.iter().map(|r| r.header("hookgate-attempt")).collect();
    assert_eq!(numbers, ["1", "2", "3"]);
    let ids: HashSet<String> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(ids.len(), 1, "one webhook-id across the attempts");
}

/// The worker dies mid-delivery (its task is dropped: nothing is released). After the lease the
/// event is claimed again and delivered, with the same webhook-id.
async fn event_of_a_killed_worker_is_delivered_after_its_lease(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang]);
    s.event("w/orders", "crash", "{}").await;
    let lease = WorkerConfig {
        lease: Duration::from_secs(1),
        ..cfg()
    };
    let first = s.worker_with(lease.clone());
    let killed = tokio::spawn(async move { first.run(std::future::pending()).await });
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    assert_eq!(s.row("crash").await.0, "processing");

    let second = s.worker_with(lease);
    s.run_until(vec![second], Duration::from_secs(15), || async {
        s.row("crash").await.0 == "processed"
    })
    .await;
    let got = s.dest.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
    assert_eq!(
        (
            got[0].header("hookgate-attempt"),
            got[1].header("hookgate-attempt")
        ),
        ("1".into(), "2".into())
    );
    // The first attempt never finished, so only the second is recorded.
    assert_eq!(
        s.attempts("crash").await,
        vec![(2, Some(200), None, "processed".to_string())]
    );
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn four_workers_deliver_a_thousand_events_exactly_once(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    for i in 0..1000 {
        s.event("w/orders", &format!("bulk-{i}"), &format!(r#"{{"n":{i}}}"#))
            .await;
    }
    let workers = (0..4).map(|_| s.worker()).collect();
    s.run_until(workers, Duration::from_secs(120), || async {
        s.unfinished().await == 0
    })
    .await;
    let got = s.dest.received();
    let ids: HashSet<String> = got.iter().map(|r| r.header("webhook-id")).collect();
    assert_eq!(
        (got.len(), ids.len()),
        (1000, 1000),
        "every event delivered exactly once"
    );
}

async fn ordering_gate_delivers_monotonic_versions_per_resource(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let mut events: Vec<(String, u32)> = (0..5)
        .flat_map(|r| (1..=12).map(move |v| (format!("res-{r}"), v)))
        .collect();
    // A deterministic shuffle (LCG), so a failure reproduces.
    let mut seed = 0x2545_f491_u64;
    for i in (1..events.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        events.swap(i, (seed >> 33) as usize % (i + 1));
    }
    for (n, (resource, version)) in events.iter().enumerate() {
        let body = json!({"data": {"id": resource, "version": version}}).to_string();
        s.event("w/ordered", &format!("ev-{n}"), &body).await;
    }
    // A repeat of a version, and an event without a version (delivered ungated).
    s.event(
        "w/ordered",
        "dup-version",
        &json!({"data": {"id": "res-0", "version": 12}}).to_string(),
    )
    .await;
    let unversioned = json!({"data": {"id": "res-0"}}).to_string();
    s.event("w/ordered", "no-version", &unversioned).await;

    let workers = (0..4).map(|_| s.worker()).collect();
    s.run_until(workers, Duration::from_secs(60), || async {
        s.unfinished().await == 0
    })
    .await;

    let mut last: HashMap<String, i64> = Default::default();
    let mut ungated = Vec::new();
    for r in s.dest.received() {
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        match (v["data"]["id"].as_str(), v["data"]["version"].as_i64()) {
            (Some(id), Some(version)) => {
                let prev = last.insert(id.to_string(), version).unwrap_or(0);
                assert!(
                    version > prev,
                    "{id}: version {version} delivered after {prev}"
                );
            }
            _ => ungated.push(String::from_utf8(r.body.clone()).unwrap()),
        }
    }
    assert_eq!(ungated, [unversioned], "the unversioned event, once");
    let text = s.metrics.encode();
    let line = r#"hookgate_ordering_ungated_total{integration="w/ordered"} 1"#;
    assert!(text.contains(line), "missing {line}:\n{text}");
    assert_eq!(s.row("no-version").await.0, "processed");
    assert_eq!(last.len(), 5);
    assert!(
        last.values().all(|v| *v == 12),
        "the newest version of every resource arrives: {last:?}"
    );
    let (reasons, stored): (Vec<(String, i64)>, Vec<String>) = on!(s.inbox(), pool => {
        let reasons = sqlx::query_as(
            "SELECT COALESCE(ignored_reason, status), COUNT(*) FROM inbox_events GROUP BY 1 ORDER BY 1",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        let stored = sqlx::query_scalar("SELECT version FROM resource_versions ORDER BY resource_id")
            .fetch_all(pool)
            .await
            .unwrap();
        (reasons, stored)
    });
    let delivered = s.dest.received().len() as i64;
    let count = |k: &str| reasons.iter().find(|(r, _)| r == k).map_or(0, |(_, n)| *n);
    assert_eq!(count("processed"), delivered);
    assert!(count("duplicate_version") >= 1, "{reasons:?}");
    assert_eq!(
        count("processed") + count("stale_version") + count("duplicate_version"),
        62
    );
    assert_eq!(stored, vec!["i:12"; 5]);
}

/// A replayed dead letter is delivered again with its history kept, the same `webhook-id`, and a
/// fresh retry schedule: `Hookgate-Attempt` starts again at 1.
async fn replayed_dead_letter_is_delivered_again(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    s.dest.script([Answer::Status(500), Answer::Status(404)]);
    s.event("w/orders", "dlq-1", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    // The retry, claimed at the instant it falls due rather than waited for.
    let due = Utc::now() + secs(40);
    let retry = s.inbox().claim(due, due + secs(60), 10).await.unwrap();
    assert_eq!(retry.len(), 1);
    w.deliver(&retry[0]).await;
    let (status, attempts, error, _) = s.row("dlq-1").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("dead_letter", 2, Some("HTTP 404"))
    );

    let id = s.row_id("dlq-1").await;
    let replayed = s
        .inbox()
        .replay_dead_letters(
            &ReplaySelector::Ids(vec![id]),
            Utc::now(),
            hookgate::inbox::Apply::By(&crate::common::tester()),
        )
        .await
        .unwrap();
    assert_eq!(replayed, vec![id]);
    assert_eq!(w.run_once().await.unwrap(), 1);
    let got = s.dest.received();
    let numbers: Vec<String> = got.iter().map(|r| r.header("hookgate-attempt")).collect();
    assert_eq!(numbers, ["1", "2", "1"], "the replay starts at attempt 1");
    assert!(
        got.iter()
            .all(|r| r.header("webhook-id") == got[0].header("webhook-id"))
    );
    let (status, attempts, error, _) = s.row("dlq-1").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("processed", 1, Some("HTTP 404")),
        "the last error stays for the record"
    );
    assert_eq!(
        s.attempts("dlq-1").await,
        vec![
            (1, Some(500), None, "retry".to_string()),
            (2, Some(404), None, "dead_letter".to_string()),
            (1, Some(200), None, "processed".to_string()),
        ],
        "history is kept across the replay"
    );
}

/// Retention on the janitor's own clock: the rows are aged instead of the test sleeping past
/// a sub-second retention, which a loaded machine could overshoot before the first sweep.
async fn janitor_drops_bodies_then_dedupe_keys_but_keeps_dead_letters(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Status(200), Answer::Status(404)]);
    s.event("w/short", "keep-going", r#"{"big":"body"}"#).await;
    let w = s.worker();
    assert_eq!(w.run_once().await.unwrap(), 1);
    s.event("w/short", "dead", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(s.row("keep-going").await.0, "processed");
    assert_eq!(s.row("dead").await.0, "dead_letter");
    let sweep = || worker::janitor::sweep(s.inbox(), &w);

    // Just finished: within both retentions (1 h payload, 2 h dedupe), nothing to do.
    assert_eq!(sweep().await.unwrap(), Swept::default());
    assert_eq!(s.body("keep-going").await, br#"{"big":"body"}"#);

    let now = Utc::now();
    s.finished_at("keep-going", now - secs(90 * 60)).await;
    s.finished_at("dead", now - secs(3 * 3600)).await;
    assert_eq!(
        sweep().await.unwrap(),
        Swept {
            purged: 1,
            ..Swept::default()
        }
    );
    assert!(s.body("keep-going").await.is_empty());
    assert_eq!(s.body("dead").await, b"{}", "a dead letter keeps its body");

    s.finished_at("keep-going", now - secs(3 * 3600)).await;
    assert_eq!(
        sweep().await.unwrap(),
        Swept {
            deleted: 1,
            ..Swept::default()
        }
    );
    assert_eq!(
        s.event_ids().await,
        ["dead"],
        "dead letters stay until replayed or purged"
    );
}

/// An independent implementation checks the delivery signature: the `standardwebhooks` Python
/// package (installed by tests/run.sh). Without it the test says why it is skipped, except in CI.
#[sqlx::test(migrations = "migrations/postgres")]
async fn delivery_signature_verifies_with_the_python_standardwebhooks_library(pool: PgPool) {
    let available = std::process::Command::new("python3")
        .args(["-c", "import standardwebhooks"])
        .status()
        .is_ok_and(|s| s.success());
    if !available {
        crate::common::skip_or_fail(
            "python3 with the standardwebhooks package is not available (pip install standardwebhooks; tests/run.sh installs it)",
        );
        return;
    }
    let s = Setup::new(Inbox::Postgres(pool)).await;
    let body = r#"{"id":"py-1","type":"order.created","note":"ünïcode"}"#;
    s.event("w/orders", "py-1", body).await;
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let r = &s.dest.received()[0];
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
secret, body, headers = sys.argv[1], open(sys.argv[2], "rb").read(), json.loads(sys.argv[3])
Webhook(secret).verify(body, headers)
try:
    Webhook(secret).verify(body + b" ", headers)
    print("tampered body accepted")
except Exception:
    print("verified")
"#;
    let dir = tempfile::tempdir().unwrap();
    let body_file = dir.path().join("body");
    std::fs::write(&body_file, &r.body).unwrap();
    let headers = json!({
        "webhook-id": r.header("webhook-id"),
        "webhook-timestamp": r.header("webhook-timestamp"),
        "webhook-signature": r.header("webhook-signature"),
    });
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            script,
            DELIVERY_SECRET,
            body_file.to_str().unwrap(),
            &headers.to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "verified");
}

/// Shutdown: claiming stops, in-flight deliveries get the grace period, then their claims are
/// released without counting as an attempt.
async fn shutdown_releases_claims_still_in_flight_after_the_grace_period(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang]);
    s.event("w/orders", "stuck", "{}").await;
    let w = s.worker_with(WorkerConfig {
        grace: Duration::from_millis(300),
        ..cfg()
    });
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(async move {
        w.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
    });
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    assert_eq!(s.row("stuck").await.0, "processing");
    let asked = std::time::Instant::now();
    stop.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("worker stops")
        .unwrap();
    assert!(
        asked.elapsed() >= Duration::from_millis(300),
        "in-flight work got its grace period"
    );
    let (status, attempts, _, _) = s.row("stuck").await;
    assert_eq!(
        (status.as_str(), attempts),
        ("pending", 0),
        "released, not counted as an attempt"
    );
    assert!(s.attempts("stuck").await.is_empty());
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn deliveries_feed_the_duration_and_completion_latency_histograms(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    s.event("w/orders", "m-1", "{}").await;
    assert_eq!(s.worker().run_once().await.unwrap(), 1);
    let text = s.metrics.encode();
    for line in [
        r#"hookgate_delivery_duration_seconds_count{integration="w/orders"} 1"#,
        r#"hookgate_completion_latency_seconds_count{integration="w/orders"} 1"#,
        r#"hookgate_delivery_attempts_total{integration="w/orders",outcome="processed"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line}:\n{text}");
    }
}

/// A claim walks the due-time and lease indexes and stops at its limit, whatever the backlog: the
/// earlier `OR` of both conditions made PostgreSQL scan and sort the whole inbox on every claim.
#[sqlx::test(migrations = "migrations/postgres")]
async fn claim_walks_indexes_instead_of_scanning_the_inbox(pool: PgPool) {
    sqlx::raw_sql(
        "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, next_attempt_at, received_at) \
         SELECT 't/stripe', 'evt_' || g, 'stripe', 'v1', '[]', convert_to(repeat('x', 1000), 'UTF8'), \
         '\\x00', 'pending', now() - interval '1 minute', now() FROM generate_series(1, 20000) g; \
         ANALYZE inbox_events;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        hookgate::inbox::CLAIM_PG
    )))
    .bind(Utc::now() + chrono::Duration::minutes(1))
    .bind(Utc::now())
    .bind(16_i64)
    .fetch_all(&pool)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        !plan.contains("Seq Scan on inbox_events"),
        "the claim scans the inbox:\n{plan}"
    );
    assert!(plan.contains("inbox_events_due"), "{plan}");
    assert!(plan.contains("inbox_events_leases"), "{plan}");
}

/// Shared buffers the due-index scan of one claim reads, from `EXPLAIN (ANALYZE, BUFFERS)` (the
/// claim's own writes, the same for every claim, are left out); the claim is rolled back.
async fn claim_buffers(pool: &PgPool, sql: &str, from: Option<DateTime<Utc>>) -> i64 {
    let mut tx = pool.begin().await.unwrap();
    let explain = format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}");
    let q = sqlx::query_scalar::<_, serde_json::Value>(sqlx::AssertSqlSafe(explain))
        .bind(Utc::now() + chrono::Duration::minutes(1))
        .bind(Utc::now())
        .bind(16_i64);
    let q = match from {
        Some(from) => q.bind(from),
        None => q,
    };
    let plan = q.fetch_one(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    fn due_scan(node: &serde_json::Value) -> Option<i64> {
        if node["Index Name"] == "inbox_events_due" {
            let blocks = |k: &str| node[k].as_i64().unwrap_or(0);
            return Some(blocks("Shared Hit Blocks") + blocks("Shared Read Blocks"));
        }
        node["Plans"].as_array()?.iter().find_map(due_scan)
    }
    due_scan(&plan[0]["Plan"]).expect("the claim scans inbox_events_due")
}

/// Events processed since the last VACUUM leave dead entries at the oldest end of the due index.
/// A full claim walks them all; the claim a busy worker makes between full ones starts past them,
/// so its cost does not grow with what was delivered before it (it had made delivery collapse
/// under a long backlog: docs/performance.md).
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_busy_workers_claim_skips_the_entries_of_events_already_delivered(pool: PgPool) {
    sqlx::raw_sql(
        "ALTER TABLE inbox_events SET (autovacuum_enabled = false); \
         INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, body_sha256, \
         status, next_attempt_at, received_at) \
         SELECT 't/stripe', 'evt_' || g, 'stripe', 'v1', '[]', convert_to(repeat('x', 1000), 'UTF8'), \
         '\\x00', 'pending', now() - interval '1 hour' + g * interval '1 ms', now() \
         FROM generate_series(1, 60000) g; \
         ANALYZE inbox_events; \
         UPDATE inbox_events SET status = 'processed', processed_at = now() \
         WHERE event_id IN (SELECT 'evt_' || g FROM generate_series(1, 50000) g);",
    )
    .execute(&pool)
    .await
    .unwrap();
    // The oldest row still due: where the worker's last claim left its cursor.
    let from: DateTime<Utc> = sqlx::query_scalar(
        "SELECT MIN(next_attempt_at) FROM inbox_events WHERE status = 'pending'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    // Twice each: the first pass over dead entries also marks them dead in the index.
    let full = claim_buffers(&pool, hookgate::inbox::CLAIM_PG, None).await;
    let full = full.min(claim_buffers(&pool, hookgate::inbox::CLAIM_PG, None).await);
    let cursor = claim_buffers(&pool, hookgate::inbox::CLAIM_FROM_PG, Some(from)).await;
    let cursor = cursor.min(claim_buffers(&pool, hookgate::inbox::CLAIM_FROM_PG, Some(from)).await);
    println!("due-index buffers per claim: full {full}, from the cursor {cursor}");
    assert!(
        cursor * 5 < full,
        "the cursor claim read {cursor} buffers, the full claim {full}"
    );
}

/// A cluster worker learns its targets from a watch. Until the first complete list arrives it
/// claims nothing: an event claimed earlier would be deferred for a minute as unconfigured.
async fn a_worker_claims_nothing_until_its_targets_are_loaded(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.event("w/orders", "early", "{}").await;
    let w = Worker::new(
        s.inbox().clone(),
        Default::default(),
        cfg(),
        Arc::new(Metrics::new()),
    )
    .awaiting_targets();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn({
        let w = w.clone();
        async move {
            w.run(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, attempts, error, _) = s.row("early").await;
    assert_eq!(
        (status.as_str(), attempts, error),
        ("pending", 0, None),
        "not claimed while targets are unknown"
    );
    w.swap_targets(worker::targets(&s.h.receiver.routes()));
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    stop.send(true).unwrap();
    run.await.unwrap();
    assert_eq!(s.row("early").await.0, "processed");
}

/// An attempt never outlives its claim: with a 10 s delivery timeout and a 2 s lease, a hanging
/// destination used to be sent the same event again by a second worker once the lease ran out
/// (and again every lease after). The attempt now ends inside the lease and is retried on the
/// schedule, so the destination sees it once.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_hanging_delivery_is_not_sent_again_when_its_lease_runs_out(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    s.dest.always(Answer::Hang);
    s.event("w/orders", "slow", "{}").await;
    let started = std::time::Instant::now();
    s.run_until(
        vec![s.worker(), s.worker()],
        Duration::from_secs(20),
        || async { started.elapsed() >= Duration::from_millis(5500) },
    )
    .await;
    assert_eq!(
        s.dest.received().len(),
        1,
        "sent once in 5.5 s with a 2 s lease"
    );
    let (status, attempts, error, _) = s.row("slow").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("retry", 1, Some("timeout"))
    );
}

/// An event whose integration is no longer configured (deleted, or its target cannot be built)
/// is not requeued forever: past the orphan grace it is dead-lettered as `integration_missing`,
/// where `dlq replay` can bring it back once the integration returns.
async fn an_event_of_a_deleted_integration_is_dead_lettered_after_the_grace(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.h.set_now(Utc::now()); // received now, not at the harness's pinned t0
    s.event("w/orders", "orphan", "{}").await;
    let without_orders = |grace| {
        let mut targets = worker::targets(&s.h.receiver.routes());
        targets.remove("w/orders");
        Worker::new(
            s.inbox().clone(),
            targets,
            WorkerConfig {
                orphan_grace: grace,
                ..cfg()
            },
            Arc::new(Metrics::new()),
        )
    };
    // Within the grace: deferred, not failed (the integration may be on its way back).
    let before = Utc::now();
    assert_eq!(
        without_orders(Duration::from_secs(3600))
            .run_once()
            .await
            .unwrap(),
        1
    );
    let after = Utc::now();
    let (status, attempts, error, next) = s.row("orphan").await;
    assert_eq!((status.as_str(), attempts, error), ("pending", 0, None));
    assert_between(
        next.unwrap(),
        before + secs(60),
        after + secs(60),
        "looked at again in a minute",
    );

    // Claimed when the minute is up rather than waited for.
    let due = after + secs(61);
    let claimed = s.inbox().claim(due, due + secs(60), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    without_orders(Duration::ZERO).deliver(&claimed[0]).await;
    let (status, _, error, _) = s.row("orphan").await;
    assert_eq!(
        (status.as_str(), error.as_deref()),
        ("dead_letter", Some("integration_missing"))
    );
    assert!(s.dest.received().is_empty());
}

/// Rows of an integration that no longer exists are not kept forever: the janitor applies the
/// default retention to them (30 d for finished events), and still never touches dead letters.
async fn janitor_cleans_rows_of_integrations_that_no_longer_exist(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    for (id, answer) in [("old", 200), ("recent", 200), ("dead", 404)] {
        s.dest.script([Answer::Status(answer)]);
        s.event("w/orders", id, "{}").await;
        assert_eq!(w.run_once().await.unwrap(), 1);
    }
    assert_eq!(s.row("dead").await.0, "dead_letter");
    let long_ago = Utc::now() - secs(31 * 86400);
    s.finished_at("old", long_ago).await;
    s.finished_at("dead", long_ago).await;
    let mut targets = worker::targets(&s.h.receiver.routes());
    targets.remove("w/orders");
    let w = Worker::new(s.inbox().clone(), targets, cfg(), Arc::new(Metrics::new()));
    let swept = worker::janitor::sweep(s.inbox(), &w).await.unwrap();
    assert_eq!(swept.deleted, 1);
    assert_eq!(s.event_ids().await, ["dead", "recent"]);
}

on_both_backends!(
    delivers_original_body_with_signed_headers,
    webhook_ids_are_stable_per_event_and_distinct_between_events,
    each_destination_answer_has_its_outcome,
    redirects_are_dead_letters_and_never_followed,
    timeouts_and_connection_errors_are_retried,
    retry_after_is_honoured,
    exhausted_schedule_dead_letters_after_exactly_three_attempts,
    event_of_a_killed_worker_is_delivered_after_its_lease,
    ordering_gate_delivers_monotonic_versions_per_resource,
    replayed_dead_letter_is_delivered_again,
    janitor_drops_bodies_then_dedupe_keys_but_keeps_dead_letters,
    shutdown_releases_claims_still_in_flight_after_the_grace_period,
    a_worker_claims_nothing_until_its_targets_are_loaded,
    an_event_of_a_deleted_integration_is_dead_lettered_after_the_grace,
    janitor_cleans_rows_of_integrations_that_no_longer_exist,
);

/// A delivery slot comes back when the destination has answered, not when the outcome has been
/// written: while PostgreSQL holds every completion (a lock on `delivery_attempts`), a worker with
/// one slot still delivers more events, and stops at `HELD_PER_SLOT` events held. Once the
/// database lets go, all of them and the next one are processed.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_slot_is_free_once_the_destination_answered_while_the_outcome_is_written(pool: PgPool) {
    use hookgate::worker::defaults::HELD_PER_SLOT;
    let s = Setup::new(Inbox::Postgres(pool.clone())).await;
    let ids: Vec<String> = (1..=HELD_PER_SLOT + 1).map(|i| format!("s-{i}")).collect();
    for id in &ids {
        s.event("w/orders", id, "{}").await;
    }
    let mut blocker = pool.begin().await.unwrap();
    sqlx::raw_sql("LOCK TABLE delivery_attempts IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let w = s.worker_with(WorkerConfig {
        concurrency: 1,
        ..cfg()
    });
    let running = crate::common::running::start([w]);
    let held = s
        .dest
        .wait_for(HELD_PER_SLOT, Duration::from_secs(10))
        .await;
    assert_eq!(held.len(), HELD_PER_SLOT);
    // That many held: the next waits for a completion, however long the database takes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        s.dest.received().len(),
        HELD_PER_SLOT,
        "more than HELD_PER_SLOT events held for one slot"
    );
    let (status, _, _, _) = s.row("s-1").await;
    assert_eq!(
        status, "processing",
        "the first outcome is still being written"
    );

    blocker.rollback().await.unwrap();
    s.dest
        .wait_for(HELD_PER_SLOT + 1, Duration::from_secs(10))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for id in &ids {
        while s.row(id).await.0 != "processed" {
            assert!(tokio::time::Instant::now() < deadline, "{id} not processed");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    running.stop().await;
}
