//! `--db-max-connections`: a pool never opens more PostgreSQL connections than its cap, and a
//! process at the smallest cap allowed still takes in and delivers everything. `standalone`
//! without hand-overs is the tightest case: the receiver's batches, the workers' `LISTEN`, a
//! claim for every event, completions and timers all share its one pool. A catch-up pass, which
//! holds a connection for its lock, fits in what the rest of a worker leaves at that cap.

use crate::catch_up_provider::{self as provider, Provider, Served};
use crate::common::destination::Destination;
use crate::common::procs::{drop_database, free_port, fresh_database, start_ready};
use crate::common::{hmac_integration, load, signed_now, skip_or_fail};
use futures::StreamExt;
use hookgate::catch_up::{CatchUp, Ran};
use hookgate::inbox::{DbLimits, Inbox};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const EVENTS: usize = 300;

/// Samples every 5 ms how many connections to the database of `url` are named `name` (other
/// tests' processes run on the same server), until [`Sampler::most`].
struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<i64>,
}

impl Sampler {
    fn start(admin_url: &str, url: &str, name: &'static str) -> Self {
        use sqlx::Connection;
        let stop = Arc::new(AtomicBool::new(false));
        let (admin_url, url, stopped) = (admin_url.to_string(), url.to_string(), stop.clone());
        let task = tokio::spawn(async move {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
            let mut most = 0;
            while !stopped.load(Ordering::Relaxed) {
                most = most.max(named_connections(&mut admin, &url, name).await);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            most
        });
        Self { stop, task }
    }

    /// The most connections seen at once.
    async fn most(self) -> i64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_at_the_smallest_cap_takes_in_and_delivers_everything_within_it() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let dest = Destination::start().await;
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("m.yaml");
    let delivery = format!(r#"url: "{}""#, dest.url);
    std::fs::write(
        &yaml,
        hmac_integration("c", "cap", "pool-cap-test-secret", &delivery),
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let args = [
        "standalone",
        "--listen",
        &listen,
        "--db-max-connections",
        "4",
        "--handoff-events",
        "0",
    ];
    let server = start_ready(dir.path(), "standalone", &args, &url, &[]).await;

    let sampler = Sampler::start(&admin_url, &url, "hookgate standalone");
    let m = hookgate::manifest::load(&[yaml]).unwrap();
    let client = reqwest::Client::new();
    let sends = (0..EVENTS).map(|i| {
        let body = format!(r#"{{"id":"evt_cap_{i}","padding":"{}"}}"#, "x".repeat(512));
        let (path, headers) = signed_now(&m, "c/cap", &body);
        let mut post = client.post(format!("http://{listen}{path}")).body(body);
        for (k, v) in &headers {
            post = post.header(k, v);
        }
        async move { post.send().await.unwrap().status().as_u16() }
    });
    // 32 requests at a time, as a busy provider sends them.
    let statuses: Vec<u16> = futures::stream::iter(sends)
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");

    let delivered = dest.wait_for(EVENTS, Duration::from_secs(60)).await;
    let most = sampler.most().await;
    let ids: BTreeSet<String> = delivered
        .iter()
        .map(|d| serde_json::from_slice::<serde_json::Value>(&d.body).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids.len(), EVENTS, "every event delivered");
    assert!((1..=4).contains(&most), "{most} connections at once");

    drop(server);
    drop_database(&admin_url, &url).await;
}

/// How many connections to the database of `url` are named `name`, as PostgreSQL counts them.
async fn named_connections(admin: &mut sqlx::PgConnection, url: &str, name: &str) -> i64 {
    let database = reqwest::Url::parse(url).unwrap().path()[1..].to_string();
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
    )
    .bind(&database)
    .bind(name)
    .fetch_one(admin)
    .await
    .unwrap()
}

/// A fresh database (its admin URL and its own) and an inbox on it named `name`, capped at five
/// connections, with its pool; `None` without a server to test on.
async fn capped_at_five(name: &str) -> Option<(String, String, Inbox, sqlx::PgPool)> {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return None;
    };
    let limits = DbLimits {
        max_connections: 5,
        ..Default::default()
    };
    let (inbox, pool) = capped(&url, name, limits).await;
    Some((admin_url, url, inbox, pool))
}

/// An inbox on `url` named `name` with these limits, and its PostgreSQL pool.
async fn capped(url: &str, name: &str, limits: DbLimits) -> (Inbox, sqlx::PgPool) {
    let inbox = Inbox::connect_as(url, name, limits).await.unwrap();
    let Inbox::Postgres(pool) = &inbox else {
        panic!("a PostgreSQL URL")
    };
    let pool = pool.clone();
    (inbox, pool)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_opens_no_more_connections_than_its_cap_and_the_rest_wait() {
    let Some((admin_url, url, inbox, pool)) = capped_at_five("pool-cap-test").await else {
        return;
    };
    let sampler = Sampler::start(&admin_url, &url, "pool-cap-test");
    // Eight statements of 300 ms at once: five run, three wait for a connection (well within the
    // acquire timeout) and run after them.
    let sleeps = (0..8).map(|_| sqlx::query("SELECT pg_sleep(0.3)").execute(&pool));
    let done = futures::future::join_all(sleeps).await;
    let most = sampler.most().await;
    assert!(done.iter().all(|r| r.is_ok()), "{done:?}");
    assert_eq!(most, 5);

    drop((inbox, pool));
    drop_database(&admin_url, &url).await;
}

/// A catch-up pass holds its integration's lock on one connection for the whole pass and
/// writes on one more, so a worker at the smallest cap runs it beside the two connections the
/// rest of the worker keeps (`LISTEN`, and a writer that keeps its connection while busy).
#[tokio::test(flavor = "multi_thread")]
async fn a_catch_up_pass_at_the_smallest_cap_needs_only_the_two_connections_left() {
    let Some((admin_url, url)) = fresh_database().await else {
        skip_or_fail("DATABASE_URL is not set");
        return;
    };
    let limits = DbLimits {
        max_connections: hookgate::inbox::MIN_CONNECTIONS,
        // A pass that needed a third connection fails within seconds instead of passing late.
        acquire_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let (inbox, pool) = capped(&url, "hookgate worker", limits).await;
    inbox.migrate().await.unwrap();
    let mut p = Provider::default();
    let now = chrono::Utc::now().timestamp();
    for i in 0..40 {
        let id = format!("evt_cap_{i:02}");
        p.stripe.push(provider::stripe_event(
            &id,
            "invoice.paid",
            now - 3600 + i * 60,
        ));
    }
    let api = Served::start(p).await;
    let m = load(&crate::catch_up::manifests(&api.url(), provider::KEY));
    let targets = hookgate::catch_up::targets(&m.route_table().unwrap());
    let metrics = Arc::new(hookgate::metrics::Metrics::new());
    let catch_up = CatchUp::new(inbox.clone(), targets, metrics, Default::default());

    let listen = pool.acquire().await.unwrap();
    let kept = pool.acquire().await.unwrap();
    let pass = || async {
        tokio::time::timeout(Duration::from_secs(30), catch_up.pass("t/stripe", true))
            .await
            .expect("the pass never hangs")
            .expect("the integration has catchUp")
    };
    let done = |missing, present| Ran::Done {
        missing,
        present,
        error: None,
    };
    assert_eq!(pass().await, done(40, 0));
    let stored: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM inbox_events WHERE integration = 't/stripe' AND source = 'catch_up'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stored, 40);
    assert_eq!(pass().await, done(0, 40), "a second pass finds them all");

    drop((listen, kept, catch_up));
    drop((inbox, pool));
    drop_database(&admin_url, &url).await;
}

/// `hookgate_db_connections{state}` and `hookgate_db_max_connections`, read from the pool at each
/// scrape: the connections calls hold, the idle ones, and the cap, as PostgreSQL counts them too.
#[tokio::test(flavor = "multi_thread")]
async fn the_pool_figures_count_connections_in_use_and_idle_against_the_cap() {
    let Some((admin_url, url, inbox, pool)) = capped_at_five("pool-figures-test").await else {
        return;
    };
    let metrics = hookgate::metrics::Metrics::new();
    metrics.watch_pool(&inbox);
    let figures = || {
        let text = metrics.encode();
        let read = |s: &str| hookgate::metrics::counter_sum(&text, s) as i64;
        (
            read(r#"hookgate_db_connections{state="in_use"}"#),
            read(r#"hookgate_db_connections{state="idle"}"#),
            read("hookgate_db_max_connections"),
        )
    };
    let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url)
        .await
        .unwrap();

    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(pool.acquire().await.unwrap());
    }
    let (in_use, idle, max) = figures();
    assert_eq!((in_use, max), (3, 5), "three held of five");
    assert_eq!(
        in_use + idle,
        named_connections(&mut admin, &url, "pool-figures-test").await,
        "open, as the server counts them"
    );

    // At the cap: every connection in use, so a further call would wait.
    for _ in 0..2 {
        held.push(pool.acquire().await.unwrap());
    }
    assert_eq!(figures(), (5, 0, 5));

    // Given back (sqlx returns a connection to its pool in a task of its own), they stay open
    // for the next calls, idle.
    drop(held);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while figures() != (0, 5, 5) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "(in use, idle, cap) {:?} 10 s after every connection was given back",
            figures()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        named_connections(&mut admin, &url, "pool-figures-test").await,
        5
    );

    drop((inbox, pool, admin));
    drop_database(&admin_url, &url).await;
}
