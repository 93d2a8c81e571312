//! The catch-up loop of one process (`CatchUp::run`): passes of different tenants side by side,
//! a due pass waiting for a free slot, shutdown giving the locks back, and an interval shortened
//! on a running worker.

use crate::catch_up::{ago, config};
use crate::catch_up_provider::{self as provider, KEY, Provider, Served};
use crate::common::harness_with;
use chrono::Utc;
use hookgate::catch_up::{self, CatchUp, Config};
use hookgate::inbox::Inbox;
use hookgate::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Stripe integration `ns/name` whose catch-up lists `api` every `interval`.
fn stripe_catching_up(ns: &str, name: &str, api: &str, interval: &str) -> String {
    format!(
        r#"
---
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: {ns}}}
stringData: {{stripe: whsec_test_receiver_secret, api: "{KEY}"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: {ns}}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: keys, key: stripe}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
  catchUp: {{provider: stripe, credentialRef: {{name: keys, key: api}}, apiBaseUrl: "{api}", interval: {interval}}}
"#
    )
}

/// Looks every 50 ms, the first at once.
fn looking_often() -> Config {
    Config {
        tick: Duration::from_millis(50),
        first_look: Duration::ZERO,
        ..config()
    }
}

/// `CatchUp::run` on a task of its own, until [`Running::stop`].
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    looping: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(catch_up: CatchUp) -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let looping = tokio::spawn(async move {
            catch_up
                .run(async {
                    let _ = stopped.await;
                })
                .await
        });
        Self { stop, looping }
    }

    /// Stops the loop; it must end within 5 s whatever its passes are doing.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.looping)
            .await
            .expect("shutdown does not wait for a hanging pass")
            .unwrap();
    }
}

/// The catch-up loop of one process over two tenants: `a/hangs`' provider holds every answer for
/// an hour, `b/fine`'s lists one event. Both are due at once, and `a/hangs` sorts first, so a
/// loop that ran one pass at a time would start it and keep `b/fine` waiting.
struct Looping {
    hang: Served,
    _fine: Served,
    metrics: Arc<Metrics>,
    running: Running,
}

impl Looping {
    async fn start(inbox: &Inbox, passes: usize, run_timeout: Duration) -> Self {
        let hang = Served::start(Provider {
            delay: Duration::from_secs(3600),
            ..Provider::default()
        })
        .await;
        let mut p = Provider::default();
        p.stripe.push(provider::stripe_event(
            "evt_b",
            "invoice.paid",
            ago(3600).timestamp(),
        ));
        let fine = Served::start(p).await;
        let yaml = stripe_catching_up("a", "hangs", &hang.url(), "10m")
            + &stripe_catching_up("b", "fine", &fine.url(), "10m");
        let h = harness_with(inbox.clone(), &yaml);
        let targets = catch_up::targets(&h.manifests.route_table().unwrap());
        let cfg = Config {
            run_timeout,
            passes,
            ..looking_often()
        };
        let metrics = Arc::new(Metrics::new());
        let catch_up = CatchUp::new(inbox.clone(), targets, metrics.clone(), cfg);
        Self {
            hang,
            _fine: fine,
            metrics,
            running: Running::start(catch_up),
        }
    }

    /// The gauges `hookgate_catch_up_passes_running` and `…_waiting`.
    fn passes(&self) -> (String, String) {
        let text = self.metrics.encode();
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or("absent")
                .to_string()
        };
        (
            value("hookgate_catch_up_passes_running"),
            value("hookgate_catch_up_passes_waiting"),
        )
    }

    /// [`Looping::passes`] once it reads `want`, or as it reads after 5 s. A pass records its
    /// run before it gives its lock back and its slot up, so a record seen is not yet a gauge
    /// moved: read once, `running` was still 2 on a starved machine.
    async fn passes_settled_at(&self, want: (&str, &str)) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let now = self.passes();
            if (now.0.as_str(), now.1.as_str()) == want || Instant::now() >= deadline {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) {
        self.running.stop().await;
    }
}

/// Waits up to `secs` for `integration`'s record to show a completed run.
async fn ran(inbox: &Inbox, integration: &str, secs: u64) -> Option<hookgate::inbox::CatchUpRun> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let run = inbox.catch_up_run(integration).await.unwrap();
        if run.as_ref().is_some_and(|r| r.last_run_at.is_some()) || Instant::now() >= deadline {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tenant whose provider API never answers keeps its own pass waiting (up to the run timeout),
/// not another tenant's: the loop of one process runs their passes side by side. Shutdown does
/// not wait for the hanging pass, which gives its lock back.
async fn a_hanging_provider_holds_up_only_its_own_integrations_pass(inbox: Inbox) {
    let l = Looping::start(&inbox, 4, Duration::from_secs(120)).await;
    let fine = ran(&inbox, "b/fine", 15).await;
    assert!(
        fine.is_some_and(|r| r.last_success_at.is_some()),
        "b/fine's pass waited behind a/hangs' provider"
    );
    let rows: Vec<String> = crate::on!(&inbox, pool => sqlx::query_scalar(
        "SELECT event_id FROM inbox_events WHERE integration = 'b/fine'")
        .fetch_all(pool).await.unwrap());
    assert_eq!(rows, ["evt_b"]);
    assert_eq!(l.hang.calls("stripe"), 1, "a/hangs' pass is in progress");
    let hanging = inbox.catch_up_run("a/hangs").await.unwrap();
    assert!(
        hanging.and_then(|r| r.last_run_at).is_none(),
        "a/hangs' pass has not ended"
    );
    assert_eq!(
        l.passes_settled_at(("1", "0")).await,
        ("1".into(), "0".into()),
        "running, waiting"
    );

    l.stop().await;
    // The stopped pass gave its lock back (a SQLite lease too, which would otherwise hold it for
    // the run timeout and a minute), and recorded nothing: the next process runs it in full.
    let lock = inbox
        .try_lock_catch_up("a/hangs", Utc::now(), Duration::from_secs(60))
        .await
        .unwrap();
    assert!(lock.is_some(), "the stopped pass gave its lock back");
    let record = inbox.catch_up_run("a/hangs").await.unwrap();
    assert!(record.and_then(|r| r.last_run_at).is_none());
}

/// With one slot, a due integration waits for it, shown by `hookgate_catch_up_passes_waiting`,
/// and runs once the pass in it ends (here at its run timeout, recorded as a `timeout` failure).
async fn past_the_slots_a_due_pass_waits_for_one_and_is_counted_waiting(inbox: Inbox) {
    let l = Looping::start(&inbox, 1, Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while l.hang.calls("stripe") == 0 {
        assert!(Instant::now() < deadline, "a/hangs' pass never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        l.passes_settled_at(("1", "1")).await,
        ("1".into(), "1".into()),
        "running, waiting"
    );
    assert!(inbox.catch_up_run("b/fine").await.unwrap().is_none());

    let fine = ran(&inbox, "b/fine", 15).await.expect("b/fine ran");
    assert!(fine.last_success_at.is_some(), "{fine:?}");
    let hung = inbox.catch_up_run("a/hangs").await.unwrap().unwrap();
    assert_eq!(hung.last_error_reason.as_deref(), Some("timeout"));
    assert!(hung.last_run_at.unwrap() <= fine.last_run_at.unwrap());
    assert_eq!(
        l.passes_settled_at(("0", "0")).await,
        ("0".into(), "0".into()),
        "running, waiting"
    );
    l.stop().await;
}

/// Shortening `spec.catchUp.interval` takes effect at once, not at the look the old interval
/// planned: with a day's interval the next look is a day away; at a minute, a last pass two hours
/// ago makes one due now.
async fn a_shortened_interval_takes_effect_without_waiting_for_the_old_look(inbox: Inbox) {
    let mut p = Provider::default();
    p.stripe.push(provider::stripe_event(
        "evt_1",
        "invoice.paid",
        ago(3600).timestamp(),
    ));
    let api = Served::start(p).await;
    let every = |interval: &str| {
        let m = crate::common::load(&stripe_catching_up("t", "stripe", &api.url(), interval));
        catch_up::targets(&m.route_table().unwrap())
    };
    let metrics = Arc::new(Metrics::new());
    let catch_up = CatchUp::new(inbox.clone(), every("1d"), metrics, looking_often());
    let running = Running::start(catch_up.clone());
    assert!(
        ran(&inbox, "t/stripe", 10).await.is_some(),
        "the first look ran a pass"
    );
    assert_eq!(api.calls("stripe"), 1);
    // As if that pass ended two hours ago: not due at a day's interval, due at a minute's.
    crate::on!(&inbox, pool => sqlx::query(
        "UPDATE catch_up_runs SET last_run_at = $1 WHERE integration = 't/stripe'")
        .bind(ago(7200)).execute(pool).await.unwrap().rows_affected());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.calls("stripe"), 1, "the next look is a day away");

    catch_up.swap_targets(every("1m"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while api.calls("stripe") < 2 {
        assert!(
            Instant::now() < deadline,
            "the shortened interval waited for the day's look"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.stop().await;
}

/// At the smallest pool, PostgreSQL runs one pass at a time (each holds a connection); SQLite,
/// whose passes hold none and whose pool ignores `--db-max-connections`, runs them all.
async fn the_pool_limits_the_passes_on_postgres_only(inbox: Inbox) {
    let small = hookgate::inbox::DbLimits {
        max_connections: hookgate::inbox::MIN_CONNECTIONS,
        ..Default::default()
    };
    let want = match inbox {
        Inbox::Postgres(_) => 1,
        Inbox::Sqlite(_) => 4,
    };
    assert_eq!(Config::for_pool(4, &inbox, &small).passes, want);
    let default = hookgate::inbox::DbLimits::default();
    assert_eq!(Config::for_pool(4, &inbox, &default).passes, 4);
}

crate::on_both_backends!(
    the_pool_limits_the_passes_on_postgres_only,
    a_hanging_provider_holds_up_only_its_own_integrations_pass,
    past_the_slots_a_due_pass_waits_for_one_and_is_counted_waiting,
    a_shortened_interval_takes_effect_without_waiting_for_the_old_look,
);
