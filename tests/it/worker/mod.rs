//! Delivery workers against real PostgreSQL and SQLite with a real HTTP destination on loopback.
//! Events enter through the real receiver, so every delivered event was verified first. What
//! holds on every inbox backend runs on both through `on_both_backends!`; what is PostgreSQL's
//! alone (several worker processes' SKIP LOCKED, the metrics) stays a `#[sqlx::test]`. Here:
//! each destination answer's outcome, retries, dead letters, replay, a killed worker's lease and
//! the ordering gate; `signing` has what the destination receives (body, headers, signature,
//! `webhook-id`), `lifecycle` shutdown, start-up, leases and integrations that disappear, and
//! `setup` the harness they share. Retention is in `janitor.rs`, the claims' plans in
//! `query_plans.rs`.

mod lifecycle;
mod setup;
mod signing;

pub(crate) use setup::*;

use crate::common::destination::{Answer, Destination, Received};
use crate::common::*;
use chrono::Utc;
use hookgate::inbox::{Inbox, ReplaySelector};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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

on_both_backends!(
    each_destination_answer_has_its_outcome,
    redirects_are_dead_letters_and_never_followed,
    timeouts_and_connection_errors_are_retried,
    retry_after_is_honoured,
    exhausted_schedule_dead_letters_after_exactly_three_attempts,
    event_of_a_killed_worker_is_delivered_after_its_lease,
    ordering_gate_delivers_monotonic_versions_per_resource,
    replayed_dead_letter_is_delivered_again,
);
