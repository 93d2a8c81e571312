//! One request cannot cost more than a handful of signature checks: a header offering more than
//! `MAX_SIGNATURES` (8) signatures is 400 `malformed_request` and writes nothing, even when one of
//! them is valid. Real router, real PostgreSQL.

use crate::common::*;
use hookgate::inbox::Inbox;
use sqlx::PgPool;

fn manifests() -> String {
    format!(
        "{}{}",
        test_manifests(),
        r#"---
apiVersion: v1
kind: Secret
metadata: {name: sw, namespace: t}
stringData:
  key: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {name: sw, namespace: t}
spec:
  scheme: {type: standard-webhooks}
  keys: [{id: k, secretRef: {name: sw, key: key}}]
  delivery: {url: "http://127.0.0.1:1/sink"}
"#
    )
}

/// The signed header value with `extra` wrong signatures of the same kind in front of it.
fn padded(header: &str, value: &str, extra: usize) -> String {
    match header {
        "stripe-signature" => {
            let (t, v1) = value.split_once(",v1=").unwrap();
            let wrong = format!(",v1={}", "0".repeat(64)).repeat(extra);
            format!("{t}{wrong},v1={v1}")
        }
        "webhook-signature" => {
            let wrong = format!("v1,{} ", "A".repeat(43) + "=").repeat(extra);
            format!("{wrong}{value}")
        }
        other => panic!("no padding for {other}"),
    }
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn more_than_eight_signatures_is_400_and_writes_nothing(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool), &manifests());
    let cases = [
        ("t/stripe", "stripe-signature", "evt_cap"),
        ("t/sw", "webhook-signature", "msg_cap"),
    ];
    for (integration, header, id) in cases {
        let body = stripe_body(id, "invoice.paid");
        let sent = hookgate::cli::send::SendOptions {
            event_id: Some(id.into()),
            ..opts()
        };
        let (path, headers) = h.sign(integration, &body, sent);
        let value = &headers.iter().find(|(k, _)| k == header).unwrap().1;

        // Nine signatures, the valid one among them: refused before any is checked.
        let nine = with_header(&headers, header, &padded(header, value, 8));
        let r = h.post(&path, &nine, body.clone()).await;
        assert_eq!(
            (r.status.as_u16(), &r.json),
            (400, &error("malformed_request")),
            "{integration} with 9 signatures"
        );
        let many = with_header(&headers, header, &padded(header, value, 999));
        let r = h.post(&path, &many, body.clone()).await;
        assert_eq!(
            (r.status.as_u16(), &r.json),
            (400, &error("malformed_request")),
            "{integration} with 1000 signatures"
        );
        assert_eq!(
            h.receiver.inbox().counts().await.unwrap(),
            (0, 0),
            "{integration}: a refused request wrote a row"
        );

        // Eight is within the cap: the valid one is found.
        let eight = with_header(&headers, header, &padded(header, value, 7));
        let r = h.post(&path, &eight, body.clone()).await;
        assert_eq!(
            (r.status.as_u16(), &r.json),
            (200, &accepted()),
            "{integration} with 8 signatures"
        );
        sqlx_clear(&h).await;
    }
}

async fn sqlx_clear(h: &Harness) {
    if let Inbox::Postgres(pool) = h.receiver.inbox() {
        sqlx::query("DELETE FROM inbox_events")
            .execute(pool)
            .await
            .unwrap();
        sqlx::query("DELETE FROM signature_nonces")
            .execute(pool)
            .await
            .unwrap();
    }
}
