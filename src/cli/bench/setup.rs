//! The bench's fixtures: its own database, the rows and signed requests, the manifests, and the
//! receiver and worker processes.

use super::BenchArgs;
use super::load::Prepared;
use super::ports::free_port;
use super::requests::{self, INTEGRATION, SECRET, Signer};
use super::sql::BenchRow;
use anyhow::{Context, bail};
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

/// The headers the receiver stores for a bench request (as JSON, the inbox's `headers` column).
pub fn headers_json(content_length: usize) -> serde_json::Value {
    serde_json::json!([
        ["host", "127.0.0.1"],
        ["content-type", "application/json"],
        ["content-length", content_length.to_string()]
    ])
}

pub struct Env {
    admin_url: String,
    pub url: String,
    /// For the baselines: as many connections as clients.
    pub pool: PgPool,
    dir: tempfile::TempDir,
    body_bytes: usize,
    /// The binary started as receiver and workers.
    hookgate: PathBuf,
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
            hookgate: match &args.hookgate {
                Some(path) => path.clone(),
                None => std::env::current_exe()?,
            },
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

    /// Events stored but not delivered yet: waiting, claimed, or waiting for a retry.
    pub async fn backlog(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM inbox_events WHERE status IN ('pending', 'processing', 'retry')",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    pub async fn drop_database(self) -> anyhow::Result<()> {
        self.pool.close().await;
        let admin = PgPool::connect(&self.admin_url).await?;
        sqlx::raw_sql(DROP).execute(&admin).await?;
        Ok(())
    }

    /// The rows a receiver would store for events `from..from + n`, for the baselines.
    pub fn rows(&self, from: usize, n: usize) -> Arc<Vec<BenchRow>> {
        let now = chrono::Utc::now();
        (from..from + n)
            .map(|i| {
                let body = requests::body(i, self.body_bytes);
                BenchRow {
                    integration: INTEGRATION.into(),
                    event_id: requests::event_id(i),
                    body_sha256: sha2::Sha256::digest(&body).to_vec(),
                    headers: headers_json(body.len()),
                    body,
                    received_at: now,
                }
            })
            .collect::<Vec<_>>()
            .into()
    }

    /// Requests for events `from..from + n`, signed now with the bench integration's key.
    pub fn signed_requests(&self, from: usize, n: usize) -> anyhow::Result<Arc<Vec<Prepared>>> {
        self.signer(from, n)?.all()
    }

    /// Requests for events `from..from + n`, signed as they are sent.
    pub fn signer(&self, from: usize, n: usize) -> anyhow::Result<Signer> {
        self.signer_of(INTEGRATION, from, n)
    }

    /// [`Env::signer`] for another integration of the manifests.
    pub fn signer_of(&self, integration: &str, from: usize, n: usize) -> anyhow::Result<Signer> {
        Signer::new(&self.manifest_path(), integration, self.body_bytes, from, n)
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.dir.path().join("bench.yaml")
    }

    /// One Stripe integration delivering to `sink`, with no rate limit.
    pub fn write_manifests(&self, sink: String) -> anyhow::Result<()> {
        self.write_integrations(&[("stripe", &sink)])
    }

    /// Stripe integrations of the `bench` namespace, each `(name, destination)`, every one
    /// signed with [`SECRET`] and none rate limited.
    pub fn write_integrations(&self, integrations: &[(&str, &str)]) -> anyhow::Result<()> {
        let mut yaml = format!(
            r#"apiVersion: v1
kind: Secret
metadata: {{name: bench-keys, namespace: bench}}
stringData:
  v1: {SECRET}
  delivery: whsec_aG9va2dhdGUtYmVuY2gtZGVsaXZlcnkta2V5ISE=
"#
        );
        for (name, url) in integrations {
            yaml.push_str(&format!(
                r#"---
apiVersion: hookgate.dev/v1alpha1
kind: WebhookIntegration
metadata: {{name: {name}, namespace: bench}}
spec:
  scheme: {{type: stripe}}
  replay: {{tolerance: 1h}}
  keys: [{{id: v1, secretRef: {{name: bench-keys, key: v1}}}}]
  delivery:
    url: "{url}"
    signingSecretRef: {{name: bench-keys, key: delivery}}
"#
            ));
        }
        std::fs::write(self.manifest_path(), yaml)?;
        Ok(())
    }

    /// `hookgate standalone --no-workers` on a free loopback port, logging at the default level,
    /// with an admin port when `admin` (for its counters).
    pub fn spawn_receiver(&self, admin: Option<SocketAddr>) -> anyhow::Result<Child> {
        self.spawn_receiver_with(admin, &[])
    }

    /// [`Env::spawn_receiver`] with more flags.
    pub fn spawn_receiver_with(
        &self,
        admin: Option<SocketAddr>,
        flags: &[&str],
    ) -> anyhow::Result<Child> {
        let addr = free_port()?;
        let listen = addr.to_string();
        let mut args = vec!["standalone", "--no-workers", "--listen", &listen];
        args.extend_from_slice(flags);
        self.spawn("receiver", &args, addr, admin)
    }

    /// `hookgate standalone` with its workers, as a user first runs it, and its admin port (for
    /// its counters).
    pub fn spawn_standalone(&self, worker_concurrency: usize) -> anyhow::Result<Child> {
        let addr = free_port()?;
        let (listen, n) = (addr.to_string(), worker_concurrency.to_string());
        self.spawn(
            "standalone",
            &["standalone", "--listen", &listen, "--concurrency", &n],
            addr,
            Some(free_port()?),
        )
    }

    /// `hookgate worker`; with `admin`, it serves its admin port there, which is then the address
    /// [`Child::wait_ready`] waits for (a worker listens for nothing else).
    pub fn spawn_workers(
        &self,
        concurrency: usize,
        admin: Option<SocketAddr>,
    ) -> anyhow::Result<Child> {
        let n = concurrency.to_string();
        self.spawn(
            "worker",
            &["worker", "--concurrency", &n],
            admin.unwrap_or(([127, 0, 0, 1], 0).into()),
            admin,
        )
    }

    /// Without `admin`, the child serves no admin port.
    fn spawn(
        &self,
        name: &str,
        args: &[&str],
        addr: SocketAddr,
        admin: Option<SocketAddr>,
    ) -> anyhow::Result<Child> {
        let mut cmd = Command::new(&self.hookgate);
        let admin_listen = admin.map(|a| a.to_string()).unwrap_or_default();
        cmd.args(args)
            .arg("-f")
            .arg(self.manifest_path())
            .args(["--admin-listen", &admin_listen, "--database-url", &self.url])
            .env("RUST_LOG", "info")
            .env("HOOKGATE_LOG_FORMAT", "json");
        let mut child = self.spawn_command(name, cmd, addr)?;
        child.admin = admin;
        Ok(child)
    }

    /// Starts `cmd` as `name`, its output in a log file of the bench's scratch directory.
    pub fn spawn_command(
        &self,
        name: &str,
        mut cmd: Command,
        addr: SocketAddr,
    ) -> anyhow::Result<Child> {
        let log = self.dir.path().join(format!("{name}.log"));
        let file = std::fs::File::create(&log)?;
        let proc = cmd
            .stdout(file.try_clone()?)
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting the {name}"))?;
        Ok(Child {
            proc,
            addr,
            admin: None,
            log,
        })
    }
}

/// A hookgate process started by the bench; killed when dropped.
pub struct Child {
    proc: std::process::Child,
    pub addr: SocketAddr,
    /// Its admin port, when it serves one.
    pub admin: Option<SocketAddr>,
    log: PathBuf,
}

impl Child {
    pub fn pid(&self) -> u32 {
        self.proc.id()
    }

    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(self.addr).await.is_err() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!(
                    "the process logging to {} did not listen on {} within 30 s; its log:\n{log}",
                    self.log.display(),
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
