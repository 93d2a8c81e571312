//! Each integration's share of a pool's slots (`worker::fair`): until one of an integration's
//! deliveries ends, and once its attempts time out, it holds at most three quarters of the
//! slots, the others deliver through the rest, and its further events wait in the inbox, not
//! counted as attempts.

use super::*;

/// A setup whose `w/orders` delivers to `s.dest`, and `w/stuck` to the destination returned,
/// which never answers.
async fn stuck_and_healthy(inbox: Inbox) -> (Setup, Destination) {
    let stuck = Destination::start().await;
    stuck.always(Answer::Hang);
    let healthy = Destination::start().await;
    let yaml = integrations(&[
        (
            "stuck",
            &format!(r#"{{url: "{}", timeout: 2s}}"#, stuck.url),
        ),
        ("orders", &format!(r#"{{url: "{}"}}"#, healthy.url)),
    ]);
    (Setup::with_yaml(inbox, healthy, &yaml), stuck)
}

/// 8 slots, a lease long enough for the stuck destination's 2 s attempts, a short grace.
fn eight_slots(s: &Setup, poll: Duration) -> Worker {
    s.worker_with(WorkerConfig {
        concurrency: 8,
        lease: Duration::from_secs(20),
        poll,
        grace: Duration::from_millis(200),
        ..cfg()
    })
}

/// `w/orders` gets 5 events and delivers them through the 2 slots `w/stuck` leaves it, before
/// any of `w/stuck`'s first 6 attempts has timed out (2 s); then the `n` other events `ids` of
/// `w/stuck` are deferred, once none of its deliveries has ended for a second.
async fn the_others_deliver_and_the_rest_is_deferred(
    s: &Setup,
    stuck: &Destination,
    ids: std::ops::Range<usize>,
    n: usize,
) {
    for i in 0..5 {
        s.event("w/orders", &format!("order-{i}"), "{}").await;
    }
    let delivered = s.dest.wait_for(5, Duration::from_secs(6)).await;
    assert_eq!(delivered.len(), 5, "w/orders delivers through 2 of the 8");
    assert_eq!(deferred(s, ids, n).await, n, "all but the 6 in flight");
    assert_eq!(
        stuck.received().len(),
        6,
        "its share from its first event, and nothing timed out yet"
    );
    let text = s.metrics.encode();
    let line = |i: &str| format!("hookgate_deliveries_deferred_total{{integration=\"{i}\"}}");
    let count = |i: &str| hookgate::metrics::counter_sum(&text, &line(i));
    // Each deferral counts; an event due again while w/stuck stays stuck is deferred again.
    assert!(count("w/stuck") >= n as f64, "{}", count("w/stuck"));
    assert!(
        text.contains(&format!("{} 0", line("w/orders"))),
        "declared at zero for every integration:\n{text}"
    );
}

/// Waits (10 s at most) until `n` of `w/stuck`'s events `stuck-{from}` to `stuck-{to - 1}` were
/// given back to the inbox for later: `pending`, no attempt counted, due in the future. How many.
async fn deferred(s: &Setup, ids: std::ops::Range<usize>, n: usize) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = Utc::now();
        let mut found = 0;
        for i in ids.clone() {
            let (status, attempts, _, next) = s.row(&format!("stuck-{i}")).await;
            if status == "pending" && attempts == 0 && next.is_some_and(|n| n > now) {
                found += 1;
            }
        }
        if found >= n || std::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Before the share, the 40 events of `w/stuck` (older, so claimed first) took all 8 slots
/// until their timeout, wave after wave, and `w/orders` waited behind them. Until round 33 its
/// first wave still took all 8 (nothing said yet that its destination was stuck), and `w/orders`
/// waited for its timeout. Now it holds 6 of 8 from its first event: `w/orders` is delivered
/// through the other 2 at once.
async fn a_stuck_destination_holds_three_quarters_of_the_slots_and_the_others_deliver(
    inbox: Inbox,
) {
    let (s, stuck) = stuck_and_healthy(inbox).await;
    for i in 0..40 {
        s.event("w/stuck", &format!("stuck-{i}"), "{}").await;
    }
    let running = crate::common::running::start([eight_slots(&s, cfg().poll)]);
    assert_eq!(stuck.wait_for(6, Duration::from_secs(10)).await.len(), 6);
    // Past the stall, what w/stuck has beyond its 6 goes back to the inbox, uncounted, for later.
    the_others_deliver_and_the_rest_is_deferred(&s, &stuck, 0..40, 34).await;
    running.stop().await;
}

/// The same through the hand-over of `hookgate standalone`: events the receiver hands over past
/// the stuck integration's share wait in memory, then go back to the inbox uncounted, while the
/// other integration's are delivered.
async fn handed_over_events_past_a_stuck_integrations_share_go_back_to_the_inbox(inbox: Inbox) {
    let (mut s, stuck) = stuck_and_healthy(inbox).await;
    let (w, end) = eight_slots(&s, Duration::from_secs(3600)).with_handoff();
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    let running = crate::common::running::start([w]);
    for i in 0..20 {
        s.event("w/stuck", &format!("stuck-{i}"), "{}").await;
    }
    assert_eq!(stuck.wait_for(6, Duration::from_secs(10)).await.len(), 6);
    the_others_deliver_and_the_rest_is_deferred(&s, &stuck, 0..20, 14).await;
    running.stop().await;
}

/// A running pool of `concurrency` slots (`handoff_events` as in [`running_pool`]) in which
/// `w/bulk`'s destination has answered and holds one hung delivery, `w/orders` then delivered
/// one event (`o-0`), and `w/bulk` got `backlog` more events, which hang.
async fn bulk_hangs_after_orders_delivered(
    inbox: Inbox,
    concurrency: usize,
    handoff_events: usize,
    backlog: usize,
) -> (Setup, Destination, crate::common::running::Running) {
    let (mut s, bulk) = bulk_and_orders(inbox).await;
    let running = running_pool(&mut s, concurrency, handoff_events);
    bulk_answers_while_one_hangs(&s, &bulk).await;
    s.event("w/orders", "o-0", "{}").await;
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(5)).await.len(), 1);
    bulk.always(Answer::Hang);
    for i in 3..3 + backlog {
        s.event("w/bulk", &format!("b-{i}"), "{}").await;
    }
    (s, bulk, running)
}

/// Eight slots. `w/orders` delivered one event a moment ago and holds no slot; `w/bulk`'s
/// destination answers, then hangs on a backlog of ten. `w/bulk` takes seven slots and leaves the
/// eighth to `w/orders`, whose next event is delivered while every one of `w/bulk`'s hangs.
/// (Until round 36 `w/bulk` took all eight, and `w/orders`'s event waited for one of its
/// deliveries to end: here, its 10 s timeout.) `handoff_events` 0 stores every event for a claim,
/// as the chart's receivers do; otherwise the receiver hands them over, as `standalone` does.
/// (SQLite's claims came one event at a time here and stopped at seven anyway, a busy pool
/// claiming only with two slots free: the hand-over shows the rule there.)
async fn the_last_slot_kept_for_a_tenant_that_delivered_a_moment_ago(
    inbox: Inbox,
    handoff_events: usize,
) {
    let (s, bulk, running) = bulk_hangs_after_orders_delivered(inbox, 8, handoff_events, 10).await;
    bulk.wait_for(9, Duration::from_secs(5)).await;
    s.event("w/orders", "o-1", "{}").await;
    // Well within `w/bulk`'s attempts (10 s, the default timeout).
    let got = s.dest.wait_for(2, Duration::from_secs(5)).await.len();
    let bulk_held = bulk.received().len() - 2;
    running.stop().await;
    assert_eq!(
        (got, bulk_held),
        (2, 7),
        "w/orders's next event took the slot w/bulk left"
    );
}

async fn the_last_slot_is_kept_for_a_tenant_that_delivered_a_moment_ago(inbox: Inbox) {
    the_last_slot_kept_for_a_tenant_that_delivered_a_moment_ago(inbox, 0).await;
}

async fn the_last_slot_is_kept_for_a_tenant_whose_events_are_handed_over(inbox: Inbox) {
    let room = hookgate::worker::defaults::HANDOFF_EVENTS;
    the_last_slot_kept_for_a_tenant_that_delivered_a_moment_ago(inbox, room).await;
}

/// Four slots, every event handed over. `w/bulk` answers, then hangs on 37 more events: it
/// holds three slots, leaves the fourth to `w/orders` (which delivered one a moment ago), and its
/// other events wait in memory until the pool holds its most events (eight per slot). `w/orders`'s
/// next event is handed over then, and takes the fourth slot past that bound. (Before round 36's
/// last change it waited until the bound had room: until `w/bulk`, none of whose deliveries had
/// ended for a second, had its waiting events deferred to the inbox.)
async fn a_tenants_handed_event_starts_past_the_events_another_holds_in_memory(inbox: Inbox) {
    let room = hookgate::worker::defaults::HANDOFF_EVENTS;
    let (s, bulk, running) = bulk_hangs_after_orders_delivered(inbox, 4, room, 37).await;
    s.event("w/orders", "o-1", "{}").await;
    let got = s.dest.wait_for(2, Duration::from_secs(5)).await.len();
    let text = s.metrics.encode();
    let deferred = hookgate::metrics::counter_sum(
        &text,
        "hookgate_deliveries_deferred_total{integration=\"w/bulk\"}",
    );
    let bulk_held = bulk.received().len() - 2;
    running.stop().await;
    assert_eq!(
        (got, bulk_held, deferred),
        (2, 3, 0.0),
        "w/orders's event started while w/bulk's waited in memory"
    );
}

on_both_backends!(
    a_stuck_destination_holds_three_quarters_of_the_slots_and_the_others_deliver,
    the_last_slot_is_kept_for_a_tenant_that_delivered_a_moment_ago,
    the_last_slot_is_kept_for_a_tenant_whose_events_are_handed_over,
    a_tenants_handed_event_starts_past_the_events_another_holds_in_memory,
    handed_over_events_past_a_stuck_integrations_share_go_back_to_the_inbox,
);
