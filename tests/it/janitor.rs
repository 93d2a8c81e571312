//! The retention janitor's pass, on PostgreSQL and SQLite, on its own clock (rows are aged instead
//! of tests sleeping): bodies, then events, of finished events; what it keeps (dead letters, events
//! still to deliver); and besides events, ordering versions that have not moved for the dedupe
//! window and the records of integrations gone with their last event (until round 17,
//! docs/performance.md, those tables only grew).

use crate::common::destination::Answer;
use crate::worker::{Setup, cfg, secs};
use chrono::{DateTime, Utc};
use hookgate::crd::defaults::RETENTION_DEDUPE;
use hookgate::inbox::Inbox;
use hookgate::metrics::Metrics;
use hookgate::worker::Worker;
use hookgate::worker::janitor::{Pass, Swept};
use serde_json::json;
use std::sync::Arc;

/// What a pass removed; it must have failed nowhere.
fn clean(pass: Pass) -> Swept {
    assert!(pass.failed.is_empty(), "{:?}", pass.failed);
    pass.swept
}

/// `(integration, resource, version)` of every stored version, sorted.
async fn versions(s: &Setup) -> Vec<(String, String, Option<String>)> {
    on!(s.inbox(), pool => {
        sqlx::query_as(
            "SELECT integration, resource_id, version FROM resource_versions \
             ORDER BY integration, resource_id",
        )
        .fetch_all(pool)
        .await
        .unwrap()
    })
}

/// Runs `sql` with `args` bound in order, then `at`.
async fn exec(s: &Setup, sql: &str, args: &[&str], at: DateTime<Utc>) {
    on!(s.inbox(), pool => {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()));
        for a in args {
            q = q.bind(*a);
        }
        q.bind(at).execute(pool).await.unwrap();
    })
}

async fn names(s: &Setup, sql: &str) -> Vec<String> {
    on!(s.inbox(), pool => {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string())).fetch_all(pool).await.unwrap()
    })
}

fn versioned(resource: &str, version: u32) -> String {
    json!({"data": {"id": resource, "version": version}}).to_string()
}

/// A version that has not moved for `retention.dedupe` (the default, 30 d) is forgotten unless a
/// worker holds the resource; a recent one stays.
async fn versions_unchanged_for_the_dedupe_window_are_forgotten_unless_leased(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    for res in ["res-old", "res-new", "res-held"] {
        s.dest.script([Answer::Status(200)]);
        s.event("w/ordered", &format!("{res}-5"), &versioned(res, 5))
            .await;
        assert_eq!(w.run_once().await.unwrap(), 1);
    }
    let now = Utc::now();
    let window = chrono::Duration::from_std(RETENTION_DEDUPE).unwrap();
    let past_window = now - window - chrono::Duration::days(1);
    for res in ["res-old", "res-held"] {
        let age = "UPDATE resource_versions SET updated_at = $2 WHERE resource_id = $1";
        exec(&s, age, &[res], past_window).await;
    }
    // Another worker holds `res-held` now: its version stays however old it is.
    let hold = "UPDATE resource_versions SET locked_until = $2, lock_token = 'other' \
                WHERE resource_id = $1";
    exec(&s, hold, &["res-held"], now + chrono::Duration::hours(1)).await;

    clean(hookgate::worker::janitor::sweep(s.inbox(), &w).await);
    let five = Some("i:5".to_string()); // the stored encoding of the integer 5
    assert_eq!(
        versions(&s).await,
        [
            ("w/ordered".into(), "res-held".into(), five.clone()),
            ("w/ordered".into(), "res-new".into(), five),
        ]
    );

    // The forgotten resource's next event is gated as its first: version 3 is delivered.
    s.dest.script([Answer::Status(200)]);
    s.event("w/ordered", "res-old-3", &versioned("res-old", 3))
        .await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    let last = s.dest.received().pop().expect("delivered");
    assert_eq!(String::from_utf8_lossy(&last.body), versioned("res-old", 3));
    assert_eq!(s.row("res-old-3").await.0, "processed");
}

/// Key use, catch-up and ordering rows go with a deleted integration's last event, never those of
/// a configured integration.
async fn records_of_integrations_gone_with_their_last_event_are_forgotten(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    let now = Utc::now();
    // `w/orders` is configured; `w/gone` was deleted and has no event left; `w/leaving` was
    // deleted but one of its events (a dead letter, say) is still kept.
    for integration in ["w/orders", "w/gone", "w/leaving"] {
        let used =
            "INSERT INTO key_usage (integration, key_id, last_used_at) VALUES ($1, 'k1', $2)";
        exec(&s, used, &[integration], now).await;
        let version = "INSERT INTO resource_versions (integration, resource_id, version, \
                       updated_at) VALUES ($1, 'r1', 'i:7', $2)";
        exec(&s, version, &[integration], now).await;
    }
    for integration in ["w/orders", "w/gone"] {
        let run = "INSERT INTO catch_up_runs (integration, last_run_at) VALUES ($1, $2)";
        exec(&s, run, &[integration], now).await;
    }
    let kept = "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
                body_sha256, status, received_at, dead_lettered_at) VALUES ($1, 'e1', 'hmac', \
                'k1', '[]', '', '', 'dead_letter', $2, $2)";
    exec(&s, kept, &["w/leaving"], now).await;

    clean(hookgate::worker::janitor::sweep(s.inbox(), &w).await);
    let order = " ORDER BY integration";
    let used = names(&s, &format!("SELECT integration FROM key_usage{order}")).await;
    assert_eq!(used, ["w/leaving", "w/orders"]);
    let runs = names(&s, &format!("SELECT integration FROM catch_up_runs{order}")).await;
    assert_eq!(runs, ["w/orders"]);
    let versions = names(
        &s,
        &format!("SELECT integration FROM resource_versions{order}"),
    )
    .await;
    assert_eq!(versions, ["w/leaving", "w/orders"]);
}

/// Retention on the janitor's own clock: the rows are aged instead of the test sleeping past
/// a sub-second retention, which a loaded machine could overshoot before the first sweep.
async fn janitor_drops_bodies_then_dedupe_keys_but_keeps_dead_letters(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    s.dest.script([Answer::Status(200), Answer::Status(404)]);
    s.event("w/short", "keep-going", r#"{"big":"body"}"#).await;
    let w = s.worker();
    assert_eq!(w.run_once().await.unwrap(), 1);
    s.event("w/short", "dead", "{}").await;
    assert_eq!(w.run_once().await.unwrap(), 1);
    assert_eq!(s.row("keep-going").await.0, "processed");
    assert_eq!(s.row("dead").await.0, "dead_letter");
    let sweep = async || clean(hookgate::worker::janitor::sweep(s.inbox(), &w).await);

    // Just finished: within both retentions (1 h payload, 2 h dedupe), nothing to do.
    assert_eq!(sweep().await, Swept::default());
    assert_eq!(s.body("keep-going").await, br#"{"big":"body"}"#);

    let now = Utc::now();
    s.finished_at("keep-going", now - secs(90 * 60)).await;
    s.finished_at("dead", now - secs(3 * 3600)).await;
    assert_eq!(
        sweep().await,
        Swept {
            purged: 1,
            ..Swept::default()
        }
    );
    assert!(s.body("keep-going").await.is_empty());
    assert_eq!(s.body("dead").await, b"{}", "a dead letter keeps its body");

    s.finished_at("keep-going", now - secs(3 * 3600)).await;
    assert_eq!(
        sweep().await,
        Swept {
            deleted: 1,
            ..Swept::default()
        }
    );
    assert_eq!(
        s.event_ids().await,
        ["dead"],
        "dead letters stay until replayed or purged"
    );
}

/// Rows of an integration that no longer exists are not kept forever: the janitor applies the
/// default retention to them (30 d for finished events), and still never touches dead letters.
async fn janitor_cleans_rows_of_integrations_that_no_longer_exist(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let w = s.worker();
    for (id, answer) in [("old", 200), ("recent", 200), ("dead", 404)] {
        s.dest.script([Answer::Status(answer)]);
        s.event("w/orders", id, "{}").await;
        assert_eq!(w.run_once().await.unwrap(), 1);
    }
    assert_eq!(s.row("dead").await.0, "dead_letter");
    let long_ago = Utc::now() - secs(31 * 86400);
    s.finished_at("old", long_ago).await;
    s.finished_at("dead", long_ago).await;
    let mut targets = hookgate::worker::targets(&s.h.receiver.routes());
    targets.remove("w/orders");
    let w = Worker::new(s.inbox().clone(), targets, cfg(), Arc::new(Metrics::new()));
    let swept = clean(hookgate::worker::janitor::sweep(s.inbox(), &w).await);
    assert_eq!(swept.deleted, 1);
    assert_eq!(s.event_ids().await, ["dead", "recent"]);
}

/// Two worker processes on one database, each asking every 10 minutes: one of them makes each
/// period's pass, whichever asks first once three quarters of the period have gone by, and a
/// process alone makes one every period.
async fn one_worker_process_makes_each_periods_pass(inbox: Inbox) {
    let s = Setup::new(inbox).await;
    let first = s.worker();
    let other_inbox = crate::common::second_pool(s.inbox()).await;
    let targets = hookgate::worker::targets(&s.h.receiver.routes());
    let other = Worker::new(
        other_inbox.clone(),
        targets,
        cfg(),
        Arc::new(Metrics::new()),
    );
    let every = std::time::Duration::from_secs(600);
    let long_ago = Utc::now() - secs(31 * 86400);
    // One finished event past retention (30 d by default) before each pass.
    let finished = async |id: &str| {
        s.dest.script([Answer::Status(200)]);
        s.event("w/orders", id, "{}").await;
        assert_eq!(first.run_once().await.unwrap(), 1);
        s.finished_at(id, long_ago).await;
    };
    let deleted = |pass: Option<Pass>| pass.map(|p| clean(p).deleted);
    let pass = hookgate::worker::janitor::pass_if_due;
    let t = Utc::now();

    finished("a").await;
    assert_eq!(
        deleted(pass(s.inbox(), &first, t, every).await.unwrap()),
        Some(1)
    );
    finished("b").await;
    let early = t + secs(449);
    assert_eq!(
        deleted(pass(&other_inbox, &other, early, every).await.unwrap()),
        None
    );
    assert_eq!(
        deleted(pass(s.inbox(), &first, early, every).await.unwrap()),
        None
    );
    assert_eq!(s.event_ids().await, ["b"], "no pass was made");
    let due = t + secs(450);
    assert_eq!(
        deleted(pass(&other_inbox, &other, due, every).await.unwrap()),
        Some(1)
    );
    assert_eq!(
        deleted(
            pass(s.inbox(), &first, due + secs(60), every)
                .await
                .unwrap()
        ),
        None
    );
    // The other process stopped: the first makes every period's pass alone.
    finished("c").await;
    let alone = due + secs(600);
    assert_eq!(
        deleted(pass(s.inbox(), &first, alone, every).await.unwrap()),
        Some(1)
    );
    assert_eq!(s.event_ids().await, Vec::<String>::new());
}

on_both_backends!(
    janitor_drops_bodies_then_dedupe_keys_but_keeps_dead_letters,
    one_worker_process_makes_each_periods_pass,
    janitor_cleans_rows_of_integrations_that_no_longer_exist,
    versions_unchanged_for_the_dedupe_window_are_forgotten_unless_leased,
    records_of_integrations_gone_with_their_last_event_are_forgotten,
);
