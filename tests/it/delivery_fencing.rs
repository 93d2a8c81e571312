//! README, Delivery: "Every write after the claim is fenced on the attempt number, so a worker
//! that lost its lease cannot overwrite the newer attempt." A worker whose lease ran out and whose
//! event was claimed again finishes late, through the inbox's own calls and through the worker's
//! whole delivery path, and must change nothing: no status, no attempt record, no dead letter, no
//! ordering version. Leases run out on explicit instants passed to `claim`, not by sleeping. On
//! PostgreSQL (where the worker's completions are batched) and SQLite.

use crate::common::destination::{Answer, Destination};
use crate::common::*;
use chrono::{DateTime, Duration, Utc};
use hookgate::cli::send::SendOptions;
use hookgate::inbox::{Advance, Attempt, Claimed, Completion, EventDetail, Inbox, ReplaySelector};
use hookgate::metrics::Metrics;
use hookgate::worker::{self, Worker, WorkerConfig};
use serde_json::json;
use std::sync::Arc;

fn manifests(dest: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: f}}
stringData: {{hmac: fencing-test-secret}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: plain, namespace: f}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  delivery: {{url: "{dest}"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: ordered, namespace: f}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: k1, secretRef: {{name: keys, key: hmac}}}}]
  ordering: {{resourceIdPointer: /data/id, versionPointer: /data/version}}
  delivery: {{url: "{dest}"}}
"#
    )
}

struct Setup {
    h: Harness,
    dest: Destination,
    worker: Worker,
}

impl Setup {
    async fn new(inbox: Inbox) -> Self {
        let dest = Destination::start().await;
        let h = harness_with(inbox, &manifests(&dest.url));
        let worker = Worker::new(
            h.receiver.inbox().clone(),
            worker::targets(&h.receiver.routes()),
            WorkerConfig::default(),
            Arc::new(Metrics::new()),
        );
        Self { h, dest, worker }
    }

    fn inbox(&self) -> &Inbox {
        self.h.receiver.inbox()
    }

    async fn event(&self, integration: &str, id: &str, body: &str) {
        let sent = SendOptions {
            event_id: Some(id.into()),
            ..opts()
        };
        assert_eq!(
            self.h.send(integration, body, sent).await.json,
            accepted(),
            "{id}"
        );
    }

    /// Claims every due event at `now`, leased until `now + lease`; exactly one is expected.
    async fn claim(&self, now: DateTime<Utc>, lease: Duration) -> Claimed {
        let mut claimed = self.inbox().claim(now, now + lease, 10).await.unwrap();
        assert_eq!(claimed.len(), 1, "one event due at {now}");
        claimed.remove(0)
    }

    /// Everything the inbox holds about the event, its recorded attempts included.
    async fn detail(&self, c: &Claimed) -> EventDetail {
        self.inbox().event_detail(c.id).await.unwrap().unwrap()
    }

    /// (version, updated_at) of a resource's ordering fence; `None` if it was never locked.
    async fn fence(&self, resource: &str) -> Option<(Option<String>, String)> {
        on!(self.inbox(), pool => {
            sqlx::query_as::<_, (Option<String>, String)>(
                "SELECT version, CAST(updated_at AS TEXT) FROM resource_versions WHERE resource_id = $1",
            )
            .bind(resource)
            .fetch_optional(pool)
            .await
            .unwrap()
        })
    }
}

fn attempt(at: DateTime<Utc>, status_code: Option<i64>) -> Attempt {
    Attempt {
        started_at: at,
        duration_ms: 5,
        status_code,
        error: None,
    }
}

/// Every way a claim can end, for the holder of `token` on resource `cus_1` (compared against
/// "no version yet").
fn every_completion(at: DateTime<Utc>, token: &str) -> Vec<Completion> {
    vec![
        Completion::Processed {
            version: Some(Advance {
                resource: "cus_1".into(),
                version: "i:7".into(),
                token: token.into(),
                previous: None,
            }),
        },
        Completion::Processed { version: None },
        Completion::Retry {
            next_attempt_at: at + Duration::seconds(30),
            error: "HTTP 500".into(),
        },
        Completion::DeadLetter {
            error: "HTTP 404".into(),
        },
        Completion::Ignored {
            reason: "stale_version",
        },
    ]
}

/// Worker A claims, stalls past its lease, and B claims the event again (attempt 2). Everything
/// A does afterwards is refused, even though A still holds the resource's ordering lock: the
/// attempt fence alone must stop it.
async fn a_worker_that_lost_its_lease_changes_nothing_when_it_completes_late(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let body = json!({"data": {"id": "cus_1", "version": 7}}).to_string();
    s.event("f/ordered", "late", &body).await;
    let t = Utc::now();
    let a = s.claim(t, Duration::seconds(1)).await;
    assert_eq!(a.attempt, 1);
    // A took the resource's lock before stalling. The lock has run out too, but nobody has
    // taken it since, so A's token would still move the version.
    let (locked, expired) = (t - Duration::seconds(10), t - Duration::seconds(5));
    let lock = s
        .inbox()
        .lock_resource("f/ordered", "cus_1", locked, expired, "token-a")
        .await
        .unwrap();
    assert_eq!(lock, Some(None));

    let b = s
        .claim(t + Duration::seconds(2), Duration::seconds(60))
        .await;
    assert_eq!((b.id, b.attempt), (a.id, 2), "B holds the newer attempt");
    let held_by_b = s.detail(&b).await;
    assert_eq!(
        (held_by_b.status.as_str(), held_by_b.attempt_count),
        ("processing", 2)
    );
    let fence_before = s.fence("cus_1").await;
    assert_eq!(fence_before.as_ref().map(|f| f.0.clone()), Some(None));

    let late = t + Duration::seconds(3);
    for completion in every_completion(late, "token-a") {
        let recorded = s
            .inbox()
            .complete(&a, &completion, Some(&attempt(late, Some(200))), late)
            .await
            .unwrap();
        assert!(!recorded, "a stale claim completed: {completion:?}");
        assert_eq!(s.detail(&b).await, held_by_b, "after {completion:?}");
        assert_eq!(s.fence("cus_1").await, fence_before, "after {completion:?}");
    }
    assert!(!s.inbox().release(&a, late).await.unwrap());
    assert_eq!(s.detail(&b).await, held_by_b, "after a stale release");
    let stale = std::slice::from_ref(&a);
    assert_eq!(s.inbox().release_many(stale, late).await.unwrap(), 0);
    assert_eq!(
        s.detail(&b).await,
        held_by_b,
        "after a stale release of many"
    );

    // A's whole delivery path with its stale claim: it may still send (at least once), but
    // whatever the destination answers, its outcome is not recorded. A 404 would dead-letter,
    // a 500 retry (both batched on PostgreSQL), a 200 advance the version (its own transaction).
    for answer in [404, 500, 200] {
        s.dest.script([Answer::Status(answer)]);
        s.worker.deliver(&a).await;
        assert_eq!(s.detail(&b).await, held_by_b, "after A's late {answer}");
        assert_eq!(
            s.fence("cus_1").await,
            fence_before,
            "after A's late {answer}"
        );
    }
    let sent: Vec<String> = s
        .dest
        .received()
        .iter()
        .map(|r| r.header("hookgate-attempt"))
        .collect();
    assert_eq!(sent, ["1", "1", "1"]);

    // B's own completion is the one that counts.
    s.dest.script([Answer::Status(200)]);
    s.worker.deliver(&b).await;
    let done = s.detail(&b).await;
    assert_eq!((done.status.as_str(), done.attempt_count), ("processed", 2));
    let history: Vec<_> = done
        .attempts
        .iter()
        .map(|a| (a.attempt, a.status_code, a.outcome.as_str()))
        .collect();
    assert_eq!(history, [(2, Some(200), "processed")]);
    assert_eq!(
        s.fence("cus_1").await.map(|f| f.0),
        Some(Some("i:7".into()))
    );

    // And A, later still, cannot undo it.
    let later = t + Duration::seconds(120);
    for completion in every_completion(later, "token-a") {
        let recorded = s
            .inbox()
            .complete(&a, &completion, Some(&attempt(later, Some(500))), later)
            .await
            .unwrap();
        assert!(!recorded, "{completion:?}");
    }
    assert_eq!(s.detail(&b).await, done);
}

/// A replay starts the attempt numbers again at 1, so the number alone cannot tell a claim made
/// before a dead letter from one made after its replay. A worker that lost its attempt-1 claim
/// and finishes after the replay's own attempt 1 was claimed must not land on that claim.
async fn a_late_completion_cannot_land_on_a_claim_made_after_a_replay(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.event("f/plain", "aba", "{}").await;
    let t = Utc::now();
    let a = s.claim(t, Duration::seconds(1)).await;
    assert_eq!(a.attempt, 1);
    let b = s
        .claim(t + Duration::seconds(2), Duration::seconds(60))
        .await;
    assert_eq!(b.attempt, 2);
    let dead = Completion::DeadLetter {
        error: "HTTP 404".into(),
    };
    let at = t + Duration::seconds(3);
    assert!(
        s.inbox()
            .complete(&b, &dead, Some(&attempt(at, Some(404))), at)
            .await
            .unwrap()
    );
    let replayed = s
        .inbox()
        .replay_dead_letters(
            &ReplaySelector::Ids(vec![b.id]),
            at,
            hookgate::inbox::Apply::By(&crate::common::tester()),
        )
        .await
        .unwrap();
    assert_eq!(replayed, vec![b.id]);
    let c = s
        .claim(t + Duration::seconds(4), Duration::seconds(60))
        .await;
    assert_eq!(
        (c.id, c.attempt),
        (a.id, a.attempt),
        "the replay's first claim has A's number"
    );
    let held_by_c = s.detail(&c).await;

    let late = t + Duration::seconds(5);
    for completion in every_completion(late, "token-a") {
        let recorded = s
            .inbox()
            .complete(&a, &completion, Some(&attempt(late, Some(200))), late)
            .await
            .unwrap();
        assert!(!recorded, "A's stale claim completed C's: {completion:?}");
        assert_eq!(s.detail(&c).await, held_by_c, "after {completion:?}");
    }
    assert!(!s.inbox().release(&a, late).await.unwrap());
    assert_eq!(s.detail(&c).await, held_by_c, "after a stale release");
    for answer in [404, 200] {
        s.dest.script([Answer::Status(answer)]);
        s.worker.deliver(&a).await;
        assert_eq!(s.detail(&c).await, held_by_c, "after A's late {answer}");
    }

    s.dest.script([Answer::Status(200)]);
    s.worker.deliver(&c).await;
    let done = s.detail(&c).await;
    assert_eq!((done.status.as_str(), done.attempt_count), ("processed", 1));
    let history: Vec<_> = done
        .attempts
        .iter()
        .map(|a| (a.attempt, a.status_code, a.outcome.as_str()))
        .collect();
    assert_eq!(
        history,
        [(2, Some(404), "dead_letter"), (1, Some(200), "processed")]
    );
}

on_both_backends!(
    a_worker_that_lost_its_lease_changes_nothing_when_it_completes_late,
    a_late_completion_cannot_land_on_a_claim_made_after_a_replay,
);
