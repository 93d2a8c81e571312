//! Shared test fixtures: manifests written to real files, a receiver on a pinned clock, and
//! requests signed the way `hookgate send` signs them.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use base64::Engine;
use chrono::{DateTime, Utc};
use hookgate::cli::send::{SendOptions, sign_request};
use hookgate::inbox::Inbox;
use hookgate::manifest::{self, Manifests};
use hookgate::metrics::Metrics;
use hookgate::receiver::Receiver;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

/// The receiver's pinned "now".
pub fn t0() -> DateTime<Utc> {
    "2026-06-01T12:00:00Z".parse().unwrap()
}

pub fn ed_key(seed: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
}

fn ed_public_b64(seed: u8) -> String {
    base64::engine::general_purpose::STANDARD.encode(ed_key(seed).verifying_key().to_bytes())
}

/// Integrations used across the receiver tests (namespace `t`).
pub fn test_manifests() -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: t}}
stringData:
  stripe: whsec_test_receiver_secret
  github: test-github-secret
  hmac: test-hmac-secret
  old: "{old}"
  mid: "{mid}"
  new: "{new}"
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: stripe, namespace: t}}
spec:
  scheme: {{type: stripe}}
  keys: [{{id: v1, secretRef: {{name: keys, key: stripe}}}}]
  events: {{allow: ["invoice.*"]}}
  delivery: {{url: "http://127.0.0.1:1/sink"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: github, namespace: t}}
spec:
  scheme: {{type: github}}
  keys: [{{id: main, secretRef: {{name: keys, key: github}}}}]
  delivery: {{url: "http://127.0.0.1:1/sink"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: partner, namespace: t}}
spec:
  scheme: {{type: ed25519}}
  keys:
    - {{id: old, secretRef: {{name: keys, key: old}}, retireAt: "2026-05-01T00:00:00Z"}}
    - {{id: mid, secretRef: {{name: keys, key: mid}}, retireAt: "2026-07-01T00:00:00Z"}}
    - {{id: new, secretRef: {{name: keys, key: new}}}}
  delivery: {{url: "http://127.0.0.1:1/sink"}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: limited, namespace: t}}
spec:
  path: /in/limited
  scheme: {{type: hmac-sha256, keyIdHeader: ""}}
  keys: [{{id: h1, secretRef: {{name: keys, key: hmac}}}}]
  limits: {{maxBodyBytes: 64, requestsPerSecond: 1, burst: 2}}
  delivery: {{url: "http://127.0.0.1:1/sink"}}
"#,
        old = ed_public_b64(1),
        mid = ed_public_b64(2),
        new = ed_public_b64(3),
    )
}

/// Writes `yaml` to a real file and loads it like `hookgate standalone -f` does.
pub fn load(yaml: &str) -> Manifests {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifests.yaml");
    std::fs::write(&path, yaml).unwrap();
    manifest::load(&[path]).expect("test manifests load")
}

/// Manifests for a process test: integration `namespace/name`, signed with HMAC-SHA256 over
/// `{timestamp}.{body}` under key `k` (`secret`), delivering as `delivery` says (the inside of a
/// YAML flow map: `url: "http://…", timeout: 5m`).
pub fn hmac_integration(namespace: &str, name: &str, secret: &str, delivery: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Secret
metadata: {{name: keys, namespace: {namespace}}}
stringData: {{k: {secret}}}
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  scheme: {{type: hmac-sha256, keyIdHeader: "", eventIdHeader: "", signedPayload: "{{timestamp}}.{{body}}"}}
  keys: [{{id: k, secretRef: {{name: keys, key: k}}}}]
  delivery: {{{delivery}}}
"#
    )
}

/// Path and headers of `body` signed now for `integration`, as its provider would send it to a
/// running process (`hookgate send`'s signing).
pub fn signed_now(m: &Manifests, integration: &str, body: &str) -> (String, Vec<(String, String)>) {
    let wi = &m
        .find(integration)
        .expect("integration in the manifests")
        .integration;
    let req = sign_request(
        wi,
        &m.secrets,
        body.as_bytes().to_vec(),
        &SendOptions::default(),
        Utc::now(),
    )
    .unwrap();
    (req.path, req.headers)
}

pub struct Harness {
    pub receiver: Receiver,
    pub manifests: Manifests,
    pub now: Arc<Mutex<DateTime<Utc>>>,
    pub metrics: Arc<Metrics>,
}

pub fn harness(inbox: Inbox) -> Harness {
    harness_with(inbox, &test_manifests())
}

pub fn harness_with(inbox: Inbox, yaml: &str) -> Harness {
    let manifests = load(yaml);
    let now = Arc::new(Mutex::new(t0()));
    let clock = now.clone();
    let metrics = Arc::new(Metrics::new());
    let receiver = Receiver::new(
        manifests.route_table().unwrap(),
        inbox,
        metrics.clone(),
        Default::default(),
    )
    .with_clock(Arc::new(move || *clock.lock().unwrap()));
    Harness {
        receiver,
        manifests,
        now,
        metrics,
    }
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub json: Value,
}

impl Harness {
    /// Headers and path of a request signed for `integration` at the harness clock.
    pub fn sign(
        &self,
        integration: &str,
        body: &str,
        opts: SendOptions,
    ) -> (String, Vec<(String, String)>) {
        let wi = &self
            .manifests
            .find(integration)
            .expect("integration in manifests")
            .integration;
        let now = *self.now.lock().unwrap();
        let req = sign_request(
            wi,
            &self.manifests.secrets,
            body.as_bytes().to_vec(),
            &opts,
            now,
        )
        .expect("signs");
        (req.path, req.headers)
    }

    /// Posts with a Content-Length, as real clients do (oneshot does not add one).
    pub async fn post(
        &self,
        path: &str,
        headers: &[(String, String)],
        body: impl Into<String>,
    ) -> Reply {
        let body: String = body.into();
        let mut req = Request::post(path).header("content-length", body.len());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        self.call(req.body(Body::from(body)).unwrap()).await
    }

    /// Signs and posts in one go.
    pub async fn send(&self, integration: &str, body: &str, opts: SendOptions) -> Reply {
        let (path, headers) = self.sign(integration, body, opts);
        self.post(&path, &headers, body.to_string()).await
    }

    pub async fn call(&self, req: Request<Body>) -> Reply {
        let res = self.receiver.router().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = http_body_util::BodyExt::collect(res.into_body())
            .await
            .unwrap()
            .to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            json,
        }
    }

    pub fn set_now(&self, t: DateTime<Utc>) {
        *self.now.lock().unwrap() = t;
    }
}

/// Holds `LOCK TABLE inbox_events IN ACCESS EXCLUSIVE MODE` from a connection of its own until
/// the returned transaction ends: no statement of the receiver's can read or write it meanwhile.
pub async fn lock_inbox(pool: &sqlx::PgPool) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE inbox_events IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

/// Waits until the receiver answers retries from its memory: its first confirmation against
/// the purges recorded in the inbox, right after it starts.
pub async fn await_dedupe_memory(h: &Harness) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !h.receiver.answers_from_memory() {
        assert!(
            std::time::Instant::now() < deadline,
            "the memory was never confirmed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Turns the receiver's memory of committed keys off: every duplicate asks the inbox.
pub fn without_dedupe_memory(h: &mut Harness) {
    with_dedupe_memory_of(h, 0);
}

/// Gives the receiver a fresh memory of committed keys of `bytes`.
pub fn with_dedupe_memory_of(h: &mut Harness, bytes: usize) {
    h.receiver = h
        .receiver
        .clone()
        .with_group_commit(hookgate::inbox::GroupCommitConfig {
            recent: hookgate::inbox::RecentConfig {
                bytes,
                ..Default::default()
            },
            ..Default::default()
        });
}

pub fn accepted() -> Value {
    serde_json::json!({"received": true, "duplicate": false})
}

pub fn duplicate() -> Value {
    serde_json::json!({"received": true, "duplicate": true})
}

pub fn error(code: &str) -> Value {
    serde_json::json!({"error": code})
}

pub fn opts() -> SendOptions {
    SendOptions::default()
}

pub fn ed_opts(seed: u8, key_id: &str) -> SendOptions {
    SendOptions {
        key_id: Some(key_id.into()),
        signing_key: Some(
            base64::engine::general_purpose::STANDARD
                .encode(ed_key(seed).to_bytes())
                .into_bytes(),
        ),
        ..SendOptions::default()
    }
}

/// Replaces the value of header `name` (case-insensitive) in a signed header list.
pub fn with_header(headers: &[(String, String)], name: &str, value: &str) -> Vec<(String, String)> {
    let mut out: Vec<_> = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(name))
        .cloned()
        .collect();
    out.push((name.to_string(), value.to_string()));
    out
}

pub fn without_header(headers: &[(String, String)], name: &str) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case(name))
        .cloned()
        .collect()
}

pub fn stripe_body(id: &str, ty: &str) -> String {
    format!(r#"{{"id":"{id}","object":"event","type":"{ty}","data":{{"object":{{"id":"in_1"}}}}}}"#)
}
pub mod destination;
pub mod loopback;
pub mod mock_api;
pub mod pg_link;
pub mod plans;
pub mod procs;
pub mod running;
#[macro_use]
pub mod scenarios;
pub mod timing;

/// A migrated SQLite inbox in a fresh temporary directory (kept alive by the returned guard).
pub async fn sqlite_inbox() -> (tempfile::TempDir, Inbox) {
    let (dir, _, inbox) = sqlite_inbox_named("inbox.db").await;
    (dir, inbox)
}

/// A migrated SQLite inbox in the file `name` of a fresh temporary folder, with its URL (for
/// the CLI, which opens its own).
pub async fn sqlite_inbox_named(name: &str) -> (tempfile::TempDir, String, Inbox) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join(name).display());
    let inbox = Inbox::connect(&url).await.unwrap();
    inbox.migrate().await.unwrap();
    (dir, url, inbox)
}

/// A second pool on the same database, as another worker process has.
pub async fn second_pool(inbox: &Inbox) -> Inbox {
    match inbox {
        Inbox::Postgres(pool) => {
            let opts = (*pool.connect_options()).clone();
            Inbox::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .connect_with(opts)
                    .await
                    .unwrap(),
            )
        }
        Inbox::Sqlite(pool) => {
            let opts = (*pool.connect_options()).clone();
            Inbox::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    .connect_with(opts)
                    .await
                    .unwrap(),
            )
        }
    }
}

/// Runs each named `async fn(Inbox)` of the calling test file on PostgreSQL (`#[sqlx::test]`,
/// its own migrated database) and on a SQLite file.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[sqlx::test(migrations = "migrations/postgres")]
                async fn $name(pool: sqlx::PgPool) {
                    super::$name(hookgate::inbox::Inbox::Postgres(pool)).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (_dir, inbox) = $crate::common::sqlite_inbox().await;
                    super::$name(inbox).await;
                }
            )*
        }
    };
}

/// Runs `$body` with `$pool` bound to the concrete pool of `$inbox` (raw-SQL fixtures in tests).
#[macro_export]
macro_rules! on {
    ($inbox:expr, $pool:ident => $body:expr) => {
        match $inbox {
            hookgate::inbox::Inbox::Postgres($pool) => $body,
            hookgate::inbox::Inbox::Sqlite($pool) => $body,
        }
    };
}

/// For a test that cannot run here because a tool or service is missing: outside CI it says why
/// and the caller returns; in CI (`CI` set and non-empty) a skip would turn a missing install
/// step into a green run, so it fails instead. Every caller is listed in the README's
/// Development section with what it needs.
pub fn skip_or_fail(why: &str) {
    match std::env::var("CI") {
        Ok(ci) if !ci.is_empty() => panic!("CI={ci}: this test may not be skipped in CI: {why}"),
        _ => eprintln!("SKIPPED: {why}"),
    }
}

/// The actor of replays and purges made by tests.
pub fn tester() -> hookgate::inbox::Actor {
    hookgate::inbox::Actor {
        name: "tester".into(),
        source: hookgate::inbox::ActorSource::OsUser,
    }
}

/// An inbox on `pool`'s database whose connections have the statement timeout `ms` that
/// `Inbox::connect` gives them from `--db-statement-timeout` (the test pools have none).
pub async fn with_statement_timeout(pool: &sqlx::PgPool, ms: &str) -> Inbox {
    let opts = (*pool.connect_options())
        .clone()
        .options([("statement_timeout", ms)]);
    Inbox::Postgres(
        sqlx::postgres::PgPoolOptions::new()
            .connect_with(opts)
            .await
            .unwrap(),
    )
}
