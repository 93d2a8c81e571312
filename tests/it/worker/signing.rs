//! What a destination receives from a worker: the original body, the forwarded and signed
//! headers, a Standard Webhooks signature (checked by hookgate's verifier and by the Python
//! `standardwebhooks` package) and a `webhook-id` stable per event.

use super::*;

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
    let mut s = Setup::new(inbox).await;
    // Retention is simulated below by a cutoff a month early. The receiver's memory of the keys
    // it committed lives half the real retention, which has not passed: it is off here.
    without_dedupe_memory(&mut s.h);
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
    s.replay("same").await;
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

on_both_backends!(
    delivers_original_body_with_signed_headers,
    webhook_ids_are_stable_per_event_and_distinct_between_events,
);
