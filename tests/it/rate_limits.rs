//! Rate limits through the real router: forged or unsigned floods never spend a route's
//! `limits.requestsPerSecond` (they have their own per-route limit), and reloading the routing
//! table does not reset a limiter.
//!
//! The limiters run on the wall clock, which a test cannot pin. So no assertion depends on how
//! fast this machine is: a flood is sent until it is refused (however long that takes), and what
//! passed is checked against the exact bound (the burst, plus the rate times the time elapsed),
//! never against a guess of how long requests take.

use crate::common::*;
use hookgate::inbox::Inbox;
use sqlx::PgPool;
use std::time::{Duration, Instant};

/// t/limited allows 1 verified request per second with a burst of 2.
fn limited(h: &Harness, id: &str) -> (String, Vec<(String, String)>, String) {
    let body = format!(r#"{{"id":"{id}"}}"#);
    let (path, headers) = h.sign("t/limited", &body, opts());
    (path, headers, body)
}

/// Most requests a GCRA limiter lets through in `elapsed`: its burst, plus `rate` per second.
/// The limiter's clock (quanta) is calibrated against the one measuring `elapsed`: 1 % slack for
/// that, never for speed.
fn at_most(burst: u32, rate: u32, elapsed: Duration) -> f64 {
    f64::from(burst) + f64::from(rate) * (elapsed.as_secs_f64() * 1.01 + 0.01)
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn forged_and_unsigned_floods_do_not_spend_the_verified_budget(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    let (path, headers, body) = limited(&h, "valid-1");
    let forged = with_header(&headers, "x-signature", &"0".repeat(64));
    let unsigned = without_header(&headers, "x-signature");
    let rate = hookgate::receiver::limits::UNVERIFIED_RPS;
    let start = Instant::now();
    let mut refused_401 = 0;
    let limited_reply = loop {
        assert!(refused_401 < 100_000, "no 429 after {refused_401} requests");
        let hdrs = if refused_401 % 2 == 0 {
            &forged
        } else {
            &unsigned
        };
        let r = h.post(&path, hdrs, body.clone()).await;
        match r.status.as_u16() {
            401 => refused_401 += 1,
            429 => break r,
            other => panic!("{other}: {}", r.json),
        }
    };
    let elapsed = start.elapsed();
    println!("{refused_401} forged/unsigned requests answered 401 in {elapsed:?}, then 429");
    assert_eq!(limited_reply.json, error("rate_limited"));
    assert!(limited_reply.headers.contains_key("retry-after"));
    assert!(
        refused_401 >= rate,
        "the unverified budget holds a burst of {rate}: {refused_401}"
    );
    assert!(
        f64::from(refused_401) <= at_most(rate, rate, elapsed),
        "{refused_401} unverified requests passed the limiter in {elapsed:?}"
    );
    assert_eq!(h.receiver.inbox().counts().await.unwrap(), (0, 0));

    // The verified budget is untouched: both requests of the burst still pass.
    let r = h.post(&path, &headers, body).await;
    assert_eq!((r.status.as_u16(), r.json), (200, accepted()));
    let (path, headers, body) = limited(&h, "valid-2");
    let r = h.post(&path, &headers, body).await;
    assert_eq!((r.status.as_u16(), r.json), (200, accepted()));
}

/// Sends verified requests to t/limited until one is refused; returns how many were accepted
/// and when the refused one was sent.
async fn spend_until_limited(h: &Harness, prefix: &str) -> (u32, Instant) {
    for n in 0..1000 {
        let (path, headers, body) = limited(h, &format!("{prefix}-{n}"));
        let sent = Instant::now();
        let r = h.post(&path, &headers, body).await;
        match r.status.as_u16() {
            200 => {}
            429 => return (n, sent),
            other => panic!("{other}: {}", r.json),
        }
    }
    panic!("no 429 after 1000 requests");
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_route_table_swap_keeps_the_limiter_state(pool: PgPool) {
    let h = harness(Inbox::Postgres(pool));
    // Timed from before the refused request was sent: when the limiter refused it, less than one
    // token was left.
    let (spent, refused_at) = spend_until_limited(&h, "before").await;
    assert!(spent >= 2, "the burst of 2 always passes");

    // The controller or a manifest reload publishes an identical table.
    h.receiver.swap_routes(h.manifests.route_table().unwrap());
    let (after_swap, _) = spend_until_limited(&h, "after").await;
    let elapsed = refused_at.elapsed();
    // A fresh limiter would let the whole burst (2) through at once; the kept one only what
    // refilled since, less than 1 + 1 per second.
    assert!(
        f64::from(after_swap) < at_most(1, 1, elapsed),
        "{after_swap} accepted right after the swap, {elapsed:?} after a 429: the burst came back"
    );
}
