//! Workers in another process than the receiver (the chart's split, or `hookgate worker` beside
//! `hookgate standalone --no-workers`) wake when the receiver stores an event for a claim, also
//! when the receiver hands events to workers of its own and had no room for this one, through
//! PostgreSQL's LISTEN/NOTIFY, instead of at their next poll; and keep doing so after their
//! listening connection is killed. Each pool here polls once an hour, so an event delivered within
//! seconds was found through a notification. PostgreSQL only: SQLite has no such channel, and its
//! workers share the receiver's process.

use crate::worker::{Setup, cfg};
use hookgate::inbox::{Arrivals, HandoffRoom, Inbox, handoff};
use hookgate::worker::WorkerConfig;
use std::time::Duration;

/// A worker of its own (no hand-over from the receiver of `s`), polling once an hour.
fn separate_worker(s: &Setup) -> hookgate::worker::Worker {
    s.worker_with(WorkerConfig {
        poll: Duration::from_secs(3600),
        ..cfg()
    })
}

/// Until the pool's listener is connected (its session shows the `LISTEN`).
async fn wait_listening(pool: &sqlx::PgPool, not_pid: Option<i32>) -> i32 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND pid IS DISTINCT FROM $1",
        )
        .bind(not_pid)
        .fetch_optional(pool)
        .await
        .unwrap();
        if let Some(pid) = pid {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the pool never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_worker_of_another_process_wakes_for_a_new_event_and_after_losing_its_listener(
    pool: sqlx::PgPool,
) {
    let s = Setup::new(Inbox::Postgres(pool.clone())).await;
    let running = crate::common::running::start([separate_worker(&s)]);
    let listener = wait_listening(&pool, None).await;
    // Past the pool's first (empty) claim: it now waits for its hour-long poll.
    s.past_empty_claims(1).await;

    s.event("w/orders", "n-1", "{}").await;
    let got = s.dest.wait_for(1, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "not woken by the receiver's notification");

    // The listening session is killed (a restarted database, a connection reaper): the pool
    // listens again by itself and the next event still wakes it.
    let empty = s.claims("none");
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(listener)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(killed);
    wait_listening(&pool, Some(listener)).await;
    // Past the claim the new listener's wake-up asks for (for what it may have missed).
    s.past_empty_claims(empty + 1).await;
    s.event("w/orders", "n-2", "{}").await;
    let got = s.dest.wait_for(2, Duration::from_secs(5)).await;
    running.stop().await;
    assert_eq!(got.len(), 2, "not woken after the listener reconnected");
}

/// A pool on an empty inbox claims once at start, not twice: its first claim waits for the
/// wake-up its listener gives itself once it listens (for what was committed before), where it
/// claimed at once and then again, empty, at that wake-up.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_listening_pool_starts_with_one_claim_not_two(pool: sqlx::PgPool) {
    let s = Setup::new(Inbox::Postgres(pool.clone())).await;
    let running = crate::common::running::start([separate_worker(&s)]);
    wait_listening(&pool, None).await;
    s.past_empty_claims(1).await;
    // Nothing else can wake it within the hour: a second claim would come from the listener.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let claims = (s.claims("none"), s.claims("some"));
    running.stop().await;
    assert_eq!(claims, (1, 0), "(empty, finding) claims at start");
}

/// `hookgate receiver --with-workers` (or `standalone`) beside `hookgate worker` pods: what the
/// receiver has no room to hand over is stored for a claim, and the other pods hear of it.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_receiver_that_hands_over_still_wakes_other_processes_for_what_it_could_not(
    pool: sqlx::PgPool,
) {
    let mut s = Setup::new(Inbox::Postgres(pool.clone())).await;
    // The receiver's own pool never takes a place: every event goes to a claim.
    let no_room = HandoffRoom {
        slots: 0,
        events: 0,
        body_bytes: 0,
        max_wait: Duration::from_secs(1),
    };
    let (end, mut handed) = handoff(no_room, Duration::from_secs(60), Arrivals::default());
    s.h.receiver = s.h.receiver.clone().with_handoff(end);
    let running = crate::common::running::start([separate_worker(&s)]);
    wait_listening(&pool, None).await;
    s.past_empty_claims(1).await;

    s.event("w/orders", "r-1", "{}").await;
    let got = s.dest.wait_for(1, Duration::from_secs(5)).await;
    running.stop().await;
    assert!(handed.try_recv().is_none(), "nothing was handed over");
    assert_eq!(
        got.len(),
        1,
        "the other process's worker was not woken by the receiver's notification"
    );
}

/// Until `arrivals` has been signalled for each of `names`: the names it got, in order.
async fn named(arrivals: &Arrivals, names: usize) -> Vec<String> {
    let mut got = std::collections::BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < names {
        tokio::time::timeout_at(deadline, arrivals.wait())
            .await
            .unwrap_or_else(|_| panic!("only {got:?} were named"));
        assert!(arrivals.take(), "woken by a commit");
        got.extend(arrivals.take_integrations());
    }
    got.into_iter().collect()
}

/// A receiver's notification names the integrations whose events it stored for a claim, so that
/// a busy worker of another process looks at them in its next claim (`worker::cursor`); an
/// empty one (a receiver of an older version) still wakes the worker, naming none.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_notification_names_the_integrations_stored_for(pool: sqlx::PgPool) {
    let arrivals = Arrivals::default();
    let listening = tokio::spawn(hookgate::inbox::listen(pool.clone(), arrivals.clone()));
    wait_listening(&pool, None).await;
    // The wake-up the listener gives itself once connected, for what it may have missed.
    tokio::time::timeout(Duration::from_secs(10), arrivals.wait())
        .await
        .unwrap();
    assert!(arrivals.take());
    assert!(arrivals.take_integrations().is_empty());

    let notifier = hookgate::inbox::Notifier::start(pool.clone());
    notifier.stored_for_claim("w/orders");
    notifier.stored_for_claim("w/refunds");
    notifier.stored_for_claim("w/orders");
    assert_eq!(named(&arrivals, 2).await, ["w/orders", "w/refunds"]);
    // Whatever else those stores signalled (one notification or two) is spent first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = tokio::time::timeout(Duration::from_millis(10), arrivals.wait()).await;
    arrivals.take();
    arrivals.take_integrations();

    sqlx::query("SELECT pg_notify($1, '')")
        .bind(hookgate::inbox::NOTIFY_CHANNEL)
        .execute(&pool)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), arrivals.wait())
        .await
        .expect("an empty notification wakes the pool");
    assert!(arrivals.take());
    assert!(arrivals.take_integrations().is_empty());
    listening.abort();
}

/// How a listener loses its connection.
#[derive(Clone, Copy, Debug)]
enum Loss {
    /// The sockets close without a word from the server (a dead network path): sqlx sees an I/O
    /// error, and its eager reconnect listens again inside `try_recv`.
    Cut,
    /// The server ends the session (a restart, `pg_terminate_backend`).
    Terminated,
    /// Cut off for longer than the pool waits for a connection: sqlx's reconnect gives up with
    /// an error, and `listen` tries again after its back-off.
    Unreachable,
}

/// After a lost connection, the listener wakes its pool only once it listens again: a wake-up
/// before the new `LISTEN` would let the pool claim, find nothing, and then miss an event
/// committed before the `LISTEN` until its next poll (an hour here). The gate holds every
/// connection the listener's pool opens or hands out, so the gap is as long as the test wants.
async fn wakes_only_once_listening_again(direct: sqlx::PgPool, loss: Loss) {
    let link = crate::common::pg_link::Link::to(&direct, 2, Duration::from_secs(1)).await;
    let arrivals = Arrivals::default();
    let listening = tokio::spawn(hookgate::inbox::listen(link.pool.clone(), arrivals.clone()));
    let first = wait_listening(&direct, None).await;
    tokio::time::timeout(Duration::from_secs(10), arrivals.wait())
        .await
        .expect("the wake-up once listening");
    assert!(arrivals.take());

    link.gate.close();
    match loss {
        Loss::Cut | Loss::Unreachable => link.cut(),
        Loss::Terminated => {
            let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                .bind(first)
                .fetch_one(&direct)
                .await
                .unwrap();
            assert!(killed);
        }
    }
    // The listener asks for a connection again, and waits at the gate; unreachable, it gives up
    // after the pool's acquire timeout and asks again after its back-off.
    link.gate
        .until_held(if let Loss::Unreachable = loss { 2 } else { 1 })
        .await;
    assert!(
        !arrivals.take(),
        "{loss:?}: the pool was woken before its listener listened again"
    );

    link.gate.open();
    let second = wait_listening(&direct, Some(first)).await;
    tokio::time::timeout(Duration::from_secs(10), arrivals.wait())
        .await
        .unwrap_or_else(|_| panic!("{loss:?}: no wake-up once listening again"));
    assert!(arrivals.take());
    // The new session is the one that hears notifications.
    assert_ne!(second, first);
    sqlx::query("SELECT pg_notify($1, 'w/orders')")
        .bind(hookgate::inbox::NOTIFY_CHANNEL)
        .execute(&direct)
        .await
        .unwrap();
    assert_eq!(named(&arrivals, 1).await, ["w/orders"], "{loss:?}");
    listening.abort();
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_listener_cut_off_wakes_its_pool_only_once_it_listens_again(pool: sqlx::PgPool) {
    wakes_only_once_listening_again(pool, Loss::Cut).await;
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_listener_whose_session_was_ended_wakes_its_pool_only_once_it_listens_again(
    pool: sqlx::PgPool,
) {
    wakes_only_once_listening_again(pool, Loss::Terminated).await;
}

#[sqlx::test(migrations = "migrations/postgres")]
async fn a_listener_that_cannot_reconnect_for_a_while_wakes_its_pool_only_once_it_listens_again(
    pool: sqlx::PgPool,
) {
    wakes_only_once_listening_again(pool, Loss::Unreachable).await;
}
