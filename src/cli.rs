//! Command-line interface: one binary, a subcommand per role or task.

use crate::crd::WebhookIntegration;
use crate::inbox::{EventSummary, Inbox, ListFilter, Status};
use crate::send::{SendOptions, sign_request};
use crate::worker::destinations::{self, Policy, Scope};
use crate::{manifest, standalone};
use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kube::CustomResourceExt;
use std::net::SocketAddr;
use std::path::PathBuf;

const DEFAULT_DB: &str = "sqlite://hookgate.db";

#[derive(Parser, Debug)]
#[command(
    name = "hookgate",
    version,
    about = "Receive third-party webhooks safely: verify, dedupe, commit, deliver"
)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "HOOKGATE_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the WebhookIntegration CustomResourceDefinition as YAML.
    Crdgen,
    /// Run the receiver from manifest files, on SQLite by default.
    Standalone(StandaloneArgs),
    /// Run the Kubernetes controller: WebhookIntegrations -> compiled routes, staged key rotation.
    Controller(ControllerArgs),
    /// Run the receiver in a cluster: routes come from the controller's compiled route Secrets.
    Receiver(ReceiverArgs),
    /// Run only the delivery workers (cluster mode: receivers run elsewhere).
    Worker(WorkerModeArgs),
    /// A local destination that prints every delivery (and checks its signature).
    Sink(crate::worker::sink::SinkArgs),
    /// Sign a request exactly like the integration's provider and send it.
    Send(SendArgs),
    /// Inspect the inbox.
    Inbox {
        #[command(subcommand)]
        command: InboxCommand,
    },
    /// Inspect, replay and purge dead letters.
    Dlq {
        #[command(subcommand)]
        command: crate::dlq::DlqCommand,
    },
    /// Measure intake, duplicates, delivery and verification against plain PostgreSQL inserts.
    Bench(crate::bench::BenchArgs),
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
    },
}

#[derive(Args, Debug)]
pub struct StandaloneArgs {
    /// Manifest files or directories (WebhookIntegrations and v1 Secrets).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, default_value = "127.0.0.1:8080", env = "HOOKGATE_LISTEN")]
    pub listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "127.0.0.1:9090", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
    pub database_url: String,
    /// Run the receiver only (deliver with `hookgate worker -f` elsewhere).
    #[arg(long)]
    pub no_workers: bool,
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub listener: ListenerArgs,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

/// Deadlines of database calls (request path, worker claims and completions).
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// How long a call may wait for a pooled database connection.
    #[arg(long, default_value_t = crate::inbox::DbLimits::default().acquire_timeout.into(), env = "HOOKGATE_DB_ACQUIRE_TIMEOUT")]
    pub db_acquire_timeout: humantime::Duration,
    /// How long one statement may run or wait for locks (PostgreSQL statement_timeout, SQLite
    /// busy timeout). A request answers 503 within both timeouts together.
    #[arg(long, default_value_t = crate::inbox::DbLimits::default().statement_timeout.into(), env = "HOOKGATE_DB_STATEMENT_TIMEOUT")]
    pub db_statement_timeout: humantime::Duration,
}

impl DbArgs {
    pub fn limits(&self) -> anyhow::Result<crate::inbox::DbLimits> {
        if self.db_acquire_timeout.is_zero() || self.db_statement_timeout.is_zero() {
            bail!("--db-acquire-timeout and --db-statement-timeout must be more than 0");
        }
        Ok(crate::inbox::DbLimits {
            acquire_timeout: *self.db_acquire_timeout,
            statement_timeout: *self.db_statement_timeout,
        })
    }
}

/// Connection-level limits of the receiver's listener (the admin port takes the header timeout).
#[derive(Args, Debug, Clone)]
pub struct ListenerArgs {
    /// How long a client may take to send a request's headers; a kept-alive connection idle this
    /// long is closed too. Slow-header clients are dropped.
    #[arg(long, default_value_t = crate::listener::HEADER_TIMEOUT.into(), env = "HOOKGATE_HEADER_TIMEOUT")]
    pub header_timeout: humantime::Duration,
    /// How long a client may take to send a request's body before it gets 408.
    #[arg(long, default_value_t = crate::receiver::BODY_TIMEOUT.into(), env = "HOOKGATE_BODY_TIMEOUT")]
    pub body_timeout: humantime::Duration,
    /// Open connections at once; more are answered 503 `overloaded` and closed.
    #[arg(long, default_value_t = crate::listener::MAX_CONNECTIONS, env = "HOOKGATE_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Requests being handled at once; more are answered 503 `overloaded`, never queued.
    #[arg(long, default_value_t = crate::listener::MAX_IN_FLIGHT, env = "HOOKGATE_MAX_IN_FLIGHT")]
    pub max_in_flight: usize,
    /// Requests per second (and burst) that may fail verification on one route before the rest
    /// get 429; they never spend the route's limits.requestsPerSecond. 0: no limit.
    #[arg(long, default_value_t = crate::receiver::limits::UNVERIFIED_RPS, env = "HOOKGATE_UNVERIFIED_RPS")]
    pub unverified_rps: u32,
}

impl ListenerArgs {
    pub fn limits(&self) -> anyhow::Result<crate::listener::Limits> {
        if self.max_connections == 0 || self.max_in_flight == 0 {
            bail!("--max-connections and --max-in-flight must be at least 1");
        }
        if self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            bail!("--header-timeout and --body-timeout must be more than 0");
        }
        Ok(crate::listener::Limits {
            header_timeout: *self.header_timeout,
            max_connections: self.max_connections,
            max_in_flight: self.max_in_flight,
        })
    }
}

/// Group commit: how the receiver gathers concurrent requests into one transaction.
#[derive(Args, Debug, Clone)]
pub struct CommitArgs {
    /// How long a batch may wait for more requests once the receiver is busy. 0: a batch is
    /// whatever arrived while the previous one committed. A lone request never waits.
    #[arg(long, default_value = "0ms", value_parser = humantime::parse_duration, env = "HOOKGATE_COMMIT_WINDOW")]
    pub commit_window: std::time::Duration,
    /// Most events committed in one transaction (1-1000).
    #[arg(long, default_value_t = 64, env = "HOOKGATE_COMMIT_BATCH")]
    pub commit_batch: usize,
    /// Transactions in flight at once [default: 1].
    #[arg(long, env = "HOOKGATE_COMMIT_CONCURRENCY")]
    pub commit_concurrency: Option<usize>,
}

impl CommitArgs {
    pub fn config(
        &self,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::inbox::GroupCommitConfig> {
        if !(1..=crate::inbox::MAX_BATCH).contains(&self.commit_batch) {
            bail!(
                "--commit-batch must be between 1 and {}, got {}",
                crate::inbox::MAX_BATCH,
                self.commit_batch
            );
        }
        if self.commit_concurrency == Some(0) {
            bail!("--commit-concurrency must be at least 1");
        }
        Ok(crate::inbox::GroupCommitConfig {
            window: self.commit_window,
            max_batch: self.commit_batch,
            concurrency: self.commit_concurrency,
            db,
        })
    }
}

/// `hookgate controller`.
#[derive(Args, Debug)]
pub struct ControllerArgs {
    /// The controller's namespace: compiled routes and the leader-election Lease live here.
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    /// Only reconcile integrations in this namespace (default: all namespaces).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// The inbox, for each key's lastUsedAt (optional).
    #[arg(long, env = "HOOKGATE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// This replica's identity in the leader Lease.
    #[arg(long, env = "POD_NAME", default_value = "hookgate-controller")]
    pub identity: String,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "0.0.0.0:9092", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
}

/// `hookgate receiver`: cluster mode.
#[derive(Args, Debug)]
pub struct ReceiverArgs {
    #[arg(long, default_value = "0.0.0.0:8080", env = "HOOKGATE_LISTEN")]
    pub listen: SocketAddr,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "0.0.0.0:9090", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[arg(long, env = "HOOKGATE_DATABASE_URL")]
    pub database_url: String,
    /// The namespace holding compiled route Secrets (the receiver's own).
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: String,
    #[command(flatten)]
    pub commit: CommitArgs,
    #[command(flatten)]
    pub listener: ListenerArgs,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `hookgate worker`: the delivery workers alone, against a shared database.
#[derive(Args, Debug)]
pub struct WorkerModeArgs {
    /// Manifest files or directories: the integrations whose events this process delivers.
    #[arg(
        short = 'f',
        long = "filename",
        required_unless_present = "namespace",
        conflicts_with = "namespace"
    )]
    pub files: Vec<PathBuf>,
    /// In a cluster: take delivery targets from the compiled route Secrets of this namespace.
    #[arg(long)]
    pub namespace: Option<String>,
    #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
    pub database_url: String,
    /// Admin endpoints: /metrics, /healthz, /readyz. Empty string disables them.
    #[arg(long, default_value = "127.0.0.1:9091", env = "HOOKGATE_ADMIN_LISTEN")]
    pub admin_listen: String,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub worker: WorkerArgs,
}

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Deliveries in flight at once in this process.
    #[arg(long, default_value_t = 16, env = "HOOKGATE_CONCURRENCY")]
    pub concurrency: usize,
    /// How long a claimed event is leased. Each attempt ends by 3/4 of it, whatever the
    /// integration's delivery timeout, so that it never outlives its claim.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub lease: std::time::Duration,
    /// Pause between claims when nothing is due.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    pub poll: std::time::Duration,
    /// On SIGTERM, how long in-flight deliveries may finish before their claims are released.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub grace: std::time::Duration,
    /// How long an event whose integration is gone waits for it to come back before it is
    /// dead-lettered as `integration_missing` (counted from its arrival).
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration, env = "HOOKGATE_ORPHAN_GRACE")]
    pub orphan_grace: std::time::Duration,
    /// Where integrations may deliver: `open` (any Service, any external host) or `namespace`
    /// (Services of the integration's own namespace, plus --allow-destination-host). Metadata
    /// addresses and the API server are refused either way.
    #[arg(long, value_enum, default_value_t = Scope::default(), env = "HOOKGATE_DESTINATIONS")]
    pub destinations: Scope,
    /// With `--destinations namespace`: an external host every integration may deliver to
    /// (`api.example.com`, `*.example.com` for its subdomains, or an IP address). Repeat the flag,
    /// or separate with commas in the variable.
    #[arg(
        long = "allow-destination-host",
        value_name = "HOST",
        env = "HOOKGATE_ALLOW_DESTINATION_HOSTS",
        value_delimiter = ',',
        value_parser = destinations::parse_allowed_host
    )]
    pub allow_destination_hosts: Vec<String>,
    /// The cluster's DNS domain, for `<svc>.<namespace>.svc.<domain>` destinations.
    #[arg(long, default_value = destinations::DEFAULT_CLUSTER_DOMAIN, env = "HOOKGATE_CLUSTER_DOMAIN")]
    pub cluster_domain: String,
}

impl WorkerArgs {
    fn config(&self, db: crate::inbox::DbLimits) -> anyhow::Result<crate::worker::WorkerConfig> {
        if self.concurrency == 0 {
            bail!("--concurrency must be at least 1");
        }
        let cluster_domain = self.cluster_domain.trim_matches('.').to_ascii_lowercase();
        if cluster_domain.is_empty() {
            bail!("--cluster-domain must not be empty");
        }
        Ok(crate::worker::WorkerConfig {
            concurrency: self.concurrency,
            lease: self.lease,
            poll: self.poll,
            grace: self.grace,
            orphan_grace: self.orphan_grace,
            destinations: Policy {
                scope: self.destinations,
                allowed_hosts: self.allow_destination_hosts.clone(),
                cluster_domain,
                // Refused whenever the process runs in a pod, `worker -f` included.
                api_server: crate::worker::resolver::api_server_from_env(),
                ..Policy::default()
            },
            db,
            ..Default::default()
        })
    }

    /// `worker --namespace`: in a pod, loopback is the pod itself (and its sidecars), not a
    /// destination. Out of one (the cluster test suite runs roles as host processes), local
    /// sinks stay allowed.
    fn cluster_config(
        &self,
        in_pod: bool,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        let mut cfg = self.config(db)?;
        cfg.destinations.allow_loopback = !in_pod;
        Ok(cfg)
    }
}

fn admin_addr(s: &str) -> anyhow::Result<Option<SocketAddr>> {
    match s {
        "" => Ok(None),
        s => Ok(Some(
            s.parse().with_context(|| format!("--admin-listen {s:?}"))?,
        )),
    }
}

#[derive(Args, Debug)]
pub struct SendArgs {
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// `namespace/name` of the WebhookIntegration.
    #[arg(long)]
    pub integration: String,
    #[command(flatten)]
    pub request: SendRequestArgs,
}

/// What to send and where: shared by `hookgate send` and `kubectl hookgate send`.
#[derive(Args, Debug, Clone)]
pub struct SendRequestArgs {
    #[arg(long, conflicts_with = "body", required_unless_present = "body")]
    pub body_file: Option<PathBuf>,
    #[arg(long)]
    pub body: Option<String>,
    /// Receiver URL. Without a path the integration's route is appended; with one it is used as is
    /// (for a receiver behind an ingress that rewrites paths).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Private key for Ed25519 schemes (raw, base64, hex or PKCS#8 PEM).
    #[arg(long)]
    pub signing_key_file: Option<PathBuf>,
    /// Sign with this key instead of the newest active one.
    #[arg(long)]
    pub key_id: Option<String>,
    /// Event id for schemes that send it in a header (default: random).
    #[arg(long)]
    pub event_id: Option<String>,
    /// Event type for schemes that send it in a header (GitHub, Shopify).
    #[arg(long)]
    pub event_type: Option<String>,
    /// Signed timestamp (unix seconds) instead of now, to try the replay window.
    #[arg(long, allow_hyphen_values = true)]
    pub timestamp: Option<i64>,
}

#[derive(Subcommand, Debug)]
pub enum InboxCommand {
    /// List events, newest first, without bodies.
    List {
        #[arg(long, env = "HOOKGATE_DATABASE_URL", default_value = DEFAULT_DB)]
        database_url: String,
        /// `namespace/name`
        #[arg(long)]
        integration: Option<String>,
        #[arg(long)]
        status: Option<Status>,
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[arg(long, default_value_t = 100)]
        limit: i64,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Crdgen => {
            print!("{}", crd_yaml());
            Ok(())
        }
        Command::Standalone(a) => {
            let db = a.db.limits()?;
            let cfg = standalone::Config {
                files: a.files,
                listen: Some(a.listen),
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                worker: (!a.no_workers).then(|| a.worker.config(db)).transpose()?,
                commit: a.commit.config(db)?,
                db,
                listener: a.listener.limits()?,
                body_timeout: *a.listener.body_timeout,
                unverified_rps: a.listener.unverified_rps,
            };
            standalone::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Controller(a) => {
            let cfg = crate::controller::run::Config {
                namespace: a.namespace,
                watch_namespace: a.watch_namespace,
                database_url: a.database_url,
                identity: a.identity,
                admin_listen: admin_addr(&a.admin_listen)?,
            };
            crate::controller::run::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Receiver(a) => {
            let db = a.db.limits()?;
            let cfg = crate::receiver::cluster::Config {
                listen: a.listen,
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                namespace: a.namespace,
                commit: a.commit.config(db)?,
                db,
                listener: a.listener.limits()?,
                body_timeout: *a.listener.body_timeout,
                unverified_rps: a.listener.unverified_rps,
            };
            crate::receiver::cluster::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Worker(a) if a.files.is_empty() => {
            let namespace = a.namespace.clone().expect("clap: -f or --namespace");
            crate::receiver::cluster::run_workers(
                namespace,
                &a.database_url,
                admin_addr(&a.admin_listen)?,
                a.worker
                    .cluster_config(crate::worker::resolver::in_pod(), a.db.limits()?)?,
                shutdown_signal(),
            )
            .await?;
            Ok(())
        }
        Command::Worker(a) => {
            let db = a.db.limits()?;
            let cfg = standalone::Config {
                files: a.files,
                listen: None,
                admin_listen: admin_addr(&a.admin_listen)?,
                database_url: a.database_url,
                worker: Some(a.worker.config(db)?),
                commit: Default::default(),
                db,
                listener: Default::default(),
                body_timeout: crate::receiver::BODY_TIMEOUT,
                unverified_rps: crate::receiver::limits::UNVERIFIED_RPS,
            };
            standalone::run(cfg, shutdown_signal()).await?;
            Ok(())
        }
        Command::Sink(a) => crate::worker::sink::run(a, shutdown_signal()).await,
        Command::Send(a) => send(a).await,
        Command::Inbox {
            command:
                InboxCommand::List {
                    database_url,
                    integration,
                    status,
                    output,
                    limit,
                },
        } => {
            let inbox = Inbox::connect(&database_url).await?;
            inbox.migrate().await?;
            let rows = inbox
                .list(&ListFilter {
                    integration,
                    status,
                    limit,
                })
                .await?;
            match output {
                Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
                Output::Table => print!("{}", table(&rows)),
            }
            Ok(())
        }
        Command::Dlq { command } => crate::dlq::run(command).await,
        Command::Bench(a) => crate::bench::run(a).await,
        Command::Migrate { database_url } => {
            Inbox::connect(&database_url).await?.migrate().await?;
            eprintln!("migrations applied");
            Ok(())
        }
    }
}

/// The CRD as committed in `crds/`.
pub fn crd_yaml() -> String {
    serde_yaml::to_string(&WebhookIntegration::crd()).expect("CRD serializes")
}

async fn send(a: SendArgs) -> anyhow::Result<()> {
    let manifests = manifest::load(&a.files)?;
    let loaded = manifests
        .find(&a.integration)
        .with_context(|| format!("no WebhookIntegration {} in the given files", a.integration))?;
    let source = format!("{}: {}", loaded.file, loaded.object());
    let (status, text, key_id) =
        send_signed(&loaded.integration, &manifests.secrets, &a.request, &source).await?;
    println!("{status} {text}");
    eprintln!("(signed with key {key_id:?})");
    Ok(())
}

/// Signs the request as the integration's provider would and POSTs it. Returns the status, the
/// response body and the id of the key used. `source` names the integration in errors.
pub async fn send_signed(
    wi: &WebhookIntegration,
    secrets: &crate::receiver::route::Secrets,
    a: &SendRequestArgs,
    source: &str,
) -> anyhow::Result<(u16, String, String)> {
    let body = match (&a.body, &a.body_file) {
        (Some(b), _) => b.clone().into_bytes(),
        (None, Some(f)) => {
            std::fs::read(f).with_context(|| format!("--body-file {}", f.display()))?
        }
        (None, None) => bail!("pass --body or --body-file"),
    };
    let signing_key = match &a.signing_key_file {
        Some(f) => {
            Some(std::fs::read(f).with_context(|| format!("--signing-key-file {}", f.display()))?)
        }
        None => None,
    };
    let opts = SendOptions {
        key_id: a.key_id.clone(),
        event_id: a.event_id.clone(),
        event_type: a.event_type.clone(),
        signing_key,
        timestamp: a.timestamp,
    };
    let req = sign_request(wi, secrets, body, &opts, chrono::Utc::now())
        .map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    let url = target_url(&a.url, &req.path)?;
    let mut builder = reqwest::Client::new().post(&url).body(req.body);
    for (k, v) in &req.headers {
        builder = builder.header(k, v);
    }
    let res = builder
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    Ok((status, text, req.key_id))
}

/// `--url` with no path gets the integration's route; a URL with a path is taken as given.
fn target_url(url: &str, route: &str) -> anyhow::Result<String> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("--url {url:?}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        bail!("--url {url:?}: use an http:// or https:// URL");
    }
    Ok(match parsed.path() {
        "" | "/" => format!("{}{route}", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

fn table(rows: &[EventSummary]) -> String {
    let mut out = format!(
        "{:<6} {:<28} {:<36} {:<32} {:<11} {:<8} {:<8} {}\n",
        "ID", "INTEGRATION", "EVENT_ID", "TYPE", "STATUS", "KEY", "ATTEMPTS", "RECEIVED"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<6} {:<28} {:<36} {:<32} {:<11} {:<8} {:<8} {}\n",
            r.id,
            r.integration,
            r.event_id,
            r.event_type.as_deref().unwrap_or("-"),
            r.status,
            r.key_id,
            r.attempts,
            r.received_at.format("%Y-%m-%dT%H:%M:%SZ")
        ));
    }
    out
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker_args(args: &[&str]) -> Result<WorkerModeArgs, clap::Error> {
        let argv = ["hookgate", "worker"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Worker(a) => Ok(a),
            other => panic!("not a worker command: {other:?}"),
        }
    }

    #[test]
    fn destination_flags_reach_the_worker_policy() {
        let a = worker_args(&[
            "--namespace",
            "hookgate-system",
            "--destinations",
            "namespace",
            "--allow-destination-host",
            "*.Partner.example",
            "--allow-destination-host",
            "api.vendor.example.",
            "--cluster-domain",
            "corp.internal",
        ])
        .unwrap();
        let cluster = a
            .worker
            .cluster_config(true, Default::default())
            .unwrap()
            .destinations;
        assert_eq!(cluster.scope, Scope::Namespace);
        assert_eq!(
            cluster.allowed_hosts,
            ["*.partner.example", "api.vendor.example"]
        );
        assert_eq!(cluster.cluster_domain, "corp.internal");
        assert!(
            !cluster.allow_loopback,
            "a pod's loopback is not a destination"
        );
        assert!(
            a.worker
                .config(Default::default())
                .unwrap()
                .destinations
                .allow_loopback
        );
    }

    #[test]
    fn destinations_default_to_open_and_refuse_a_bad_host() {
        let a = worker_args(&["-f", "x.yaml"]).unwrap();
        let policy = a.worker.config(Default::default()).unwrap().destinations;
        assert_eq!(policy.scope, Scope::Open);
        assert_eq!(policy.cluster_domain, destinations::DEFAULT_CLUSTER_DOMAIN);
        assert!(policy.allowed_hosts.is_empty());
        let e = worker_args(&[
            "-f",
            "x.yaml",
            "--allow-destination-host",
            "https://x.example",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not a host name"), "{e}");
    }

    #[test]
    fn send_url_appends_the_route_only_to_a_bare_base() {
        let route = "/hooks/payments/stripe";
        assert_eq!(
            target_url("http://127.0.0.1:8080", route).unwrap(),
            "http://127.0.0.1:8080/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/", route).unwrap(),
            "https://h.example/hooks/payments/stripe"
        );
        assert_eq!(
            target_url("https://h.example/in/stripe", route).unwrap(),
            "https://h.example/in/stripe"
        );
        assert!(
            target_url("ftp://h.example", route)
                .unwrap_err()
                .to_string()
                .contains("--url")
        );
        assert!(target_url("not a url", route).is_err());
    }
}
