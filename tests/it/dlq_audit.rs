//! The dead-letter audit trail on both backends: a replay or purge writes its row in its own
//! transaction (no row for a dry run; no change when the row cannot be written); `hookgate dlq
//! audit` lists them with the OS user; `kubectl hookgate dlq` records the Kubernetes user from a
//! SelfSubjectReview.

use crate::common::*;
use chrono::Duration;
use clap::Parser;
use hookgate::inbox::{Actor, ActorSource, Apply, AuditedEvent, Inbox, ReplaySelector};
use serde_json::{Value, json};
use sqlx::Row;

/// A dead letter of `integration`, dead-lettered `ago` before t0; returns its row id.
async fn dead(inbox: &Inbox, integration: &str, event_id: &str, ago: Duration) -> i64 {
    const SQL: &str = "INSERT INTO inbox_events (integration, event_id, scheme, key_id, headers, \
         body, body_sha256, status, attempts, last_error, received_at, dead_lettered_at) \
         VALUES ($1, $2, 'stripe', 'v1', '[]', $3, $4, 'dead_letter', 5, 'HTTP 503', $5, $6) \
         RETURNING id";
    on!(inbox, pool => {
        sqlx::query(SQL)
            .bind(integration)
            .bind(event_id)
            .bind(b"{}".to_vec())
            .bind(vec![0u8; 32])
            .bind(t0() - ago - Duration::hours(1))
            .bind(t0() - ago)
            .fetch_one(pool)
            .await
            .unwrap()
            .get::<i64, _>(0)
    })
}

async fn status(inbox: &Inbox, id: i64) -> Option<String> {
    on!(inbox, pool => {
        sqlx::query("SELECT status FROM inbox_events WHERE id = $1")
            .bind(id)
            .fetch_optional(pool)
            .await
            .unwrap()
            .map(|r| r.get::<String, _>(0))
    })
}

fn jane() -> Actor {
    Actor {
        name: "jane@example.com".into(),
        source: ActorSource::Kubernetes,
    }
}

fn event(id: i64, integration: &str, event_id: &str) -> AuditedEvent {
    AuditedEvent {
        id,
        integration: integration.into(),
        event_id: event_id.into(),
    }
}

async fn replays_and_purges_are_recorded_with_actor_selection_and_events(inbox: Inbox) {
    let a1 = dead(&inbox, "t/a", "evt-1", Duration::hours(3)).await;
    let a2 = dead(&inbox, "t/a", "evt-2", Duration::hours(2)).await;
    let b1 = dead(&inbox, "t/b", "evt-3", Duration::hours(1)).await;

    // A dry run changes nothing and records nothing.
    let sel = ReplaySelector::Integration {
        integration: "t/a".into(),
        since: None,
    };
    let would = inbox.replay_dead_letters(&sel, t0(), Apply::DryRun).await;
    assert_eq!(would.unwrap(), [a1, a2]);
    assert!(inbox.audit_log(None, 0).await.unwrap().is_empty());

    let replayed = inbox
        .replay_dead_letters(&sel, t0(), Apply::By(&tester()))
        .await
        .unwrap();
    assert_eq!(replayed, [a1, a2]);
    let purged = inbox
        .purge_dead_letters(&ReplaySelector::Ids(vec![b1, a1]), Apply::By(&jane()))
        .await
        .unwrap();
    // a1 is pending now, so only b1 goes; the record says what was asked and what happened.
    assert_eq!(purged, [b1]);
    // Nothing selected is still a recorded decision.
    let none = inbox
        .replay_dead_letters(&ReplaySelector::All, t0(), Apply::By(&tester()))
        .await
        .unwrap();
    assert!(none.is_empty());

    let log = inbox.audit_log(None, 0).await.unwrap();
    let summary: Vec<_> = log
        .iter()
        .map(|r| {
            (
                r.action.as_str(),
                r.actor.as_str(),
                r.actor_source,
                r.selector.clone(),
                r.event_count,
                r.events.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "replay",
                "tester",
                ActorSource::OsUser,
                "all".into(),
                0,
                vec![]
            ),
            (
                "purge",
                "jane@example.com",
                ActorSource::Kubernetes,
                format!("ids {}, {}", a1.min(b1), a1.max(b1)),
                1,
                vec![event(b1, "t/b", "evt-3")]
            ),
            (
                "replay",
                "tester",
                ActorSource::OsUser,
                "integration t/a".into(),
                2,
                vec![event(a1, "t/a", "evt-1"), event(a2, "t/a", "evt-2")]
            ),
        ],
        "newest first"
    );
    let newest = log[0].at;
    assert!(log.windows(2).all(|w| w[0].at >= w[1].at));
    assert_eq!(inbox.audit_log(Some(newest), 0).await.unwrap().len(), 1);
    assert_eq!(inbox.audit_log(None, 2).await.unwrap().len(), 2);
}

/// The audit row and the change share one transaction: when the row cannot be written, the
/// replay and the purge fail whole and every dead letter stays as it was.
async fn no_change_without_its_audit_row(inbox: Inbox) {
    let a = dead(&inbox, "t/a", "evt-1", Duration::hours(1)).await;
    on!(&inbox, pool => {
        sqlx::query("DROP TABLE dlq_audit").execute(pool).await.unwrap();
    });
    let replay = inbox
        .replay_dead_letters(&ReplaySelector::All, t0(), Apply::By(&tester()))
        .await;
    assert!(replay.is_err(), "{replay:?}");
    assert_eq!(status(&inbox, a).await.as_deref(), Some("dead_letter"));
    let purge = inbox
        .purge_dead_letters(&ReplaySelector::Ids(vec![a]), Apply::By(&tester()))
        .await;
    assert!(purge.is_err(), "{purge:?}");
    assert_eq!(status(&inbox, a).await.as_deref(), Some("dead_letter"));
}

on_both_backends!(
    replays_and_purges_are_recorded_with_actor_selection_and_events,
    no_change_without_its_audit_row,
);

fn hookgate(url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookgate"))
        .args(args)
        .env("HOOKGATE_DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test]
async fn cli_records_the_os_user_and_audit_lists_it() {
    let (_dir, url, inbox) = sqlite_inbox_named("audit.db").await;
    let a = dead(&inbox, "t/a", "evt-1", Duration::hours(1)).await;
    inbox.close().await;

    let (code, _, err) = hookgate(&url, &["dlq", "replay", "--dry-run", "--all"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = hookgate(&url, &["dlq", "replay", &a.to_string()]);
    assert_eq!(code, Some(0), "{err}");

    let (code, out, err) = hookgate(&url, &["dlq", "audit", "-o", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let rows: Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "the dry run is not recorded: {out}");
    let me = hookgate::cli::dlq::os_user().name;
    assert_eq!(rows[0]["actor"], me.as_str());
    assert_eq!(rows[0]["actor_source"], "os_user");
    assert_eq!(rows[0]["action"], "replay");
    assert_eq!(rows[0]["selector"], format!("ids {a}"));
    assert_eq!(rows[0]["event_count"], 1);
    assert_eq!(
        rows[0]["events"],
        json!([{"id": a, "integration": "t/a", "event_id": "evt-1"}])
    );

    let (code, out, _) = hookgate(&url, &["dlq", "audit", "--since", "1h"]);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("ID "), "{out}");
    assert!(
        lines[1].contains("replay") && lines[1].contains(&me) && lines[1].contains("os_user"),
        "{out}"
    );
    let (_, out, _) = hookgate(&url, &["dlq", "audit", "--since", "2099-01-01T00:00:00Z"]);
    assert_eq!(out.lines().count(), 1, "header only: {out}");
}

#[tokio::test]
async fn the_plugin_records_the_kubernetes_user() {
    use hookgate::plugin::{PluginArgs, run};
    let (_dir, url, inbox) = sqlite_inbox_named("plugin.db").await;
    let a = dead(&inbox, "pay/stripe", "evt-1", Duration::hours(1)).await;

    let (service, mut handle) = tower_test::mock::pair::<
        http::Request<kube::client::Body>,
        http::Response<kube::client::Body>,
    >();
    let client = kube::Client::new(service, "pay");
    let script = tokio::spawn(async move {
        let seen = crate::common::mock_api::answer(
            &mut handle,
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            (
                201,
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                       "metadata": {}, "status": {"userInfo": {"username": "jane@example.com",
                       "groups": ["system:authenticated"]}}}),
            ),
        )
        .await;
        assert_eq!(seen.body["kind"], "SelfSubjectReview");
        handle
    });
    let args = PluginArgs::try_parse_from([
        "kubectl-hookgate",
        "dlq",
        "purge",
        "--database-url",
        &url,
        "--integration",
        "stripe",
    ])
    .unwrap();
    let mut out = Vec::new();
    run(client, "pay", args, &mut out).await.unwrap();
    script.await.unwrap();

    let log = inbox.audit_log(None, 0).await.unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (
            log[0].actor.as_str(),
            log[0].actor_source,
            log[0].action.as_str()
        ),
        ("jane@example.com", ActorSource::Kubernetes, "purge")
    );
    assert_eq!(log[0].selector, "integration pay/stripe");
    assert_eq!(log[0].events, [event(a, "pay/stripe", "evt-1")]);
}
