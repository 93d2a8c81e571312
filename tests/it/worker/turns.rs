//! Claims take the integrations' due events in turns (`inbox::claim`): one integration's backlog
//! no longer holds back another's events until it is delivered.

use super::*;

/// `w/bulk`'s `bulk` events, then `w/orders`'s `orders`, each stored after the one before.
async fn store(s: &Setup, bulk: usize, orders: usize) {
    for i in 0..bulk {
        s.event("w/bulk", &format!("bulk-{i}"), "{}").await;
    }
    for i in 0..orders {
        s.event("w/orders", &format!("order-{i}"), "{}").await;
    }
}

fn ids(batch: &[hookgate::inbox::Claimed]) -> Vec<String> {
    let mut ids: Vec<String> = batch.iter().map(|c| c.event_id.clone()).collect();
    ids.sort();
    ids
}

fn strings(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

/// The oldest of each integration, then the second of each, and so on: `w/orders`'s three
/// events are in the first claim of eight although 60 of `w/bulk`'s are older. Oldest first
/// across integrations, that claim was `bulk-0` to `bulk-7`. A claim from the last one's
/// cursors takes turns the same way, from where each integration's events were left.
async fn a_claim_takes_each_integrations_oldest_events_in_turns(inbox: Inbox) {
    let (s, _bulk) = bulk_and_orders(inbox).await;
    store(&s, 60, 3).await;
    let now = Utc::now();
    let until = now + chrono::Duration::seconds(60);
    let batch = s.inbox().claim(now, until, 8).await.unwrap();
    assert_eq!(
        ids(&batch),
        strings(&[
            "bulk-0", "bulk-1", "bulk-2", "bulk-3", "bulk-4", "order-0", "order-1", "order-2"
        ])
    );

    // Two integrations with more waiting: four events are two turns of two.
    for i in 3..6 {
        s.event("w/orders", &format!("order-{i}"), "{}").await;
    }
    let due = |id: &str| {
        batch
            .iter()
            .find(|c| c.event_id == id)
            .unwrap()
            .due_at
            .unwrap()
    };
    let from = vec![
        ("w/bulk".to_string(), due("bulk-0")),
        ("w/orders".to_string(), due("order-0")),
    ];
    let now = Utc::now();
    let batch = s
        .inbox()
        .claim_due_from(now, until, 4, &[], &from)
        .await
        .unwrap();
    assert_eq!(
        ids(&batch),
        strings(&["bulk-5", "bulk-6", "order-3", "order-4"])
    );

    // Claims of one: within a turn, the integration served least recently goes first, and one
    // that recent claims did not serve at all before any.
    let one = |served: &'static [&'static str]| {
        let served: Vec<String> = served.iter().map(|s| s.to_string()).collect();
        let inbox = s.inbox().clone();
        async move {
            let batch = inbox.claim_after(Utc::now(), until, 1, &served).await;
            ids(&batch.unwrap())
        }
    };
    assert_eq!(one(&["w/bulk"]).await, ["order-5"], "w/orders not served");
    assert_eq!(one(&["w/orders", "w/bulk"]).await, ["bulk-7"]);
    assert_eq!(one(&["w/bulk", "w/orders"]).await, ["bulk-8"]);
}

/// A pool with 4 slots, 300 of `w/bulk`'s events waiting (its destination answers in 20 ms:
/// 1.5 s of deliveries), then 5 of `w/orders`'s. `w/orders` is delivered while most of
/// `w/bulk`'s backlog still waits; oldest first, it waited for all 300.
async fn another_integrations_backlog_does_not_hold_an_integrations_events_back(inbox: Inbox) {
    let (s, bulk) = bulk_and_orders(inbox).await;
    bulk.always(Answer::After(Duration::from_millis(20)));
    store(&s, 300, 5).await;
    let running = crate::common::running::start([s.worker_with(WorkerConfig {
        concurrency: 4,
        lease: Duration::from_secs(20),
        ..cfg()
    })]);
    let orders = s.dest.wait_for(5, Duration::from_secs(30)).await;
    let bulk_then = bulk.received().len();
    assert_eq!(orders.len(), 5);
    assert!(
        bulk_then < 100,
        "w/orders waited for {bulk_then} of w/bulk's 300 events"
    );
    // And w/bulk's backlog is delivered all the same.
    assert_eq!(bulk.wait_for(300, Duration::from_secs(60)).await.len(), 300);
    running.stop().await;
}

/// A pool with 4 slots busy with `w/bulk`'s backlog (its destination answers in 100 ms: 40
/// deliveries a second), its events stored for claims (no hand-over room), then one event each
/// of three integrations no claim has served, stored one after another. Each is claimed at the
/// pool's next claim, within a few of `w/bulk`'s deliveries (0-3 here; 15 once, in a CI run with
/// every other test beside it): the store names its integration. On PostgreSQL each used to wait
/// for the next full claim, up to a second; 24-27 of `w/bulk`'s deliveries each, measured. SQLite's
/// claims look at every integration anyway.
async fn an_integration_no_claim_served_lately_is_claimed_once_its_event_is_stored(inbox: Inbox) {
    let bulk = Destination::start().await;
    let quiet = Destination::start().await;
    let to = |d: &Destination| format!(r#"{{url: "{}"}}"#, d.url);
    let yaml = integrations(&[
        ("bulk", &to(&bulk)),
        ("orders", &to(&quiet)),
        ("refunds", &to(&quiet)),
        ("payouts", &to(&quiet)),
    ]);
    let mut s = Setup::with_yaml(inbox, quiet, &yaml);
    bulk.always(Answer::After(Duration::from_millis(100)));
    let (w, end) = s
        .worker_with(WorkerConfig {
            concurrency: 4,
            poll: Duration::from_secs(3600),
            handoff_events: 0,
            ..cfg()
        })
        .with_handoff();
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    for i in 0..400 {
        s.event("w/bulk", &format!("bulk-{i}"), "{}").await;
    }
    let running = crate::common::running::start([w]);
    bulk.wait_for(8, Duration::from_secs(30)).await;
    let mut waits = Vec::new();
    for (n, integration) in ["w/orders", "w/refunds", "w/payouts"].iter().enumerate() {
        let before = bulk.received().len();
        s.event(integration, &format!("quiet-{n}"), "{}").await;
        s.dest.wait_for(n + 1, Duration::from_secs(30)).await;
        waits.push(bulk.received().len() - before);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    running.stop().await;
    assert!(
        waits.iter().all(|w| *w <= 18),
        "w/bulk's deliveries while each quiet event waited: {waits:?}"
    );
}

/// Eight slots, every event stored for a claim (no hand-over room), seven of them held by
/// `w/bulk`'s deliveries that hang. `w/orders`'s event is claimed on the eighth: its integration
/// holds no slot. (Until round 35 a busy pool claimed only with a quarter of its slots free, two,
/// and the event waited for the hung deliveries to time out.)
async fn an_idle_integrations_event_is_claimed_on_the_first_free_slot(inbox: Inbox) {
    let (mut s, bulk) = bulk_and_orders(inbox).await;
    let running = running_pool(&mut s, 8, 0);
    bulk_answers_while_one_hangs(&s, &bulk).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Each is claimed as it is stored, with two slots or more free.
    bulk.always(Answer::Hang);
    for (n, i) in (3..9).enumerate() {
        s.event("w/bulk", &format!("b-{i}"), "{}").await;
        bulk.wait_for(n + 4, Duration::from_secs(5)).await;
    }
    assert_eq!(bulk.received().len(), 9, "w/bulk holds seven slots");
    s.event("w/orders", "o-0", "{}").await;
    // Well within `w/bulk`'s attempts (10 s, the default timeout).
    let got = s.dest.wait_for(1, Duration::from_secs(5)).await.len();
    running.stop().await;
    assert_eq!(got, 1, "w/orders's event took the one free slot");
}

on_both_backends!(
    an_integration_no_claim_served_lately_is_claimed_once_its_event_is_stored,
    an_idle_integrations_event_is_claimed_on_the_first_free_slot,
    a_claim_takes_each_integrations_oldest_events_in_turns,
    another_integrations_backlog_does_not_hold_an_integrations_events_back,
);
