//! Catch-up (`spec.catchUp`) against a provider API served locally (`catch_up_provider`): a gap
//! is filled exactly once, pages are followed, rate limits are waited out, an auth failure is
//! counted and turns the condition, the credential never shows, and two workers never both fetch.

use crate::catch_up_provider::{self as provider, KEY, Provider, Served};
use crate::common::{Harness, accepted, duplicate, harness_with, opts, second_pool};
use chrono::{DateTime, Utc};
use hookgate::catch_up::http::Backoff;
use hookgate::catch_up::{self, CatchUp, Config, Ran};
use hookgate::inbox::Inbox;
use hookgate::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Four integrations (Stripe, Paddle twice, GitHub) in namespace `t` whose catch-up lists the
/// provider stand-in at `api` with the credential `key`.
pub fn manifests(api: &str, key: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: t}}
stringData:
  stripe: whsec_test_receiver_secret
  paddle: pdl_ntfset_test_only_catch_up
  github: test-github-secret
---
apiVersion: v1
kind: Secret
metadata: {{name: provider-api, namespace: t}}
stringData:
  key: "{key}"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: stripe, namespace: t}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: keys, key: stripe}}}}]
  events: {{allow: ["invoice.*"]}}
  delivery: {{url: "http://127.0.0.1:1/sink"}}
  catchUp:
    provider: stripe
    credentialRef: {{name: provider-api, key: key}}
    apiBaseUrl: "{api}"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: paddle, namespace: t}}
spec:
  scheme: {{type: paddle}}
  keys: [{{id: v1, secretRef: {{name: keys, key: paddle}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
  catchUp:
    provider: paddle
    credentialRef: {{name: provider-api, key: key}}
    apiBaseUrl: "{api}"
    lookback: 24h
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: paddle-v1, namespace: t}}
spec:
  scheme: {{type: paddle}}
  keys: [{{id: v1, secretRef: {{name: keys, key: paddle}}}}]
  events: {{versionPointer: /data/schema, supported: ["1"]}}
  delivery: {{url: "http://127.0.0.1:1/sink"}}
  catchUp:
    provider: paddle
    credentialRef: {{name: provider-api, key: key}}
    apiBaseUrl: "{api}"
    lookback: 24h
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: github, namespace: t}}
spec:
  scheme: {{type: github}}
  keys: [{{id: main, secretRef: {{name: keys, key: github}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
  catchUp:
    provider: github
    credentialRef: {{name: provider-api, key: key}}
    apiBaseUrl: "{api}"
    github: {{repository: octo/hello, hookId: 7}}
"#
    )
}

/// Quick retries, so a test waits for `Retry-After` only.
pub fn config() -> Config {
    Config {
        backoff: Backoff {
            attempts: 4,
            first: Duration::from_millis(10),
            max: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(5),
        },
        ..Config::default()
    }
}

struct Setup {
    server: Served,
    h: Harness,
    catch_up: CatchUp,
    metrics: Arc<Metrics>,
    inbox: Inbox,
}

impl Setup {
    async fn new(inbox: Inbox, provider: Provider, key: &str) -> Self {
        let server = Served::start(provider).await;
        let h = harness_with(inbox.clone(), &manifests(&server.url(), key));
        h.set_now(Utc::now());
        let metrics = Arc::new(Metrics::new());
        let catch_up = Self::worker(&h, inbox.clone(), metrics.clone());
        Self {
            server,
            h,
            catch_up,
            metrics,
            inbox,
        }
    }

    /// Another worker process on `inbox` (its own pool, for the exclusivity tests).
    fn worker(h: &Harness, inbox: Inbox, metrics: Arc<Metrics>) -> CatchUp {
        let targets = catch_up::targets(&h.manifests.route_table().unwrap());
        CatchUp::new(inbox, targets, metrics, config())
    }

    async fn pass(&self, integration: &str) -> Ran {
        self.catch_up
            .pass(integration, true)
            .await
            .expect("has catchUp")
    }

    /// (event id, source, source credential, signed_at) of every row of `integration`.
    async fn rows(
        &self,
        integration: &str,
    ) -> Vec<(String, String, Option<String>, Option<DateTime<Utc>>)> {
        crate::on!(&self.inbox, pool => sqlx::query_as(
            "SELECT event_id, source, source_credential, signed_at FROM inbox_events \
             WHERE integration = $1 ORDER BY event_id")
            .bind(integration)
            .fetch_all(pool)
            .await
            .unwrap())
    }
}

fn done(missing: u64, present: u64) -> Ran {
    Ran::Done {
        missing,
        present,
        error: None,
    }
}

pub fn ago(secs: i64) -> DateTime<Utc> {
    Utc::now() - chrono::Duration::seconds(secs)
}

async fn a_stripe_gap_is_filled_exactly_once(inbox: Inbox) {
    let mut p = Provider::default();
    // Eight events of the last hours, oldest first; one outside the lookback, one too young.
    p.stripe.push(provider::stripe_event(
        "evt_old",
        "invoice.paid",
        ago(80 * 3600).timestamp(),
    ));
    for i in 1..=8 {
        p.stripe.push(provider::stripe_event(
            &format!("evt_{i}"),
            "invoice.paid",
            ago(3600 * (9 - i)).timestamp(),
        ));
    }
    p.stripe.push(provider::stripe_event(
        "evt_young",
        "invoice.paid",
        ago(10).timestamp(),
    ));
    let s = Setup::new(inbox, p, KEY).await;
    // Webhooks 1 to 3 arrived; 4 to 8 were lost upstream.
    for i in 1..=3 {
        let body = serde_json::to_string(&s.server.state.lock().unwrap().stripe[i]).unwrap();
        assert_eq!(s.h.send("t/stripe", &body, opts()).await.json, accepted());
    }

    let before_pass = chrono::Utc::now();
    assert_eq!(s.pass("t/stripe").await, done(5, 3));
    // Caught-up events are verified by no key: their use is the empty key id's, written with them.
    let used = s.inbox.keys_last_used("t/stripe").await.unwrap();
    assert!(
        used.get("")
            .is_some_and(|t| *t >= before_pass - chrono::Duration::seconds(1)),
        "{used:?}"
    );
    let rows = s.rows("t/stripe").await;
    let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(
        ids,
        [
            "evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6", "evt_7", "evt_8"
        ]
    );
    for (id, source, credential, signed_at) in &rows {
        let caught = id.as_str() >= "evt_4";
        assert_eq!(source, if caught { "catch_up" } else { "webhook" }, "{id}");
        assert_eq!(
            credential.as_deref(),
            caught.then_some("provider-api/key"),
            "{id}"
        );
        assert!(signed_at.is_some(), "{id}: the provider's created time");
    }
    let created = s.server.state.lock().unwrap().stripe[8]["created"]
        .as_i64()
        .unwrap();
    assert_eq!(
        rows[7].3.unwrap().timestamp(),
        created,
        "signed_at is Stripe's created"
    );

    // Again: nothing more, everything counted as present.
    assert_eq!(s.pass("t/stripe").await, done(0, 8));
    assert_eq!(s.rows("t/stripe").await.len(), 8);
    // The lost webhook finally arrives: an ordinary duplicate, not a conflict.
    let body = serde_json::to_string(&s.server.state.lock().unwrap().stripe[6]).unwrap();
    assert_eq!(s.h.send("t/stripe", &body, opts()).await.json, duplicate());
    let conflicts: i64 = crate::on!(&s.inbox, pool => sqlx::query_scalar(
        "SELECT CAST(SUM(dedupe_conflicts) AS BIGINT) FROM inbox_events").fetch_one(pool).await.unwrap());
    assert_eq!(conflicts, 0);
    let text = s.metrics.encode();
    assert!(
        text.contains("hookgate_catch_up_missing_total{integration=\"t/stripe\"} 5\n"),
        "{text}"
    );
    assert!(
        text.contains("hookgate_catch_up_present_total{integration=\"t/stripe\"} 11\n"),
        "{text}"
    );
    let run = s.inbox.catch_up_run("t/stripe").await.unwrap().unwrap();
    assert_eq!(
        (
            run.missing_total,
            run.last_missing,
            run.consecutive_failures
        ),
        (5, 0, 0)
    );
    assert!(run.last_success_at.is_some());
    // Every query asked for events created within the lookback (72 h).
    let queries = s.server.state.lock().unwrap().queries.clone();
    assert!(
        queries.iter().all(|q| q.contains("created%5Bgte%5D=")),
        "{queries:?}"
    );
}

async fn pages_are_followed_across_the_whole_lookback(inbox: Inbox) {
    let mut p = Provider::default();
    for i in 0..250 {
        let at = ago(3600 + 60 * (250 - i));
        p.stripe.push(provider::stripe_event(
            &format!("evt_{i:04}"),
            "invoice.paid",
            at.timestamp(),
        ));
        p.paddle.push(provider::paddle_event(
            &format!("evt_01p{i:04}"),
            "subscription.updated",
            at,
        ));
    }
    // Paddle has no date filter: older events must not be read page after page.
    let mut paddle = vec![];
    for i in 0..450 {
        paddle.push(provider::paddle_event(
            &format!("evt_00o{i:04}"),
            "subscription.updated",
            ago(30 * 3600),
        ));
    }
    paddle.append(&mut p.paddle);
    p.paddle = paddle;
    let s = Setup::new(inbox, p, KEY).await;

    assert_eq!(s.pass("t/stripe").await, done(250, 0));
    assert_eq!(s.server.calls("stripe"), 3, "100 + 100 + 50");
    assert_eq!(s.pass("t/paddle").await, done(250, 0));
    // 200 recent, then 50 recent and 150 past the 24 h lookback: the listing stops there.
    assert_eq!(s.server.calls("paddle"), 2);
    assert_eq!(s.rows("t/stripe").await.len(), 250);
    assert_eq!(s.rows("t/paddle").await.len(), 250);
    assert_eq!(s.pass("t/paddle").await, done(0, 250));
}

async fn two_workers_never_both_fetch(inbox: Inbox) {
    let mut p = Provider::default();
    p.stripe.push(provider::stripe_event(
        "evt_1",
        "invoice.paid",
        ago(3600).timestamp(),
    ));
    // Held long enough that the second pass starts while the first is fetching.
    p.delay = Duration::from_millis(400);
    let s = Setup::new(inbox.clone(), p, KEY).await;
    let other = Setup::worker(&s.h, second_pool(&inbox).await, Arc::new(Metrics::new()));

    let (a, b) = tokio::join!(s.catch_up.pass("t/stripe", true), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        other.pass("t/stripe", true).await
    });
    assert_eq!((a, b), (Some(done(1, 0)), Some(Ran::Locked)));
    assert_eq!(s.server.calls("stripe"), 1, "exactly one process fetched");
    // Right after, the schedule is shared too: a pass just ended, so the other is not due.
    assert_eq!(other.pass("t/stripe", false).await, Some(Ran::NotDue));
    assert_eq!(s.server.calls("stripe"), 1);
    // The lock was given back: an explicit pass runs.
    assert_eq!(other.pass("t/stripe", true).await, Some(done(0, 1)));
}

async fn rate_limits_and_5xx_are_retried_with_backoff(inbox: Inbox) {
    let mut p = Provider::default();
    p.stripe.push(provider::stripe_event(
        "evt_1",
        "invoice.paid",
        ago(3600).timestamp(),
    ));
    p.script.push_back((429, Some("1")));
    p.script.push_back((503, None));
    let s = Setup::new(inbox, p, KEY).await;
    let started = Instant::now();
    assert_eq!(s.pass("t/stripe").await, done(1, 0));
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    assert_eq!(s.server.calls("stripe"), 3);

    // A limit that outlasts the attempts fails the run, counted by reason.
    for _ in 0..4 {
        s.server
            .state
            .lock()
            .unwrap()
            .script
            .push_back((429, Some("0")));
    }
    let Ran::Done { error: Some(e), .. } = s.pass("t/stripe").await else {
        panic!("a run that stays rate limited fails")
    };
    assert_eq!(e.metric_label(), "rate_limited");
    assert!(s.metrics.encode().contains(
        "hookgate_catch_up_errors_total{integration=\"t/stripe\",reason=\"rate_limited\"} 1\n"
    ));
}

async fn paddle_events_are_caught_up_and_a_later_webhook_is_a_duplicate(inbox: Inbox) {
    let mut p = Provider::default();
    for i in 1..=3 {
        p.paddle.push(provider::paddle_event(
            &format!("evt_01h{i}"),
            "transaction.completed",
            ago(7200 - i * 60),
        ));
    }
    let s = Setup::new(inbox, p, KEY).await;
    assert_eq!(s.pass("t/paddle").await, done(3, 0));
    // Paddle's webhook carries a notification_id the event entity lacks: other bytes, same event.
    let mut webhook = s.server.state.lock().unwrap().paddle[1].clone();
    webhook["notification_id"] = "ntf_01h2".into();
    let reply = s.h.send("t/paddle", &webhook.to_string(), opts()).await;
    assert_eq!(reply.json, duplicate());
    assert_eq!(s.rows("t/paddle").await.len(), 3);
    // An ordinary duplicate: not counted as a dedupe conflict (which a differing body would be).
    let conflicts: i64 = crate::on!(&s.inbox, pool => sqlx::query_scalar(
        "SELECT CAST(SUM(dedupe_conflicts) AS BIGINT) FROM inbox_events").fetch_one(pool).await.unwrap());
    assert_eq!(conflicts, 0);
    assert!(
        !s.h.metrics
            .encode()
            .contains("hookgate_dedupe_conflicts_total{")
    );
}

async fn github_deliveries_missing_from_the_inbox_are_redelivered(inbox: Inbox) {
    let p = Provider {
        deliveries: vec![
            // Oldest first: g-ok was delivered; g-lost failed twice; g-later failed then succeeded;
            // g-fresh failed seconds ago (GitHub may still bring it).
            provider::delivery(1, "g-ok", ago(7200), 200),
            provider::delivery(2, "g-lost", ago(7000), 503),
            provider::delivery(3, "g-later", ago(6900), 502),
            provider::delivery(4, "g-lost", ago(6800), 0),
            provider::delivery(5, "g-later", ago(6700), 200),
            provider::delivery(6, "g-fresh", ago(5), 504),
        ],
        ..Provider::default()
    };
    let s = Setup::new(inbox, p, KEY).await;
    let push = |guid: &str| hookgate::cli::send::SendOptions {
        event_id: Some(guid.into()),
        event_type: Some("push".into()),
        ..opts()
    };
    assert_eq!(
        s.h.send("t/github", r#"{"after":"a1"}"#, push("g-ok"))
            .await
            .json,
        accepted()
    );

    assert_eq!(s.pass("t/github").await, done(1, 1));
    assert_eq!(
        s.server.state.lock().unwrap().redelivered,
        [4],
        "the newest attempt of g-lost"
    );
    // GitHub redelivers it, signed, through the receiver. (Bodies differ per event: GitHub signs
    // the body only, so one body twice is a replay.)
    assert_eq!(
        s.h.send("t/github", r#"{"after":"b2"}"#, push("g-lost"))
            .await
            .json,
        accepted()
    );
    s.server
        .state
        .lock()
        .unwrap()
        .deliveries
        .push(provider::delivery(7, "g-lost", ago(3), 200));
    assert_eq!(s.pass("t/github").await, done(0, 2));
    assert_eq!(
        s.server.state.lock().unwrap().redelivered,
        [4],
        "nothing more"
    );
}

/// `events.versionPointer` holds for caught-up events as for webhooks: one of another version is
/// stored, dead-lettered with its reason, and never claimed for delivery.
async fn caught_up_events_of_an_unsupported_version_are_dead_lettered(inbox: Inbox) {
    let mut p = Provider::default();
    for (i, schema) in [(1, "1"), (2, "2")] {
        let mut ev = provider::paddle_event(
            &format!("evt_v{i}"),
            "transaction.completed",
            ago(7200 - i * 60),
        );
        ev["data"]["schema"] = schema.into();
        p.paddle.push(ev);
    }
    let s = Setup::new(inbox, p, KEY).await;
    assert_eq!(s.pass("t/paddle-v1").await, done(2, 0));
    let rows: Vec<(String, String, Option<String>)> = crate::on!(&s.inbox, pool => sqlx::query_as(
        "SELECT event_id, status, last_error FROM inbox_events WHERE integration = 't/paddle-v1' \
         ORDER BY event_id").fetch_all(pool).await.unwrap());
    assert_eq!(rows[0].0, "evt_v1");
    assert_eq!(rows[0].1, "pending");
    assert_eq!(rows[1].0, "evt_v2");
    assert_eq!(rows[1].1, "dead_letter");
    let reason = rows[1].2.as_deref().unwrap_or_default();
    assert!(reason.starts_with("unsupported_event_version"), "{reason}");
}

crate::on_both_backends!(
    a_stripe_gap_is_filled_exactly_once,
    pages_are_followed_across_the_whole_lookback,
    two_workers_never_both_fetch,
    rate_limits_and_5xx_are_retried_with_backoff,
    paddle_events_are_caught_up_and_a_later_webhook_is_a_duplicate,
    github_deliveries_missing_from_the_inbox_are_redelivered,
    caught_up_events_of_an_unsupported_version_are_dead_lettered,
);

/// Logs written while a test runs (the subscriber is this thread's; the test runtime is
/// single-threaded, so every task's lines land here).
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn an_auth_failure_is_counted_turns_the_condition_and_never_shows_the_credential() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (_dir, inbox) = crate::common::sqlite_inbox().await;
    let revoked = "sk_test_revoked_key_9876543210";
    let mut p = Provider::default();
    p.stripe.push(provider::stripe_event(
        "evt_1",
        "invoice.paid",
        ago(3600).timestamp(),
    ));
    let s = Setup::new(inbox, p, revoked).await;

    for _ in 0..3 {
        let Ran::Done {
            error: Some(e),
            missing: 0,
            ..
        } = s.pass("t/stripe").await
        else {
            panic!("a refused credential fails the run")
        };
        assert_eq!(e.metric_label(), "unauthorized");
    }
    let run = s.inbox.catch_up_run("t/stripe").await.unwrap().unwrap();
    assert_eq!(run.consecutive_failures, 3);
    assert_eq!(run.last_error_reason.as_deref(), Some("unauthorized"));
    assert!(run.last_success_at.is_none());
    let text = s.metrics.encode();
    assert!(
        text.contains(
            "hookgate_catch_up_errors_total{integration=\"t/stripe\",reason=\"unauthorized\"} 3\n"
        ),
        "{text}"
    );

    // What the controller writes to status from that record.
    let mut plan = hookgate::controller::plan::Plan {
        status: Default::default(),
        manifests: None,
        remove_route: false,
        retired: Vec::new(),
        notes: Vec::new(),
        requeue_after: Duration::from_secs(60),
    };
    hookgate::controller::plan::catch_up::set_catch_up(
        &mut plan,
        &[],
        Some(1),
        Utc::now(),
        Some(&run),
    );
    let c = plan
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "CatchUpFailing")
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("True", "Unauthorized")
    );
    assert!(
        c.message.contains("Invalid API Key provided: [redacted]"),
        "{}",
        c.message
    );

    let status = serde_json::to_string(&plan.status).unwrap();
    let logged = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("catch-up failed"), "{logged}");
    for (what, text) in [
        ("status", &status),
        ("logs", &logged),
        ("record", &format!("{run:?}")),
    ] {
        assert!(
            !text.contains(revoked),
            "the credential is in the {what}: {text}"
        );
        assert!(
            !text.contains("9876543210"),
            "part of the credential is in the {what}: {text}"
        );
    }
    // The provider echoed it in its answer; the record still holds only the redacted message.
    assert!(run.last_error.unwrap().contains("[redacted]"));
}
