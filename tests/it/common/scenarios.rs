//! Receiver behaviours that must hold on every inbox backend. Each backend's test file expands
//! `every_scenario!` with its own test macro, so a scenario added here runs on all of them.

/// Calls `$backend!(name, ...)` with every scenario in this file.
#[macro_export]
macro_rules! every_scenario {
    ($backend:ident) => {
        $backend!(
            accept_then_duplicate,
            provider_retry_is_duplicate,
            dedupe_conflict_is_counted,
            signature_replay_with_new_id_is_duplicate,
            filtered_type_is_recorded_as_ignored,
            fifty_concurrent_identical_posts_make_one_row,
            nonces_expire_after_retention_and_are_pruned,
            expired_unpruned_nonce_is_renewed,
            inbox_stats_count_by_status,
            key_use_is_written_within_seconds_without_a_stop,
            key_use_keeps_the_latest_instant,
        );
    };
}

use super::*;
use hookgate::inbox::{ListFilter, Status};

async fn rows(h: &Harness, integration: &str) -> Vec<hookgate::inbox::EventSummary> {
    let filter = ListFilter {
        integration: Some(integration.into()),
        ..Default::default()
    };
    h.receiver.inbox().list(&filter).await.unwrap()
}

/// New event -> 200 committed with the key that verified it; the same request again -> duplicate.
pub async fn accept_then_duplicate(inbox: Inbox) {
    let h = harness(inbox);
    let body = stripe_body("evt_accept", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let first = h.post(&path, &headers, body.clone()).await;
    assert_eq!((first.status, first.json), (StatusCode::OK, accepted()));
    let again = h.post(&path, &headers, body.clone()).await;
    assert_eq!((again.status, again.json), (StatusCode::OK, duplicate()));

    let stored = rows(&h, "t/stripe").await;
    assert_eq!(stored.len(), 1);
    let row = &stored[0];
    assert_eq!(row.event_id, "evt_accept");
    assert_eq!(row.event_type.as_deref(), Some("invoice.paid"));
    assert_eq!(row.status, "pending");
    assert_eq!(row.key_id, "v1");
    assert_eq!(row.scheme, "stripe");
    assert_eq!(row.signed_at, Some(t0()));
    assert_eq!(row.received_at, t0());
    assert_eq!(row.next_attempt_at, Some(t0()));
}

/// A provider retry carries the same event id with a fresh timestamp and signature.
pub async fn provider_retry_is_duplicate(inbox: Inbox) {
    let h = harness(inbox);
    let body = stripe_body("evt_retry", "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
    h.set_now(t0() + chrono::Duration::seconds(90));
    let retry = h.send("t/stripe", &body, opts()).await;
    assert_eq!((retry.status, retry.json), (StatusCode::OK, duplicate()));
    assert_eq!(rows(&h, "t/stripe").await.len(), 1);
}

/// Same id, different body: answered as a duplicate, the first body kept, the conflict counted.
pub async fn dedupe_conflict_is_counted(inbox: Inbox) {
    let h = harness(inbox);
    assert_eq!(
        h.send("t/stripe", &stripe_body("evt_c", "invoice.paid"), opts())
            .await
            .json,
        accepted()
    );
    let other = h
        .send("t/stripe", &stripe_body("evt_c", "invoice.voided"), opts())
        .await;
    assert_eq!((other.status, other.json), (StatusCode::OK, duplicate()));
    let stored = rows(&h, "t/stripe").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].event_type.as_deref(), Some("invoice.paid"));
    assert_eq!(stored[0].dedupe_conflicts, 1);
    let metrics = h.metrics.encode();
    assert!(
        metrics.contains(r#"hookgate_dedupe_conflicts_total{integration="t/stripe"} 1"#),
        "{metrics}"
    );
}

/// A captured GitHub delivery re-sent with a new X-GitHub-Delivery is a replay, not a new event.
pub async fn signature_replay_with_new_id_is_duplicate(inbox: Inbox) {
    let h = harness(inbox);
    let body = r#"{"ref":"refs/heads/main"}"#;
    let sent = SendOptions {
        event_id: Some("delivery-1".into()),
        event_type: Some("push".into()),
        ..opts()
    };
    let (path, headers) = h.sign("t/github", body, sent);
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    let replayed = with_header(&headers, "X-GitHub-Delivery", "delivery-2-forged");
    let r = h.post(&path, &replayed, body).await;
    assert_eq!((r.status, r.json), (StatusCode::OK, duplicate()));
    let stored = rows(&h, "t/github").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].event_id, "delivery-1");
}

/// Types outside `events.allow` are stored as ignored, answered as such, and still deduped.
pub async fn filtered_type_is_recorded_as_ignored(inbox: Inbox) {
    let h = harness(inbox);
    let body = stripe_body("evt_ign", "charge.succeeded");
    let r = h.send("t/stripe", &body, opts()).await;
    assert_eq!(
        (r.status, r.json),
        (
            StatusCode::OK,
            serde_json::json!({"received": true, "ignored": "event_type"})
        )
    );
    let again = h.send("t/stripe", &body, opts()).await;
    assert_eq!(again.json, duplicate());
    let stored = rows(&h, "t/stripe").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].status, Status::Ignored.as_str());
    assert_eq!(stored[0].next_attempt_at, None);
}

/// 50 identical deliveries at once over real HTTP: one row, exactly one `duplicate:false`.
pub async fn fifty_concurrent_identical_posts_make_one_row(inbox: Inbox) {
    let h = harness(inbox);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = h.receiver.router();
    let server = tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let body = stripe_body("evt_burst", "invoice.paid");
    let (path, headers) = h.sign("t/stripe", &body, opts());
    let client = reqwest::Client::new();
    let url = format!("http://{addr}{path}");
    let requests = (0..50).map(|_| {
        let mut req = client.post(&url).body(body.clone());
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        async move {
            let res = req.send().await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    });
    let answers = futures::future::join_all(requests).await;
    server.abort();

    assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
    let fresh = answers.iter().filter(|(_, j)| *j == accepted()).count();
    let dups = answers.iter().filter(|(_, j)| *j == duplicate()).count();
    assert_eq!((fresh, dups), (1, 49));
    assert_eq!(rows(&h, "t/stripe").await.len(), 1);
}

/// Signature digests are remembered for `nonceRetention` only: after it the pruner removes them,
/// and the same signature with a new unsigned id is no longer caught (the documented limit).
pub async fn nonces_expire_after_retention_and_are_pruned(inbox: Inbox) {
    let h = harness(inbox);
    let body = r#"{"ref":"refs/heads/main"}"#;
    let sent = SendOptions {
        event_id: Some("delivery-a".into()),
        event_type: Some("push".into()),
        ..opts()
    };
    let (path, headers) = h.sign("t/github", body, sent);
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    let inbox = h.receiver.inbox();
    // Within the window nothing is pruned and the replay is caught.
    h.set_now(t0() + chrono::Duration::hours(23));
    assert_eq!(
        inbox
            .prune_nonces(t0() + chrono::Duration::hours(23))
            .await
            .unwrap(),
        0
    );
    let replay = with_header(&headers, "X-GitHub-Delivery", "delivery-b");
    assert_eq!(h.post(&path, &replay, body).await.json, duplicate());
    // 24 h after acceptance the digest is gone.
    let later = t0() + chrono::Duration::hours(24) + chrono::Duration::milliseconds(1);
    assert_eq!(inbox.prune_nonces(later).await.unwrap(), 1);
    assert_eq!(inbox.counts().await.unwrap(), (1, 0));
    h.set_now(later);
    let replay = with_header(&headers, "X-GitHub-Delivery", "delivery-c");
    assert_eq!(h.post(&path, &replay, body).await.json, accepted());
}

/// An expired digest that was not pruned yet is renewed in place, not treated as a replay.
pub async fn expired_unpruned_nonce_is_renewed(inbox: Inbox) {
    let h = harness(inbox);
    let body = r#"{"ref":"refs/tags/v1"}"#;
    let sent = SendOptions {
        event_id: Some("delivery-x".into()),
        event_type: Some("push".into()),
        ..opts()
    };
    let (path, headers) = h.sign("t/github", body, sent);
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    h.set_now(t0() + chrono::Duration::hours(25));
    let replay = with_header(&headers, "X-GitHub-Delivery", "delivery-y");
    assert_eq!(h.post(&path, &replay, body).await.json, accepted());
    let replay = with_header(&headers, "X-GitHub-Delivery", "delivery-z");
    assert_eq!(
        h.post(&path, &replay, body).await.json,
        duplicate(),
        "renewed for another window"
    );
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (2, 1));
}

/// Inbox figures for metrics and status: the backlog by status, age of the oldest waiting event,
/// conflicts and keys' last use; the gauges drop integrations that emptied.
pub async fn inbox_stats_count_by_status(inbox: Inbox) {
    let h = harness(inbox);
    assert_eq!(
        h.send("t/stripe", &stripe_body("s1", "invoice.paid"), opts())
            .await
            .json,
        accepted()
    );
    h.set_now(t0() + chrono::Duration::seconds(30));
    assert_eq!(
        h.send("t/stripe", &stripe_body("s2", "invoice.paid"), opts())
            .await
            .json,
        accepted()
    );
    // The conflict is answered as a duplicate; s3's type is filtered out by `events.allow`.
    let conflict = h
        .send("t/stripe", &stripe_body("s2", "invoice.voided"), opts())
        .await;
    assert_eq!(
        (conflict.status, conflict.json),
        (StatusCode::OK, duplicate())
    );
    assert_eq!(
        h.send("t/stripe", &stripe_body("s3", "charge.succeeded"), opts())
            .await
            .json,
        serde_json::json!({"received": true, "ignored": "event_type"})
    );
    let at = t0() + chrono::Duration::seconds(90);
    let backlog = h.receiver.inbox().backlog(at).await.unwrap();
    let pending = backlog.iter().find(|s| s.status == "pending").unwrap();
    assert_eq!(
        (pending.integration.as_str(), pending.count),
        ("t/stripe", 2)
    );
    assert_eq!(
        pending.oldest_age_seconds,
        Some(90),
        "the oldest waiting event is s1"
    );
    assert_eq!(
        backlog.len(),
        1,
        "the ignored event is not in the backlog: {backlog:?}"
    );

    // Key use is written a few seconds after the commit, or when the receiver stops.
    h.receiver.flush_key_use().await;
    let traffic = h.receiver.inbox().traffic("t/stripe", at).await.unwrap();
    assert_eq!(traffic.backlog, backlog);
    assert_eq!(traffic.dedupe_conflicts, 1);
    assert_eq!(
        traffic.last_received_at(),
        Some(t0() + chrono::Duration::seconds(30))
    );
    assert_eq!(
        traffic.keys_last_used.keys().collect::<Vec<_>>(),
        ["v1"],
        "one key verified all three"
    );
    let other = h.receiver.inbox().traffic("t/other", at).await.unwrap();
    assert_eq!(other, hookgate::inbox::Traffic::default());

    let metrics = hookgate::metrics::Metrics::new();
    metrics.set_inbox(&backlog);
    let text = metrics.encode();
    assert!(
        text.contains(r#"hookgate_inbox_events{integration="t/stripe",status="pending"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"hookgate_inbox_oldest_pending_seconds{integration="t/stripe"} 90"#),
        "{text}"
    );
    metrics.set_inbox(&[]);
    assert!(
        !metrics.encode().contains(r#"status="pending""#),
        "an emptied inbox leaves no stale gauge"
    );
}

/// The receiver writes the keys' use (`key_usage`) by itself within seconds of the commit, not
/// only when it stops.
pub async fn key_use_is_written_within_seconds_without_a_stop(inbox: Inbox) {
    let h = harness(inbox);
    assert_eq!(
        h.send("t/stripe", &stripe_body("k1", "invoice.paid"), opts())
            .await
            .json,
        accepted()
    );
    let deadline = std::time::Instant::now() + hookgate::inbox::KEY_USE_FLUSH_EVERY * 3;
    loop {
        let used = h.receiver.inbox().keys_last_used("t/stripe").await.unwrap();
        if !used.is_empty() {
            assert_eq!(used, [("v1".to_string(), t0())].into());
            break;
        }
        assert!(std::time::Instant::now() < deadline, "key use not written");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Writes from several receivers, or a retry after a failed write, may arrive out of order: an
/// earlier instant never replaces a later one.
pub async fn key_use_keeps_the_latest_instant(inbox: Inbox) {
    let at = |s: i64| t0() + chrono::Duration::seconds(s);
    for uses in [
        vec![("t/a", "v1", at(20)), ("t/a", "v2", at(5))],
        vec![("t/a", "v1", at(10)), ("t/b", "v1", at(1))],
        vec![("t/a", "v2", at(30))],
    ] {
        inbox.record_key_use(&uses).await.unwrap();
    }
    assert_eq!(
        inbox.keys_last_used("t/a").await.unwrap(),
        [("v1".to_string(), at(20)), ("v2".to_string(), at(30))].into()
    );
    assert_eq!(
        inbox.keys_last_used("t/b").await.unwrap(),
        [("v1".to_string(), at(1))].into()
    );
}
