//! `hookgate send` for every provider scheme, and `hookgate send --handshake`, as a user runs them:
//! the binary against `hookgate standalone` serving the shipped examples over real HTTP, a SQLite
//! inbox, workers delivering to a real destination.

use crate::common::destination::Destination;
use crate::standalone::{example_secrets, examples_delivering_to, list, repo, run, start};
use serde_json::{Value, json};
use std::time::Duration;

/// One `hookgate send` run: exit status, the `status body` line it printed, and its stderr.
struct Sent {
    ok: bool,
    status: u16,
    body: String,
    stderr: String,
}

fn send_with(files: &str, base: &str, integration: &str, extra: &[&str]) -> Sent {
    let mut args = vec![
        "send",
        "-f",
        files,
        "--integration",
        integration,
        "--url",
        base,
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let (status, body) = stdout.split_once(' ').unwrap_or((&stdout, ""));
    Sent {
        ok: out.status.success(),
        status: status
            .parse()
            .unwrap_or_else(|_| panic!("{integration}: no status line: {stdout:?} {stderr}")),
        body: body.to_string(),
        stderr,
    }
}

fn key(k: &str) -> String {
    repo(&format!("config/examples/keys/{k}"))
        .display()
        .to_string()
}

/// The example's secret as the Secret holds it, for computing answers independently.
fn example_value(file: &str, key: &str) -> String {
    let text = std::fs::read_to_string(repo(&format!("config/examples/{file}"))).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("{file} has no {key}"));
    line.trim().to_string()
}

/// Every scheme added with the provider set is signed by `hookgate send` exactly as its provider
/// signs (a Twilio JSON body through `?bodySHA256=`, a form body with its parameters, SendGrid
/// with ECDSA P-256 from the example's PEM key, Linear with the time written into the body) and
/// answered 200 by the receiver; each handshake comes back as its provider requires and is
/// never stored; a wrong Meta verify token and a stale Zoom check exit non-zero; no secret of the
/// session reaches the logs.
#[tokio::test]
async fn every_provider_is_sent_and_accepted_and_every_handshake_answered() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("hookgate.db").display());
    let dest = Destination::start().await;
    let log = dir.path().join("standalone.log");
    let mut server = start(&db, &examples_delivering_to(dir.path(), &dest.url), &log).await;
    let base = server.base.as_str();
    let examples = repo("config/examples").display().to_string();
    let send = |integration: &str, extra: &[&str]| send_with(&examples, base, integration, extra);
    let (discord, sendgrid) = (key("discord.key"), key("sendgrid.key"));
    let fresh = json!({"received": true, "duplicate": false});

    let events: Vec<(&str, Vec<&str>)> = vec![
        (
            "comms/twilio",
            vec![
                "--body",
                r#"{"MessageSid":"SM1","EventType":"com.twilio.messaging.inbound-message.received"}"#,
            ],
        ),
        (
            "comms/twilio",
            vec!["--body", "MessageSid=SM2&From=%2B15005550006&Body=hi+there"],
        ),
        (
            "streams/twitch",
            vec![
                "--body",
                r#"{"subscription":{"type":"channel.follow"},"event":{"user_id":"1"}}"#,
                "--event-type",
                "channel.follow",
            ],
        ),
        (
            "meetings/zoom",
            vec!["--body", r#"{"event":"meeting.started","payload":{}}"#],
        ),
        (
            "messaging/whatsapp",
            vec![
                "--body",
                r#"{"object":"whatsapp_business_account","entry":[]}"#,
            ],
        ),
        (
            "platform/gitlab",
            vec![
                "--body",
                r#"{"object_kind":"push"}"#,
                "--event-type",
                "Push Hook",
            ],
        ),
        (
            "billing/paddle",
            vec![
                "--body",
                r#"{"event_id":"evt_01","event_type":"transaction.completed","data":{}}"#,
            ],
        ),
        (
            "payments/square",
            vec![
                "--body",
                r#"{"event_id":"sq-1","type":"payment.created","data":{}}"#,
            ],
        ),
        (
            "email/sendgrid",
            vec![
                "--body",
                r#"[{"email":"a@example.com","event":"delivered","sg_event_id":"x1"}]"#,
                "--signing-key-file",
                &sendgrid,
            ],
        ),
        (
            "platform/linear",
            vec![
                "--body",
                r#"{"action":"create","type":"Issue","data":{"id":"1"}}"#,
                "--event-type",
                "Issue",
            ],
        ),
        (
            "platform/discord",
            vec![
                "--body",
                r#"{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","data":{}}}"#,
                "--signing-key-file",
                &discord,
            ],
        ),
    ];
    for (integration, args) in &events {
        let s = send(integration, args);
        assert!(s.ok, "{integration}: {}", s.stderr);
        assert_eq!(
            (s.status, serde_json::from_str::<Value>(&s.body).unwrap()),
            (200, fresh.clone()),
            "{integration} {args:?}"
        );
    }
    // The same Twilio delivery again (same idempotency token, same signed URL) is a duplicate.
    let twilio_again = ["--body", "MessageSid=SM3", "--event-id", "twilio-idem-1"];
    let first = send("comms/twilio", &twilio_again);
    assert_eq!(serde_json::from_str::<Value>(&first.body).unwrap(), fresh);
    let again = send("comms/twilio", &twilio_again);
    assert_eq!(
        serde_json::from_str::<Value>(&again.body).unwrap(),
        json!({"received": true, "duplicate": true})
    );
    let stored = events.len() + 1;

    // Handshakes: signed like events, answered as each provider requires, never stored.
    let handshake = |integration: &str, extra: &[&str]| {
        let mut args = vec!["--handshake"];
        args.extend_from_slice(extra);
        let s = send(integration, &args);
        assert!(
            s.ok,
            "{integration} handshake: {} {} {}",
            s.status, s.body, s.stderr
        );
        assert!(
            s.stderr.contains("answered as the provider requires"),
            "{}",
            s.stderr
        );
        s
    };
    let slack = handshake("platform/slack", &[]);
    let answer: Value = serde_json::from_str(&slack.body).unwrap();
    assert_eq!(slack.status, 200);
    assert!(
        answer["challenge"].as_str().unwrap().starts_with("hs_"),
        "{answer}"
    );
    let ping = handshake("platform/discord", &["--signing-key-file", &discord]);
    assert_eq!((ping.status, ping.body.as_str()), (200, r#"{"type":1}"#));
    let events_ping = send(
        "platform/discord",
        &["--handshake=events", "--signing-key-file", &discord],
    );
    assert!(events_ping.ok, "{}", events_ping.stderr);
    assert_eq!((events_ping.status, events_ping.body.as_str()), (204, ""));
    let twitch = handshake("streams/twitch", &[]);
    assert_eq!(twitch.status, 200);
    assert!(
        twitch.body.starts_with("hs_"),
        "the bare challenge: {}",
        twitch.body
    );
    let zoom = handshake("meetings/zoom", &[]);
    let answer: Value = serde_json::from_str(&zoom.body).unwrap();
    let plain = answer["plainToken"].as_str().unwrap();
    // Zoom's check, computed here from the example's secret token, not by hookgate.
    let secret = example_value("zoom.yaml", "secret-token");
    assert_eq!(
        answer["encryptedToken"],
        const_hex::encode(hookgate::signature::hmac_sha256(
            secret.as_bytes(),
            &[plain.as_bytes()]
        ))
    );
    let meta = handshake("messaging/whatsapp", &[]);
    assert_eq!(meta.status, 200);
    assert!(
        meta.body.starts_with("hs_"),
        "the bare challenge: {}",
        meta.body
    );
    assert!(meta.stderr.contains("unsigned"), "{}", meta.stderr);

    // Meta with another verify token than the receiver's: 403 printed, non-zero exit.
    let wrong_token = "not-the-verify-token-7c1f";
    let wrong = dir.path().join("meta-wrong-token.yaml");
    std::fs::write(
        &wrong,
        std::fs::read_to_string(repo("config/examples/meta.yaml"))
            .unwrap()
            .replace(&example_value("meta.yaml", "verify-token"), wrong_token),
    )
    .unwrap();
    let refused = send_with(
        wrong.to_str().unwrap(),
        base,
        "messaging/whatsapp",
        &["--handshake"],
    );
    assert!(!refused.ok, "a refused handshake fails the command");
    assert_eq!(
        (refused.status, refused.body.as_str()),
        (403, r#"{"error":"invalid_verify_token"}"#)
    );
    assert!(
        refused.stderr.contains(&format!(
            "{}: WebhookIntegration messaging/whatsapp: meta subscribe: expected 200 text/plain",
            wrong.display()
        )) && refused.stderr.contains("got 403: the verify token differs"),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains(wrong_token), "{}", refused.stderr);
    // A Zoom check signed an hour ago: outside the window, 400 printed, non-zero exit.
    let hour_ago = (chrono::Utc::now().timestamp() - 3600).to_string();
    let stale = send("meetings/zoom", &["--handshake", "--timestamp", &hour_ago]);
    assert!(!stale.ok);
    assert_eq!(stale.status, 400);
    assert!(
        stale.stderr.contains("outside the receiver's window"),
        "{}",
        stale.stderr
    );

    // Only the events are in the inbox, and the workers deliver exactly those.
    let rows = list(&db, &[]);
    assert_eq!(rows.len(), stored, "handshakes are never stored: {rows:?}");
    for scheme in [
        "twilio", "twitch", "zoom", "meta", "gitlab", "paddle", "square", "sendgrid", "linear",
        "discord",
    ] {
        assert!(
            rows.iter().any(|r| r["scheme"] == scheme),
            "{scheme} stored: {rows:?}"
        );
    }
    let twilio = list(&db, &["--integration", "comms/twilio"]);
    assert!(
        twilio.iter().any(|r| r["event_id"] == "twilio-idem-1"),
        "Twilio's idempotency token is the event id: {twilio:?}"
    );
    let delivered = dest.wait_for(stored, Duration::from_secs(30)).await;
    assert_eq!(delivered.len(), stored);
    // The content type follows the body, as Twilio's does, and reaches the destination.
    let content_type = |body: &str| {
        let d = delivered
            .iter()
            .find(|d| d.body.starts_with(body.as_bytes()))
            .unwrap_or_else(|| panic!("{body} delivered"));
        d.header("content-type")
    };
    assert_eq!(
        content_type("MessageSid=SM2"),
        "application/x-www-form-urlencoded"
    );
    assert_eq!(content_type(r#"{"MessageSid":"SM1""#), "application/json");

    let metrics = server.metrics().await;
    for (integration, n) in [
        ("platform/slack", 1),
        ("platform/discord", 2),
        ("streams/twitch", 1),
        ("meetings/zoom", 1),
        ("messaging/whatsapp", 1),
    ] {
        let line = format!("hookgate_handshakes_total{{integration=\"{integration}\"}} {n}");
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }

    // Debug-level logs of the whole session: no secret, verify token or private key line.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap();
    let mut secrets = example_secrets();
    secrets.push(wrong_token.to_string());
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        assert!(
            !logs.contains(secret.as_str()),
            "a secret reached the logs: {secret:.12}…"
        );
    }
    assert!(
        logs.contains("endpoint handshake answered"),
        "handshakes are logged"
    );
}

/// The command refuses what it cannot send before sending anything, naming the file, the object
/// and the flag or field.
#[test]
fn send_names_what_is_missing_for_a_handshake_or_a_key() {
    let examples = repo("config/examples").display().to_string();
    let nowhere = "http://127.0.0.1:9";
    let refused_at = |url: &str, integration: &str, extra: &[&str]| {
        let mut args = vec![
            "send",
            "-f",
            &examples,
            "--integration",
            integration,
            "--url",
            url,
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(!out.status.success(), "{integration} {extra:?}");
        assert!(out.stdout.is_empty(), "nothing was sent");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let refused = |integration: &str, extra: &[&str]| refused_at(nowhere, integration, extra);
    let e = refused("payments/stripe", &["--handshake"]);
    assert!(
        e.contains("stripe.yaml: WebhookIntegration payments/stripe: scheme stripe has no endpoint handshake; --handshake applies to slack, discord, twitch, zoom and meta"),
        "{e}"
    );
    let e = refused("platform/slack", &["--handshake=events"]);
    assert!(
        e.contains("--handshake=events") && e.contains("slack"),
        "{e}"
    );
    let e = refused("email/sendgrid", &["--body", "[]"]);
    assert!(
        e.contains("sendgrid.yaml: WebhookIntegration email/sendgrid: key \"v1\" is a public key: pass its private key with --signing-key-file"),
        "{e}"
    );
    let ed25519 = key("discord.key");
    let e = refused(
        "email/sendgrid",
        &["--body", "[]", "--signing-key-file", &ed25519],
    );
    assert!(
        e.contains(&format!(
            "--signing-key-file {ed25519}: not a valid P-256 private key"
        )),
        "{e}"
    );
    let e = refused(
        "platform/discord",
        &["--handshake", "--signing-key-file", &key("partner-v1.key")],
    );
    assert!(e.contains("does not belong to key \"app\""), "{e}");
    // Nothing listens: the error names the route, never the URL's verify token.
    let e = refused("messaging/whatsapp", &["--handshake"]);
    assert!(
        e.contains("WebhookIntegration messaging/whatsapp: sending to http://127.0.0.1:9/hooks/messaging/whatsapp"),
        "{e}"
    );
    assert!(
        !e.contains(&example_value("meta.yaml", "verify-token")) && !e.contains("hub."),
        "{e}"
    );
    let e = refused_at(
        "http://127.0.0.1:9/in/twilio?x=1",
        "comms/twilio",
        &["--body", "{}"],
    );
    assert!(e.contains("twilio signs the URL's query"), "{e}");
}
