//! `spec.sourceRanges` (issue #17 §3) over real TCP on 127.0.0.1, through the production
//! listener, which hands the handler the peer address. Every refusal also checks that nothing
//! was stored.

use crate::common::loopback::Served;
use crate::common::*;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use hookgate::inbox::Inbox;
use sqlx::PgPool;

/// `inside` admits loopback (where the tests connect from); `outside` only TEST-NET-1; `open`
/// has no ranges. `outside` has a verified budget of 1 request per second.
fn manifests() -> String {
    let integration = |name: &str, extra: &str| {
        format!(
            r#"
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: t}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: keys, key: stripe}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
{extra}"#
        )
    };
    [
        "apiVersion: v1\nkind: Secret\nmetadata: {name: keys, namespace: t}\nstringData: {stripe: whsec_test_receiver_secret}\n".to_string(),
        integration("inside", "  sourceRanges: [127.0.0.0/8, \"::1/128\"]\n"),
        integration(
            "outside",
            "  sourceRanges: [192.0.2.0/24]\n  limits: {requestsPerSecond: 1, burst: 1}\n",
        ),
        integration("open", ""),
    ]
    .join("\n---\n")
}

type Headers = Vec<(String, String)>;

/// A Stripe request signed for `t/{name}`, plus `extra` headers.
fn signed(h: &Harness, name: &str, id: &str, extra: &[(&str, &str)]) -> (String, Headers, String) {
    let body = stripe_body(id, "invoice.paid");
    let (path, mut headers) = h.sign(&format!("t/{name}"), &body, opts());
    headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (path, headers, body)
}

async fn stored(h: &Harness) -> i64 {
    h.receiver.inbox().counts().await.unwrap().0
}

fn served_with(h: &mut Harness, trusted_proxies: u8) {
    h.receiver = h.receiver.clone().with_trusted_proxies(trusted_proxies);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn an_allowed_peer_is_stored_and_any_other_is_403_before_verification(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool), &manifests());
    let s = Served::start(&h.receiver).await;

    let (path, headers, body) = signed(&h, "inside", "evt_in", &[]);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
    assert_eq!(stored(&h).await, 1);

    // Validly signed, from loopback, which is outside 192.0.2.0/24.
    let (path, headers, body) = signed(&h, "outside", "evt_out", &[]);
    assert_eq!(
        s.post(&path, &headers, body).await,
        (403, error("source_not_allowed"))
    );
    // Unsigned: still 403, not 401, because the address is checked first.
    assert_eq!(
        s.post(&path, &[], "{}").await,
        (403, error("source_not_allowed"))
    );
    // With no trusted proxy, X-Forwarded-For is not read at all, even when it names an
    // allowed address.
    let (path, headers, body) = signed(
        &h,
        "outside",
        "evt_xff",
        &[("x-forwarded-for", "192.0.2.10")],
    );
    assert_eq!(
        s.post(&path, &headers, body).await,
        (403, error("source_not_allowed"))
    );
    assert_eq!(
        h.receiver.inbox().counts().await.unwrap(),
        (1, 0),
        "nothing more stored"
    );

    let metrics = h.metrics.encode();
    assert!(
        metrics.contains(r#"hookgate_receiver_requests_total{integration="t/outside",outcome="source_not_allowed"} 3"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains("hookgate_signature_failures_total{integration=\"t/outside\""),
        "a refused source never reaches verification: {metrics}"
    );
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn with_one_trusted_proxy_a_forged_leftmost_entry_does_not_get_in(pool: PgPool) {
    let mut h = harness_with(Inbox::Postgres(pool), &manifests());
    served_with(&mut h, 1);
    let s = Served::start(&h.receiver).await;

    // The client claims 192.0.2.10; the proxy (the loopback peer) appended what it saw.
    let forged = [("x-forwarded-for", "192.0.2.10, 203.0.113.5")];
    let (path, headers, body) = signed(&h, "outside", "evt_forged", &forged);
    assert_eq!(
        s.post(&path, &headers, body).await,
        (403, error("source_not_allowed"))
    );
    // The same forgery on a second header line the proxy added after the client's.
    let lines = [
        ("x-forwarded-for", "192.0.2.10"),
        ("x-forwarded-for", "203.0.113.5"),
    ];
    let (path, headers, body) = signed(&h, "outside", "evt_lines", &lines);
    assert_eq!(
        s.post(&path, &headers, body).await,
        (403, error("source_not_allowed"))
    );
    // The peer (loopback) no longer counts either: the proxy's entry does.
    let (path, headers, body) = signed(&h, "inside", "evt_peer", &forged);
    assert_eq!(
        s.post(&path, &headers, body).await,
        (403, error("source_not_allowed"))
    );
    assert_eq!(stored(&h).await, 0);

    // The proxy wrote an allowed address: in, whatever the client wrote on the left.
    let real = [("x-forwarded-for", "unknown, 198.51.100.1,192.0.2.10")];
    let (path, headers, body) = signed(&h, "outside", "evt_real", &real);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
    // IPv6 and a port, as some proxies write them.
    let v6 = [("x-forwarded-for", "[::1]:4711")];
    let (path, headers, body) = signed(&h, "inside", "evt_v6", &v6);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
    assert_eq!(stored(&h).await, 2);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn too_few_or_unreadable_forwarded_entries_are_refused(pool: PgPool) {
    let mut h = harness_with(Inbox::Postgres(pool), &manifests());
    served_with(&mut h, 2);
    let s = Served::start(&h.receiver).await;
    for (case, xff) in [
        ("no header", None),
        ("one entry for two proxies", Some("192.0.2.10")),
        (
            "the client entry is not an address",
            Some("unknown, 10.0.0.5"),
        ),
        ("an empty client entry", Some(", 10.0.0.5")),
    ] {
        let extra: Vec<_> = xff.map(|v| ("x-forwarded-for", v)).into_iter().collect();
        let (path, headers, body) = signed(&h, "outside", "evt_few", &extra);
        assert_eq!(
            s.post(&path, &headers, body).await,
            (403, error("client_address_unknown")),
            "{case}"
        );
    }
    // A route without ranges never looks at the address.
    let (path, headers, body) = signed(&h, "open", "evt_open", &[]);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
    // Two entries: the left one is what the outer proxy saw.
    let two = [("x-forwarded-for", "192.0.2.10, 10.0.0.5")];
    let (path, headers, body) = signed(&h, "outside", "evt_two", &two);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
    assert_eq!(stored(&h).await, 2);
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn refused_sources_spend_neither_rate_budget(pool: PgPool) {
    let mut h = harness_with(Inbox::Postgres(pool), &manifests());
    h.receiver = h.receiver.clone().with_unverified_rps(1);
    served_with(&mut h, 1);
    let s = Served::start(&h.receiver).await;
    let outside = [("x-forwarded-for", "203.0.113.5")];
    let inside = [("x-forwarded-for", "192.0.2.10")];
    for i in 0..5 {
        // Forged and valid requests from outside: 403 every time, never 429.
        let (path, _, _) = signed(&h, "outside", "x", &[]);
        let forged: Headers = vec![("x-forwarded-for".into(), "203.0.113.5".into())];
        assert_eq!(
            s.post(&path, &forged, "{}").await,
            (403, error("source_not_allowed"))
        );
        let (path, headers, body) = signed(&h, "outside", &format!("evt_flood_{i}"), &outside);
        assert_eq!(
            s.post(&path, &headers, body).await,
            (403, error("source_not_allowed"))
        );
    }
    // From inside, the first bad signature is still a 401 (the unverified budget is untouched)
    // and the first valid request is stored (the verified budget of 1 is untouched).
    let (path, _, _) = signed(&h, "outside", "x", &[]);
    let bad: Headers = vec![
        ("x-forwarded-for".into(), "192.0.2.10".into()),
        ("stripe-signature".into(), "t=1780315200,v1=00".into()),
    ];
    assert_eq!(
        s.post(&path, &bad, "{}").await,
        (401, error("invalid_signature"))
    );
    let (path, headers, body) = signed(&h, "outside", "evt_after_flood", &inside);
    assert_eq!(s.post(&path, &headers, body).await, (200, accepted()));
}

/// A router served without the hookgate listener has no peer address: a route with ranges
/// refuses rather than guessing, and a route without them is unaffected.
#[sqlx::test(migrations = "migrations/postgres")]
async fn without_a_peer_address_a_route_with_ranges_refuses(pool: PgPool) {
    let h = harness_with(Inbox::Postgres(pool), &manifests());
    let (path, headers, body) = signed(&h, "inside", "evt_oneshot", &[]);
    let r = h.post(&path, &headers, body).await;
    assert_eq!(
        (r.status, r.json),
        (StatusCode::FORBIDDEN, error("client_address_unknown"))
    );
    let (path, headers, body) = signed(&h, "open", "evt_oneshot_open", &[]);
    assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    // A GET is refused by address before the method is looked at.
    let get = Request::get(path.replace("open", "inside"))
        .body(Body::empty())
        .unwrap();
    assert_eq!(h.call(get).await.status, StatusCode::FORBIDDEN);
    assert_eq!(stored(&h).await, 1);
}
