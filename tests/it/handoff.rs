//! The receiver storing new events leased to the workers of its own process (standalone), on both
//! backends: the row is what a claim would have left, the completion's fence matches it, a pool
//! without room (or stopped) gets a plain pending row, an event that waited too long for a slot
//! is claimed afresh, hand-overs cost no claims, a burst past the pool's slots is held for it
//! while it keeps pace and not once it stops taking, a slow database holds hand-overs back as it
//! holds claims (PostgreSQL only: it locks one table), and shutdown gives back what never started.

use crate::common::destination::Answer;
use crate::common::*;
use crate::worker::{Setup, cfg};
use chrono::{DateTime, Utc};
use hookgate::inbox::{Arrivals, Completion, HandoffRoom, Inbox, handoff};
use hookgate::worker::WorkerConfig;
use sqlx::Row;
use sqlx::types::Json;
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(60);

/// Room for `n` events, whatever the pool's pace.
fn room(n: usize) -> HandoffRoom {
    HandoffRoom {
        slots: n,
        events: n,
        body_bytes: usize::MAX,
        max_wait: Duration::from_secs(1),
    }
}

/// (status, attempts, locked_until, headers) of one event's row.
pub(crate) async fn stored(
    s: &Setup,
    event_id: &str,
) -> (String, i64, Option<DateTime<Utc>>, serde_json::Value) {
    on!(s.inbox(), pool => {
        let r = sqlx::query(
            "SELECT status, attempts, locked_until, headers FROM inbox_events WHERE event_id = $1",
        )
        .bind(event_id)
        .fetch_one(pool)
        .await
        .unwrap();
        let headers: Json<serde_json::Value> = r.get(3);
        (r.get(0), r.get(1), r.get(2), headers.0)
    })
}

/// The pool of `s` with a poll of an hour, leasing for [`LEASE`], with the receiver of `s`
/// handing over to it: an event it delivers promptly was handed over, never claimed.
pub(crate) fn pool_with_handoff(s: &mut Setup, concurrency: usize) -> hookgate::worker::Worker {
    let w = s.worker_with(WorkerConfig {
        concurrency,
        lease: LEASE,
        poll: Duration::from_secs(3600),
        grace: Duration::from_millis(300),
        ..cfg()
    });
    let (w, end) = w.with_handoff();
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    w
}

async fn a_stored_event_is_handed_over_leased_as_its_claim_would_be(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    let (end, mut handed) = handoff(room(4), LEASE, Arrivals::default());
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    let before = Utc::now();
    s.event("w/orders", "h-1", r#"{"id":"h-1"}"#).await;
    let after = Utc::now();

    let got = handed.try_recv().expect("handed over once committed");
    assert!(handed.try_recv().is_none(), "one event, one hand-over");
    let (status, attempts, locked, headers) = stored(&s, "h-1").await;
    assert_eq!((status.as_str(), attempts), ("processing", 1));
    assert_eq!(
        locked,
        Some(got.lease_until),
        "the row holds the lease handed over"
    );
    let lease = chrono::TimeDelta::from_std(LEASE).unwrap();
    let (from, to) = (before + lease, after + lease);
    assert!(
        got.lease_until >= from - chrono::TimeDelta::microseconds(1) && got.lease_until <= to,
        "leased for the workers' lease from arrival: {} not in [{from}, {to}]",
        got.lease_until
    );
    assert_eq!(got.id, s.row_id("h-1").await);
    assert_eq!((got.attempt, got.event_id.as_str()), (1, "h-1"));
    assert_eq!(got.body, &br#"{"id":"h-1"}"#[..]);
    let handed_headers: serde_json::Value = serde_json::from_str(got.headers.json().get()).unwrap();
    assert_eq!(handed_headers, headers, "the headers as a claim reads them");
    assert!(
        !got.headers.pairs().is_empty(),
        "the request's headers are handed over: {headers}"
    );
    assert!(
        s.h.metrics
            .encode()
            .contains(r#"hookgate_events_handed_over_total{integration="w/orders"} 1"#),
        "counted"
    );

    let done = s
        .inbox()
        .complete(
            &got,
            &Completion::Processed { version: None },
            None,
            Utc::now(),
        )
        .await
        .unwrap();
    assert!(
        done,
        "the completion's fence (id, attempt, lease) matches the stored row"
    );
    assert_eq!(s.row("h-1").await.0, "processed");
}

async fn only_a_new_event_is_handed_over_and_an_unused_place_comes_back(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    // One place: had the duplicate kept it, the next event could not be handed over.
    let (end, mut handed) = handoff(room(1), LEASE, Arrivals::default());
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    s.event("w/orders", "d-1", "{}").await;
    assert_eq!(handed.try_recv().map(|e| e.event_id), Some("d-1".into()));

    assert_eq!(s.send("w/orders", "d-1", "{}").await, duplicate());
    assert!(
        handed.try_recv().is_none(),
        "a duplicate is not handed over"
    );
    assert_eq!(stored(&s, "d-1").await.1, 1, "the stored row is untouched");

    s.event("w/orders", "d-2", "{}").await;
    assert_eq!(handed.try_recv().map(|e| e.event_id), Some("d-2".into()));
}

async fn without_room_an_event_is_stored_pending_for_a_claim(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    let (end, mut handed) = handoff(room(1), LEASE, Arrivals::default());
    s.h.receiver = s.h.receiver.clone().with_handoff(end.clone());
    let taken = end
        .reserve("w/orders", Utc::now(), 0)
        .expect("the one place");
    s.event("w/orders", "p-1", "{}").await;
    let (status, attempts, locked, _) = stored(&s, "p-1").await;
    assert_eq!((status.as_str(), attempts, locked), ("pending", 0, None));
    assert!(handed.try_recv().is_none());

    drop(taken);
    s.event("w/orders", "p-2", "{}").await;
    assert_eq!(stored(&s, "p-2").await.0, "processing", "room again");
    assert!(handed.try_recv().is_some());
}

async fn a_pool_delivers_what_it_is_handed_without_a_claim(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    let w = pool_with_handoff(&mut s, 8);
    let running = crate::common::running::start([w]);
    // The pool's first claim finds nothing; after it, only a hand-over delivers within the hour.
    s.past_empty_claims(1).await;
    s.event("w/orders", "w-1", r#"{"id":"w-1"}"#).await;
    let got = s.dest.wait_for(1, Duration::from_secs(20)).await;
    assert_eq!(got.len(), 1, "delivered without a claim");
    assert_eq!(got[0].body, &br#"{"id":"w-1"}"#[..]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.row("w-1").await.0 != "processed" {
        assert!(
            tokio::time::Instant::now() < deadline,
            "outcome not recorded"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    running.stop().await;
    let (_, attempts, _, _) = s.row("w-1").await;
    assert_eq!(attempts, 1);
    let recorded = s.attempts("w-1").await;
    assert_eq!(recorded.len(), 1);
    assert_eq!((recorded[0].0, recorded[0].1), (1, Some(200)));
}

/// One slot: the first event hangs at the destination, the second waits handed over. Stopping
/// gives both back as pending (no attempt counted), and the stopped pool hands nothing more.
async fn shutdown_releases_handed_events_and_later_ones_are_stored_pending(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang]);
    let w = pool_with_handoff(&mut s, 1);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    s.event("w/orders", "first", "{}").await;
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    s.event("w/orders", "second", "{}").await;
    assert_eq!(
        stored(&s, "second").await.0,
        "processing",
        "handed over, waiting"
    );

    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("the pool stops within its grace and the database deadline");
    for id in ["first", "second"] {
        let (status, attempts, locked, _) = stored(&s, id).await;
        assert_eq!(
            (status.as_str(), attempts, locked),
            ("pending", 0, None),
            "{id}"
        );
        assert!(s.attempts(id).await.is_empty(), "{id}: no attempt recorded");
    }
    s.event("w/orders", "after", "{}").await;
    assert_eq!(
        stored(&s, "after").await.0,
        "pending",
        "a stopped pool takes nothing"
    );
    assert_eq!(s.dest.received().len(), 1, "nothing else was sent");
}

/// One slot and a 4 s lease (attempts time out after 3 s). The first event hangs for its whole
/// attempt while the second waits handed over, so when the slot comes back the second has about
/// 1 s of its lease left: too little for an attempt. It is put back and claimed afresh at once
/// (the poll is an hour): its delivery runs under a new lease, and is still attempt 1.
async fn a_handed_event_left_without_lease_for_an_attempt_is_claimed_afresh(inbox: Inbox) {
    let lease = Duration::from_secs(4);
    let mut s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang, Answer::Hang]);
    let w = s.worker_with(WorkerConfig {
        concurrency: 1,
        lease,
        poll: Duration::from_secs(3600),
        grace: Duration::from_millis(300),
        ..cfg()
    });
    let (w, end) = w.with_handoff();
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    s.event("w/orders", "first", "{}").await;
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    s.event("w/orders", "second", "{}").await;
    let (status, _, handed_lease, _) = stored(&s, "second").await;
    assert_eq!(status, "processing", "handed over, waiting for the slot");
    let handed_lease = handed_lease.unwrap();

    let got = s.dest.wait_for(2, Duration::from_secs(20)).await;
    let delivered_at = Utc::now();
    assert_eq!(
        got.len(),
        2,
        "the second event was delivered within the poll"
    );
    assert_eq!(
        got[1].header("hookgate-attempt"),
        "1",
        "putting back counts no attempt"
    );
    let (status, attempts, locked, _) = stored(&s, "second").await;
    assert_eq!((status.as_str(), attempts), ("processing", 1));
    let locked = locked.unwrap();
    assert!(
        locked > handed_lease && locked >= delivered_at + chrono::TimeDelta::seconds(2),
        "delivered under a fresh lease ({locked}), not the one it was handed with ({handed_lease})"
    );
    running.stop().await;
}

/// Eight slots, a destination answering in 100 ms, and senders that keep the hand-over full: each
/// freed slot could be refilled at once by a handed-over event, and events without a place are
/// stored pending. Those must still move while the stream lasts (claims keep a quarter of the
/// slots), not wait until it pauses.
async fn events_stored_pending_are_delivered_while_handed_over_ones_keep_coming(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    s.dest.always(Answer::After(Duration::from_millis(100)));
    let w = pool_with_handoff(&mut s, 8);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = std::sync::Arc::new(s);
    let mut senders = tokio::task::JoinSet::new();
    for k in 0..12 {
        let (s, stop) = (s.clone(), stop.clone());
        senders.spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                s.event("w/orders", &format!("s{k}-{n}"), "{}").await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
    }
    // The first event that found no place.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let first = loop {
        let pending: Option<String> = on!(s.inbox(), pool => {
            sqlx::query_scalar(
                "SELECT event_id FROM inbox_events WHERE status = 'pending' ORDER BY id LIMIT 1",
            )
            .fetch_optional(pool)
            .await
            .unwrap()
        });
        if let Some(id) = pending {
            break id;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing was stored pending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut status = stored(&s, &first).await.0;
    while status != "processed" && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = stored(&s, &first).await.0;
    }
    let handed_still_flowing = s.dest.received().len();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    while senders.join_next().await.is_some() {}
    running.stop().await;
    assert_eq!(
        status, "processed",
        "{first}, stored pending, was not delivered within 5 s while the hand-over stayed full \
         ({handed_still_flowing} deliveries by then)"
    );
}

/// Each handed-over event wakes the pool; with nothing stored for a claim since its last full
/// claim found nothing, it must not claim again before its poll (an hour here): until round 14
/// every hand-over cost an empty claim, hundreds a second at 3,400 events/s.
async fn handed_over_events_do_not_each_cost_an_empty_claim(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    let w = pool_with_handoff(&mut s, 8);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    let before = s.claims("none");
    for i in 0..20 {
        s.event("w/orders", &format!("c-{i}"), "{}").await;
        let got = s.dest.wait_for(i + 1, Duration::from_secs(20)).await;
        assert_eq!(got.len(), i + 1, "c-{i} was delivered");
    }
    let empty = s.claims("none") - before;
    let found = s.claims("some");
    running.stop().await;
    assert_eq!(found, 0, "nothing was stored for a claim");
    assert_eq!(empty, 0, "claims that found nothing during 20 hand-overs");
}

/// `hookgate_events_handed_over_total` of `w/orders` as the receiver of `s` counted it.
fn handed(s: &Setup) -> u64 {
    let series = "hookgate_events_handed_over_total{integration=\"w/orders\"}";
    hookgate::metrics::counter_sum(&s.h.metrics.encode(), series) as u64
}

/// `senders` concurrent senders each store `each` events of `w/orders` one after another
/// (`{prefix}{sender}-{n}`); returns once all are stored.
async fn send_at_once(s: &std::sync::Arc<Setup>, senders: usize, each: usize, prefix: &str) {
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..senders {
        let (s, prefix) = (s.clone(), prefix.to_string());
        tasks.spawn(async move {
            for n in 0..each {
                s.event("w/orders", &format!("{prefix}{k}-{n}"), "{}").await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a sender panicked");
    }
}

/// Two slots, a destination answering in 20 ms, and 40 events arriving at once: until round 15
/// the receiver held only as many as the slots and stored the rest for claims (each a second
/// rewrite of its row); now they wait in memory while the pool keeps taking them.
async fn a_burst_past_the_slots_is_handed_over_without_a_claim(inbox: Inbox) {
    let mut s = Setup::new(inbox).await;
    s.dest.always(Answer::After(Duration::from_millis(20)));
    let w = pool_with_handoff(&mut s, 2);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    let s = std::sync::Arc::new(s);
    send_at_once(&s, 8, 5, "b").await;
    let got = s.dest.wait_for(40, Duration::from_secs(20)).await;
    let (found, handed) = (s.claims("some"), handed(&s));
    running.stop().await;
    assert_eq!(got.len(), 40, "every event delivered");
    assert_eq!(handed, 40, "every event handed over");
    assert_eq!(found, 0, "no claim found an event");
}

/// Three slots. `w/bulk`'s destination answers in 200 ms, and one of its deliveries hangs for the
/// whole test, so the pool knows `w/bulk`'s destination answers and lets it take every free slot.
/// A burst of 30 of its events is handed over, then one of `w/orders`: the pool takes the events
/// held in turns by integration, so `w/orders`'s starts within a few of `w/bulk`'s. (Taken in
/// commit order, it waited for all 30: three seconds.) The few are counted from the moment
/// `w/orders`'s event is stored, not from the burst's first: a slow machine delivers more of the
/// burst while it is still being sent, which says nothing of the order. Counted from the first,
/// a run here read 9 against a bound of 10, and a starved full run 31.
async fn a_handed_burst_does_not_hold_back_another_integrations_next_event(inbox: Inbox) {
    let (mut s, bulk) = crate::worker::bulk_and_orders(inbox).await;
    bulk.always(Answer::After(Duration::from_millis(200)));
    let w = pool_with_handoff(&mut s, 3);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    crate::worker::bulk_answers_while_one_hangs(&s, &bulk).await;
    // b-0 and b-2 answered while b-1 hangs: `w/bulk` is not bound to its share.
    tokio::time::sleep(Duration::from_millis(400)).await;
    for i in 3..33 {
        s.event("w/bulk", &format!("b-{i}"), "{}").await;
    }
    s.event("w/orders", "o-0", "{}").await;
    let at_store = bulk.received().len();
    s.dest.wait_for(1, Duration::from_secs(20)).await;
    let after = bulk.received().len() - at_store;
    running.stop().await;
    // Of the 33, those w/bulk's destination had not yet received when o-0 was stored.
    let held = 33usize.saturating_sub(at_store);
    assert!(
        held >= 16,
        "only {held} of w/bulk's events were left when w/orders's was stored: the burst went out too slowly to show the order"
    );
    // In turns, o-0 goes within a few of w/bulk's (4 of 28 held on this machine); in commit
    // order, after every one held. 5 is what the old bound, 10 from the burst's first, left
    // after the 5 that arrive before o-0 is stored.
    assert!(
        after <= 5,
        "w/orders's event reached its destination after {after} more of w/bulk's ({held} were held)"
    );
}

/// A pool of one slot with the receiver's hand-over, whose destination never answers, running
/// and holding `first` in that slot.
async fn one_hung_slot(inbox: Inbox) -> (Setup, crate::common::running::Running) {
    let mut s = Setup::new(inbox).await;
    s.dest.always(Answer::Hang);
    let w = pool_with_handoff(&mut s, 1);
    let running = crate::common::running::start([w]);
    s.past_empty_claims(1).await;
    s.event("w/orders", "first", "{}").await;
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    (s, running)
}

/// One slot, held by a destination that never answers: the pool takes one more event to start
/// next and stops taking. The receiver holds another event per slot whatever the pace, and more
/// while the pool took one within the last second (`worker::defaults::HANDOFF_MAX_WAIT`); after
/// that second, new events are stored for a claim in due order instead of waiting in memory.
async fn a_pool_that_stops_taking_is_held_no_more_events_after_a_second(inbox: Inbox) {
    let (s, running) = one_hung_slot(inbox).await;
    for id in ["second", "third", "fourth"] {
        s.event("w/orders", id, "{}").await;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    s.event("w/orders", "fifth", "{}").await;
    let mut status = Vec::new();
    for id in ["second", "third", "fourth", "fifth"] {
        status.push(stored(&s, id).await.0);
    }
    tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("the pool stops within its grace and the database deadline");
    assert_eq!(
        status,
        ["processing", "processing", "processing", "pending"],
        "second to fourth held for the pool, fifth stored for a claim"
    );
}

/// One slot held by a destination that never answers, and 300 events handed over behind it (sent
/// at once, within the second the pool keeps being handed events): stopping gives every one back
/// as pending, uncounted, in a few statements rather than 300.
async fn shutdown_releases_hundreds_of_held_events(inbox: Inbox) {
    let (s, running) = one_hung_slot(inbox).await;
    let s = std::sync::Arc::new(s);
    send_at_once(&s, 10, 30, "h").await;
    let held = handed(&s);
    let stopped = tokio::time::timeout(Duration::from_secs(30), running.stop())
        .await
        .expect("the pool stops within its grace and the database deadline");
    let counts: Vec<(String, i64, i64)> = on!(s.inbox(), pool => {
        sqlx::query_as(
            "SELECT status, COUNT(*), CAST(SUM(attempts) AS BIGINT) FROM inbox_events GROUP BY status ORDER BY status",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    });
    // Most arrive within that second; a slow host may store some pending, which changes nothing
    // below, but a batch of fewer than a hundred would not be the case this test is for.
    assert!(held >= 100, "only {held} of 301 events were handed over");
    assert_eq!(
        counts,
        [("pending".to_string(), 301, 0)],
        "every event given back, no attempt counted"
    );
    // The hung delivery and every event handed over: all held at the stop, all given back.
    let [stopped] = &stopped[..] else {
        panic!("one pool")
    };
    assert_eq!(stopped.failed, None);
    assert_eq!(stopped.released, stopped.held);
    assert!(stopped.held >= held, "{stopped:?}, {held} handed over");
}

on_both_backends!(
    a_handed_burst_does_not_hold_back_another_integrations_next_event,
    shutdown_releases_hundreds_of_held_events,
    a_burst_past_the_slots_is_handed_over_without_a_claim,
    a_pool_that_stops_taking_is_held_no_more_events_after_a_second,
    handed_over_events_do_not_each_cost_an_empty_claim,
    events_stored_pending_are_delivered_while_handed_over_ones_keep_coming,
    a_handed_event_left_without_lease_for_an_attempt_is_claimed_afresh,
    a_stored_event_is_handed_over_leased_as_its_claim_would_be,
    only_a_new_event_is_handed_over_and_an_unused_place_comes_back,
    without_room_an_event_is_stored_pending_for_a_claim,
    a_pool_delivers_what_it_is_handed_without_a_claim,
    shutdown_releases_handed_events_and_later_ones_are_stored_pending,
);

/// The pool's bound on events held (delivering, or having their outcome written) holds for
/// handed-over events too, not only for claimed ones: while PostgreSQL holds every completion (a
/// lock on `delivery_attempts`), a pool with one slot that keeps being handed new events delivers
/// `HELD_PER_SLOT` of them and then waits, instead of delivering ever more whose outcomes pile up
/// in memory and whose leases run out while they wait. Once the database lets go, every event is
/// processed, each delivered once.
#[sqlx::test(migrations = "migrations/postgres")]
async fn handed_over_events_stop_at_the_pools_held_bound_while_outcomes_wait(pool: sqlx::PgPool) {
    use hookgate::worker::defaults::HELD_PER_SLOT;
    let mut s = Setup::new(Inbox::Postgres(pool.clone())).await;
    let w = pool_with_handoff(&mut s, 1);
    let running = crate::common::running::start([w]);
    let mut blocker = pool.begin().await.unwrap();
    sqlx::raw_sql("LOCK TABLE delivery_attempts IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let ids: Vec<String> = (1..=3 * HELD_PER_SLOT).map(|i| format!("b-{i}")).collect();
    for id in &ids {
        s.event("w/orders", id, "{}").await;
        // Time for the pool to take what it was handed, so that each event gets a place.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.dest
        .wait_for(HELD_PER_SLOT, Duration::from_secs(10))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered = s.dest.received().len();
    let (status, ..) = stored(&s, "b-1").await;

    blocker.rollback().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    for id in &ids {
        while stored(&s, id).await.0 != "processed" {
            assert!(tokio::time::Instant::now() < deadline, "{id} not processed");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    let received = s.dest.received();
    running.stop().await;
    assert_eq!(
        status, "processing",
        "the first outcome was still being written"
    );
    assert_eq!(
        delivered, HELD_PER_SLOT,
        "events delivered while no outcome could be written (one slot)"
    );
    let mut seen: Vec<String> = received.iter().map(|r| r.header("webhook-id")).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), ids.len(), "each event delivered once");
    assert_eq!(received.len(), ids.len(), "each event delivered once");
}
