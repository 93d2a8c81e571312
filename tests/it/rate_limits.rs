//! Rate limits through the real router: forged or unsigned floods never spend a route's
//! `limits.requestsPerSecond` (they have their own per-route limit), and reloading the routing
//! table does not reset a limiter.

use crate::common::*;
use hookgate::inbox::Inbox;
use sqlx::PgPool;

/// t/limited allows 1 verified request per second with a burst of 2.
fn limited(h: &Harness, id: &str) -> (String, Vec<(String, String)>, String) {
    let body = format!(r#"{{"id":"{id}"}}"#);
    let (path, headers) = h.sign("t/limited", &body, opts());
    (path, headers, body)
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn forged_and_unsigned_floods_do_not_spend_the_verified_budget(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let (path, headers, body) = limited(&h, "valid-1");
    let forged = with_header(&headers, "x-signature", &"0".repeat(64));
    let unsigned = without_header(&headers, "x-signature");
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for i in 0..100 {
        let hdrs = if i % 2 == 0 { &forged } else { &unsigned };
        let r = h.post(&path, hdrs, body.clone()).await;
        *statuses.entry(r.status.as_u16()).or_default() += 1;
        if r.status.as_u16() == 429 {
            assert_eq!(r.json, error("rate_limited"));
            assert!(r.headers.contains_key("retry-after"));
        } else {
            assert_eq!(r.status.as_u16(), 401, "{}", r.json);
        }
    }
    println!("100 forged/unsigned requests: {statuses:?}");
    assert!(
        statuses.get(&429).copied().unwrap_or(0) > 0,
        "unverified traffic has a limit of its own"
    );
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0));

    // The verified budget is untouched: both requests of the burst still pass.
    let r = h.post(&path, &headers, body).await;
    assert_eq!((r.status.as_u16(), r.json), (200, accepted()));
    let (path, headers, body) = limited(&h, "valid-2");
    let r = h.post(&path, &headers, body).await;
    assert_eq!((r.status.as_u16(), r.json), (200, accepted()));
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_route_table_swap_keeps_the_limiter_state(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    for id in ["a", "b"] {
        let (path, headers, body) = limited(&h, id);
        assert_eq!(h.post(&path, &headers, body).await.json, accepted());
    }
    // The controller or a manifest reload publishes an identical table.
    h.receiver.swap_routes(h.manifests.route_table().unwrap());
    let (path, headers, body) = limited(&h, "c");
    let r = h.post(&path, &headers, body).await;
    assert_eq!(
        (r.status.as_u16(), r.json),
        (429, error("rate_limited")),
        "the burst was spent before the swap"
    );
}
