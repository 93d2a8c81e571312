//! The ordering gate's stored version moves only for the worker that holds the resource's lock,
//! and only from the version it compared against: a worker that lost its lock and completes late
//! cannot move the version backwards. On PostgreSQL and SQLite.

use crate::common::*;
use chrono::Duration;
use hookgate::inbox::{Advance, Completion, Inbox};

fn advance(version: &str, token: &str, previous: Option<&str>) -> Completion {
    Completion::Processed {
        version: Some(Advance {
            resource: "cus_1".into(),
            version: version.into(),
            token: token.into(),
            previous: previous.map(Into::into),
        }),
    }
}

async fn a_worker_that_lost_its_lock_cannot_move_the_version(inbox: Inbox) {
    let h = harness(inbox.clone());
    for id in ["evt_a", "evt_b"] {
        let r = h
            .send("t/stripe", &stripe_body(id, "invoice.paid"), opts())
            .await;
        assert_eq!(r.json, accepted());
    }
    let now = t0() + Duration::seconds(1);
    let claimed = inbox
        .claim(now, now + Duration::seconds(60), 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    // Worker A locks the resource and compares against "no version yet"; then it stalls.
    let lock =
        |at, token| inbox.lock_resource("t/stripe", "cus_1", at, at + Duration::seconds(2), token);
    assert_eq!(lock(now, "token-a").await.unwrap(), Some(None));
    // A's lock expires; B takes it and delivers version 5.
    let later = now + Duration::seconds(3);
    assert_eq!(lock(later, "token-b").await.unwrap(), Some(None));
    assert!(
        inbox
            .complete(&claimed[1], &advance("i:5", "token-b", None), None, later)
            .await
            .unwrap()
    );
    // A completes late with version 3: its event ends, the gate stays at 5.
    let _ = inbox
        .complete(&claimed[0], &advance("i:3", "token-a", None), None, later)
        .await;
    let after = later + Duration::seconds(10);
    assert_eq!(
        lock(after, "token-c").await.unwrap(),
        Some(Some("i:5".to_string()))
    );
}

on_both_backends!(a_worker_that_lost_its_lock_cannot_move_the_version);
