//! A worker's life around its deliveries: shutdown within the grace period, nothing claimed
//! before its targets are loaded, an attempt that ends inside its lease, events of integrations
//! that disappeared, and delivery slots freed before the outcome is written, as `/metrics` counts
//! them.

use super::*;

/// `w` running on a task of its own until `true` is sent on the returned channel.
fn running(
    w: Worker,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<worker::Stopped>,
) {
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(async move {
        w.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await
    });
    (stop, run)
}

/// Shutdown: claiming stops, in-flight deliveries get the grace period, then their claims are
/// released without counting as an attempt.
async fn shutdown_releases_claims_still_in_flight_after_the_grace_period(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang]);
    s.event("w/orders", "stuck", "{}").await;
    let w = s.worker_with(WorkerConfig {
        grace: Duration::from_millis(300),
        ..cfg()
    });
    let (stop, run) = running(w);
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    assert_eq!(s.row("stuck").await.0, "processing");
    let asked = std::time::Instant::now();
    stop.send(true).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("worker stops")
        .unwrap();
    assert_eq!(
        stopped,
        worker::Stopped {
            held: 1,
            released: 1,
            failed: None
        },
        "the claim cut off by the grace period is the one given back"
    );
    assert!(
        asked.elapsed() >= Duration::from_millis(300),
        "in-flight work got its grace period"
    );
    let (status, attempts, _, _) = s.row("stuck").await;
    assert_eq!(
        (status.as_str(), attempts),
        ("pending", 0),
        "released, not counted as an attempt"
    );
    assert!(s.attempts("stuck").await.is_empty());
}

/// A claim loop that never has to wait still stops when asked. It looked at the stop only while
/// waiting, so with a zero `poll` (claims that find nothing, again at once) it never stopped.
async fn a_worker_that_never_waits_between_claims_still_stops(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker_with(WorkerConfig {
        poll: Duration::ZERO,
        ..cfg()
    });
    let (stop, run) = running(w);
    // Stopped while it spins: claim after claim finding nothing.
    s.past_empty_claims(3).await;
    stop.send(true).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the worker stops")
        .unwrap();
    assert_eq!(
        stopped,
        worker::Stopped {
            held: 0,
            released: 0,
            failed: None
        }
    );
}

/// A cluster worker learns its targets from a watch. Until the first complete list arrives it
/// claims nothing: an event claimed earlier would be deferred for a minute as unconfigured.
async fn a_worker_claims_nothing_until_its_targets_are_loaded(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.event("w/orders", "early", "{}").await;
    let w = Worker::new(
        s.inbox().clone(),
        Default::default(),
        cfg(),
        Arc::new(Metrics::new()),
    )
    .awaiting_targets();
    let (stop, run) = running(w.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, attempts, error, _) = s.row("early").await;
    assert_eq!(
        (status.as_str(), attempts, error),
        ("pending", 0, None),
        "not claimed while targets are unknown"
    );
    w.swap_targets(worker::targets(&s.h.receiver.routes()));
    assert_eq!(s.dest.wait_for(1, Duration::from_secs(10)).await.len(), 1);
    stop.send(true).unwrap();
    run.await.unwrap();
    assert_eq!(s.row("early").await.0, "processed");
}

/// An attempt never outlives its claim: with a 10 s delivery timeout and a 2 s lease, a hanging
/// destination used to be sent the same event again by a second worker once the lease ran out
/// (and again every lease after). The attempt now ends inside the lease and is retried on the
/// schedule, so the destination sees it once.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_hanging_delivery_is_not_sent_again_when_its_lease_runs_out(pool: PgPool) {
    let s = Setup::new(Inbox::Postgres(pool)).await;
    s.dest.always(Answer::Hang);
    s.event("w/orders", "slow", "{}").await;
    let started = std::time::Instant::now();
    s.run_until(
        vec![s.worker(), s.worker()],
        Duration::from_secs(20),
        || async { started.elapsed() >= Duration::from_millis(5500) },
    )
    .await;
    assert_eq!(
        s.dest.received().len(),
        1,
        "sent once in 5.5 s with a 2 s lease"
    );
    let (status, attempts, error, _) = s.row("slow").await;
    assert_eq!(
        (status.as_str(), attempts, error.as_deref()),
        ("retry", 1, Some("timeout"))
    );
}

/// An event whose integration is no longer configured (deleted, or its target cannot be built)
/// is not requeued forever: past the orphan grace it is dead-lettered as `integration_missing`,
/// where `dlq replay` can bring it back once the integration returns.
async fn an_event_of_a_deleted_integration_is_dead_lettered_after_the_grace(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.h.set_now(Utc::now()); // received now, not at the harness's pinned t0
    s.event("w/orders", "orphan", "{}").await;
    let without_orders = |grace| {
        let mut targets = worker::targets(&s.h.receiver.routes());
        targets.remove("w/orders");
        Worker::new(
            s.inbox().clone(),
            targets,
            WorkerConfig {
                orphan_grace: grace,
                ..cfg()
            },
            Arc::new(Metrics::new()),
        )
    };
    // Within the grace: deferred, not failed (the integration may be on its way back).
    let before = Utc::now();
    assert_eq!(
        without_orders(Duration::from_secs(3600))
            .run_once()
            .await
            .unwrap(),
        1
    );
    let after = Utc::now();
    let (status, attempts, error, next) = s.row("orphan").await;
    assert_eq!((status.as_str(), attempts, error), ("pending", 0, None));
    assert_between(
        next.unwrap(),
        before + secs(60),
        after + secs(60),
        "looked at again in a minute",
    );

    // Claimed when the minute is up rather than waited for.
    let due = after + secs(61);
    let claimed = s.inbox().claim(due, due + secs(60), 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    without_orders(Duration::ZERO).deliver(&claimed[0]).await;
    let (status, _, error, _) = s.row("orphan").await;
    assert_eq!(
        (status.as_str(), error.as_deref()),
        ("dead_letter", Some("integration_missing"))
    );
    assert!(s.dest.received().is_empty());
}

/// `hookgate_delivery_slots_in_use` against `hookgate_delivery_max_slots`: a slot counts while its
/// destination has not answered, and none once the pool has stopped.
async fn the_slots_in_use_are_the_deliveries_waiting_for_their_destination(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Hang, Answer::Hang, Answer::Hang]);
    for i in 1..=3 {
        s.event("w/orders", &format!("held-{i}"), "{}").await;
    }
    let w = s.worker_with(WorkerConfig {
        lease: Duration::from_secs(60),
        grace: Duration::from_millis(200),
        ..cfg()
    });
    let (stop, run) = running(w);
    assert_eq!(s.dest.wait_for(3, Duration::from_secs(10)).await.len(), 3);
    assert_eq!(
        s.slots(),
        (3, 8),
        "(in use, max) while three destinations hang"
    );
    stop.send(true).unwrap();
    run.await.unwrap();
    assert_eq!(s.slots(), (0, 8), "given back when the pool stopped");
}

on_both_backends!(
    the_slots_in_use_are_the_deliveries_waiting_for_their_destination,
    shutdown_releases_claims_still_in_flight_after_the_grace_period,
    a_worker_that_never_waits_between_claims_still_stops,
    a_worker_claims_nothing_until_its_targets_are_loaded,
    an_event_of_a_deleted_integration_is_dead_lettered_after_the_grace,
);

/// A delivery slot comes back when the destination has answered, not when the outcome has been
/// written: while PostgreSQL holds every completion (a lock on `delivery_attempts`), a worker with
/// one slot still delivers more events, and stops at `HELD_PER_SLOT` events held. Once the
/// database lets go, all of them and the next one are processed.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_slot_is_free_once_the_destination_answered_while_the_outcome_is_written(pool: PgPool) {
    use hookgate::worker::defaults::HELD_PER_SLOT;
    let s = Setup::new(Inbox::Postgres(pool.clone())).await;
    let ids: Vec<String> = (1..=HELD_PER_SLOT + 1).map(|i| format!("s-{i}")).collect();
    for id in &ids {
        s.event("w/orders", id, "{}").await;
    }
    let mut blocker = pool.begin().await.unwrap();
    sqlx::raw_sql("LOCK TABLE delivery_attempts IN EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let w = s.worker_with(WorkerConfig {
        concurrency: 1,
        ..cfg()
    });
    let running = crate::common::running::start([w]);
    let held = s
        .dest
        .wait_for(HELD_PER_SLOT, Duration::from_secs(10))
        .await;
    assert_eq!(held.len(), HELD_PER_SLOT);
    // That many held: the next waits for a completion, however long the database takes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        s.dest.received().len(),
        HELD_PER_SLOT,
        "more than HELD_PER_SLOT events held for one slot"
    );
    let (status, _, _, _) = s.row("s-1").await;
    assert_eq!(
        status, "processing",
        "the first outcome is still being written"
    );
    assert_eq!(
        s.slots(),
        (0, 1),
        "the slot is free while the outcomes wait for the database"
    );

    blocker.rollback().await.unwrap();
    s.dest
        .wait_for(HELD_PER_SLOT + 1, Duration::from_secs(10))
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    for id in &ids {
        while s.row(id).await.0 != "processed" {
            assert!(tokio::time::Instant::now() < deadline, "{id} not processed");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    running.stop().await;
}
