//! Receiver against real SQLite files, as `hookgate standalone` runs by default.

use crate::common::{accepted, harness, opts, stripe_body};
use hookgate::inbox::{Inbox, ListFilter};
use sqlx::Row;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

macro_rules! on_sqlite {
    ($($name:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $name() {
            let (_dir, inbox) = crate::common::sqlite_inbox().await;
            crate::common::scenarios::$name(inbox).await;
        }
    )*};
}

every_scenario!(on_sqlite);

/// The standalone inbox is a durable store: WAL journal and fsync on every commit.
#[tokio::test]
async fn sqlite_inbox_is_durable_wal_with_full_sync() {
    let (_dir, inbox) = crate::common::sqlite_inbox().await;
    let Inbox::Sqlite(pool) = &inbox else {
        unreachable!()
    };
    let mut conn = pool.acquire().await.unwrap();
    let mode: String = sqlx::query("PRAGMA journal_mode")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .get(0);
    let sync: i64 = sqlx::query("PRAGMA synchronous")
        .fetch_one(&mut *conn)
        .await
        .unwrap()
        .get(0);
    assert_eq!(mode, "wal");
    assert_eq!(sync, 2, "synchronous=FULL");
}

/// A missing database file is created, and a second handle on it (`hookgate inbox list` beside a
/// running `hookgate standalone`) reads while the receiver writes: a writer task posts signed
/// events through the receiver while a reader task lists them. Neither waits for the other to
/// finish; the writer only waits, after each acknowledged event, until a read has begun since, so
/// reads and writes interleave on any scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_sqlite_file_is_created_and_read_while_the_receiver_writes() {
    const EVENTS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested-new.db");
    let url = format!("sqlite://{}", path.display());
    let writer = Inbox::connect(&url).await.unwrap();
    writer.migrate().await.unwrap();
    assert!(path.exists());
    let reader = Inbox::connect(&url).await.unwrap();
    reader.migrate().await.unwrap();
    assert_eq!(reader.counts().await.unwrap(), (0, 0));

    let h = harness(writer);
    // Events the receiver has acknowledged (200), and the acknowledged count a finished read
    // started from.
    let acked = Arc::new(AtomicUsize::new(0));
    let (read_from, mut reads) = tokio::sync::watch::channel(0usize);
    let reading = tokio::spawn({
        let acked = acked.clone();
        async move {
            let (mut seen, mut errors) = (Vec::new(), Vec::new());
            loop {
                let before = acked.load(Ordering::SeqCst);
                match reader.list(&ListFilter::default()).await {
                    Ok(rows) => seen.push((before, rows.len())),
                    Err(e) => errors.push(e.to_string()),
                }
                read_from.send_replace(before);
                if before == EVENTS {
                    return (seen, errors);
                }
            }
        }
    });
    for i in 1..=EVENTS {
        let body = stripe_body(&format!("evt_rw_{i}"), "invoice.paid");
        let r = h.send("t/stripe", &body, opts()).await;
        assert_eq!((r.status.as_u16(), r.json), (200, accepted()), "event {i}");
        acked.store(i, Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(60), reads.wait_for(|&from| from >= i))
            .await
            .unwrap_or_else(|_| panic!("no read finished within 60 s after event {i}"))
            .unwrap();
    }
    let (seen, errors) = reading.await.unwrap();
    assert!(errors.is_empty(), "the reader failed: {errors:?}");
    for &(before, rows) in &seen {
        assert!(
            (before..=EVENTS).contains(&rows),
            "a read begun after {before} acknowledged events saw {rows} rows"
        );
    }
    // Each read the writer waited for finished before the next write began, so the reader saw
    // the inbox at every size on the way.
    let sizes: BTreeSet<usize> = seen.iter().map(|&(_, rows)| rows).collect();
    let missing: Vec<usize> = (1..=EVENTS).filter(|n| !sizes.contains(n)).collect();
    assert!(missing.is_empty(), "never read at sizes {missing:?}");
    println!("{} reads while {EVENTS} events were written", seen.len());
}
