//! The flags of every subcommand, and their conversion into the roles' configs.

use crate::destination::{self, Policy, Scope};
use crate::inbox::Status;
use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

pub(crate) const DEFAULT_DB: &str = "sqlite://hookgate.db";

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
    Sink(crate::cli::sink::SinkArgs),
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
        command: crate::cli::dlq::DlqCommand,
    },
    /// Measure intake, duplicates, delivery and verification against plain PostgreSQL inserts.
    Bench(crate::cli::bench::BenchArgs),
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
    #[arg(long, default_value_t = crate::http::listener::HEADER_TIMEOUT.into(), env = "HOOKGATE_HEADER_TIMEOUT")]
    pub header_timeout: humantime::Duration,
    /// How long a client may take to send a request's body before it gets 408.
    #[arg(long, default_value_t = crate::receiver::BODY_TIMEOUT.into(), env = "HOOKGATE_BODY_TIMEOUT")]
    pub body_timeout: humantime::Duration,
    /// Open connections at once; more are answered 503 `overloaded` and closed.
    #[arg(long, default_value_t = crate::http::listener::MAX_CONNECTIONS, env = "HOOKGATE_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// Requests being handled at once; more are answered 503 `overloaded`, never queued.
    #[arg(long, default_value_t = crate::http::listener::MAX_IN_FLIGHT, env = "HOOKGATE_MAX_IN_FLIGHT")]
    pub max_in_flight: usize,
    /// Requests per second (and burst) that may fail verification on one route before the rest
    /// get 429; they never spend the route's limits.requestsPerSecond. 0: no limit.
    #[arg(long, default_value_t = crate::receiver::limits::UNVERIFIED_RPS, env = "HOOKGATE_UNVERIFIED_RPS")]
    pub unverified_rps: u32,
}

impl ListenerArgs {
    pub fn limits(&self) -> anyhow::Result<crate::http::listener::Limits> {
        if self.max_connections == 0 || self.max_in_flight == 0 {
            bail!("--max-connections and --max-in-flight must be at least 1");
        }
        if self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            bail!("--header-timeout and --body-timeout must be more than 0");
        }
        Ok(crate::http::listener::Limits {
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
    #[arg(long, default_value_t = crate::worker::defaults::CONCURRENCY, env = "HOOKGATE_CONCURRENCY")]
    pub concurrency: usize,
    /// How long a claimed event is leased. Each attempt ends by 3/4 of it, whatever the
    /// integration's delivery timeout, so that it never outlives its claim.
    #[arg(long, default_value_t = crate::worker::defaults::LEASE.into())]
    pub lease: humantime::Duration,
    /// Pause between claims when nothing is due.
    #[arg(long, default_value_t = crate::worker::defaults::POLL.into())]
    pub poll: humantime::Duration,
    /// On SIGTERM, how long in-flight deliveries may finish before their claims are released.
    #[arg(long, default_value_t = crate::worker::defaults::GRACE.into())]
    pub grace: humantime::Duration,
    /// How long an event whose integration is gone waits for it to come back before it is
    /// dead-lettered as `integration_missing` (counted from its arrival).
    #[arg(long, default_value_t = crate::worker::defaults::ORPHAN_GRACE.into(), env = "HOOKGATE_ORPHAN_GRACE")]
    pub orphan_grace: humantime::Duration,
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
        value_parser = destination::parse_allowed_host
    )]
    pub allow_destination_hosts: Vec<String>,
    /// The cluster's DNS domain, for `<svc>.<namespace>.svc.<domain>` destinations.
    #[arg(long, default_value = destination::DEFAULT_CLUSTER_DOMAIN, env = "HOOKGATE_CLUSTER_DOMAIN")]
    pub cluster_domain: String,
}

impl WorkerArgs {
    pub(crate) fn config(
        &self,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        if self.concurrency == 0 {
            bail!("--concurrency must be at least 1");
        }
        let cluster_domain = self.cluster_domain.trim_matches('.').to_ascii_lowercase();
        if cluster_domain.is_empty() {
            bail!("--cluster-domain must not be empty");
        }
        Ok(crate::worker::WorkerConfig {
            concurrency: self.concurrency,
            lease: *self.lease,
            poll: *self.poll,
            grace: *self.grace,
            orphan_grace: *self.orphan_grace,
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
    pub(crate) fn cluster_config(
        &self,
        in_pod: bool,
        db: crate::inbox::DbLimits,
    ) -> anyhow::Result<crate::worker::WorkerConfig> {
        let mut cfg = self.config(db)?;
        cfg.destinations.allow_loopback = !in_pod;
        Ok(cfg)
    }
}

pub(crate) fn admin_addr(s: &str) -> anyhow::Result<Option<SocketAddr>> {
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
    fn a_bare_worker_command_line_is_the_default_worker_config() {
        let a = worker_args(&["-f", "x.yaml"]).unwrap();
        let mut cfg = a.worker.config(Default::default()).unwrap();
        // Taken from KUBERNETES_SERVICE_HOST when the tests run in a pod, not from a flag.
        cfg.destinations.api_server.clear();
        assert_eq!(cfg, crate::worker::WorkerConfig::default());
    }

    #[test]
    fn destinations_default_to_open_and_refuse_a_bad_host() {
        let a = worker_args(&["-f", "x.yaml"]).unwrap();
        let policy = a.worker.config(Default::default()).unwrap().destinations;
        assert_eq!(policy.scope, Scope::Open);
        assert_eq!(policy.cluster_domain, destination::DEFAULT_CLUSTER_DOMAIN);
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
}
