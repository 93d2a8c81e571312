use super::*;

/// Room for `n` events of any size, whatever the pool's pace.
fn events(n: usize) -> Room {
    Room {
        slots: n,
        events: n,
        body_bytes: usize::MAX,
        max_wait: Duration::from_secs(1),
    }
}

#[test]
fn past_the_slots_events_are_held_only_while_the_pool_keeps_pace() {
    let room = Room {
        slots: 2,
        events: 5,
        body_bytes: usize::MAX,
        max_wait: Duration::from_secs(1),
    };
    let ms = Duration::from_millis;
    let cases = [
        // (held, the integration's, since the pool's last take, that event's wait, may hold one)
        (0, 0, ms(0), ms(0), true),
        (1, 1, ms(60_000), ms(60_000), true),
        (2, 2, ms(10), ms(20), true),
        (4, 4, ms(999), ms(999), true),
        (5, 0, ms(0), ms(0), false),
        (2, 2, ms(1_000), ms(0), false),
        (2, 2, ms(0), ms(1_000), false),
        (3, 3, ms(5_000), ms(10), false),
        // Another integration's events past the slots: this one's are within them.
        (4, 1, ms(5_000), ms(5_000), true),
        (4, 2, ms(5_000), ms(5_000), false),
        (5, 1, ms(5_000), ms(5_000), false),
    ];
    for (held, own, since, wait, want) in cases {
        assert_eq!(
            may_hold(&room, held, own, since, wait),
            want,
            "{held} held ({own} its own), taken {since:?} ago after waiting {wait:?}"
        );
    }
    let off = Room { events: 0, ..room };
    assert!(
        !may_hold(&off, 0, 0, ms(0), ms(0)),
        "no events: no hand-over"
    );
}

#[tokio::test]
async fn bodies_held_stay_within_the_byte_budget_until_the_pool_takes_them() {
    let room = Room {
        body_bytes: 100,
        ..events(10)
    };
    let (handoff, mut handed) = handoff(room, Duration::from_secs(60), Arrivals::default());
    let now = Utc::now();
    let a = handoff.reserve("t/a", now, 60).expect("60 of 100 bytes");
    assert!(
        handoff.reserve("t/a", now, 60).is_none(),
        "120 of 100 bytes"
    );
    let b = handoff.reserve("t/a", now, 40).expect("100 of 100 bytes");
    assert!(
        handoff.reserve("t/a", now, 0).is_some(),
        "an empty body holds no bytes"
    );
    drop(b);
    let until = a.lease_until();
    a.send(event(1, until));
    assert!(
        handoff.reserve("t/a", now, 60).is_none(),
        "sent, not yet taken"
    );
    assert_eq!(handed.try_recv().map(|e| e.id), Some(1));
    assert!(
        handoff.reserve("t/a", now, 100).is_some(),
        "taken: its bytes are free"
    );
    assert!(
        handoff.reserve("t/a", now, 101).is_none(),
        "larger than the budget"
    );
}

/// A hand-over with one slot and room for ten, for a pool that lags once what it took waited
/// 50 ms.
fn lagging_in_50_ms() -> (Handoff, Handed) {
    let room = Room {
        slots: 1,
        events: 10,
        body_bytes: usize::MAX,
        max_wait: Duration::from_millis(50),
    };
    handoff(room, Duration::from_secs(60), Arrivals::default())
}

#[tokio::test]
async fn a_pool_that_stops_taking_gets_no_more_than_its_slots() {
    let (handoff, mut handed) = lagging_in_50_ms();
    let now = Utc::now();
    let mut kept = vec![handoff.reserve("t/a", now, 0).expect("within the slots")];
    kept.push(
        handoff
            .reserve("t/a", now, 0)
            .expect("past the slots, the pool just started"),
    );
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(
        handoff.reserve("t/a", now, 0).is_none(),
        "nothing taken for 80 ms"
    );
    let first = kept.remove(0);
    let until = first.lease_until();
    first.send(event(1, until));
    assert!(handed.try_recv().is_some());
    assert!(
        handoff.reserve("t/a", Utc::now(), 0).is_none(),
        "the event it took had waited 80 ms"
    );
    drop(kept);
    let fresh = handoff
        .reserve("t/a", Utc::now(), 0)
        .expect("within the slots");
    let until = fresh.lease_until();
    fresh.send(event(2, until));
    assert!(handed.try_recv().is_some());
    let _within = handoff
        .reserve("t/a", Utc::now(), 0)
        .expect("within the slots");
    assert!(
        handoff.reserve("t/a", Utc::now(), 0).is_some(),
        "past the slots again: it took one at once, which had not waited"
    );
}

/// A pool that stopped taking: `t/a`, which holds its slot's worth, gets no more; `t/b` still
/// gets its slot's worth, reserved or held, and the pool takes it before `t/a`'s second.
#[tokio::test]
async fn past_its_slots_an_integration_gets_no_more_and_another_still_does() {
    let (handoff, mut handed) = lagging_in_50_ms();
    let now = Utc::now();
    let (a1, a2) = (
        handoff.reserve("t/a", now, 0).expect("within the slots"),
        handoff
            .reserve("t/a", now, 0)
            .expect("the pool just started"),
    );
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert!(
        handoff.reserve("t/a", now, 0).is_none(),
        "t/a: past its slots"
    );
    let b = handoff
        .reserve("t/b", now, 0)
        .expect("t/b: within its slots");
    assert!(
        handoff.reserve("t/b", now, 0).is_none(),
        "t/b: its reservation holds its slot"
    );
    for (id, place) in [(1, a1), (2, a2)] {
        let until = place.lease_until();
        place.send(event_of("t/a", id, until));
    }
    let until = b.lease_until();
    b.send(event_of("t/b", 3, until));
    assert!(
        handoff.reserve("t/b", now, 0).is_none(),
        "t/b: its event held holds its slot"
    );
    let order: Vec<i64> = std::iter::from_fn(|| handed.try_recv().map(|e| e.id)).collect();
    assert_eq!(order, [1, 3, 2], "in turns");
    assert!(
        handoff.reserve("t/b", Utc::now(), 0).is_some(),
        "t/b: taken, its slot is free again"
    );
}

fn event(id: i64, lease_until: DateTime<Utc>) -> Claimed {
    event_of("t/a", id, lease_until)
}

fn event_of(integration: &str, id: i64, lease_until: DateTime<Utc>) -> Claimed {
    Claimed {
        id,
        integration: integration.into(),
        event_id: format!("evt_{id}"),
        event_type: None,
        headers: crate::inbox::StoredHeaders::none(),
        content_type: None,
        body: bytes::Bytes::new(),
        attempt: 1,
        lease_until,
        received_at: lease_until,
        signed_at: None,
        due_at: None,
    }
}

#[test]
fn the_lease_is_whole_microseconds_after_now() {
    let now = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
    let until = lease_until(now, Duration::from_secs(60));
    assert_eq!(until.timestamp(), 1_700_000_060);
    assert_eq!(until.timestamp_subsec_nanos(), 123_456_000);
}

#[tokio::test]
async fn places_run_out_and_come_back_when_an_unused_reservation_is_dropped() {
    let (handoff, mut handed) = handoff(events(2), Duration::from_secs(60), Arrivals::default());
    let now = Utc::now();
    let a = handoff.reserve("t/a", now, 0).expect("room for one");
    let b = handoff.reserve("t/a", now, 0).expect("room for two");
    assert!(handoff.reserve("t/a", now, 0).is_none(), "no third place");
    drop(b);
    let c = handoff
        .reserve("t/a", now, 0)
        .expect("the dropped place is free again");
    let until = a.lease_until();
    a.send(event(1, until));
    assert_eq!(handed.try_recv().map(|e| e.id), Some(1));
    drop(c);
    assert!(handed.try_recv().is_none(), "nothing was sent for c");
}

#[tokio::test]
async fn after_close_no_place_is_given_but_reserved_events_still_arrive() {
    let (handoff, mut handed) = handoff(events(4), Duration::from_secs(60), Arrivals::default());
    let now = Utc::now();
    let held = handoff.reserve("t/a", now, 0).expect("room");
    handed.close();
    assert!(
        handoff.reserve("t/a", now, 0).is_none(),
        "closed: stored pending instead"
    );
    let until = held.lease_until();
    held.send(event(7, until));
    assert_eq!(handed.recv().await.map(|e| e.id), Some(7));
    assert!(handed.recv().await.is_none(), "every reservation spent");
}

/// The events held are taken in turns by integration, each integration's in commit order: one
/// integration's burst held for the pool no longer starts ahead of another's next event. (Held in
/// one queue in commit order, `t/b`'s first event waited for all five of `t/a`'s.)
#[tokio::test]
async fn events_held_are_taken_in_turns_by_integration() {
    let (handoff, mut handed) = handoff(events(16), Duration::from_secs(60), Arrivals::default());
    let send = |integration: &str, id| {
        let place = handoff.reserve("t/a", Utc::now(), 0).expect("room");
        let until = place.lease_until();
        place.send(Claimed {
            integration: integration.into(),
            ..event(id, until)
        });
    };
    for id in 1..=5 {
        send("t/a", id);
    }
    send("t/b", 6);
    send("t/c", 7);
    send("t/b", 8);
    let mut taken = vec![handed.try_recv().unwrap().id];
    // An integration whose first event arrives now takes its turn after those already waiting.
    send("t/d", 9);
    while let Some(e) = handed.try_recv() {
        taken.push(e.id);
    }
    assert_eq!(taken, [1, 6, 7, 2, 9, 8, 3, 4, 5]);
}
