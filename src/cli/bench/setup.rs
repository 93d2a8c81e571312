//! The bench's fixtures: its own database, the rows and signed requests, the manifests, and the
//! receiver and worker processes.

use super::BenchArgs;
use super::load::Prepared;
use super::sql::BenchRow;
use crate::signature::{SignInput, SigningKey};
use anyhow::{Context, bail};
use axum::body::Bytes;
use sha2::Digest;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DATABASE: &str = "hookgate_bench";
const DROP: &str = "DROP DATABASE IF EXISTS hookgate_bench WITH (FORCE)";
const CREATE: &str = "CREATE DATABASE hookgate_bench";
const SECRET: &str = "whsec_bench_only_0123456789abcdef";
const INTEGRATION: &str = "bench/stripe";

pub struct Env {
    admin_url: String,
    pub url: String,
    /// For the baselines: as many connections as clients.
    pub pool: PgPool,
    dir: tempfile::TempDir,
    body_bytes: usize,
}

impl Env {
    /// Creates the `hookgate_bench` database afresh and migrates it.
    pub async fn create(args: &BenchArgs) -> anyhow::Result<Self> {
        let mut url = reqwest::Url::parse(&args.database_url).context("--database-url")?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            bail!(
                "--database-url must be a postgres:// URL (the bench compares against PostgreSQL)"
            );
        }
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&args.database_url)
            .await
            .with_context(|| {
                format!(
                    "cannot connect to {}",
                    crate::redact::redact_url(&args.database_url)
                )
            })?;
        sqlx::raw_sql(DROP).execute(&admin).await?;
        sqlx::raw_sql(CREATE)
            .execute(&admin)
            .await
            .context("the bench needs CREATEDB on that server")?;
        admin.close().await;
        url.set_path(DATABASE);
        let url = url.to_string();
        crate::inbox::Inbox::connect(&url).await?.migrate().await?;
        let pool = PgPoolOptions::new()
            .max_connections(args.concurrency as u32)
            .connect(&url)
            .await?;
        Ok(Self {
            admin_url: args.database_url.clone(),
            url,
            pool,
            dir: tempfile::tempdir()?,
            body_bytes: args.body_bytes,
        })
    }

    /// Empties every table and checkpoints, so each phase starts from the same state.
    pub async fn reset(&self) -> anyhow::Result<()> {
        sqlx::raw_sql(
            "TRUNCATE inbox_events, signature_nonces, delivery_attempts, resource_versions \
             RESTART IDENTITY CASCADE",
        )
        .execute(&self.pool)
        .await?;
        // CHECKPOINT needs superuser or pg_checkpoint; without it the phases still run.
        let _ = sqlx::raw_sql("CHECKPOINT").execute(&self.pool).await;
        Ok(())
    }

    /// Refreshes the planner's statistics after a bulk load, as autovacuum would shortly after,
    /// so the delivery phase measures steady state rather than the minute after the load.
    pub async fn analyze(&self) -> anyhow::Result<()> {
        sqlx::raw_sql("ANALYZE inbox_events")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn pending(&self) -> anyhow::Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM inbox_events WHERE status = 'pending'")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    pub async fn drop_database(self) -> anyhow::Result<()> {
        self.pool.close().await;
        let admin = PgPool::connect(&self.admin_url).await?;
        sqlx::raw_sql(DROP).execute(&admin).await?;
        Ok(())
    }

    /// Event `i`'s body: a Stripe-shaped JSON object padded to exactly `body_bytes`.
    fn body(&self, i: usize) -> Bytes {
        let head = format!(
            r#"{{"id":"evt_bench_{i:08}","object":"event","type":"invoice.paid","data":{{"object":{{"pad":""#
        );
        let tail = r#""}}}"#;
        let pad = self.body_bytes.saturating_sub(head.len() + tail.len());
        Bytes::from(format!("{head}{}{tail}", "x".repeat(pad)))
    }

    /// The rows a receiver would store for events `from..from + n`, for the baselines.
    pub fn rows(&self, from: usize, n: usize) -> Arc<Vec<BenchRow>> {
        let now = chrono::Utc::now();
        (from..from + n)
            .map(|i| {
                let body = self.body(i);
                BenchRow {
                    integration: INTEGRATION.into(),
                    event_id: format!("evt_bench_{i:08}"),
                    body_sha256: sha2::Sha256::digest(&body).to_vec(),
                    headers: serde_json::json!([
                        ["host", "127.0.0.1"],
                        ["content-type", "application/json"],
                        ["content-length", body.len().to_string()]
                    ]),
                    body,
                    received_at: now,
                }
            })
            .collect::<Vec<_>>()
            .into()
    }

    /// Requests for events `from..from + n`, signed now with the bench integration's key.
    pub fn signed_requests(&self, from: usize, n: usize) -> anyhow::Result<Arc<Vec<Prepared>>> {
        let manifests = crate::manifest::load(&[self.manifest_path()])?;
        let table = manifests.route_table()?;
        let route = table
            .iter()
            .find(|r| r.integration == INTEGRATION)
            .context("bench integration compiled")?;
        let key = SigningKey::Hmac(SECRET.as_bytes().to_vec());
        let now = chrono::Utc::now().timestamp();
        (from..from + n)
            .map(|i| {
                let body = self.body(i);
                let event_id = format!("evt_bench_{i:08}");
                let input = SignInput {
                    key_id: "v1",
                    timestamp: now,
                    event_id: &event_id,
                    event_type: Some("invoice.paid"),
                    body: &body,
                };
                let mut headers = vec![("content-type".parse()?, "application/json".parse()?)];
                for (k, v) in route
                    .verifier
                    .scheme()
                    .sign(&key, &input)
                    .map_err(anyhow::Error::msg)?
                {
                    headers.push((k.parse()?, v.parse()?));
                }
                Ok(Prepared {
                    path: route.path.clone(),
                    headers,
                    body,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Arc::new)
    }

    fn manifest_path(&self) -> PathBuf {
        self.dir.path().join("bench.yaml")
    }

    /// One Stripe integration delivering to `sink`, with no rate limit.
    pub fn write_manifests(&self, sink: String) -> anyhow::Result<()> {
        let yaml = format!(
            r#"apiVersion: v1
kind: Secret
metadata: {{name: bench-keys, namespace: bench}}
stringData:
  v1: {SECRET}
  delivery: whsec_aG9va2dhdGUtYmVuY2gtZGVsaXZlcnkta2V5ISE=
---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: stripe, namespace: bench}}
spec:
  scheme: {{type: stripe}}
  replay: {{tolerance: 1h}}
  keys: [{{id: v1, secretRef: {{name: bench-keys, key: v1}}}}]
  delivery:
    url: "{sink}"
    signingSecretRef: {{name: bench-keys, key: delivery}}
"#
        );
        std::fs::write(self.manifest_path(), yaml)?;
        Ok(())
    }

    /// `hookgate standalone --no-workers` on a free loopback port, logging at the default level.
    pub fn spawn_receiver(&self) -> anyhow::Result<Child> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let listen = addr.to_string();
        self.spawn(
            "receiver",
            &["standalone", "--no-workers", "--listen", &listen],
            addr,
        )
    }

    pub fn spawn_workers(&self, concurrency: usize) -> anyhow::Result<Child> {
        let n = concurrency.to_string();
        self.spawn(
            "worker",
            &["worker", "--concurrency", &n],
            ([127, 0, 0, 1], 0).into(),
        )
    }

    fn spawn(&self, name: &str, args: &[&str], addr: SocketAddr) -> anyhow::Result<Child> {
        let log = self.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log)?;
        let proc = Command::new(std::env::current_exe()?)
            .args(args)
            .arg("-f")
            .arg(self.manifest_path())
            .args(["--admin-listen", "", "--database-url", &self.url])
            .env("RUST_LOG", "info")
            .env("HOOKGATE_LOG_FORMAT", "json")
            .stdout(file.try_clone()?)
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting the {name}"))?;
        Ok(Child { proc, addr, log })
    }
}

/// A hookgate process started by the bench; killed when dropped.
pub struct Child {
    proc: std::process::Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Child {
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(self.addr).await.is_err() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!(
                    "the receiver did not listen on {} within 30 s; its log:\n{log}",
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    fn status_kib(&self, field: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.proc.id()))
            .context("reading /proc (the bench measures memory on Linux)")?;
        status
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .trim()
                    .strip_suffix("kB")?
                    .trim()
                    .parse()
                    .ok()
            })
            .with_context(|| format!("no {field} in /proc/{}/status", self.proc.id()))
    }

    /// Resident memory now.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory the process ever had.
    pub fn peak_rss_kib(&self) -> anyhow::Result<u64> {
        self.status_kib("VmHWM:")
    }

    pub fn stop(mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}
