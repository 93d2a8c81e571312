//! The inbox gauges' figures, shared by the worker processes of one database (`inbox::gauges`):
//! each interval one process reads the backlog and the others export what it wrote, aged to
//! their own clock; a process alone reads it every time; and every worker's `/metrics` shows it.

use crate::common::*;
use chrono::{DateTime, Duration as Span, Utc};
use hookgate::inbox::{BacklogCount, GaugeFigures, Inbox};
use hookgate::metrics::Metrics;
use hookgate::worker::{Worker, WorkerConfig};
use std::sync::Arc;
use std::time::Duration;

const EVERY: Duration = Duration::from_secs(15);

async fn gauges(inbox: &Inbox, at: DateTime<Utc>) -> GaugeFigures {
    inbox.backlog_for_gauges(at, EVERY).await.unwrap().unwrap()
}

async fn send(h: &Harness, id: &str) {
    let body = stripe_body(id, "invoice.paid");
    assert_eq!(h.send("t/stripe", &body, opts()).await.json, accepted());
}

fn pending(backlog: &[BacklogCount]) -> (i64, Option<i64>) {
    let p = backlog.iter().find(|c| c.status == "pending").unwrap();
    (p.count, p.oldest_age_seconds)
}

async fn one_process_reads_the_backlog_for_all_each_interval(inbox: Inbox) {
    let h = harness(inbox.clone());
    let other = second_pool(&inbox).await;
    for id in ["g1", "g2"] {
        send(&h, id).await;
    }
    let t = t0() + Span::seconds(60);

    let first = gauges(&inbox, t).await;
    assert!(first.read, "no figures yet: the first process reads them");
    assert_eq!(pending(&first.backlog), (2, Some(60)));

    send(&h, "g3").await;
    // Within the interval the other process exports what the first read, aged to its own now.
    let shared = gauges(&other, t + Span::seconds(1)).await;
    assert!(!shared.read);
    assert_eq!(pending(&shared.backlog), (2, Some(61)));
    assert!(!gauges(&inbox, t + Span::seconds(11)).await.read);

    // Past three quarters of the interval the next turn is due, whoever asks first.
    let next = gauges(&other, t + Span::seconds(12)).await;
    assert!(next.read);
    assert_eq!(pending(&next.backlog), (3, Some(72)));
    let after = gauges(&inbox, t + Span::seconds(13)).await;
    assert!(!after.read);
    assert_eq!(after.backlog.len(), next.backlog.len());
    assert_eq!(pending(&after.backlog), (3, Some(73)));

    // Asked at once, the turn goes to one of them.
    let at = t + Span::seconds(30);
    let (a, b) = tokio::join!(gauges(&inbox, at), gauges(&other, at));
    assert_eq!((a.read as u8) + (b.read as u8), 1, "{a:?} {b:?}");
    assert_eq!(a.backlog, b.backlog);
}

async fn a_process_alone_reads_them_every_interval(inbox: Inbox) {
    let h = harness(inbox.clone());
    let mut at = t0();
    for n in 1..=3 {
        send(&h, &format!("a{n}")).await;
        let figures = gauges(&inbox, at).await;
        assert!(figures.read, "tick {n}");
        assert_eq!(pending(&figures.backlog).0, n);
        at += Span::from_std(EVERY).unwrap();
    }
}

/// Two dead letters of `t/stripe`, which no worker claims, written straight to the inbox.
async fn dead_letters(inbox: &Inbox) {
    for id in ["d1", "d2"] {
        on!(inbox, pool => {
            sqlx::query(
                "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, body, \
                 body_sha256, status, received_at, dead_lettered_at) \
                 VALUES ('t/stripe', $1, 'stripe', 'v1', '[]', $2, $3, 'dead_letter', $4, $4)",
            )
            .bind(id)
            .bind(b"{}".to_vec())
            .bind(vec![0u8; 32])
            .bind(Utc::now())
            .execute(pool)
            .await
            .unwrap();
        });
    }
}

async fn every_worker_exports_the_shared_figures(inbox: Inbox) {
    dead_letters(&inbox).await;
    let cfg = WorkerConfig {
        gauges_every: Duration::from_millis(100),
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut metrics = Vec::new();
    let mut runs = Vec::new();
    for pool in [inbox.clone(), second_pool(&inbox).await] {
        let m = Arc::new(Metrics::new());
        let worker = Worker::new(pool, Default::default(), cfg.clone(), m.clone());
        let mut stopped = stopped.clone();
        runs.push(tokio::spawn(async move {
            let stop = async move { drop(stopped.wait_for(|stop| *stop).await) };
            worker.run(stop).await
        }));
        metrics.push(m);
    }
    let line = r#"hookgate_inbox_events{integration="t/stripe",status="dead_letter"} 2"#;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !metrics.iter().all(|m| m.encode().contains(line)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            metrics[1].encode()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    for run in runs {
        run.await.unwrap();
    }
}

/// A turn whose read fails (here the statement timeout, while another session holds the inbox
/// locked; in production, a backlog that outgrew the timeout) exports the last figures written,
/// aged to now, and says why: the oldest event's age keeps growing rather than freezing at the
/// last read, which would keep `HookgateInboxOldestPending` from ever firing.
#[sqlx::test(migrations = "migrations/postgres")]
async fn a_turn_whose_read_fails_exports_the_last_figures_aged(pool: sqlx::PgPool) {
    let inbox = with_statement_timeout(&pool, "200").await;
    let h = harness(inbox.clone());
    send(&h, "f1").await;
    let t = t0() + Span::seconds(60);
    assert_eq!(pending(&gauges(&inbox, t).await.backlog), (1, Some(60)));
    send(&h, "f2").await;

    let lock = "LOCK TABLE inbox_events IN ACCESS EXCLUSIVE MODE";
    let release = crate::common::timing::held_lock(&pool, lock, Duration::from_millis(500)).await;
    let next = t + Span::from_std(EVERY).unwrap();
    let (failed, ()) = tokio::join!(inbox.backlog_for_gauges(next, EVERY), release);
    let failed = failed.unwrap().unwrap();
    assert!(!failed.read, "{failed:?}");
    let why = failed.read_failed.as_deref().unwrap_or_default();
    assert!(why.contains("statement timeout"), "{failed:?}");
    assert_eq!(
        pending(&failed.backlog),
        (1, Some(75)),
        "the last read's count, aged"
    );

    // The next turn reads again.
    let later = next + Span::from_std(EVERY).unwrap();
    let read = gauges(&inbox, later).await;
    assert!(read.read && read.read_failed.is_none(), "{read:?}");
    assert_eq!(pending(&read.backlog), (2, Some(90)));
}

crate::on_both_backends!(
    one_process_reads_the_backlog_for_all_each_interval,
    a_process_alone_reads_them_every_interval,
    every_worker_exports_the_shared_figures,
);
