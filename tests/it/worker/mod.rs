//! Delivery workers against real PostgreSQL and SQLite with a real HTTP destination on loopback.
//! Events enter through the real receiver, so every delivered event was verified first. What
//! holds on every inbox backend runs on both through `on_both_backends!`; what is PostgreSQL's
//! alone (several worker processes' SKIP LOCKED, the metrics) stays a `#[sqlx::test]`. Here:
//! several workers, the ordering gate, replay and the delivery histograms; `outcomes` has each
//! destination answer's outcome, retries, dead letters and a killed worker's lease; `signing`
//! what the destination receives (body, headers, signature, `webhook-id`); `lifecycle`
//! shutdown, start-up, leases and integrations that disappear; `fairness` and `turns` how
//! integrations share a pool; `timing` the claims' and completions' durations; and `setup` the
//! harness they share. Retention is in `janitor.rs`, the claims' plans in `query_plans.rs`.

mod fairness;
mod lifecycle;
mod outcomes;
mod setup;
mod signing;
mod timing;
mod turns;

pub(crate) use setup::*;

use crate::common::destination::{Answer, Destination, Received};
use crate::common::*;
use chrono::Utc;
use hookgate::inbox::Inbox;
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Three integrations' events, so that the workers' claims take turns between them and their
/// locks skip what another worker's claim holds (`inbox::claim`).
#[sqlx::test(migrations = "migrations/postgres")]
async fn four_workers_deliver_a_thousand_events_exactly_once(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    let integrations = ["w/orders", "w/short", "w/ordered"];
    for i in 0..1000 {
        let body = format!(r#"{{"n":{i},"data":{{"id":"r{i}","version":1}}}}"#);
        s.event(integrations[i % 3], &format!("bulk-{i}"), &body)
            .await;
    }
    // A lease no delivery here outlasts: with `cfg()`'s 2 s, six tests at once on two cores
    // wrote some outcomes after their lease and those events were delivered twice, as leases
    // are meant to (at-least-once), which is not what this test is about.
    let workers = (0..4)
        .map(|_| {
            s.worker_with(WorkerConfig {
                lease: Duration::from_secs(30),
                ..cfg()
            })
        })
        .collect();
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

    s.replay("dlq-1").await;
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
    ordering_gate_delivers_monotonic_versions_per_resource,
    replayed_dead_letter_is_delivered_again,
);
