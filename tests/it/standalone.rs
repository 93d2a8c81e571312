//! `hookgate standalone`, `send` and `inbox list` as a user runs them: real processes, real HTTP on
//! loopback, the shipped example manifests, a SQLite inbox in a temp directory.

use crate::common::destination::Destination;
use crate::common::procs::{BIN, free_port};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

pub(crate) fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) base: String,
    pub(crate) admin: String,
}

impl Server {
    /// The process's `/metrics` exposition.
    pub(crate) async fn metrics(&self) -> String {
        reqwest::get(format!("{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// Each of `series` (a whole exposition line without its newline) is in `metrics`.
fn assert_series(metrics: &str, series: &[&str]) {
    for line in series {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shipped examples with their delivery URLs pointed at `dest`.
pub(crate) fn examples_delivering_to(dir: &Path, dest: &str) -> PathBuf {
    let out = dir.join("examples");
    std::fs::create_dir_all(&out).unwrap();
    let base = dest.trim_end_matches("/deliver");
    for entry in std::fs::read_dir(repo("config/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace("http://127.0.0.1:9000", base);
            std::fs::write(out.join(path.file_name().unwrap()), text).unwrap();
        }
    }
    out
}

/// Starts `hookgate standalone` with JSON logs at debug level written to `log`.
pub(crate) async fn start(db_url: &str, examples: &Path, log: &Path) -> Server {
    let (port, admin_port) = (free_port(), free_port());
    let child = Command::new(BIN)
        .args(["standalone", "-f"])
        .arg(examples)
        .args(["--poll", "50ms", "--log-format", "json"])
        .env("RUST_LOG", "debug")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
        .args(["--database-url", db_url])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        admin: format!("http://127.0.0.1:{admin_port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = reqwest::get(format!("{}/readyz", server.admin)).await;
        if ready.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        assert!(Instant::now() < deadline, "standalone did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `hookgate send ...`: returns (status, JSON body) from its stdout line.
fn send(base: &str, integration: &str, extra: &[&str]) -> (u16, Value) {
    let examples = repo("config/examples");
    let mut args = vec![
        "send",
        "-f",
        examples.to_str().unwrap(),
        "--integration",
        integration,
        "--url",
        base,
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "send {integration}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, body) = stdout.trim().split_once(' ').expect("status and body");
    (status.parse().unwrap(), serde_json::from_str(body).unwrap())
}

pub(crate) fn list(db_url: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["inbox", "list", "--database-url", db_url, "-o", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn examples_serve_and_every_provider_format_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("hookgate.db").display());
    let dest = Destination::start().await;
    let log = dir.path().join("standalone.log");
    let mut server = start(&db, &examples_delivering_to(dir.path(), &dest.url), &log).await;
    let base = server.base.as_str();
    let key = |k: &str| {
        repo(&format!("config/examples/keys/{k}"))
            .display()
            .to_string()
    };
    let payload = |p: &str| repo(&format!("config/payloads/{p}")).display().to_string();
    let (partner_v1, partner_v2, discord) = (
        key("partner-v1.key"),
        key("partner-v2.key"),
        key("discord.key"),
    );
    let invoice = payload("stripe-invoice.json");
    let fresh = serde_json::json!({"received": true, "duplicate": false});

    // Before any request, every integration's counters that alerts read are there at zero, so
    // that the first refusal, dead letter or retiring-key request is an increase Prometheus sees.
    assert_series(
        &server.metrics().await,
        &[
            r#"hookgate_receiver_requests_total{integration="payments/stripe",outcome="accepted"} 0"#,
            r#"hookgate_receiver_requests_total{integration="payments/stripe",outcome="invalid_signature"} 0"#,
            r#"hookgate_receiver_requests_total{integration="shop/orders",outcome="inbox_unavailable"} 0"#,
            r#"hookgate_verified_requests_total{integration="platform/partner",key="v1"} 0"#,
            r#"hookgate_verified_requests_total{integration="platform/partner",key="v2"} 0"#,
            r#"hookgate_delivery_attempts_total{integration="payments/stripe",outcome="dead_letter"} 0"#,
            r#"hookgate_delivery_attempts_total{integration="platform/github",outcome="retry"} 0"#,
            r#"hookgate_deliveries_deferred_total{integration="shop/orders"} 0"#,
            r#"hookgate_catch_up_errors_total{integration="payments/stripe",reason="unauthorized"} 0"#,
            r#"hookgate_retention_failures_total{step="purge"} 0"#,
            r#"hookgate_retention_failures_total{step="versions"} 0"#,
            // One integration with catch-up, four slots: it never waits for one.
            "hookgate_catch_up_passes_waiting 0",
            // Each listener's slots against its caps: nothing has reached the webhook port yet,
            // and the scrape itself is the admin port's one request in flight.
            r#"hookgate_http_open_connections{listener="receiver"} 0"#,
            r#"hookgate_http_max_connections{listener="receiver"} 1024"#,
            r#"hookgate_http_max_requests_in_flight{listener="receiver"} 128"#,
            r#"hookgate_http_requests_in_flight{listener="admin"} 1"#,
            r#"hookgate_http_max_connections{listener="admin"} 64"#,
            // Each listener's counters, there at 0 from the moment it listens: the first drop or
            // refusal after a start is an increase.
            r#"hookgate_http_connections_dropped_total{listener="receiver"} 0"#,
            r#"hookgate_http_requests_refused_total{listener="receiver"} 0"#,
            r#"hookgate_http_requests_refused_total{listener="admin"} 0"#,
            // The database pool against its cap: SQLite's 4; and the workers' 32 slots, idle.
            "hookgate_db_max_connections 4",
            "hookgate_delivery_slots_in_use 0",
            "hookgate_delivery_max_slots 32",
        ],
    );

    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("payments/stripe", vec!["--body-file", &invoice]),
        (
            "platform/github",
            vec![
                "--body",
                r#"{"ref":"refs/heads/main"}"#,
                "--event-type",
                "push",
            ],
        ),
        (
            "shop/orders",
            vec!["--body", r#"{"type":"order.created","data":{"id":1}}"#],
        ),
        (
            "platform/partner",
            vec!["--body", r#"{"n":1}"#, "--signing-key-file", &partner_v2],
        ),
        (
            "platform/partner",
            vec![
                "--body",
                r#"{"n":2}"#,
                "--signing-key-file",
                &partner_v1,
                "--key-id",
                "v1",
            ],
        ),
        // A webhook event: a PING would be a handshake, answered and never stored
        // (send_providers covers those).
        (
            "platform/discord",
            vec![
                "--body",
                r#"{"version":1,"application_id":"1","type":1,"event":{"type":"APPLICATION_AUTHORIZED","data":{}}}"#,
                "--signing-key-file",
                &discord,
            ],
        ),
        (
            "platform/slack",
            vec![
                "--body",
                r#"{"event_id":"Ev1","event":{"type":"app_mention"}}"#,
            ],
        ),
        (
            "platform/shopify",
            vec!["--body", r#"{"id":1}"#, "--event-type", "orders/create"],
        ),
    ];
    for (integration, args) in &cases {
        assert_eq!(
            send(base, integration, args),
            (200, fresh.clone()),
            "{integration}"
        );
    }
    // A Stripe retry of the same event is a duplicate.
    assert_eq!(
        send(base, "payments/stripe", &["--body-file", &invoice]).1["duplicate"],
        true
    );
    // A forged signature is refused with 401 and a JSON error.
    let forged = reqwest::Client::new()
        .post(format!("{base}/hooks/payments/stripe"))
        .header(
            "Stripe-Signature",
            format!(
                "t={},v1={}",
                chrono::Utc::now().timestamp(),
                "ab".repeat(32)
            ),
        )
        .body(std::fs::read(&invoice).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    assert_eq!(
        forged.json::<Value>().await.unwrap(),
        serde_json::json!({"error": "invalid_signature"})
    );

    // The CLI reads the inbox while the server holds it.
    let rows = list(&db, &[]);
    assert_eq!(rows.len(), cases.len());
    for field in [
        "id",
        "integration",
        "event_id",
        "event_type",
        "status",
        "key_id",
        "attempts",
        "received_at",
    ] {
        assert!(rows[0].get(field).is_some(), "missing {field}: {}", rows[0]);
    }
    assert!(
        rows.iter().all(|r| r.get("body").is_none()),
        "no bodies by default"
    );
    let partner = list(&db, &["--integration", "platform/partner"]);
    let mut keys: Vec<&str> = partner
        .iter()
        .map(|r| r["key_id"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["v1", "v2"]);

    // The workers beside the receiver deliver every accepted event to the destination.
    let delivered = dest.wait_for(cases.len(), Duration::from_secs(30)).await;
    assert_eq!(delivered.len(), cases.len());
    let stripe = delivered
        .iter()
        .find(|r| r.header("hookgate-integration") == "payments/stripe")
        .unwrap();
    assert_eq!(stripe.body, std::fs::read(&invoice).unwrap());
    assert!(
        stripe.header("webhook-signature").starts_with("v1,"),
        "stripe.yaml signs deliveries"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while list(&db, &["--status", "processed"]).len() < cases.len() {
        assert!(Instant::now() < deadline, "rows not marked processed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stripe = list(
        &db,
        &["--integration", "payments/stripe", "--status", "processed"],
    );
    assert_eq!(stripe[0]["event_id"], "evt_1QexampleInvoicePaid");
    assert_eq!(stripe[0]["event_type"], "invoice.paid");

    // Each verified request counts for the key that verified it (the retiring-key alert reads
    // this): the partner mid-rotation shows both keys; the Stripe retry counts, the forgery not.
    // The Stripe event and its retry were answered 2xx and timed, the forgery not; every
    // transaction of the intake was timed.
    let text = server.metrics().await;
    assert_series(
        &text,
        &[
            r#"hookgate_receiver_requests_total{integration="payments/stripe",outcome="duplicate"} 1"#,
            r#"hookgate_verified_requests_total{integration="platform/partner",key="v1"} 1"#,
            r#"hookgate_verified_requests_total{integration="platform/partner",key="v2"} 1"#,
            r#"hookgate_verified_requests_total{integration="payments/stripe",key="v1"} 2"#,
            r#"hookgate_receiver_request_duration_seconds_count{integration="payments/stripe"} 2"#,
            r#"hookgate_receiver_request_duration_seconds_count{integration="platform/partner"} 2"#,
        ],
    );
    let count = |name: &str| hookgate::metrics::counter_sum(&text, name);
    let commits = count("hookgate_intake_commit_duration_seconds_count");
    assert!(commits >= 1.0, "no intake transaction timed");
    assert_eq!(commits, count("hookgate_intake_batch_size_count"));
    // On SQLite each outcome commits in a transaction of its own, timed; the workers claimed at
    // least at start-up, timed too.
    assert!(
        count("hookgate_completion_commit_duration_seconds_count") >= cases.len() as f64,
        "every processed event's completion timed"
    );
    assert!(count("hookgate_claim_duration_seconds_count") >= 1.0);

    // A full run's logs (intake, duplicates, a forged signature, delivery) at debug level carry
    // the event fields but no configured secret, private key or signature.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let logs = std::fs::read_to_string(&log).unwrap();
    let mut secrets = example_secrets();
    secrets.push("ab".repeat(32));
    secrets.extend(delivered.iter().map(|r| r.header("webhook-signature")));
    secrets.retain(|s| !s.is_empty());
    for secret in &secrets {
        assert!(
            !logs.contains(secret.as_str()),
            "a secret or signature reached the logs: {secret:.12}…"
        );
    }
    let received: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "event received")
        .collect();
    assert!(
        received.len() >= cases.len(),
        "one JSON line per event: {}",
        received.len()
    );
    for field in ["integration", "event_id", "event_type", "key_id", "outcome"] {
        assert!(
            received[0]["fields"].get(field).is_some(),
            "{field} missing in {}",
            received[0]
        );
    }
    assert!(
        logs.contains("\"attempt\":1"),
        "delivery lines carry the attempt"
    );

    let table = run(&["inbox", "list", "--database-url", &db]);
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with("ID") && text.contains("platform/discord"),
        "{text}"
    );
}

#[test]
fn broken_manifest_stops_start_up_naming_file_object_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.yaml");
    std::fs::write(
        &file,
        "apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {name: pay, namespace: billing}\n\
         spec:\n  scheme: {type: stripe-v2}\n  keys: [{id: v1, secretRef: {name: s, key: k}}]\n  delivery: {url: 'http://x'}\n",
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("h.db").display());
    let out = run(&[
        "standalone",
        "-f",
        file.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &db,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(file.to_str().unwrap()), "{err}");
    assert!(err.contains("WebhookIntegration billing/pay"), "{err}");
    assert!(err.contains("spec.scheme.type"), "{err}");
    assert!(
        !dir.path().join("h.db").exists(),
        "nothing is created before the manifests are valid"
    );
}

#[test]
fn a_metadata_destination_stops_start_up_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hooks.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: billing}\nstringData: {k: whsec_x}\n---\n\
         apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {name: pay, namespace: billing}\n\
         spec:\n  scheme: {type: stripe}\n  keys: [{id: v1, secretRef: {name: s, key: k}}]\n\
         \x20 delivery: {url: 'http://0xa9fea9fe/latest/meta-data/'}\n",
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("h.db").display());
    let listen = format!("127.0.0.1:{}", free_port());
    let out = run(&[
        "standalone",
        "-f",
        file.to_str().unwrap(),
        "--listen",
        &listen,
        "--database-url",
        &db,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: WebhookIntegration billing/pay: spec.delivery.url: 169.254.169.254 is a cloud metadata address",
            file.display()
        )),
        "{err}"
    );
    // The inbox is opened before the listener binds; neither happened.
    assert!(!dir.path().join("h.db").exists(), "nothing is created");
}

#[test]
fn send_explains_a_missing_private_key() {
    let out = run(&[
        "send",
        "-f",
        repo("config/examples").to_str().unwrap(),
        "--integration",
        "platform/discord",
        "--body",
        "{}",
        "--url",
        "http://127.0.0.1:9",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--signing-key-file"), "{err}");
    assert!(err.contains("WebhookIntegration platform/discord"), "{err}");
}

/// Every secret value the examples configure (Secret data and stringData, the private keys),
/// as the strings that must never appear in a log.
pub(crate) fn example_secrets() -> Vec<String> {
    use base64::Engine;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo("config/examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
                if v["kind"] != "Secret" {
                    continue;
                }
                for (_, value) in v["stringData"].as_mapping().into_iter().flatten() {
                    out.push(value.as_str().unwrap().trim().to_string());
                }
                for (_, value) in v["data"].as_mapping().into_iter().flatten() {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(value.as_str().unwrap())
                        .unwrap();
                    out.push(String::from_utf8(raw).unwrap());
                }
            }
        }
    }
    for key in [
        "partner-v1.key",
        "partner-v2.key",
        "discord.key",
        "sendgrid.key",
    ] {
        let pem = std::fs::read_to_string(repo(&format!("config/examples/keys/{key}"))).unwrap();
        out.extend(
            pem.lines()
                .filter(|l| !l.starts_with("-----"))
                .map(str::to_string),
        );
    }
    assert!(out.len() >= 10, "found the example secrets: {}", out.len());
    out
}

/// The same event id with a different body, through the real process with `--log-format json`:
/// answered as a duplicate, and logged as exactly one `warn` line whose fields are the message,
/// the integration and the event id (README, Dedupe), with neither body, no signature and no
/// secret anywhere in the line.
#[tokio::test]
async fn a_dedupe_conflict_logs_one_warning_naming_integration_and_event_id_only() {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    let secret = "whsec_dedupe-conflict-test-secret";
    std::fs::write(
        manifests.join("conflict.yaml"),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: k, namespace: c}}\nstringData: {{v1: {secret}}}\n---\n\
             apiVersion: hookgate.dev/v1alpha1\nkind: WebhookIntegration\nmetadata: {{name: pay, namespace: c}}\n\
             spec:\n  scheme: {{type: stripe}}\n  keys: [{{id: v1, secretRef: {{name: k, key: v1}}}}]\n\
             \x20 delivery: {{url: 'http://127.0.0.1:9/none'}}\n"
        ),
    )
    .unwrap();
    let db = format!("sqlite://{}", dir.path().join("hookgate.db").display());
    let log = dir.path().join("standalone.log");
    let mut server = start(&db, &manifests, &log).await;
    let m = hookgate::manifest::load(std::slice::from_ref(&manifests)).unwrap();
    let wi = &m.find("c/pay").unwrap().integration;

    let bodies = [
        r#"{"id":"evt_conflict","type":"invoice.paid","data":{"note":"first-body-7f3a"}}"#,
        r#"{"id":"evt_conflict","type":"invoice.paid","data":{"note":"second-body-9c1e"}}"#,
    ];
    let (mut answers, mut signatures) = (Vec::new(), Vec::new());
    for body in bodies {
        let req = hookgate::cli::send::sign_request(
            wi,
            &m.secrets,
            body.as_bytes().to_vec(),
            &Default::default(),
            chrono::Utc::now(),
        )
        .unwrap();
        let mut post = reqwest::Client::new()
            .post(format!("{}{}", server.base, req.path))
            .body(body);
        for (k, v) in &req.headers {
            if k.eq_ignore_ascii_case("stripe-signature") {
                signatures.push(v.clone());
                signatures.extend(
                    v.split(',')
                        .filter_map(|p| p.strip_prefix("v1="))
                        .map(str::to_string),
                );
            }
            post = post.header(k, v);
        }
        let res = post.send().await.unwrap();
        answers.push((res.status().as_u16(), res.json::<Value>().await.unwrap()));
    }
    assert_eq!(
        answers,
        [
            (
                200,
                serde_json::json!({"received": true, "duplicate": false})
            ),
            (
                200,
                serde_json::json!({"received": true, "duplicate": true})
            ),
        ]
    );
    assert_eq!(signatures.len(), 4, "both requests signed: {signatures:?}");
    assert_eq!(list(&db, &[])[0]["dedupe_conflicts"], 1);
    // The line is written before the answer is sent; stopping the process only ends the file.
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    let logs = std::fs::read_to_string(&log).unwrap();
    let conflicts: Vec<(&str, Value)> = logs
        .lines()
        .filter(|l| l.contains("dedupe conflict"))
        .map(|l| (l, serde_json::from_str(l).expect("a JSON log line")))
        .collect();
    assert_eq!(conflicts.len(), 1, "one line per conflict:\n{logs}");
    let (line, json) = &conflicts[0];
    assert_eq!(json["level"], "WARN", "{line}");
    let fields = json["fields"].as_object().expect("fields");
    let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["event_id", "integration", "message"], "{line}");
    assert_eq!(fields["integration"], "c/pay", "{line}");
    assert_eq!(fields["event_id"], "evt_conflict", "{line}");
    let mut never = vec![
        secret.to_string(),
        secret.trim_start_matches("whsec_").to_string(),
        "first-body-7f3a".to_string(),
        "second-body-9c1e".to_string(),
    ];
    never.extend(bodies.map(str::to_string));
    never.extend(signatures);
    for s in &never {
        assert!(
            !line.contains(s.as_str()),
            "{s:.24}… in the conflict line: {line}"
        );
    }
}
